"""The reward-design study: rows and the runs they name, what an item's evidence holds, the summary and the paired
tests against EviOmni's reward on per-item files, the evidence files' reuse, a profile without the study (the GRPO
runs and their evaluation are covered by the ci pipeline)."""

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from repro import assets
from repro.config import DesignRow, is_main_design_run, load_profile
from repro.data import layout
from repro.formulas import rewards
from repro.io import write_jsonl
from repro.registry import REWARD_DESIGNS
from repro.studies import reward_designs as rd
from repro.studies.figures import plot_reward_designs

QUESTION = "What is the capital of France?"


def test_a_row_names_a_design_and_optionally_the_kl_estimator_of_its_run():
    assert [row.name for row in (DesignRow("eviomni"), DesignRow("eviomni", "k2"), DesignRow("eval_rar", "k3"))] == [
        "eviomni", "eviomni_k2", "eval_rar_k3"]
    cfg = load_profile("ci")
    k2 = rd.design_profile(cfg, DesignRow("eviomni", "k2"))
    assert k2.rewards == dataclasses.replace(cfg.rewards, design="eviomni")
    assert k2.train == dataclasses.replace(cfg.train, kl_estimator="k2")
    evinote = rd.design_profile(cfg, DesignRow("evinote"))  # no estimator: the profile's own
    assert evinote.rewards.design == "evinote" and evinote.train == cfg.train and evinote.train.kl_estimator == "k3"
    assert dataclasses.replace(evinote, rewards=cfg.rewards) == cfg  # nothing else changes
    table = rd.design_table(cfg)
    assert table.values.tolist() == [
        ["eviomni", "eviomni", "k3", "", REWARD_DESIGNS["eviomni"].source],
        ["evinote", "evinote", "k3", "evinote_reading=paper, nli_model=" + str(cfg.rewards.nli_model),
         REWARD_DESIGNS["evinote"].source],
        ["arena_k2", "arena", "k2", "arena_accuracy=em", REWARD_DESIGNS["arena"].source]]


def test_each_row_has_its_run_directory_and_per_item_files():
    cfg = load_profile("ci")
    assert rd.design_run(cfg, DesignRow("arena", "k2")).root == Path("data/ci/train/reward_designs/arena_k2")
    assert layout.predictions_path("ci", rd.STUDY, "fanoutqa", "arena_k2") == \
        Path("data/ci/predictions/reward_designs/fanoutqa/arena_k2.jsonl")
    assert rd.evidence_scores_path(cfg, "fanoutqa", "arena_k2") == \
        Path("data/ci/predictions/reward_designs/evidence_scores/fanoutqa/arena_k2.jsonl")


def test_the_row_that_repeats_the_main_run_reuses_it(tmp_path, monkeypatch):
    cfg, tiny = load_profile("ci"), load_profile("tiny")  # ci's rows are at the main run's budget (max_steps null)
    rows = [DesignRow("eviomni"), DesignRow("eviomni", "k3"), DesignRow("eviomni", "k2"), DesignRow("evinote")]
    assert [is_main_design_run(cfg, row) for row in rows] == [
        True, True, False, False]  # k3 is the profile's estimator; k2 and another design train runs of their own
    one_step = dataclasses.replace(cfg, reward_designs=dataclasses.replace(cfg.reward_designs, max_steps=1))
    assert not any(is_main_design_run(one_step, row) for row in cfg.reward_designs.designs)  # another budget
    assert rd.design_run(one_step, rows[0]).root == Path("data/ci/train/reward_designs/eviomni")
    assert rd.design_run(cfg, rows[0]).root == layout.train_run_dir("ci")
    assert rd.design_run(cfg, rows[3]).root == Path("data/ci/train/reward_designs/evinote")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"the eviomni row .* is the main run's \(D170\): run the "
                                                r"train_eviomni stage first"):
        rd.trained_design_run(cfg, rows[0])
    (tmp_path / layout.train_run_dir("ci") / "extractor").mkdir(parents=True)
    assert rd.trained_design_run(cfg, rows[0]).root == layout.train_run_dir("ci")  # read, not trained
    trained = []
    monkeypatch.setattr(rd, "train_extractor", lambda run_cfg, root: trained.append((run_cfg, root)))
    rd.trained_design_run(tiny, rows[0])  # tiny's one-step rows: each trains its own
    [(run_cfg, root)] = trained
    assert root == Path("data/tiny/train/reward_designs/eviomni") and run_cfg.rewards.design == "eviomni"
    assert run_cfg.train == dataclasses.replace(tiny.train, max_steps=1, score_single_checkpoint=False)  # (D177)


