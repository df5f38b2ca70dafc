"""Issue #49's free checks on step 2's items: the positional shortcut and the shared-weights reader, by hand."""

import math

import pandas as pd
import pytest

from repro.studies import evidence_shortcut as esc

PASSAGES = [{"contents": "Vell\nVell lies on the Tarn. Anna Berg founded it."},
            {"contents": "Tarn\nThe Tarn is a river. It floods."}]
ROWS = [{"id": "q0", "golden_answers": ["Tarn"], "passages": PASSAGES},  # the shortcut sentence names the answer
        {"id": "q1", "golden_answers": ["Anna Berg"], "passages": PASSAGES}]  # it does not


def rollout(extract: str) -> str:
    return f"<reason>r</reason><extract>{extract}</extract><answer>a</answer>"


def policy(extracts: list[str], ar: list[float], o_e: list[str | None]) -> pd.DataFrame:
    return pd.DataFrame({"id": ["q0", "q1"], "rollout": [rollout(e) for e in extracts], "ar_evidence": ar,
                         "o_e": o_e})


ITEMS = {"start": policy(["Vell lies on the Tarn.", "The Tarn is a river."], [1, 0], ["Tarn</answer>", "x"]),
         "seed-0": policy(["Vell lies on the Tarn. It floods.", "Tarn and Vell: Anna Berg founded it."], [1, 1],
                          ["the Tarn river", "Anna"])}


def test_the_shortcut_and_a_title_outside_a_copied_sentence_by_hand():
    assert esc.is_shortcut(" Vell lies on\nthe Tarn. ", PASSAGES)  # whitespace collapsed
    assert not esc.is_shortcut("Vell lies on the Tarn. It floods.", PASSAGES)
    assert esc.has_shortcut("Vell lies on the Tarn. It floods.", PASSAGES)
    assert not esc.is_shortcut("", [{"contents": "Empty\n"}])  # passage 1 without a sentence: no shortcut
    assert not esc.title_outside_copy("The Tarn is a river.", PASSAGES)  # the title only inside a copied sentence
    assert esc.title_outside_copy("Tarn and Vell: Anna Berg founded it.", PASSAGES)  # "Tarn" outside the copy
    assert esc.title_outside_copy("the tarn, it floods", PASSAGES)  # no verbatim copy: normalised "tarn" matches
    assert esc.reader_f1("the Tarn river", ["Tarn"]) == pytest.approx(2 / 3)  # P 1/2, R 1
    assert math.isnan(esc.reader_f1(None, ["Tarn"]))


def test_shortcut_items_flag_every_policys_extract_on_the_held_out_rows():
    flags = esc.shortcut_items(ROWS, ITEMS)
    assert list(flags.columns) == esc.FLAG_COLUMNS and len(flags) == 4
    assert flags["shortcut_holds_answer"].tolist() == [True, False, True, False]
    assert flags["extract_is_shortcut"].tolist() == [True, False, False, False]
    assert flags["extract_has_shortcut"].tolist() == [True, False, True, False]
    assert flags["title_outside_copy"].tolist() == [False, False, False, True]
    assert flags["f1_evidence"].tolist() == pytest.approx([1.0, 0.0, 2 / 3, 2 / 3])  # "Anna" vs "Anna Berg": 2/3
    with pytest.raises(ValueError, match="not the held-out rows"):
        esc.shortcut_items(ROWS[::-1], ITEMS)


def test_recall_split_by_the_shortcut_copies_and_the_reader_by_hand():
    flags = esc.shortcut_items(ROWS, ITEMS)
    split = esc.recall_by_shortcut(flags).set_index(["subset", "policy"])
    held, none = split.loc[("shortcut holds an answer", "seed-0")], split.loc[("shortcut holds none", "seed-0")]
    assert (held["questions"], held["start"], held["trained"], held["difference"]) == (1, 1.0, 1.0, 0.0)
    assert (none["questions"], none["difference"], none["trained_only"], none["start_only"]) == (1, 1.0, 1, 0)
    assert math.isnan(none["p_value"])  # one question: no test

    copies = esc.shortcut_copies(flags).set_index("policy")
    assert copies.loc["start", ["extract_is_shortcut", "extract_has_shortcut", "title_outside_copy"]].tolist() == [
        0.5, 0.5, 0.0]
    assert copies.loc["seed-0", ["extract_is_shortcut", "extract_has_shortcut", "title_outside_copy"]].tolist() == [
        0.0, 0.5, 0.5]
    assert copies.loc["seed-0", ["ar_evidence", "ar_shortcut", "vs_shortcut_difference"]].tolist() == [1.0, 0.5, 0.5]

    reader = esc.reader_f1_table(flags).set_index("policy")
    assert reader.loc["start", ["questions_holding", "f1_evidence_where_held"]].tolist() == [1, 1.0]
    assert reader.loc["seed-0", "questions_holding"] == 2
    assert reader.loc["seed-0", "f1_evidence_where_held"] == pytest.approx(2 / 3)
    assert reader.loc["seed-0", "questions_both"] == 1 and math.isnan(reader.loc["seed-0", "p_value"])  # < 2: no test
