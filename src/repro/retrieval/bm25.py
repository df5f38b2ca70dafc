"""BM25 over the passage corpus with `bm25s` (Lucene scoring; English stopwords, no stemmer)."""

from __future__ import annotations

import os

import bm25s
import numpy as np

from repro.data.corpus import PassageStore


class BM25Retriever:
    def __init__(self, model: bm25s.BM25):
        self.model = model

    @classmethod
    def build(cls, store: PassageStore, k1: float = 0.9, b: float = 0.4, progress: bool = True) -> BM25Retriever:
        tokens = bm25s.tokenize([p["contents"] for p in store], stopwords="en", show_progress=progress)
        model = bm25s.BM25(k1=k1, b=b)
        model.index(tokens, show_progress=progress)
        return cls(model)

    def save(self, directory: str | os.PathLike) -> None:
        self.model.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> BM25Retriever:
        return cls(bm25s.BM25.load(str(directory), show_progress=False))

    def search(self, queries: list[str], k: int, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row numbers), each (n_queries, k), best first. As in Lucene (Search-R1's BM25 server), a query
        with no term left after the stopwords matches nothing and a `k` beyond the corpus gets every passage; the
        missing hits are row -1, as FAISS pads them."""
        tokens = bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
        kept = min(k, self.model.scores["num_docs"])
        rows, scores = self.model.retrieve(tokens, k=kept, show_progress=progress)
        rows = np.pad(rows, ((0, 0), (0, k - kept)), constant_values=-1)
        scores = np.pad(scores, ((0, 0), (0, k - kept)))
        rows[[not terms for terms in tokens]] = -1
        return scores, rows
