"""Search-R1's text protocol and the context-aware query, against the upstream behaviour."""

import pytest

from repro.agentic.actions import (INVALID_ACTION_MESSAGE, Action, cut_response, final_answer, format_documents,
                                   information_block, parse_action, step_reasoning)
from repro.agentic.extractor import compose_query

DOCS = [{"id": "7", "contents": '"Garajonay National Park"\nGarajonay National Park is located on La Gomera.'},
        {"id": "9", "contents": '"Teide National Park"\nTeide National Park is a national park in Tenerife.'}]


def test_invalid_action_message_is_search_r1s_verbatim():
    assert INVALID_ACTION_MESSAGE == (
        "\nMy previous action is invalid. If I want to search, I should put the query between <search> and "
        "</search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
        "Let me try again.\n")


@pytest.mark.parametrize("text, cut", [
    ("<think>x</think><search> q </search><information>junk", "<think>x</think><search> q </search>"),
    ("<answer> Paris </answer> trailing", "<answer> Paris </answer>"),
    # Search-R1 looks for </search> first, whatever comes earlier
    ("<answer>a</answer><search>b</search>", "<answer>a</answer><search>b</search>"),
    ("no tags at all", "no tags at all"),
])
def test_cut_response_follows_search_r1(text, cut):
    assert cut_response(text) == cut


@pytest.mark.parametrize("response, action", [
    ("<think>need it</think>\n<search> Teide location </search>", Action("search", "Teide location")),
    ("<think>done</think> <answer> Canary Islands, Spain </answer>", Action("answer", "Canary Islands, Spain")),
    ("<search>first</search> <answer>second</answer>", Action("search", "first")),
    ("The answer is Paris.", Action(None)),
    ("<answer> unclosed", Action(None)),
    ("<search>   </search>", Action(None)),  # nothing to retrieve
    ("<answer></answer>", Action("answer", "")),
])
def test_parse_action(response, action):
    assert parse_action(response) == action


@pytest.mark.parametrize("response, reasoning", [
    ("<think> I need the park. </think>\n<search> Teide </search>", "I need the park."),
    ("<think>a</think> <think>b</think><search>q</search>", "a\nb"),
    ("I should look it up. <search>q</search>", "I should look it up."),
    ("<search>q</search><think>after the action</think>", ""),
])
def test_step_reasoning_is_the_think_before_the_action(response, reasoning):
    assert step_reasoning(response) == reasoning


def test_documents_are_formatted_like_search_r1():
    assert format_documents(DOCS) == (
        'Doc 1(Title: "Garajonay National Park") Garajonay National Park is located on La Gomera.\n'
        'Doc 2(Title: "Teide National Park") Teide National Park is a national park in Tenerife.\n')
    assert information_block(format_documents(DOCS[:1])) == (
        '\n\n<information>Doc 1(Title: "Garajonay National Park") Garajonay National Park is located on '
        'La Gomera.</information>\n\n')


def test_final_answer_scores_the_last_answer_of_the_completion_only():
    assert final_answer("<think>x</think><answer> McComb, Mississippi </answer>") == "McComb, Mississippi"
    assert final_answer("<answer>a</answer> ... <answer> b </answer>") == "b"
    assert final_answer("<answer> unclosed") is None
    assert final_answer("no answer") is None


def test_composed_query_holds_question_reasoning_and_sub_query():
    query = compose_query(" Where is Teide? ", "I need the park's location.", "Teide National Park location")
    assert query == ("Where is Teide?\n<think> I need the park's location. </think>\n"
                     "<search> Teide National Park location </search>")
    assert compose_query("Where is Teide?", "  ", "Teide") == "Where is Teide?\n<search> Teide </search>"
