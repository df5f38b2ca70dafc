"""The evidence gate (issue #31, deliverable 1): the sentences it sets as evidence, its contrasts by hand, its rule,
and greedy o_e from a real model."""

import pandas as pd
import pytest

from repro.config import RewardsConfig
from repro.studies.evidence_gate import gate_contrast, gate_items, gate_passes, gate_rows, gate_sentences

ROW = {"id": "q1", "question": "Who designed the Eiffel Tower?", "golden_answers": ["Gustave Eiffel", "Eiffel"],
       "passages": [{"contents": "Paris\nParis is the capital. Eiffel lived here."},
                    {"contents": "Eiffel Tower\nIt opened in 1889. The company of Gustave Eiffel built it! Tall."}]}


def test_each_kind_of_sentence_is_drawn_from_its_own_kind_by_question_id():
    drawn = {gate_sentences({**ROW, "id": f"q{i}"}, seed=0)["answer"] for i in range(100)}
    assert drawn == {"Eiffel lived here.", "The company of Gustave Eiffel built it!"}
    answerless = {gate_sentences({**ROW, "id": f"q{i}"}, seed=0)["none"] for i in range(100)}
    assert answerless == {"Paris is the capital.", "It opened in 1889.", "Tall."}
    assert gate_sentences(ROW, 0) == gate_sentences(dict(ROW), 0)  # the same draw in every process
    # a substring is not an answer for DPR's has_answer, but it is not answerless either: neither kind takes it
    row = {**ROW, "golden_answers": ["Eiffel"], "passages": [{"contents": "T\nEiffelsberg is a hill. Tall."}]}
    assert gate_sentences(row, 0) is None  # no sentence holds "Eiffel" as a token
    assert gate_rows([ROW, row], questions=5, seed=0) == [ROW]


def test_the_contrast_by_hand_and_the_rule():
    f1 = {"answer": [1.0, 0.5, 0.0, 1.0], "none": [0.0, 0.5, 0.0, 0.0]}
    items = pd.DataFrame([{"id": f"q{i}", "evidence": kind, "f1": f1[kind][i], "em": float(f1[kind][i] == 1.0)}
                          for i in range(4) for kind in ("answer", "none")])
    table = gate_contrast(items).set_index("metric")
    assert table.loc["f1", "contrast"] == pytest.approx(0.5)  # (2.5 - 0.5) / 4
    assert (table.loc["f1", "answer_only"], table.loc["f1", "answerless_only"]) == (2, 0)
    assert table.loc["em", "contrast"] == pytest.approx(0.5) and table.loc["em", "test"] == "McNemar (exact)"
    assert table.loc["em", "p_value"] == pytest.approx(0.5)  # 2 vs 0 discordant: 2 * 0.5**2
    assert table.loc["em", "ci_low"] <= 0 <= table.loc["em", "ci_high"]  # the interval agrees with p = 0.5
    passing = pd.DataFrame([{"metric": "f1", "contrast": 0.06, "ci_low": 0.01}])
    assert gate_passes(passing, 0.05)
    assert not gate_passes(passing.assign(ci_low=-0.01), 0.05)  # the interval reaches 0
    assert not gate_passes(passing.assign(contrast=0.04), 0.05)  # too small to matter, however sure


def test_o_e_is_the_readers_greedy_answer_from_the_evidence_alone(tiny_llama_dir):
    rows = [{**ROW, "id": f"q{i}"} for i in range(3)]
    items = gate_items(str(tiny_llama_dir), rows, RewardsConfig(), seed=0, max_new_tokens=4, progress=False)
    assert items["evidence"].tolist() == ["answer", "none"] * 3
    assert items["sentence"].tolist() == [s for r in rows for s in gate_sentences(r, 0).values()]
    assert items["f1"].between(0, 1).all() and items["em"].isin([0.0, 1.0]).all()
    again = gate_items(str(tiny_llama_dir), rows, RewardsConfig(), seed=0, max_new_tokens=4, progress=False)
    assert again["o_e"].tolist() == items["o_e"].tolist()  # greedy on transformers: the same bytes
