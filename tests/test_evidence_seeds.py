"""Step 2 of the evidence experiment (issue #31): the seeds' profiles, the baselines, the outcomes and the verdict's
rules by hand, and the whole study end to end on the `ci` model (mechanics only: a random model learns nothing)."""

import dataclasses
import json
import math
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from transformers import TrainerState

from repro.config import EvidenceConfig, load_profile
from repro.data import layout
from repro.io import read_json, write_json, write_jsonl
from repro.reporting import stats
from repro.studies import evidence_placebo as ep
from repro.studies import evidence_seeds as es
from repro.studies import evidence_shortcut as esc
from repro.studies import heldout
from repro.train.grpo.run import selected_step
from scripts.machine import cores_busy

PASSAGES = [{"contents": "Vell\nVell lies on the Tarn. Anna Berg founded it."},
            {"contents": "Tarn\nThe Tarn is a river. It floods."}]


def test_a_seed_changes_only_grpos_seed_and_step_budget():
    cfg = load_profile("cpu-evidence")
    run = es.seed_profile(cfg, 2)
    assert (run.train.seed, run.seed, run.train.max_steps) == (2, cfg.seed, cfg.train.max_steps)
    assert run.train.format_warmup == cfg.train.format_warmup  # every seed starts from the one warm-up
    assert dataclasses.replace(run.train, seed=None) == cfg.train and run.rewards == cfg.rewards
    shorter = dataclasses.replace(cfg, evidence=dataclasses.replace(cfg.evidence, max_steps=3))
    assert es.seed_profile(shorter, 0).train.max_steps == 3
    assert es.seed_run(cfg, 2).root == layout.train_run_dir("cpu-evidence", "evidence_seeds/seed-2")


def test_without_dev_selection_the_last_step_is_exported_saying_so():
    state = TrainerState(global_step=40, best_metric=None)
    assert selected_step(state, None) == (40, "last step: train.selection_metric is null (no dev selection)")
    state.best_metric, state.best_global_step = 0.3, 20  # a recorded best is ignored when nothing selects
    assert selected_step(state, None)[0] == 40 and selected_step(state, "f1_evidence")[0] == 20


def test_the_random_span_and_the_first_sentence_by_hand():
    words = "Vell lies on the Tarn. Anna Berg founded it. The Tarn is a river. It floods.".split()
    spans = {es.random_span(PASSAGES, 3, f"q{i}", 0) for i in range(200)}
    assert spans == {" ".join(words[i:i + 3]) for i in range(len(words) - 2)}  # every start, titles left out
    assert es.random_span(PASSAGES, 3, "q1", 0) == es.random_span(PASSAGES, 3, "q1", 0)
    assert es.random_span(PASSAGES, 0, "q1", 0) == ""  # no extract, no span
    assert es.random_span(PASSAGES, 99, "q1", 0) == " ".join(words)
    assert es.first_sentence(PASSAGES) == "Vell lies on the Tarn."
    assert es.first_sentence([{"contents": "Empty\n"}, *PASSAGES]) == ""  # passage 1 holds no sentence


def items(ar: list[int], share: list[float] | None = None) -> pd.DataFrame:
    n = len(ar)
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "ar_evidence": ar, "ar_random_span": [0] * n,
                         "evidence_words": [4] * n, "answer_share": share or [0.5] * n})


