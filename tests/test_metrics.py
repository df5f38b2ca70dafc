import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from conftest import tagged_texts

from repro.formulas.metrics import (
    answer_recall,
    compression_ratio,
    corpus_compression_ratio,
    corpus_qa_scores,
    exact_match,
    f1,
    normalize_answer,
    per_item_qa_scores,
    text_length,
)


def test_normalize_answer_follows_squad():
    assert normalize_answer("The  Quick, Brown fox!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words
    assert normalize_answer("U.S.A.") == "usa"


def test_exact_match():
    assert exact_match("the Eiffel Tower.", ["Eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel tower"]) == 0.0
    assert exact_match("NYC", ["New York City", "nyc"]) == 1.0  # max over aliases
    assert exact_match("Paris", "Paris") == 1.0  # a single golden answer as a string


@pytest.mark.parametrize(
    ("prediction", "golden", "expected"),
    [
        ("Barack Obama", ["Obama"], 2 / 3),  # P = 1/2, R = 1
        ("New York City", ["new york", "NYC"], 0.8),  # P = 2/3, R = 1 -> 0.8; max over aliases
        ("the cat cat sat", ["cat sat on mat"], 4 / 7),  # clipped counts: P = 2/3, R = 2/4
        ("Paris", ["London"], 0.0),
        ("the", ["Paris"], 0.0),  # empty after normalisation
        ("Paris, France", ["paris", "France Paris"], 1.0),
    ],
)
def test_f1_hand_values(prediction, golden, expected):
    assert f1(prediction, golden) == pytest.approx(expected)


def test_f1_is_at_least_exact_match():
    for prediction, golden in [("Obama", ["Barack Obama", "obama"]), ("x y", ["x y"]), ("a b", ["c"])]:
        assert f1(prediction, golden) >= exact_match(prediction, golden)


def test_answer_recall_is_normalised_containment():
    assert answer_recall("The capital of France is Paris.", ["paris"]) == 1.0
    assert answer_recall("Sir Michael Tippett wrote it.", ["Benjamin Britten", "michael  tippett"]) == 1.0
    assert answer_recall("Benjamin Britten", ["Michael Tippett"]) == 0.0
    assert answer_recall("anything at all", ["The"]) == 0.0  # a golden answer that normalises to nothing


@pytest.mark.parametrize("call", [lambda: exact_match("x", []), lambda: f1("x", [1]), lambda: f1(None, ["x"])])
def test_metrics_reject_bad_input(call):
    with pytest.raises((ValueError, TypeError)):
        call()


def test_compression_ratio_eq9():
    assert compression_ratio([100] * 5, 13) == pytest.approx(500 / 13)
    assert compression_ratio([120, 80], 200) == 1.0
    assert compression_ratio(500, 13) == pytest.approx(500 / 13)  # the summed passage length
    assert compression_ratio([100] * 5, 0) == 500.0  # empty evidence counts as one unit (D12)
    with pytest.raises(ValueError, match="undefined"):
        compression_ratio([100], 0, min_evidence_length=0)
    with pytest.raises(ValueError):
        compression_ratio([], 10)
    with pytest.raises(ValueError):
        compression_ratio([100, -1], 10)


def test_corpus_compression_reports_mean_and_ratio_of_sums():
    summary = corpus_compression_ratio([[10, 10], [30]], [2, 10])
    assert summary.mean_per_item == pytest.approx((20 / 2 + 30 / 10) / 2)
    assert summary.ratio_of_sums == pytest.approx(50 / 12)
    assert (summary.n_items, summary.n_empty_evidence) == (2, 0)
    assert corpus_compression_ratio([[10], [10]], [0, 10]).n_empty_evidence == 1
    with pytest.raises(ValueError):
        corpus_compression_ratio([[10]], [1, 2])


def test_corpus_qa_scores_are_item_means():
    predictions, golden = ["Paris", "Barack Obama", "Lyon"], [["Paris"], ["Obama"], ["Nice"]]
    per_item = per_item_qa_scores(predictions, golden)
    assert per_item["em"].tolist() == [1.0, 0.0, 0.0]
    assert corpus_qa_scores(predictions, golden) == pytest.approx({"em": 1 / 3, "f1": (1 + 2 / 3 + 0) / 3})
    with pytest.raises(ValueError):
        corpus_qa_scores([], [])


def test_text_length_in_words_and_tokens():
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # words and punctuation
    assert text_length("Paris is nice.", unit="words") == 3
    assert text_length("Paris is nice.", unit="tokens", tokenizer=tokenizer) == 4
    assert text_length("", unit="words") == 0
    with pytest.raises(ValueError, match="needs a tokenizer"):
        text_length("x", unit="tokens")
    with pytest.raises(ValueError):
        text_length("x", unit="chars")


# Properties (hypothesis): any strings and lengths give a score in range, never NaN, never an exception ---------

ANSWERS = st.lists(tagged_texts(), min_size=1, max_size=4)
LENGTHS = st.integers(0, 10**12) | st.floats(0, 1e12)  # token or word counts


@settings(max_examples=400, deadline=None)
@given(tagged_texts(), ANSWERS)
def test_qa_scores_of_any_strings_are_in_the_unit_interval(prediction, golden):
    scores = {"em": exact_match(prediction, golden), "f1": f1(prediction, golden),
              "ar": answer_recall(prediction, golden)}
    assert all(0.0 <= value <= 1.0 for value in scores.values()), scores
    normalized = normalize_answer(prediction)
    assert normalize_answer(normalized) == normalized  # idempotent
    if scores["em"] == 1.0 and normalized:
        assert scores["f1"] == 1.0 and scores["ar"] == 1.0
    if normalized:
        assert exact_match(prediction, [prediction]) == f1(prediction, [prediction]) == 1.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(LENGTHS, min_size=1, max_size=5), min_size=1, max_size=5), st.data())
def test_compression_ratios_of_any_lengths_are_finite_and_non_negative(passage_lengths, data):
    evidence = data.draw(st.lists(LENGTHS, min_size=len(passage_lengths), max_size=len(passage_lengths)))
    corpus = corpus_compression_ratio(passage_lengths, evidence)
    per_item = [compression_ratio(p, e) for p, e in zip(passage_lengths, evidence)]
    assert all(math.isfinite(v) and v >= 0 for v in [*per_item, corpus.mean_per_item, corpus.ratio_of_sums])
    assert corpus.n_items == len(evidence) and 0 <= corpus.n_empty_evidence <= len(evidence)
