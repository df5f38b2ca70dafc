"""FilCo: the StrInc and lexical silver contexts (hand-computed), the filter's SFT examples, and a trained filter on
the tiny random Llama producing evidence through the evaluation runner."""

import dataclasses
import json

import pytest
from safetensors.torch import load_file

from repro.baselines.filco import (
    FILCO_INSTRUCTION,
    FilCoFilter,
    filter_adapter,
    filter_examples,
    lexical_overlap,
    filco_sentences,
    silver_context,
    string_inclusion,
)
from repro.config import load_profile
from repro.evaluation.answering import Answerer
from repro.evaluation.runner import evaluate
from repro.formulas.prompts import chat_messages
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.train.lora.runner import fit_lora_sft, sft_args

ROW = {"id": "q1", "question": "Where is the Eiffel Tower?", "golden_answers": ["Paris", "City of Light"],
       "passages": [
           {"id": "1", "contents": '"Paris"\nThe Eiffel Tower is a landmark. It stands in paris, France. '
                                   'It was built in 1889.', "score": 2.0},
           {"id": "2", "contents": '"Tower Bridge"\nTower Bridge is in London. Paris is called the City of Light.',
            "score": 1.0}]}
NO_ANSWER = {"id": "q2", "question": "Who built Tower Bridge?", "golden_answers": ["Horace Jones"],
             "passages": [{"id": "2", "contents": '"Tower Bridge"\nTower Bridge is in London.', "score": 1.0}]}


def test_passages_are_split_into_sentences_without_their_titles():
    assert filco_sentences(ROW) == ["The Eiffel Tower is a landmark.", "It stands in paris, France.",
                                      "It was built in 1889.", "Tower Bridge is in London.",
                                      "Paris is called the City of Light."]


def test_string_inclusion_selects_exactly_the_sentences_containing_an_answer():
    assert string_inclusion("It stands in paris, France.", ["Paris"])  # case-insensitive, like FilCo's has_answer
    assert not string_inclusion("The Eiffel Tower is a landmark.", ["Paris", "City of Light"])
    # the title "Paris" of passage 1 does not count; sentences keep passage order and are joined by a space
    assert silver_context(ROW, "strinc") == "It stands in paris, France. Paris is called the City of Light."
    assert silver_context(NO_ANSWER, "strinc") == ""


def test_lexical_overlap_is_the_unigram_f1_with_the_answer_against_the_threshold():
    answers = ["Eiffel Tower Paris"]  # normalised: eiffel tower paris (3 words)
    # "the eiffel tower is in paris" -> eiffel tower is in paris: 3 common of 5 -> P 3/5, R 3/3, F1 0.75
    assert lexical_overlap("The Eiffel Tower is in Paris.", answers) == pytest.approx(0.75)
    # "tower bridge is in london": 1 common of 5 -> P 1/5, R 1/3, F1 = 2 * (1/15) / (8/15) = 0.25
    assert lexical_overlap("Tower Bridge is in London.", answers) == pytest.approx(0.25)
    row = {**ROW, "golden_answers": answers, "passages": [
        {"id": "1", "contents": '"t"\nThe Eiffel Tower is in Paris. Tower Bridge is in London.', "score": 1.0}]}
    assert silver_context(row, "lexical", threshold=0.5) == "The Eiffel Tower is in Paris."
    assert silver_context(row, "lexical", threshold=0.25) == "The Eiffel Tower is in Paris. Tower Bridge is in London."
    assert silver_context(row, "lexical", threshold=0.8) == ""
    with pytest.raises(ValueError, match="criterion"):
        silver_context(row, "cxmi")


def test_sft_examples_ask_filcos_prompt_for_the_silver_context():
    filco = load_profile("ci").filco
    examples = filter_examples([ROW, NO_ANSWER], dataclasses.replace(filco, require_silver=True))
    assert [e["id"] for e in examples] == ["q1"]  # no silver sentence: dropped
    (example,) = examples
    assert example["prompt"] == chat_messages(
        f"{FILCO_INSTRUCTION}\n\nquestion: Where is the Eiffel Tower?\n"
        "context: The Eiffel Tower is a landmark. It stands in paris, France. It was built in 1889.\n"
        "Tower Bridge is in London. Paris is called the City of Light.")
    assert example["completion"] == [{"role": "assistant",
                                      "content": "It stands in paris, France. Paris is called the City of Light."}]
    kept = filter_examples([ROW, NO_ANSWER], dataclasses.replace(filco, require_silver=False))
    assert kept[1]["completion"][0]["content"] == ""


def test_a_profile_without_a_trained_filter_says_which_stage_to_run():
    cfg = dataclasses.replace(load_profile("ci"), name="no-such-profile")
    with pytest.raises(FileNotFoundError, match="filco_train"):
        filter_adapter(cfg)


def test_the_trained_filter_gives_the_evidence_through_the_runner(tmp_path, tiny_llama_dir):
    cfg = load_profile("ci")
    filco = dataclasses.replace(cfg.filco, max_steps=1, per_device_batch_size=1)
    model, run = str(tiny_llama_dir), tmp_path / "filter"
    examples = [{k: e[k] for k in ("prompt", "completion")} for e in filter_examples([ROW], filco)]
    adapter = fit_lora_sft(model, examples, sft_args(cfg, filco, run / "checkpoints", progress=False), filco,
                               run, {"model": model, "filco": dataclasses.asdict(filco)})
    assert any("lora_B" in name for name in load_file(adapter / "adapter_model.safetensors"))
    assert [json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text().splitlines()][0] == 1

    pool = ModelPool("transformers", "float32", progress=False)
    generator, model_id = pool.get(model, str(adapter))
    params = GenerationParams(max_new_tokens=4, batch_size=2)
    refiner = FilCoFilter(generator, model_id, params)
    assert "+lora:" in refiner.config()["model"]  # the adapter's fingerprint enters the configuration
    answerer = Answerer(*pool.get(model), GenerationParams(max_new_tokens=2))
    records = evaluate([ROW, NO_ANSWER], refiner, answerer, tmp_path / "filco.jsonl",
                       length_tokenizer=generator.tokenizer, tokenizer_id="tiny", progress=False)
    prompts = [chat_messages(refiner.prompt(r["question"], refiner.document(r))) for r in (ROW, NO_ANSWER)]
    assert [r["evidence"] for r in records] == [o.strip() for o in generator.generate(prompts, params)]
    assert all(r["cr"] is not None for r in records)


def test_a_null_filco_section_trains_nothing_and_records_not_requested(tmp_path):
    """released-1p5b's `filco: null` (docs/gpu.md's released path): the stage's output says so, and a later run with
    the section set overwrites the record."""
    from repro.baselines.filco import train_filco
    from repro.data.layout import REQUESTED

    cfg = dataclasses.replace(load_profile("ci"), filco=None)
    assert train_filco(cfg, tmp_path) == tmp_path
    assert json.loads((tmp_path / REQUESTED).read_text()) == {"requested": False}
    assert sorted(p.name for p in tmp_path.iterdir()) == [REQUESTED]