def test_evidence_recall_per_seed_and_pooled_by_hand():
    study = {es.START: items([1, 0, 0, 0, 1, 0]), "seed-0": items([1, 1, 1, 0, 0, 0]),
             "seed-1": items([1, 1, 1, 1, 1, 0])}
    table = es.evidence_recall(study).set_index("policy")
    assert table.loc["seed-0", ["trained_only", "start_only"]].tolist() == [2, 1]
    assert table.loc["seed-0", "difference"] == pytest.approx(1 / 6)
    assert table.loc["seed-1", "p_value"] == pytest.approx(0.25)  # 3 vs 0: 2 * 0.5**3
    pooled = table.loc["pooled"]
    assert (pooled["questions"], pooled["trained_only"], pooled["start_only"]) == (12, 5, 1)
    assert pooled["difference"] == pytest.approx(4 / 12)
    assert pooled["p_value"] == pytest.approx(2 * 7 / 64)  # 5 of 6 discordant pairs: 2 * P(X >= 5)
    assert pooled["ci_low"] < pooled["difference"] < pooled["ci_high"]
    assert pooled["seed_sd"] == pytest.approx(np.std([1 / 6, 1 / 2], ddof=1))
    assert pooled["seed_level_p"] == pytest.approx(es.seed_level_test([1 / 6, 1 / 2]).p_value)
    with pytest.raises(ValueError, match="other questions"):
        es.evidence_recall({es.START: items([1, 0]), "seed-0": items([1, 0, 1])})


def test_the_seed_level_test_of_the_reports_three_seeds_by_hand():
    # step 2's evidence AR per seed (docs/cpu-evidence.md): 0.145, 0.120, 0.240 against the start's 0.140
    differences = [0.145 - 0.140, 0.120 - 0.140, 0.240 - 0.140]
    t = np.mean(differences) / (np.std(differences, ddof=1) / math.sqrt(3))
    result = es.seed_level_test(differences)
    assert result.statistic == pytest.approx(t) and result.statistic == pytest.approx(0.775, abs=1e-3)
    assert result.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t))  # Student's t on 2 df, two-sided
    assert round(result.p_value, 2) == 0.52 and result.effect == pytest.approx(0.085 / 3)
    assert result.ci_low < 0 < result.ci_high and result.n == 3
    with pytest.raises(ValueError, match="at least 2 finite"):
        es.seed_level_test([0.1])


def test_a_rescoring_is_compared_with_the_cached_scores_byte_for_byte(tmp_path):
    frame = pd.DataFrame({"id": ["q0", "q1", "q2"], "o_e": ["a", "b", None], "answer_share": [0.1, float("nan"), 1.0]})
    path = tmp_path / "start.jsonl"
    write_jsonl(path, frame.to_dict("records"))
    assert es.jsonl_bytes(frame) == path.read_bytes()  # what write_jsonl writes
    same = es.compare_scores(path, frame.copy())
    assert same["identical"] and same["differing_ids"] == [] and same["sha256_cached"] == same["sha256_repeated"]
    changed = frame.copy()
    changed.loc[1, "o_e"] = "c"
    assert es.compare_scores(path, changed) | {"sha256_cached": None, "sha256_repeated": None} == {
        "file": str(path), "identical": False, "questions": 3, "differing_ids": ["q1"], "sha256_cached": None,
        "sha256_repeated": None}
    assert es.compare_scores(path, frame.iloc[:2])["differing_ids"] == ["line 3"]


def test_the_probe_pooled_averages_each_questions_share_over_the_seeds():
    start = items([0] * 4, [0.1, 0.2, 0.3, float("nan")])
    study = {es.START: start, "seed-0": items([0] * 4, [0.3, 0.2, 0.5, 0.9]),
             "seed-1": items([0] * 4, [0.1, 0.4, 0.5, 0.9])}
    table = es.probe_shares(study).set_index("policy")
    assert table.loc["seed-0", "questions"] == 3  # the question without a probed sentence is left out
    assert table.loc["seed-0", "difference"] == pytest.approx((0.2 + 0 + 0.2) / 3)
    assert table.loc["pooled", "difference"] == pytest.approx((0.1 + 0.1 + 0.2) / 3)
    recall = es.evidence_recall({name: frame.assign(ar_evidence=[1, 0, 0, 0]) for name, frame in study.items()})
    primary = es.primary_outcomes(recall.assign(p_value=[1.0, 1.0, 0.04]), table.reset_index().assign(p_value=0.01))
    assert primary["outcome"].tolist() == ["(a) evidence AR", "(b) probe answer share"]
    assert primary["p_holm"].tolist() == pytest.approx([0.04, 0.02])  # Holm over the two pooled outcomes


