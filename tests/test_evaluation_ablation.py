"""Table 3's answer-reward ablation: subset names, which run a subset reuses, the table layout beside the paper, and
the paired tests of each subset against all three answers on per-item files (the training runs themselves are covered
by the ci pipeline)."""

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT
from repro.config import ConfigError, is_main_run, load_profile
from repro.data import layout
from repro.io import write_jsonl
from repro.reporting.paper import load_paper_tables
from repro.studies import ablation
from repro.studies.ablation import compare_subsets, subset_label, subset_name, summarize_ablation, table3
from repro.train.grpo.logs import TrainRun

ALL = "Evidence+Rationale+Full Ctx"
REFERENCE = ("evidence", "rationale", "full")


def test_subsets_are_named_like_the_paper_rows_in_any_order():
    assert subset_label(["full", "evidence"]) == "Evidence+Full Ctx"
    assert subset_label(("rationale", "full", "evidence")) == ALL
    assert subset_label(["rationale"]) == "Rationale"
    assert subset_name(("full", "rationale")) == "rationale+full"
    paper_rows = set(load_paper_tables(3)["method"])
    assert {subset_label(s) for s in load_profile("paper-1p5b").ablation.subsets} == paper_rows
    assert {subset_label(s) for s in load_profile("tiny").ablation.subsets} <= paper_rows


def test_duplicate_or_empty_subsets_are_rejected():
    from repro.config import AblationConfig

    with pytest.raises(ConfigError, match="ablation"):
        AblationConfig(subsets=[("evidence",), ("evidence",)], datasets=["fanoutqa"])
    with pytest.raises(ConfigError, match="ablation"):
        AblationConfig(subsets=[("evidence", "evidence")], datasets=["fanoutqa"])


def test_the_papers_reference_row_is_table_2s_eviomni_run():
    """Table 3 (1.5B only) prints Table 2's EviOmni-1.5B EM as its reference row on every set: one run (D165)."""
    table2, table3_rows = load_paper_tables(2), load_paper_tables(3)
    assert set(table3_rows["model_size"]) == {"1.5B"}
    reference = table3_rows[table3_rows["method"] == ALL].set_index("dataset")["value"]
    eviomni = table2[(table2["method"] == "EviOmni") & (table2["model_size"] == "1.5B")
                     & (table2["metric"] == "EM")].set_index("dataset")["value"]
    assert reference.drop("Average").to_dict() == eviomni.to_dict() == {"NQ": 41.14, "TQA": 56.84, "HotpotQA": 20.46}
    assert reference["Average"] == pytest.approx(eviomni.mean(), abs=0.005)


def test_a_subset_is_the_main_run_when_its_answers_and_step_budget_are():
    paper, tiny = load_profile("paper-1p5b"), load_profile("tiny")
    assert [is_main_run(paper, s) for s in paper.ablation.subsets] == [False] * 5 + [True]  # max_steps: null
    assert ablation.ablation_run(paper, REFERENCE).root == layout.train_run_dir("paper-1p5b")  # Table 2's run
    assert ablation.ablation_run(paper, ["evidence"]).root == layout.train_run_dir("paper-1p5b", "ablation/evidence")
    # tiny: one-step ablation runs beside a 24-step main run, so its reference row is trained here
    assert tiny.ablation.max_steps == 1 != tiny.train.max_steps
    assert not any(is_main_run(tiny, s) for s in tiny.ablation.subsets)
    own = layout.train_run_dir("tiny", f"ablation/{subset_name(REFERENCE)}")
    assert ablation.ablation_run(tiny, REFERENCE).root == own
    same_budget = dataclasses.replace(tiny, ablation=dataclasses.replace(tiny.ablation, max_steps=tiny.train.max_steps))
    assert is_main_run(same_budget, ("full", "rationale", "evidence"))  # as a set: Eq. 5 averages the answers
    full_only = dataclasses.replace(same_budget, rewards=dataclasses.replace(tiny.rewards, answer_subset=("full",)))
    assert [is_main_run(full_only, s) for s in tiny.ablation.subsets] == [True, False]  # [full] is then the main run


