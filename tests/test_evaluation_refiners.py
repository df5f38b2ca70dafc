"""Each refiner's contract (the prompt it sends, how the evidence is read) and the QA generator's prompts."""

import pytest

from repro.evaluation.answering import Answerer, read_prediction
from repro.evaluation.refiners import ChainOfThought, ClosedBook, FullPassages, RationalExtractor, Refinement
from repro.formulas.prompts import (
    EVIDENCE_STOP,
    chat_messages,
    closed_book_qa_prompt,
    cot_prompt,
    evidence_extraction_prompt,
    format_passages,
    qa_messages,
    rag_qa_prompt,
)
from repro.formulas.tags import extract_evidence
from repro.generation import GenerationParams, Generator
from repro.generation.transformers_backend import TransformersGenerator

ROWS = [
    {"id": "a", "question": "Who wrote Hamlet?", "golden_answers": ["Shakespeare"], "passages": [
        {"id": "1", "contents": '"Hamlet"\nHamlet is a tragedy written by William Shakespeare.', "score": 3.0},
        {"id": "2", "contents": '"Macbeth"\nMacbeth is a tragedy.', "score": 2.0}]},
    {"id": "b", "question": "Where is Paris?", "golden_answers": ["France"], "passages": [
        {"id": "3", "contents": '"Paris"\nParis is the capital of France.', "score": 1.0}]},
]


class Recording(Generator):
    """A real generator whose prompts and parameters are recorded, or a scripted one (`outputs`) for the
    readers' edge cases."""

    def __init__(self, inner: Generator | None = None, outputs: list[str] | None = None):
        self.inner, self.outputs, self.calls = inner, outputs, []

    def _generate(self, prompts, params):
        self.calls.append((prompts, params))
        return list(self.outputs) if self.outputs is not None else self.inner.generate(prompts, params)


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


PARAMS = GenerationParams(max_new_tokens=3, batch_size=2)


def test_zero_gives_no_evidence_and_full_gives_the_formatted_passages():
    assert ClosedBook().refine(ROWS) == [Refinement(None), Refinement(None)]
    assert FullPassages().refine(ROWS) == [Refinement(format_passages(row["passages"])) for row in ROWS]


@pytest.mark.slow
def test_cot_sends_table_13_and_its_whole_output_is_the_evidence(tiny):
    generator = Recording(tiny)
    refinements = ChainOfThought(generator, "tiny", PARAMS).refine(ROWS)
    ((prompts, params),) = generator.calls
    assert prompts == [chat_messages(cot_prompt(r["question"], format_passages(r["passages"]))) for r in ROWS]
    assert params == PARAMS
    outputs = tiny.generate(prompts, PARAMS)
    assert [r.evidence for r in refinements] == [o.strip() for o in outputs]


@pytest.mark.slow
def test_the_rational_extractor_sends_table_14_and_stops_at_extract(tiny):
    generator = Recording(tiny)
    refinements = RationalExtractor(generator, "tiny", PARAMS).refine(ROWS)
    ((prompts, params),) = generator.calls
    assert prompts == [chat_messages(evidence_extraction_prompt(r["question"], format_passages(r["passages"])))
                       for r in ROWS]
    assert params.stop == (EVIDENCE_STOP,) and params.include_stop and params.max_new_tokens == 3
    outputs = tiny.generate(prompts, params)
    assert [r.evidence for r in refinements] == [extract_evidence(o) for o in outputs]


def test_the_rational_extractor_reads_the_extract_tag_and_keeps_the_raw_output():
    outputs = ["<reason>Passage 1 names the author.</reason><extract>Shakespeare wrote Hamlet.</extract>",
               "<reason>cut off before extracting"]
    refinements = RationalExtractor(Recording(outputs=outputs), "scripted", PARAMS).refine(ROWS)
    assert refinements == [Refinement("Shakespeare wrote Hamlet.", outputs[0]), Refinement("", outputs[1])]


def test_cot_keeps_no_raw_output_when_it_is_the_evidence():
    refinements = ChainOfThought(Recording(outputs=["Step 1.", "  Step 2.\n"]), "s", PARAMS).refine(ROWS)
    assert refinements == [Refinement("Step 1."), Refinement("Step 2.", "  Step 2.\n")]


def test_the_configuration_names_prompt_model_and_decoding_but_not_the_batch_size():
    base = RationalExtractor(Recording(outputs=[]), "model-a", PARAMS).config()
    assert base["template"].startswith("[Instruction]") and base["model"] == "model-a"
    assert base["decoding"]["stop"] == (EVIDENCE_STOP,) and "batch_size" not in base["decoding"]
    rebatched = RationalExtractor(Recording(outputs=[]), "model-a", GenerationParams(max_new_tokens=3, batch_size=64))
    assert rebatched.config() == base
    longer = RationalExtractor(Recording(outputs=[]), "model-a", GenerationParams(max_new_tokens=4))
    assert longer.config() != base
    assert ChainOfThought(Recording(outputs=[]), "model-a", PARAMS).config()["refiner"] != base["refiner"]


def test_the_generator_answers_with_table_11_or_closed_book_with_table_12():
    assert qa_messages("Who wrote Hamlet?", None) == chat_messages(closed_book_qa_prompt("Who wrote Hamlet?"))
    assert qa_messages("Who wrote Hamlet?", "Shakespeare wrote it.") == chat_messages(
        rag_qa_prompt("Who wrote Hamlet?", "Shakespeare wrote it."))
    assert qa_messages("Who wrote Hamlet?", "") == chat_messages(rag_qa_prompt("Who wrote Hamlet?", ""))

    generator = Recording(outputs=["Shakespeare", "\n France \nmore"])
    answers = Answerer(generator, "s", GenerationParams(max_new_tokens=8)).answer(
        [r["question"] for r in ROWS], ["evidence", None])
    assert [read_prediction(a) for a in answers] == ["Shakespeare", "France"]
    assert generator.calls[0][0][1] == chat_messages(closed_book_qa_prompt("Where is Paris?"))
    with pytest.raises(ValueError, match="greedily"):
        Answerer(generator, "s", GenerationParams(do_sample=True))