def test_baselines_test_each_policy_against_a_random_span_of_its_own_length():
    study = es.SeedsStudy(rows=[], fixed_baselines=pd.DataFrame({"id": ["q0", "q1"], "ar_random_sentence": [1, 0],
                                                                 "ar_first_sentence": [0, 0]}),
                          items={es.START: items([0, 0]), "seed-0": items([1, 1]).assign(ar_random_span=[1, 0])})
    table = es.baselines(study).set_index("policy")
    assert table.loc["seed-0", ["ar_evidence", "ar_random_span", "ar_random_sentence"]].tolist() == [1.0, 0.5, 0.5]
    assert table.loc["seed-0", "vs_span_difference"] == pytest.approx(0.5)
    assert table.loc["pooled", "questions"] == 2  # the seeds only: the start is not pooled


def verdict_inputs(only: tuple[int, int], seeds: list[float], p_holm: float, span_p: float, n: int = 600):
    recall = pd.DataFrame([{"policy": f"seed-{i}", "questions": n // len(seeds), "difference": d}
                           for i, d in enumerate(seeds)])
    low, high = stats.mcnemar_score_interval(*only, n)
    recall.loc[len(recall)] = {"policy": "pooled", "questions": n, "difference": (only[0] - only[1]) / n}
    recall = recall.assign(trained_only=only[0], start_only=only[1], ci_low=low, ci_high=high)
    primary = pd.DataFrame([{"outcome": "(a) evidence AR", "difference": (only[0] - only[1]) / n, "p_holm": p_holm}])
    baseline = pd.DataFrame([{"policy": "pooled", "vs_span_difference": 0.1, "vs_span_p": span_p}])
    return recall, primary, baseline


def test_the_verdict_follows_the_rules_written_before_the_run():
    supported = es.seeds_verdict(*verdict_inputs((60, 20), [0.1, 0.05, -0.01], p_holm=0.001, span_p=0.001))
    assert supported["verdict"] == "supported at this scale" and supported["reading"] == "measurement"
    one_seed = es.seeds_verdict(*verdict_inputs((60, 20), [0.1, -0.05, -0.01], p_holm=0.001, span_p=0.001))
    assert one_seed["verdict"] == "inconclusive at n = 600"  # positive in one seed of three
    no_better_than_span = es.seeds_verdict(*verdict_inputs((60, 20), [0.1, 0.05, 0.01], p_holm=0.001, span_p=0.2))
    assert no_better_than_span["verdict"] == "inconclusive at n = 600"
    # 30 vs 30 discordant of 600 (discordance 0.1): the interval ends near +2.5 points, 3.7 are detectable
    level = es.seeds_verdict(*verdict_inputs((30, 30), [0.0, 0.0, 0.0], p_holm=1.0, span_p=1.0))
    assert level["ci_high"] < level["detectable_difference"]
    assert level["verdict"] == "contradicted at this scale"
    small = es.seeds_verdict(*verdict_inputs((1, 1), [0.0, 0.0], p_holm=1.0, span_p=1.0, n=8))
    assert math.isnan(small["detectable_difference"])  # 8 pairs detect no difference at discordance 0.25
    assert small["verdict"] == "inconclusive at n = 8"
    assert small["reading"].startswith("mechanics only: 4 questions x 2 seeds")


def test_step_two_waits_for_the_gate(tmp_path, monkeypatch):
    cfg = load_profile("cpu-evidence")
    monkeypatch.chdir(tmp_path)
    off = {"profile": "cpu-evidence", "requested": False}
    assert es.record_study(dataclasses.replace(cfg, evidence=None), tmp_path / "out") == off
    for directory in (tmp_path / "out", es.seed_run(cfg, 0).root.parent):  # both outputs of the stage exist
        assert read_json(directory / "study.json") == off
    with pytest.raises(FileNotFoundError, match="evidence_gate first"):
        es.study_record(cfg)
    write_json(es.gate_file(cfg), {"requested": True, "passes": False})
    assert es.study_record(cfg)["gate_passes"] is False


@pytest.mark.slow
def test_the_study_trains_each_seed_scores_every_policy_on_the_same_questions_and_reuses_them(
        tiny_llama_dir, tmp_path, monkeypatch):
    from tests.test_train_e2e import contexts

    cfg = load_profile("ci")
    monkeypatch.chdir(tmp_path)  # the data stage's contexts files and the runs, relative to the cwd
    cfg = dataclasses.replace(
        cfg, models=dataclasses.replace(cfg.models, extractor=str(tiny_llama_dir)),
        train=dataclasses.replace(cfg.train, format_warmup=None, selection_metric=None, save_steps=1, max_steps=1,
                                  heldout_backend="transformers", heldout_options={}),
        evidence=EvidenceConfig(seeds=[0, 1], heldout_questions=3))
    write_jsonl(layout.contexts_path(cfg, cfg.train.dataset, "train"), contexts(4))
    write_jsonl(layout.contexts_path(cfg, cfg.train.dataset, "dev"), contexts(6))

    study = es.run_seeds(cfg, progress=False)
    assert list(study.items) == ["start", "seed-0", "seed-1"]
    for seed in (0, 1):
        run = es.seed_run(cfg, seed)
        assert read_json(run.config_file)["seed"] == seed and not run.dev_log.exists()  # no dev pass at all
        assert run.selection()["selected_by"].startswith("last step: train.selection_metric is null")
    ids = study.items["start"]["id"].tolist()
    assert len(ids) == 3 and all(frame["id"].tolist() == ids for frame in study.items.values())
    assert all(frame["answer_share"].between(0, 1).all() for frame in study.items.values())

    scores = layout.train_run_dir(cfg.name, "evidence_seeds/scores")
    stamps = {path.name: path.stat().st_mtime_ns for path in scores.iterdir()}
    again = es.run_seeds(cfg, progress=False)  # every run finished, every score cached: nothing is redone
    assert {path.name: path.stat().st_mtime_ns for path in scores.iterdir()} == stamps
    for name, frame in study.items.items():
        pd.testing.assert_frame_equal(again.items[name], frame, check_dtype=False)
    monkeypatch.setattr(es, "scoring_code", lambda: "changed")  # other scoring code: the cache is not reused
    es.run_seeds(cfg, progress=False)
    assert all(path.stat().st_mtime_ns != stamps[path.name] for path in scores.iterdir())

    control = dataclasses.replace(cfg, name="ci-placebo", rewards=dataclasses.replace(cfg.rewards,
                                                                                     design="eviomni_placebo"),
                                  evidence=dataclasses.replace(cfg.evidence, recipe_profile=cfg.name))
    monkeypatch.undo()  # the real scoring code again: the recipe's scores were written under the other
    monkeypatch.chdir(tmp_path)
    for split, n in (("train", 4), ("dev", 6)):  # the control's own data stage: the same questions
        write_jsonl(layout.contexts_path(control, control.train.dataset, split), contexts(n))
    with patch.object(ep, "load_profile", lambda name: cfg), pytest.raises(
            FileNotFoundError, match="no scores of the recipe arm's start"):  # before any training
        es.run_seeds(control, progress=False)
    assert not es.seed_run(control, 0).root.exists()
    es.run_seeds(cfg, progress=False)  # the recipe arm's scores, by this code
    with patch.object(ep, "load_profile", lambda name: cfg):
        paired = es.run_seeds(control, progress=False)  # the placebo design's GRPO runs, paired with the recipe's
    assert read_json(es.seed_run(control, 0).config_file)["rewards"]["design"] == "eviomni_placebo"
    pd.testing.assert_frame_equal(paired.items["start"], again.items["start"], check_dtype=False)  # reused
    assert not es.scores_path(control, "start").exists() and list(paired.recipe) == list(study.items)
    primary = ep.placebo_primary(paired)
    assert primary["seed"].tolist() == ["seed-0", "seed-1", "pooled"]
    flags = esc.shortcut_items(paired.rows, paired.items)
    assert len(flags) == 9 and set(esc.recall_by_shortcut(flags)["policy"]) <= {"seed-0", "seed-1", "pooled"}
    assert esc.shortcut_copies(flags)["policy"].tolist() == ["start", "seed-0", "seed-1"]
    assert esc.reader_f1_table(flags)["policy"].tolist() == ["start", "seed-0", "seed-1"]
    secondary = ep.placebo_secondary(paired, flags, esc.shortcut_items(paired.rows, paired.recipe))
    assert len(secondary) == 9 and ep.placebo_verdict(primary)["seeds"] == 2

    recall = es.evidence_recall(study.items)
    verdict = es.seeds_verdict(recall, es.primary_outcomes(recall, es.probe_shares(study.items)), es.baselines(study))
    assert verdict["reading"].startswith("mechanics only") and verdict["pairs"] == 6
    es.write_items(study, tmp_path / "items.jsonl")
    assert len((tmp_path / "items.jsonl").read_text().splitlines()) == 9
    assert {"policy", "ar_random_sentence", "ar_first_sentence"} <= set(json.loads(
        (tmp_path / "items.jsonl").read_text().splitlines()[0]))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny_llama_dir", "smollm2_dir"])
def test_held_out_scores_repeat_byte_for_byte_alone_and_under_load(model, request):
    """Deliverable 6: transformers' greedy scoring, with its fixed batches, gives the same texts and scores beside
    other work as alone (vLLM's engine in processes of its own did not: it batches by timing, D204)."""
    from tests.test_train_e2e import contexts

    cfg = load_profile("cpu-evidence")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, max_completion_length=32))
    policy, rows = str(request.getfixturevalue(model)), contexts(3)  # 3 rows: a full batch and a partial one
    with patch.object(heldout, "BATCH_SIZE", 2):
        alone = heldout.score_policy(cfg, policy, rows, progress=False)
        with cores_busy(1):  # a spinner beside the scorer's threads (and any other worker): over 2 cores' work
            loaded = heldout.score_policy(cfg, policy, rows, progress=False)
    pd.testing.assert_frame_equal(loaded, alone)
    assert json.dumps(loaded.to_dict("records")) == json.dumps(alone.to_dict("records"))