def test_what_an_items_evidence_holds_by_hand():
    calls = []

    def nli(premises, hypotheses):
        calls.append((list(premises), list(hypotheses)))
        return [0.8 if h.startswith("Paris") else 0.3 for h in hypotheses]

    record = {"id": "1", "question": QUESTION, "golden_answers": ["Paris", "City of Light"],
              "evidence": "Paris is the capital.",
              "raw_output": "<relevance>[3, 1, 3]</relevance><reason>r</reason><extract>Paris is the capital.</extract>"}
    assert rd.evidence_scores(record, [1, 2], nli) == {
        "id": "1", "ar_evidence": 1.0, "nli_entailment": 0.8, "nli_support": 1.0, "relevance": [1, 3],
        "gold_passages": [1, 2]}
    # R_EQR's hypothesis for every golden answer, the evidence as premise, the max over the answers
    assert calls == [(["Paris is the capital."] * 2, [rewards.eqr_hypothesis("Paris", QUESTION),
                                                      rewards.eqr_hypothesis("City of Light", QUESTION)])]
    untagged = {**record, "evidence": "Lyon is a city.", "raw_output": None}  # the output was the evidence itself
    assert rd.evidence_scores(untagged, [], lambda p, h: [0.5] * len(p)) == {
        "id": "1", "ar_evidence": 0.0, "nli_entailment": 0.5, "nli_support": 0.0, "relevance": None,
        "gold_passages": []}  # 0.5 is not above the threshold: entailment must be more likely than not


def prediction(i: int, em: int, evidence: str = "e") -> dict:
    return {"id": str(i), "question": QUESTION, "golden_answers": ["Paris"], "evidence": evidence, "raw_output": None,
            "prediction": "Paris" if em else "Lyon", "em": em, "f1": float(em), "passage_tokens": 100,
            "evidence_tokens": 10, "cr": 10.0}


def evidence(i: int, ar: int, support: int, relevance) -> dict:
    return {"id": str(i), "ar_evidence": float(ar), "nli_entailment": 0.9 if support else 0.1,
            "nli_support": float(support), "relevance": relevance, "gold_passages": [1]}


@pytest.fixture
def files(tmp_path):
    """Eight questions, the same EM. eviomni: AR on 0-5, no NLI support, no relevance list. arena: AR on 0-1 only
    (4 discordant pairs, all against it), NLI support on 0-1 (2 discordant, both for it), relevance [1] (= gold) on
    0-3, [1, 2] on 4-5, none on 6-7."""
    rows = []
    designs = {"eviomni": ([1] * 6 + [0] * 2, [0] * 8, [None] * 8),
               "arena": ([1] * 2 + [0] * 6, [1] * 2 + [0] * 6, [[1]] * 4 + [[1, 2]] * 2 + [None] * 2)}
    for design, (ar, support, relevance) in designs.items():
        path, scores = tmp_path / f"{design}.jsonl", tmp_path / f"{design}.evidence.jsonl"
        write_jsonl(path, [prediction(i, int(i < 4)) for i in range(8)])
        write_jsonl(scores, [evidence(i, *item) for i, item in enumerate(zip(ar, support, relevance))])
        rows.append({"design": design, "dataset": "ovos-describe", "path": str(path), "evidence_scores": str(scores)})
    return pd.DataFrame(rows)


def test_the_summary_adds_what_the_evidence_holds_to_table_2s_scores(files):
    summary = rd.summarize_designs(files).set_index("design")
    assert summary.loc["eviomni", "EM"] == summary.loc["arena", "EM"] == pytest.approx(50.0)
    assert summary.loc["eviomni", "evidence AR"] == pytest.approx(75.0)
    assert summary.loc["arena", "evidence AR"] == pytest.approx(25.0)
    assert summary.loc["arena", "NLI support"] == pytest.approx(25.0)
    assert summary.loc["arena", "NLI entailment"] == pytest.approx((2 * 0.9 + 6 * 0.1) / 8)
    assert summary.loc["arena", "relevance tagged"] == pytest.approx(75.0)  # 6 of 8 outputs cite passages
    assert summary.loc["arena", "relevance precision"] == pytest.approx(75.0)  # 6 gold of 4 x 1 + 2 x 2 = 8 listed
    assert summary.loc["arena", "relevance recall"] == pytest.approx(100.0)  # 6 of the 6 gold passages of those items
    assert summary.loc["eviomni", "relevance tagged"] == 0.0
    assert math.isnan(summary.loc["eviomni", "relevance precision"])  # undefined where nothing is cited
    assert (summary["n"] == 8).all() and (summary["CR"] == 10.0).all()


