"""Recall@k / NDCG@k with "passage contains a golden answer" as the positive (Table 8)."""

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from repro.data.answers import has_answer
from repro.retrieval.quality import ndcg_at_k, per_question, positive_labels, recall_at_k, split_quality


def _row(rid, answers, texts, qtype=None):
    return {"id": rid, "golden_answers": answers, "metadata": {"type": qtype} if qtype else {},
            "passages": [{"id": str(i), "contents": f'"T"\n{t}'} for i, t in enumerate(texts)]}


def test_answer_match_is_normalised_and_on_token_boundaries():
    assert has_answer("The tower was completed in 1889.", ["1889"])
    assert has_answer("Painted by LEONARDO da Vinci!", ["leonardo da vinci"])
    assert has_answer("population of 680,000 people", ["680000"])
    assert not has_answer("in 18890 it rained", ["1889"])
    assert not has_answer("anything", ["the"])  # normalises to nothing


@pytest.mark.parametrize("labels", [[0, 1, 0, 0, 1], [1, 0, 0, 0, 0], [0, 0, 0, 1, 1], [1, 1, 1, 0, 0]])
def test_ndcg_matches_sklearn_on_the_retrieved_list(labels):
    ranks = np.arange(len(labels), 0, -1)[None, :]  # the retriever's order
    assert ndcg_at_k(labels) == pytest.approx(ndcg_score(np.array([labels]), ranks))


def test_metrics_of_a_split():
    rows = [_row("a", ["Paris"], ["London", "Paris is big", "x", "y", "z"]),
            _row("b", ["1945"], ["no", "no", "no", "no", "no"]),
            _row("c", ["yes"], ["yes indeed", "x", "y", "z", "w"], qtype="comparison")]
    assert positive_labels(rows[0], 5) == [False, True, False, False, False]
    titled = {**rows[1], "passages": [{"id": "0", "contents": '"1945"\nA year of change.'}]}
    assert positive_labels(titled, 5) == [False]  # the title line is not the passage's text
    assert recall_at_k([False] * 5) == 0.0 and ndcg_at_k([False] * 5) == 0.0
    everything = split_quality(rows, 5)
    assert everything["questions"] == 3
    assert everything["Recall@5"] == pytest.approx(100 * 2 / 3)
    assert everything["NDCG@5"] == pytest.approx(100 * (1 / np.log2(3) + 0 + 1) / 3)
    bridge_only = split_quality([{**r, "metadata": {"type": "bridge"}} for r in rows[:2]] + rows[2:], 5, ["bridge"])
    assert bridge_only["questions"] == 2 and bridge_only["Recall@5"] == pytest.approx(50.0)
    assert list(per_question(rows, 1)["recall"]) == [0.0, 0.0, 1.0]  # only the first passage counts at k=1