@pytest.mark.slow
@pytest.mark.vllm
def test_held_out_scores_on_vllms_in_process_engine_repeat_alone_and_under_load(tiny_llama_dir):
    """Deliverable 6: vLLM's CPU engine in this process (D193, `tiny`'s held-out engine and options) gets every
    request before its first step, so its batches do not depend on timing: a fresh engine scores the same bytes
    beside other work as alone (scripts/vllm_repeatability.py; the engine in processes of its own did not)."""
    from repro.generation import vllm_backend
    from tests.test_train_e2e import contexts

    cfg = load_profile("cpu-evidence")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, max_completion_length=32, heldout_backend="vllm",
        heldout_options=load_profile("tiny").train.heldout_options))
    policy, rows = str(tiny_llama_dir), contexts(3)
    started, start_engine = [], vllm_backend.start_engine

    def recorded(engine, cpu_reserved_cores, in_process=False):
        started.append(in_process)
        return start_engine(engine, cpu_reserved_cores, in_process)

    with patch.object(vllm_backend, "start_engine", recorded):
        alone = heldout.score_policy(cfg, policy, rows, progress=False)
        with cores_busy(1):  # a spinner beside the scorer's threads (and any other worker): over 2 cores' work
            loaded = heldout.score_policy(cfg, policy, rows, progress=False)
    # at 3 rows the engine in processes of its own repeated too (3 of 3 tries): what this test can see is the
    # in-process engine, which the script found repeating on 48 prompts where the other did not
    assert started == [True, True]
    pd.testing.assert_frame_equal(loaded, alone)
    assert json.dumps(loaded.to_dict("records")) == json.dumps(alone.to_dict("records"))
