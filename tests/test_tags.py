import pytest

from repro.tags import (
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
