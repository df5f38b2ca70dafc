"""Each study's headline line (D241): the same five keys in every declared metrics file, so that `dvc metrics show`
prints one table a terminal holds, and its headline numbers in full in metrics/full/<stage>.json."""

import json
import math

import pandas as pd
import pytest

from repro.evaluation.tables import reference_label
from repro.reporting import plots
from repro.studies.ablation import REFERENCE, subset_label
from repro.studies.training_dynamics import curve_headline, first_last

SUMMARY = pd.DataFrame({"dataset": ["NQ", "TQA"] * 4,
                        "method": ["Full"] * 2 + ["RECOMP"] * 2 + ["EviOmni"] * 2 + ["Zero"] * 2,
                        "EM": [40.0, 50.0, 30.0, 44.0, 38.0, 46.0, 10.0, math.nan]})


def test_the_line_is_the_study_row_against_the_best_other_averaged_over_the_datasets():
    # means: Full 45, RECOMP 37, EviOmni 42, Zero 10 (its NaN dataset left out, as pandas' mean does)
    assert plots.headline_line(SUMMARY, "method", "EM", of="EviOmni") == {
        "metric": "EM", "of": "EviOmni", "value": 42.0, "vs": "Full", "vs value": 45.0}
    assert plots.headline_line(SUMMARY, "method", "EM", of="EviOmni", vs="RECOMP")["vs value"] == 37.0
    fastest = plots.headline_line(SUMMARY, "method", "EM", of="EviOmni", lower_is_better=True, label="s/query")
    assert (fastest["metric"], fastest["vs"], fastest["vs value"]) == ("s/query", "Zero", 10.0)


def test_a_missing_row_or_number_is_null():
    assert plots.compare({"a": 1.0, "b": math.nan}, "EM", of="c") == {
        "metric": "EM", "of": "c", "value": None, "vs": "a", "vs value": 1.0}
    assert plots.compare({"a": 1.0, "b": None}, "EM", of="a") == {
        "metric": "EM", "of": "a", "value": 1.0, "vs": None, "vs value": None}  # no other row has a number
    assert plots.compare({}, "EM", of="a", vs="b")["vs value"] is None
    assert plots.compare({"a": 2.0, "b": 2.0, "c": 2.0}, "EM", of="a")["vs"] == "b"  # a tie: the first in order


def test_names_are_shortened_to_keep_the_columns_narrow():
    assert plots.short_name("EviOmni (released)") == "EviOmni (released)"  # 18: the widest kept whole
    assert plots.short_name("LLMLingua-2 (untrained stand-in)") == "LLMLingua-2…"  # whole words, then "…"
    assert plots.short_name("Evidence+Rationale+Full Ctx") == "Evidence+Rational…"  # one long word: cut in it
    assert len(plots.short_name("x" * 40)) == plots.NAME_WIDTH
    line = plots.compare({REFERENCE: 3.0, subset_label({"full"}): 2.0}, "EM", of=REFERENCE,
                         names={REFERENCE: "all answers"})
    assert (line["of"], line["vs"]) == ("all answers", "Full Ctx")


def test_integers_stay_integers_for_dvc():
    line = plots.compare({"this run": 3, "the paper": 10}, "claims supported", of="this run", vs="the paper")
    assert (type(line["value"]), line["vs value"]) == (int, 10)


def test_save_metrics_writes_the_line_and_the_numbers_at_the_paths_dvc_yaml_declares(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line, full = plots.headline_line(SUMMARY, "method", "EM", of="EviOmni"), plots.headline(SUMMARY, ["method"], ["EM"])
    paths = plots.save_metrics(line, full, "main_comparison")
    assert [p.as_posix() for p in paths] == ["metrics/main_comparison.json", "metrics/full/main_comparison.json"]
    assert json.loads(paths[0].read_text()) == line and json.loads(paths[1].read_text()) == full
    assert full["Average"]["EviOmni"]["EM"] == 42.0
    with pytest.raises(ValueError, match=r"metrics/latency\.json: a headline line has the keys"):
        plots.save_metrics({"Average": {}}, full, "latency")


def test_the_reference_label_follows_the_released_switch():
    assert reference_label(["zero", "full", "eviomni"]) == "EviOmni"
    assert reference_label(["zero", "full", "eviomni_released"]) == "EviOmni (released)"
    assert reference_label(["zero", "full"]) == "Full"  # as reference_pairs: the last method


def test_a_curve_line_is_the_last_steps_against_the_first():
    log = pd.DataFrame({"f1_evidence": [0.1, 0.2, 0.3, 0.5, 0.6, 0.7]}, index=pd.Index(range(1, 7), name="step"))
    line = curve_headline(first_last(log, ["f1_evidence"]), "f1_evidence")  # means of steps 4-6 and 1-3
    assert line == {"metric": "f1_evidence", "of": "last steps", "value": pytest.approx(0.6), "vs": "first steps",
                    "vs value": pytest.approx(0.2)}
    assert curve_headline(first_last(log, ["f1_evidence"]), "reward_final")["value"] is None  # not logged
    assert curve_headline(first_last(log, []), "f1_evidence")["vs value"] is None  # an empty table
