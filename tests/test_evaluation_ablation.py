"""Table 3's answer-reward ablation: subset names, the table layout beside the paper, and the paired tests of each
subset against all three answers on per-item files (the training runs themselves are covered by the ci pipeline)."""

import pandas as pd
import pytest

from repro.config import ConfigError, load_profile
from repro.evaluation.ablation import compare_subsets, subset_label, subset_name, summarize_ablation, table3
from repro.io import write_jsonl
from repro.paper import load_paper_tables

ALL = "Evidence+Rationale+Full Ctx"


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