def test_each_design_is_compared_with_eviomnis_reward_on_every_metric(files):
    tests = rd.compare_designs(files, n_resamples=999)
    assert set(tests["design"]) == {"arena"} and (tests["reference"] == "eviomni").all() and (tests["n"] == 8).all()
    mcnemar = tests[tests["test"] == "McNemar (exact)"].set_index("metric")
    assert list(mcnemar.index) == ["em", "ar_evidence", "nli_support"]  # F1 gets no McNemar
    assert mcnemar.loc["ar_evidence", "effect"] == pytest.approx(-50.0)  # points: 2/8 − 6/8
    assert mcnemar.loc["ar_evidence", "p_value"] == pytest.approx(2 * 0.5**4)  # 4 discordant pairs, all one way
    # its exact interval: Clopper-Pearson of 0/4 is [0, 1 − 0.025^(1/4)], times 4/8 as 2θ − 1, in points
    assert mcnemar.loc["ar_evidence", ["ci_low", "ci_high"]].tolist() == pytest.approx(
        [-50.0, 50 * (1 - 2 * 0.025**0.25)])
    assert set(tests[tests["test"] == "paired bootstrap"]["metric"]) == {"f1"}  # the bootstrap interval: F1 only
    assert mcnemar.loc["nli_support", "effect"] == pytest.approx(25.0)
    assert mcnemar.loc["nli_support", "p_value"] == pytest.approx(2 * 0.5**2)
    assert mcnemar.loc["em", "p_value"] == pytest.approx(1.0)
    assert set(tests["metric"]) == {"em", "f1", "ar_evidence", "nli_support"}
    assert (tests["p_holm"] >= tests["p_value"]).all()


def test_files_over_different_questions_are_refused(files):
    path = files.loc[1, "evidence_scores"]
    write_jsonl(path, [evidence(i, 0, 0, None) for i in range(7)])
    with pytest.raises(ValueError, match="different questions"):
        rd.compare_designs(files, n_resamples=99)


def test_the_plot_shows_each_difference_with_its_interval(files):
    fig = plot_reward_designs(rd.compare_designs(files, n_resamples=999))
    assert [ax.get_title() for ax in fig.axes] == ["EM", "F1", "evidence AR", "NLI support"]
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["arena"]
    assert all(ax.containers for ax in fig.axes)  # an error bar per panel


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    out = tmp_path_factory.mktemp("nli-untrained-minilm")
    assets.build_nli_standin(out)
    return out


def test_evidence_scores_are_written_per_item_and_reused(tmp_path, monkeypatch, standin):
    monkeypatch.chdir(tmp_path)
    cfg = load_profile("ci", params_path=Path(__file__).resolve().parents[1] / "params.yaml")
    cfg = dataclasses.replace(cfg, rewards=dataclasses.replace(cfg.rewards, nli_model=str(standin)))
    passages = [{"id": "p1", "contents": '"Paris"\nParis is the capital of France.'},
                {"id": "p2", "contents": '"Lyon"\nLyon is a city.'}]
    write_jsonl(layout.contexts_path(cfg, "fanoutqa", "test"),
                [{"id": str(i), "question": QUESTION, "golden_answers": ["Paris"], "passages": passages}
                 for i in range(2)])
    path = layout.predictions_path("ci", rd.STUDY, "fanoutqa", "eviomni")
    write_jsonl(path, [prediction(0, 1, "Paris is the capital."), prediction(1, 0, "")])
    files = pd.DataFrame([{"design": "eviomni", "dataset": "fanoutqa", "path": str(path)}])

    scored = rd.score_evidence(cfg, files, progress=False)  # the stand-in NLI model, loaded because nothing is scored
    assert scored["evidence_scores"].tolist() == [str(rd.evidence_scores_path(cfg, "fanoutqa", "eviomni"))]
    lines = Path(scored["evidence_scores"][0]).read_text().splitlines()
    first, second = (json.loads(line) for line in lines)
    assert (first["ar_evidence"], second["ar_evidence"]) == (1.0, 0.0) and first["gold_passages"] == [1]
    assert 0 < first["nli_entailment"] < 1 and first["relevance"] is None

    def unused(premises, hypotheses):
        raise AssertionError("finished evidence scores are reused, not recomputed")

    assert rd.score_evidence(cfg, files, progress=False, nli=unused).equals(scored)
    write_jsonl(path, [prediction(0, 1, "Lyon is a city."), prediction(1, 0, "")])  # another evidence: scored again
    rescored = rd.score_evidence(cfg, files, progress=False, nli=lambda p, h: [0.9] * len(p))
    assert [json.loads(line)["nli_support"] for line in Path(rescored["evidence_scores"][0]).read_text().splitlines()] \
        == [1.0, 1.0]


def test_a_profile_without_the_study_records_that_it_was_not_requested(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = dataclasses.replace(load_profile("ci", params_path=Path(__file__).resolve().parents[1] / "params.yaml"),
                              reward_designs=None)
    files = rd.score_evidence(cfg, rd.run_reward_designs(cfg, progress=False))
    assert files.empty and list(files.columns) == ["design", "dataset", "path", "evidence_scores"]
    for directory in ("train", "predictions"):
        assert json.loads(Path(f"data/ci/{directory}/reward_designs/study.json").read_text()) == {
            "requested": False, "designs": []}
    summary, tests = rd.summarize_designs(files), rd.compare_designs(files)
    assert summary.empty and {"EM", "evidence AR", "relevance recall"} <= set(summary.columns)
    assert tests.empty and {"design", "metric", "p_holm"} <= set(tests.columns)
    assert rd.design_table(cfg).empty
    assert plot_reward_designs(tests).axes[0].texts[0].get_text() == "no design to compare with the reference"
