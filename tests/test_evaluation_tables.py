"""Aggregation of per-item records against hand-computed values, Table 2's layout and the paired tests."""

import math

import pandas as pd
import pytest

from repro.evaluation.records import RecordFile
from repro.evaluation.tables import (
    compare_methods,
    questions_needed,
    reference_pairs,
    summarize,
    summarize_files,
    table2,
)


def rec(i: int, em: float, f1: float, passage_tokens: int, evidence_tokens: int | None, in_passages=True) -> dict:
    cr = None if evidence_tokens is None else passage_tokens / max(evidence_tokens, 1)
    return {"id": f"q{i}", "question": "q?", "golden_answers": ["a"], "evidence": None if cr is None else "e",
            "prediction": "a", "em": em, "f1": f1, "passage_tokens": passage_tokens, "evidence_tokens": evidence_tokens,
            "cr": cr, "answer_in_passages": in_passages}


EXTRACTOR = [rec(0, 1.0, 1.0, 100, 10), rec(1, 0.0, 0.5, 200, 0), rec(2, 0.0, 0.0, 300, 100, in_passages=False)]
ZERO = [rec(0, 0.0, 0.0, 100, None), rec(1, 0.0, 0.25, 200, None), rec(2, 1.0, 1.0, 300, None, in_passages=False)]


def test_summary_matches_hand_computed_scores_and_both_compression_ratios():
    row = summarize(EXTRACTOR)
    assert row["n"] == 3 and row["EM"] == pytest.approx(100 / 3) and row["F1"] == pytest.approx(50.0)
    # per item: 100/10, 200/max(0, 1), 300/100  ->  mean (10 + 200 + 3) / 3;  sums: 600 / (10 + 1 + 100)
    assert row["CR"] == pytest.approx(213 / 3) and row["CR (ratio of sums)"] == pytest.approx(600 / 111)
    assert row["empty evidence"] == 1 and row["evidence tokens"] == pytest.approx(110 / 3)
    assert row["passage tokens"] == pytest.approx(200.0)

    zero = summarize(ZERO)
    assert zero["EM"] == pytest.approx(100 / 3) and zero["F1"] == pytest.approx(125 / 3)
    assert math.isnan(zero["CR"]) and math.isnan(zero["CR (ratio of sums)"])
    with pytest.raises(ValueError, match="either every record"):
        summarize(EXTRACTOR + [rec(3, 0, 0, 10, None)])


@pytest.fixture
def files(tmp_path) -> pd.DataFrame:
    rows = []
    for method, records in [("zero", ZERO), ("prompted_extractor", EXTRACTOR)]:
        path = tmp_path / "set" / f"{method}.jsonl"
        RecordFile(path, {"method": method}).finish(records)
        rows.append({"dataset": "set", "method": method, "path": str(path)})
    return pd.DataFrame(rows)


def test_summaries_per_file_and_on_the_answer_in_passages_items(files):
    summary = summarize_files(files)
    assert list(summary["method"]) == ["Zero", "Prompted extraction"] and list(summary["group"]) == ["WR", "RAR"]
    subset = summarize_files(files, where="answer_in_passages")
    assert list(subset["n"]) == [2, 2] and list(subset["EM"]) == [0.0, 50.0]


def test_table2_layout_with_the_paper_rows_beside(files):
    paper = pd.DataFrame([
        {"dataset": "NQ", "model_size": "1.5B", "method": m, "metric": metric, "value": v}
        for m, metric, v in [("Zero", "EM", 13.74), ("Zero", "CR", math.nan), ("EviOmni", "EM", 41.14),
                             ("Full", "EM", 41.97)]])
    table = table2(summarize_files(files), labels={"set": "Set"}, paper=paper, source="ours")
    assert list(table.columns) == ["source", "dataset", "metric", "Zero", "Prompted extraction"]
    ours = table[table["source"] == "ours"].set_index("metric")
    assert list(ours.index) == ["EM", "F1", "CR", "CR (ratio of sums)"] and set(ours["dataset"]) == {"Set"}
    assert ours.loc["EM", "Prompted extraction"] == pytest.approx(100 / 3) and math.isnan(ours.loc["CR", "Zero"])
    (paper_row,) = table[table["source"] == "paper (1.5B)"].itertuples(index=False)  # only methods shown here
    assert (paper_row.dataset, paper_row.metric, paper_row.Zero) == ("NQ", "EM", 13.74)


def test_paired_tests_on_the_same_items(files):
    tests = compare_methods(files, n_resamples=999)
    assert set(tests["a"]) == {"Prompted extraction"} and set(tests["b"]) == {"Zero"}
    em = tests[tests["metric"] == "em"]
    assert em["test"].tolist() == ["approximate randomization (two-sided)", "McNemar (exact)"]  # EM: no bootstrap
    assert em["effect"].tolist() == pytest.approx([0.0] * 2) and set(tests["n"]) == {3}
    f1 = tests[(tests["metric"] == "f1") & (tests["test"] == "paired bootstrap")]
    assert f1["effect"].item() == pytest.approx(100 * (1.5 - 1.25) / 3)
    assert (tests["p_holm"] >= tests["p_value"]).all()

    subset = compare_methods(files, pairs=[("prompted_extractor", "zero")], where="answer_in_passages",
                             n_resamples=999)
    assert set(subset["n"]) == {2}
    mcnemar = subset[subset["test"] == "McNemar (exact)"].set_index("metric").loc["em"]
    assert mcnemar["effect"] == pytest.approx(50.0)
    # 1 vs 0 discordant of 2: Clopper-Pearson of 1/1 is [0.025, 1], so 1/2·(2θ − 1) is [−47.5, 50] points
    assert [mcnemar["ci_low"], mcnemar["ci_high"]] == pytest.approx([-47.5, 50.0])


def test_extra_file_columns_such_as_the_noise_level_are_kept_and_plotted(files):
    from repro.studies.figures import plot_noise_robustness

    noisy = pd.concat([files.assign(noise=0), files.assign(noise=2)], ignore_index=True)
    summary = summarize_files(noisy)
    assert list(summary.columns[:3]) == ["dataset", "noise", "method"] and list(summary["noise"]) == [0, 0, 2, 2]
    fig = plot_noise_robustness(summary)
    assert [ax.get_title() for ax in fig.axes] == ["set: EM", "set: F1", "set: EM drop"]
    drop = fig.axes[2].get_lines()[0].get_ydata()  # the same files at both levels: no drop
    assert list(drop) == [0.0, 0.0]


def test_reference_pairs_compare_eviomni_with_every_other_method():
    assert reference_pairs(["zero", "full", "eviomni", "cot"]) == [("eviomni", "zero"), ("eviomni", "full"),
                                                                  ("eviomni", "cot")]
    assert reference_pairs(["zero", "full"]) == [("full", "zero")]  # no EviOmni column: the last one


def test_questions_needed_from_the_observed_discordance_by_hand(files):
    table = questions_needed(files, [("prompted_extractor", "zero")])
    row = table.iloc[0]
    # EM 1,0,0 vs 0,0,1: two of three questions discordant; (1.96·√(2/3) + 0.8416·√(2/3 − 0.05²))² / 0.05² = 2090.7
    assert row["questions"] == 3 and row["discordant_rate"] == pytest.approx(2 / 3)
    assert row["questions_needed"] == 2091 and not row["raised_to_difference"]
    same = questions_needed(files, [("zero", "zero")]).iloc[0]  # no discordance: the least that holds 5 points
    assert same["discordant_rate"] == 0 and same["raised_to_difference"] and same["questions_needed"] == 155
