"""Open named retrievers and retrieve QA splits, reusing indexes and results whose manifests match.

    session = RetrievalSession(cfg, store, corpus_fingerprint)
    path, status = session.retrieve_split("minilm", "fanoutqa", "test")   # cached after the first run
    scores, rows = session.retriever("bm25").search(["who painted the Mona Lisa?"], k=5)
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tqdm.auto import tqdm

from repro.assets import resolve
from repro.config import Profile, RetrieverConfig
from repro.data import layout
from repro.data.corpus import PassageStore, file_fingerprint
from repro.data.qa import read_qa
from repro.io import atomic_dir, write_json, write_jsonl
from repro.retrieval.bm25 import BM25Retriever
from repro.retrieval.cache import retriever_key, stale_reason, write_manifest
from repro.retrieval.dense import DenseRetriever
from repro.retrieval.faiss_index import load_index, save_index

Retriever = DenseRetriever | BM25Retriever
FAISS_FILE, BM25_DIR = "faiss.index", "bm25"


def encoder_refs(cfg: RetrieverConfig, profile: str) -> tuple[str | None, str | None]:
    """Resolved (query, passage) model references; passage is None when the query model serves both."""
    query = resolve(cfg.query_encoder, profile) if cfg.query_encoder else None
    passage = resolve(cfg.passage_encoder, profile) if cfg.passage_encoder else None
    return query, passage


def contexts_row(row: dict, store: PassageStore, rows: list[int], scores: list[float]) -> dict:
    passages = []
    for r, s in zip(rows, scores):
        if r >= 0:  # FAISS pads with -1 when the corpus has fewer than k passages
            passages.append({**store[int(r)], "score": float(s)})
    return {**row, "passages": passages}


class RetrievalSession:
    """Retrievers and retrieval results of one profile over one corpus; everything is opened lazily, so
    a run whose results are all cached loads no model and builds no index."""

    def __init__(self, cfg: Profile, store: PassageStore, corpus_fingerprint: str, progress: bool = True):
        self.cfg, self.store, self.corpus_fingerprint, self.progress = cfg, store, corpus_fingerprint, progress
        self._keys: dict[str, dict] = {}
        self._open: dict[str, Retriever] = {}

    def key(self, name: str) -> dict:
        if name not in self._keys:
            rcfg = self.cfg.retrieval.retrievers[name]
            self._keys[name] = {"retriever": retriever_key(rcfg, *encoder_refs(rcfg, self.cfg.name)),
                                "corpus": self.corpus_fingerprint}
        return self._keys[name]

    @property
    def opened(self) -> list[str]:
        """Names of the retrievers this session has loaded (empty when everything came from the cache)."""
        return list(self._open)

    def retriever(self, name: str) -> Retriever:
        if name not in self._open:
            self._open[name] = self._open_retriever(name)
        return self._open[name]

    def ensure_index(self, name: str) -> str:
        """Build the index of `name` unless a matching one is on disk; says which happened."""
        reason = stale_reason(layout.index_dir(self.cfg.name, name), self.key(name))
        if reason is None:
            return "cached"
        self.retriever(name)
        return f"built ({reason})"

    def _open_retriever(self, name: str) -> Retriever:
        rcfg = self.cfg.retrieval.retrievers[name]
        directory = layout.index_dir(self.cfg.name, name)
        reason = stale_reason(directory, self.key(name))
        if reason is not None:
            print(f"index {name}: {reason}; building it over {len(self.store)} passages")
            shutil.rmtree(directory, ignore_errors=True)
        if rcfg.method == "bm25":
            if reason is None:
                return BM25Retriever.load(directory / BM25_DIR)
            retriever = BM25Retriever.build(self.store, rcfg.k1, rcfg.b, self.progress)
            with atomic_dir(directory) as tmp:
                retriever.save(tmp / BM25_DIR)
                write_json(tmp / "manifest.json", self.key(name))
            return retriever
        retriever = DenseRetriever(rcfg, *encoder_refs(rcfg, self.cfg.name))
        if reason is None:
            retriever.use_index(load_index(directory / FAISS_FILE, mmap=rcfg.index == "Flat"))  # mapped: 65 GB for e5
            return retriever
        index = retriever.build_index(self.store, self.progress)
        with atomic_dir(directory) as tmp:  # saved before it moves to the GPUs
            save_index(index, tmp / FAISS_FILE)
            write_json(tmp / "manifest.json", self.key(name))
        retriever.use_index(index)
        return retriever

    def retrieve(self, name: str, rows: list[dict], k: int, batch: int = 256) -> list[dict]:
        """`rows` with their top-k passages (`passages`: [{"id", "contents", "score"}], best first)."""
        retriever, out = self.retriever(name), []
        for start in tqdm(range(0, len(rows), batch), desc=f"retrieve {name}", disable=not self.progress):
            chunk = rows[start:start + batch]
            scores, hits = retriever.search([r["question"] for r in chunk], k)
            out.extend(contexts_row(r, self.store, h, s) for r, h, s in zip(chunk, hits, scores))
        return out

    def retrieve_split(self, name: str, dataset: str, split: str) -> tuple[Path, str]:
        """Write the top-k of `name` for a QA split unless a matching cache exists; (path, what happened)."""
        qa = layout.qa_path(self.cfg.name, dataset, split)
        out = layout.retrieval_path(self.cfg.name, name, dataset, split)
        key = {**self.key(name), "qa": file_fingerprint(qa), "topk": self.cfg.retrieval.topk}
        reason = stale_reason(out, key)
        if reason is None:
            return out, "cached"
        write_jsonl(out, self.retrieve(name, list(read_qa(qa)), self.cfg.retrieval.topk))
        write_manifest(out, key)
        return out, f"computed ({reason})"