def test_the_main_run_is_read_never_trained_and_other_subsets_are_trained(tmp_path, monkeypatch):
    paper = load_profile("paper-1p5b", ROOT / "params.yaml")
    tiny = load_profile("tiny", ROOT / "params.yaml")
    monkeypatch.chdir(tmp_path)  # no data/ here
    trained = []
    monkeypatch.setattr(ablation, "train_extractor",
                        lambda cfg, root: trained.append((cfg.name, root, cfg.rewards.answer_subset,
                                                          cfg.train.max_steps, cfg.train.score_single_checkpoint))
                        or TrainRun(root))
    with pytest.raises(FileNotFoundError, match=r"data/paper-1p5b/train/eviomni/extractor: no trained extractor "
                                                r"yet; the Evidence\+Rationale\+Full Ctx row .* train_eviomni stage"):
        ablation.trained_run(paper, REFERENCE)
    layout.train_run_dir("paper-1p5b").joinpath("extractor").mkdir(parents=True)
    assert ablation.trained_run(paper, REFERENCE).extractor == layout.train_run_dir("paper-1p5b") / "extractor"
    assert trained == []
    ablation.trained_run(paper, ["evidence"])
    ablation.trained_run(tiny, REFERENCE)
    assert trained == [  # the variant's profile: its subset, its steps (the main run's when null), no lone dev pass
        ("paper-1p5b", layout.train_run_dir("paper-1p5b", "ablation/evidence"), ("evidence",),
         paper.train.max_steps, False),
        ("tiny", layout.train_run_dir("tiny", "ablation/evidence+rationale+full"), tuple(REFERENCE), 1, False)]


def records(ems: list[int]) -> list[dict]:
    return [{"id": str(i), "question": "q", "golden_answers": ["a"], "evidence": "e", "prediction": "a" if em else "b",
             "em": em, "f1": float(em), "passage_tokens": 100, "evidence_tokens": 10, "cr": 10.0}
            for i, em in enumerate(ems)]


@pytest.fixture
def files(tmp_path):
    """Eight questions: all three answers right on 0-5, Evidence on 0-1 only (4 discordant pairs, all one way)."""
    rows = []
    for label, ems in ((ALL, [1] * 6 + [0] * 2), ("Evidence", [1] * 2 + [0] * 6)):
        path = tmp_path / f"{label}.jsonl"
        write_jsonl(path, records(ems))
        rows.append({"subset": label, "dataset": "fanoutqa", "path": str(path)})
    return pd.DataFrame(rows)


def test_table3_puts_the_average_last_and_the_paper_below(files):
    table = table3(summarize_ablation(files), labels={"fanoutqa": "FanOutQA"}, paper=load_paper_tables(3),
                   source="this run (ci)")
    assert list(table.columns) == ["source", "answers", "FanOutQA", "NQ", "TQA", "HotpotQA", "Average"]
    ours = table[table["source"] == "this run (ci)"].set_index("answers")
    assert ours.loc[ALL, "FanOutQA"] == pytest.approx(75.0) and ours.loc["Evidence", "Average"] == pytest.approx(25.0)
    paper = table[table["source"] == "paper (1.5B)"].set_index("answers")
    assert paper.loc[ALL, "NQ"] == pytest.approx(41.14) and paper.loc["Rationale", "Average"] == pytest.approx(39.05)


def test_each_subset_is_compared_with_all_three_answers_on_the_same_items(files):
    tests = compare_subsets(files, n_resamples=999)
    assert set(tests["subset"]) == {"Evidence"} and (tests["reference"] == ALL).all()
    mcnemar = tests[tests["test"] == "McNemar (exact)"].iloc[0]
    assert mcnemar["effect"] == pytest.approx(-50.0)  # points: 2/8 − 6/8
    assert mcnemar["p_value"] == pytest.approx(2 * 0.5**4)  # four discordant pairs, all against Evidence
    assert (tests["n"] == 8).all()


def test_files_over_different_questions_are_refused(files, tmp_path):
    write_jsonl(files.loc[1, "path"], records([1, 0]))
    with pytest.raises(ValueError, match="different questions"):
        compare_subsets(files, n_resamples=99)


def test_ablation_null_trains_nothing_and_records_that_table_3_was_not_requested(tmp_path, monkeypatch):
    """`ablation: null` switches Table 3 off as `reward_designs: null` does: the stage writes its outputs, saying so,
    and the notebook's tables hold the paper's rows only."""
    cfg = dataclasses.replace(load_profile("paper-1p5b", ROOT / "params.yaml"), ablation=None)
    paper = load_paper_tables(3)
    monkeypatch.chdir(tmp_path)  # no data/ here
    monkeypatch.setattr(ablation, "train_extractor", lambda *args, **kwargs: pytest.fail("nothing is trained"))
    files = ablation.run_ablation(cfg, progress=False)
    assert files.empty and list(files.columns) == ["subset", "dataset", "path"]
    for directory in ("train/ablation", "predictions/ablation_answer_rewards"):
        assert json.loads(Path(f"data/paper-1p5b/{directory}/study.json").read_text()) == {
            "requested": False, "subsets": []}
    summary = summarize_ablation(files)
    assert summary.empty and {"subset", "dataset", "EM", "F1", "CR"} <= set(summary.columns)
    table = table3(summary, paper=paper, source="this run (paper-1p5b)")
    assert set(table["source"]) == {"paper (1.5B)"} and len(table) == 6
    assert compare_subsets(files).empty
