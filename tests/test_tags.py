import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tagged_texts
from repro.formulas.tags import (
    ParsedResponse,
    extract_answer,
    extract_evidence,
    extract_rationale,
    is_well_formatted,
    parse_response,
)

FULL = "<reason>Passage 2 says so.</reason>\n<extract>Paris is the capital.</extract>\n<answer>Paris</answer>"


@pytest.mark.parametrize(
    "response",
    [
        FULL,
        "<reason>r</reason><extract>e</extract><answer>a</answer>",
        "\n <reason>\nmulti\nline\n</reason>\n\n<extract>e</extract> <answer> a </answer>\n",
    ],
)
def test_strict_format_accepts(response):
    assert is_well_formatted(response)


@pytest.mark.parametrize(
    "response",
    [
        "",
        "<reason>r</reason><extract>e</extract>",  # no answer
        "<reason>r</reason><answer>a</answer><extract>e</extract>",  # order
        "<reason>r</reason><extract>e</extract><answer></answer>",  # empty answer
        "<reason>  </reason><extract>e</extract><answer>a</answer>",  # blank rationale
        "prefix <reason>r</reason><extract>e</extract><answer>a</answer>",  # text outside the tags
        "<reason>r</reason>between<extract>e</extract><answer>a</answer>",
        "<reason>r</reason><extract>e</extract><answer>a</answer> trailing",
        "<reason>r <reason>x</reason><extract>e</extract><answer>a</answer>",  # nested / repeated tag
        "<reason>r</reason><extract>e</extract><answer>a</answer><answer>b</answer>",
        "<reason>r<extract>e</extract><answer>a</answer>",  # unclosed reason
    ],
)
def test_strict_format_rejects(response):
    assert not is_well_formatted(response)


def test_strict_format_of_the_inference_form():
    assert is_well_formatted("<reason>r</reason><extract>e</extract>", with_answer=False)
    assert not is_well_formatted(FULL, with_answer=False)


def test_lenient_readers_on_a_complete_response():
    assert extract_rationale(FULL) == "Passage 2 says so."
    assert extract_evidence(FULL) == "Paris is the capital."
    assert extract_answer(FULL) == "Paris"
    assert parse_response(FULL) == ParsedResponse("Passage 2 says so.", "Paris is the capital.", "Paris", True)


def test_lenient_evidence_when_generation_stopped_at_extract():
    # engines may drop the stop string </extract>, or cut the output at max tokens
    assert extract_evidence("<reason>r</reason><extract>the evidence") == "the evidence"
    assert extract_evidence("<reason>r</reason><extract>the evidence</extract>") == "the evidence"
    assert extract_evidence("<reason>r</reason> bare evidence <answer>x</answer>") == "bare evidence"
    assert extract_evidence("<reason>still reasoning when cut") == ""
    assert extract_evidence("no tags at all") == "no tags at all"
    parsed = parse_response("<reason>r</reason><extract>e")
    assert (parsed.evidence, parsed.answer, parsed.well_formatted) == ("e", None, False)


def test_lenient_rationale_without_closing_tag():
    assert extract_rationale("<reason>r1 r2<extract>e</extract>") == "r1 r2"
    assert extract_rationale("<extract>e</extract>") == ""


def test_lenient_answer():
    assert extract_answer("Paris</answer>") == "Paris"  # continuation of a prefilled <answer>
    assert extract_answer("<answer> Beijing </answer> ... <answer>Paris</answer>") == "Paris"  # the last one
    assert extract_answer("<answer>Paris") == "Paris"
    assert extract_answer("  Paris \n") == "Paris"


def test_readers_reject_non_strings():
    with pytest.raises(TypeError):
        extract_evidence(None)


# Properties (hypothesis): any text is read without raising, and the readers' outputs hold no tag they stop at ---

@settings(max_examples=400, deadline=None)
@given(tagged_texts())
def test_any_text_is_read_without_raising_and_spans_stop_at_their_tags(text):
    parsed = parse_response(text)
    assert isinstance(parsed.well_formatted, bool) and isinstance(is_well_formatted(text, with_answer=False), bool)
    assert not any(tag in parsed.rationale for tag in ("</reason>", "<extract>", "<answer>"))
    assert not any(tag in parsed.evidence for tag in ("</extract>", "<answer>"))
    assert parsed.answer is None or not any(tag in parsed.answer for tag in ("<answer>", "</answer>"))
    assert not any(tag in extract_answer(text) for tag in ("<answer>", "</answer>"))
    assert all(s == s.strip() for s in (parsed.rationale, parsed.evidence, parsed.answer or ""))


@settings(max_examples=300, deadline=None)
@given(st.tuples(*[st.text(st.characters(blacklist_characters="<>"), max_size=20).filter(str.strip)] * 3),
       st.sampled_from(["", " ", "\n"]))
def test_a_well_formatted_response_is_read_back_exactly(parts, gap):
    reason, extract, answer = parts
    text = f"{gap}<reason>{reason}</reason>{gap}<extract>{extract}</extract>{gap}<answer>{answer}</answer>{gap}"
    assert parse_response(text) == ParsedResponse(reason.strip(), extract.strip(), answer.strip(), True)
    assert is_well_formatted(text.split("<answer>")[0], with_answer=False)


def test_a_stray_closing_extract_tag_never_reaches_the_evidence():  # found by the property above (D109)
    assert extract_evidence("</extract>") == ""
    assert extract_evidence("Paris is the capital.</extract>") == "Paris is the capital."
    assert extract_evidence("<reason>r</reason> e</extract><answer>x</answer>") == "e"
    assert extract_evidence("no tags at all") == "no tags at all"
