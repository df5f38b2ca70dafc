"""Search-R1's text protocol and the context-aware query, against the upstream behaviour; Eval-RAR's `<evaluate>`
blocks read from hand-written turns (its App. A.3 case study)."""

import pytest

from repro.agentic.actions import (ACTION_STOPS, INVALID_ACTION_MESSAGE, SEARCH_R1, Action, cut_evaluation,
                                   cut_response, eval_rar_protocol, evaluation_blocks, evaluation_text, final_answer,
                                   format_documents, information_block, parse_action, step_reasoning)
from repro.agentic.extractor import compose_query
from repro.formulas.prompts import EVAL_RAR_TEMPLATE, SEARCH_R1_TEMPLATE

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


# Eval-RAR's case study (seed 003, App. A.3), as the agent's turns after each observation.
NIXON_TURN_2 = ("<evaluate>From the information gathered, the target person delivering the Checkers speech is Richard "
                "Nixon. Now, the main concern is to find the death date of Richard Nixon.</evaluate>\n\n"
                "<search>When did Richard Nixon die</search>")
NIXON_TURN_3 = ("<evaluate> With the target person identified as Richard Nixon and the date of death confirmed, we can "
                "now answer the target question.</evaluate>\n\n<answer>April 22, 1994</answer>")


def test_an_evaluation_block_stays_in_the_turn_and_the_action_after_it_is_read():
    assert "</evaluate>" not in ACTION_STOPS  # an evaluation does not end the turn: its action follows it
    assert cut_response(NIXON_TURN_2 + "\n\n<information>invented</information>") == NIXON_TURN_2
    assert parse_action(NIXON_TURN_2) == Action("search", "When did Richard Nixon die")
    assert cut_response(NIXON_TURN_3 + " more") == NIXON_TURN_3
    assert parse_action(NIXON_TURN_3) == Action("answer", "April 22, 1994")
    # the stops act wherever they are, as token stops do: an answer written inside the evaluation ends the turn
    inside = "<evaluate> The answer is <answer> April 22, 1994 </answer> as Doc 1 says. </evaluate>"
    assert cut_response(inside) == "<evaluate> The answer is <answer> April 22, 1994 </answer>"
    assert parse_action(cut_response(inside)) == Action("answer", "April 22, 1994")


def test_evaluation_blocks_are_eq3s_ordered_segments_and_y_eval_their_concatenation():
    completion = ("<think>I need the speaker first.</think>\n<search>When did the person who gave the Checkers "
                  "speech die</search>" + NIXON_TURN_2 + NIXON_TURN_3)
    assert evaluation_blocks(completion) == [
        "From the information gathered, the target person delivering the Checkers speech is Richard Nixon. Now, the "
        "main concern is to find the death date of Richard Nixon.",
        "With the target person identified as Richard Nixon and the date of death confirmed, we can now answer the "
        "target question."]
    assert evaluation_text(completion) == "\n".join(evaluation_blocks(completion))
    assert final_answer(completion) == "April 22, 1994"
    assert evaluation_blocks("<evaluate> unclosed <search>x</search>") == []  # only complete blocks count
    assert evaluation_text("no evaluation") == ""


def test_a_separate_evaluation_is_cut_after_its_closing_tag():
    assert cut_evaluation("<evaluate> Nixon died in 1994. </evaluate>\n<search> x </search>") == \
        "<evaluate> Nixon died in 1994. </evaluate>"
    assert cut_evaluation("<evaluate> ran out of tokens") == "<evaluate> ran out of tokens"


def test_protocols_differ_in_the_prompt_and_the_evaluation_step():
    assert SEARCH_R1.prompt("who wrote hamlet") == SEARCH_R1_TEMPLATE.format(question="who wrote hamlet?")
    assert SEARCH_R1.evaluation is None
    protocol = eval_rar_protocol()
    assert protocol.prompt(" who wrote hamlet? ") == EVAL_RAR_TEMPLATE.format(question="who wrote hamlet?")
    assert (protocol.name, protocol.evaluation, eval_rar_protocol("separate").evaluation) == \
        ("eval_rar", "in_turn", "separate")
    with pytest.raises(ValueError, match="in_turn"):
        eval_rar_protocol("after")
