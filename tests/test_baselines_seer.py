"""SEER: the three experts and their CoV-weighted combination (hand-computed), deduplication and preference pairs,
the answer log-likelihood against a direct computation, and one DPO step on the tiny random Llama by two gloo
processes (the ci profile's launcher)."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import ROOT
from safetensors.torch import load_file

from repro.assets import MINILM_WEIGHTS
from repro.baselines.seer import (
    Assessor,
    SEERExtractor,
    align_with_dpo,
    candidate_pools,
    completion_log_likelihoods,
    conciseness_by_length,
    conciseness_by_similarity,
    cov_weights,
    deduplicate,
    dpo_examples,
    faithfulness,
    full_answer,
    helpfulness,
    preference_pairs,
    seer_prompt,
)
from repro.config import load_profile
from repro.formulas.prompts import chat_messages, passages_document, qa_messages
from repro.generation import GenerationParams, Generator
from repro.generation.transformers_backend import TransformersGenerator
from repro.retrieval.encoders import TextEncoder

ROW = {"id": "q1", "question": "What is the capital of France?", "golden_answers": ["Paris"],
       "passages": [{"id": "1", "contents": '"France"\nParis is the capital of France.', "score": 1.0}]}


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


def test_the_three_experts_by_hand():
    passages = passages_document(ROW)  # "Passage 1 (Title: France): Paris is the capital of France."
    assert faithfulness("Paris is the capital.", passages) == 1.0  # paris, is, capital: all in the passages
    assert faithfulness("Paris is big.", passages) == pytest.approx(2 / 3)  # "big" is not
    assert faithfulness("...", passages) == 0.0
    assert helpfulness(-1.0, -3.0) == pytest.approx(1 / (1 + np.exp(-2.0)))  # σ(2) = 0.8808
    assert helpfulness(-2.0, -2.0) == 0.5
    assert conciseness_by_length("one two three", "a b c d e f g h i j k l") == pytest.approx(0.75)  # 1 - 3/12
    assert conciseness_by_length("a b c", "a b") == 0.0
    unit = np.array([0.6, 0.8])
    assert conciseness_by_similarity(unit, np.array([1.0, 0.0])) == pytest.approx(0.6)
    assert conciseness_by_similarity(unit, np.array([-1.0, 0.0])) == 0.0
    assert full_answer(" What is the capital of France? ", "Paris") == "What is the capital of France? Paris"


def test_cov_weighting_by_hand():
    scores = np.array([[1.0, 0.5, 0.2], [0.5, 0.5, 0.6]])
    # means 0.75, 0.5, 0.4; population stds 0.25, 0, 0.2; CoVs 1/3, 0, 1/2 -> weights 0.4, 0, 0.6
    np.testing.assert_allclose(cov_weights(scores), [0.4, 0.0, 0.6])
    # smoothing 0.1: 13/30, 1/10, 6/10 over 34/30
    np.testing.assert_allclose(cov_weights(scores, smoothing=0.1), np.array([13, 3, 18]) / 34)
    np.testing.assert_allclose(cov_weights(np.ones((3, 3))), [1 / 3] * 3)  # nothing varies: uniform
    overall = scores @ cov_weights(scores)
    np.testing.assert_allclose(overall, [0.52, 0.56])


def test_deduplication_drops_empty_and_near_identical_candidates():
    samples = [" Paris is the capital. ", "paris is THE capital!", "", "  ", "Lyon is a city.", "Paris capital"]
    # word sets: {paris, is, capital} twice (Jaccard 1); {paris, capital} vs the first: 2/3 < 0.9
    assert deduplicate(samples, 0.9) == ["Paris is the capital.", "Lyon is a city.", "Paris capital"]
    assert deduplicate(samples, 0.6) == ["Paris is the capital.", "Lyon is a city."]


def test_preference_pairs_put_the_best_against_the_worst():
    candidates, overall = ["a", "b", "c", "d"], [0.2, 0.9, 0.5, 0.2]
    assert preference_pairs(candidates, overall) == [("b", "d")]  # ties: the later sample is worse
    assert preference_pairs(candidates, overall, max_pairs=3) == [("b", "d"), ("b", "a"), ("b", "c")]
    assert preference_pairs(candidates, overall, min_margin=0.5, max_pairs=3) == [("b", "d"), ("b", "a")]
    assert preference_pairs(["a"], [1.0]) == [] and preference_pairs(["a", "b"], [0.5, 0.5]) == []


def test_answer_log_likelihood_is_the_mean_token_log_probability(tiny):
    prompts = [qa_messages(ROW["question"], None), qa_messages(ROW["question"], "Paris is the capital of France.")]
    scores = completion_log_likelihoods(tiny, prompts, ["Paris", "Paris"], batch_size=2)
    assert scores == pytest.approx(completion_log_likelihoods(tiny, prompts, ["Paris", "Paris"], batch_size=1),
                                   abs=1e-4)  # right padding does not change a row
    tokenizer = tiny.tokenizer
    prompt = tokenizer.apply_chat_template(prompts[0], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer = tokenizer("Paris", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        log_probs = tiny.model(torch.tensor([ids + answer])).logits[0].log_softmax(-1)
    expected = np.mean([log_probs[len(ids) - 1 + j, t].item() for j, t in enumerate(answer)])
    assert scores[0] == pytest.approx(expected, abs=1e-5)


def test_the_assessor_scores_every_candidate_with_the_qa_generator_and_the_encoder(tiny):
    seer = load_profile("ci").seer
    encoder = TextEncoder(str(MINILM_WEIGHTS.locate().parent), "mean", normalize=True)
    candidates = ["Paris is the capital of France.", "Berlin is big."]
    scored = Assessor(tiny, encoder, seer).assess(ROW, candidates)
    assert [s["evidence"] for s in scored] == candidates
    assert [s["faithfulness"] for s in scored] == [1.0, pytest.approx(1 / 3)]  # only "is" of berlin, is, big
    closed, *with_evidence = completion_log_likelihoods(
        tiny, [qa_messages(ROW["question"], e) for e in [None, *candidates]], ["Paris"] * 3)
    assert [s["helpfulness"] for s in scored] == pytest.approx([helpfulness(x, closed) for x in with_evidence])
    # the real MiniLM finds the right evidence closer to "What is the capital of France? Paris"
    assert scored[0]["conciseness"] > scored[1]["conciseness"]
    lengths = Assessor(tiny, None, dataclasses.replace(seer, conciseness="length")).assess(ROW, candidates)
    passages = passages_document(ROW)
    assert [s["conciseness"] for s in lengths] == [conciseness_by_length(e, passages) for e in candidates]


@pytest.mark.slow
def test_one_dpo_step_of_two_processes_on_the_built_pairs_saves_an_adapter(tmp_path, tiny_llama_dir):
    cfg = load_profile("ci")
    seer = dataclasses.replace(cfg.seer, max_steps=1, per_device_batch_size=1, gradient_accumulation_steps=1,
                               accelerate_config=str(ROOT / "configs/accelerate/cpu-2proc.yaml"))
    cfg = dataclasses.replace(cfg, seer=seer)
    record = {"id": "q1", "candidates": [
        {"evidence": "Paris is the capital.", "faithfulness": 1.0, "helpfulness": 0.9, "conciseness": 0.8},
        {"evidence": "Berlin is big.", "faithfulness": 0.0, "helpfulness": 0.4, "conciseness": 0.1}]}
    (example,) = dpo_examples([record], {"q1": ROW}, np.array([1 / 3] * 3), seer)
    assert example["prompt"] == chat_messages(seer_prompt(ROW["question"], passages_document(ROW)))
    assert example["chosen"][0]["content"] == "Paris is the capital."
    assert example["rejected"][0]["content"] == "Berlin is big."
    pair = {k: example[k] for k in ("prompt", "chosen", "rejected")}
    run = tmp_path / "extractor"
    adapter = align_with_dpo(cfg, str(tiny_llama_dir), [pair, pair], run, {"test": 1}, progress=False)
    weights = load_file(adapter / "adapter_model.safetensors")
    assert any("lora_B" in n and w.abs().sum() > 0 for n, w in weights.items())  # B starts at zero: it moved
    assert json.loads((run / "run_config.json").read_text())["processes"] == 2
    assert sorted(p.name for p in (run / "checkpoints" / "checkpoint-1").glob("rng_state*")) == [
        "rng_state_0.pth", "rng_state_1.pth"]  # one step of one pair per process
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert log[0]["step"] == 1 and "rewards/margins" in log[0] and log[0]["epoch"] == 1.0


def test_candidates_are_sampled_where_the_studies_generate_and_scored_with_transformers():
    ci = load_profile("ci")
    sampling, scoring = candidate_pools(ci)  # the CPU profiles: one transformers pool, as before
    assert sampling is scoring and (sampling.backend, sampling.options) == ("transformers", {})
    paper = load_profile("paper-1p5b")
    sampling, scoring = candidate_pools(paper)  # nothing is loaded until a model is asked for
    assert (sampling.backend, sampling.options) == ("vllm", paper.evaluation.options)
    assert sampling.options["data_parallel"] == "auto" and scoring.backend == "transformers"


class Scripted(Generator):
    def __init__(self, outputs):
        self.outputs, self.calls = outputs, []

    def _generate(self, prompts, params):
        self.calls.append(prompts)
        return list(self.outputs)


def test_the_seer_refiner_sends_its_prompt_and_keeps_the_whole_output():
    generator = Scripted(["  Paris is the capital of France.\n"])
    (refinement,) = SEERExtractor(generator, "scripted", GenerationParams(max_new_tokens=4)).refine([ROW])
    assert generator.calls == [[chat_messages(seer_prompt(ROW["question"], passages_document(ROW)))]]
    assert refinement.evidence == "Paris is the capital of France."


def test_a_null_seer_section_trains_nothing_and_records_not_requested(tmp_path):
    """released-1p5b's `seer: null` (docs/gpu.md's released path): the stage's output says so."""
    from repro.baselines.seer import train_seer
    from repro.data.layout import REQUESTED

    cfg = dataclasses.replace(load_profile("ci"), seer=None)
    assert train_seer(cfg, tmp_path) == tmp_path
    assert json.loads((tmp_path / REQUESTED).read_text()) == {"requested": False}
    assert sorted(p.name for p in tmp_path.iterdir()) == [REQUESTED]
