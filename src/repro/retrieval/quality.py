"""Retrieval quality as in Table 8 (App. A.3): Recall@k and NDCG@k of the top-k passages, where a
passage is positive when its text contains a golden answer (normalised string match on token boundaries;
the title line does not count, as in DPR's evaluation).

- Recall@k: 1 if any of the top-k passages is positive (answer recall / top-k accuracy, as in DPR).
- NDCG@k: binary gains, DCG = sum_i rel_i / log2(i + 1) over ranks i = 1..k, normalised by the DCG of
  the same k labels sorted (the ideal ordering of the retrieved list; the full set of positives in the
  corpus is unknown). A question without positives scores 0 on both.
For HotpotQA only "bridge" questions count (`question_types`); yes/no and comparison answers are rarely
spans of a passage. Both metrics are reported in percent, like the paper.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from repro.config import Profile
from repro.data import layout
from repro.data.answers import has_answer
from repro.data.corpus import split_contents
from repro.data.qa import read_contexts


def positive_labels(row: dict, k: int) -> list[bool]:
    """Whether each of the top-k passages' text (its title line excluded, as in DPR) holds an answer."""
    return [has_answer(split_contents(p["contents"])[1], row["golden_answers"]) for p in row["passages"][:k]]


def recall_at_k(labels: list[bool]) -> float:
    return float(any(labels))


def ndcg_at_k(labels: list[bool]) -> float:
    gains = np.asarray(labels, dtype=float)
    discounts = 1.0 / np.log2(np.arange(2, len(gains) + 2))
    ideal = float(np.sort(gains)[::-1] @ discounts)
    return float(gains @ discounts) / ideal if ideal > 0 else 0.0


def per_question(rows: list[dict], k: int, question_types: list[str] | None = None) -> pd.DataFrame:
    """One row per counted question: id, recall, ndcg (0/1 and [0, 1])."""
    records = []
    for row in rows:
        if question_types is not None and row["metadata"].get("type") not in question_types:
            continue
        labels = positive_labels(row, k)
        records.append({"id": row["id"], "recall": recall_at_k(labels), "ndcg": ndcg_at_k(labels)})
    return pd.DataFrame(records, columns=["id", "recall", "ndcg"])


def split_quality(rows: list[dict], k: int, question_types: list[str] | None = None) -> dict:
    scores = per_question(rows, k, question_types)
    return {"questions": len(scores), f"Recall@{k}": 100 * scores["recall"].mean() if len(scores) else np.nan,
            f"NDCG@{k}": 100 * scores["ndcg"].mean() if len(scores) else np.nan}


def quality_table(cfg: Profile) -> pd.DataFrame:
    """Table 8 for a profile in long form: one row per (dataset, retriever, split) of every open-domain
    dataset and every retriever in `retrieval.evaluate`."""
    k, records = cfg.retrieval.topk, []
    for spec in cfg.data.datasets:
        if spec.setting != "open":
            continue
        for name in cfg.retrieval.evaluate:
            for split in spec.splits:
                rows = read_contexts(layout.retrieval_path(cfg.name, name, spec.name, split))
                records.append({"dataset": spec.label, "retriever": name, "split": split,
                                **split_quality(rows, k, spec.question_types)})
    return pd.DataFrame(records)
