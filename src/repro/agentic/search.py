"""The agent's search tool, in process or over HTTP; both return, per query, the top-k passages as
`{"id", "contents", "score"}` dicts, best first.

    search = LocalSearch(session.retriever(cfg.retrieval.agentic), store)     # in process
    search = RetrievalClient("http://127.0.0.1:8000/retrieve")               # Search-R1-compatible server
    hits = search.search(["who painted the mona lisa"], topk=3)
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Protocol

from repro.config import Profile
from repro.data.corpus import PassageStore
from repro.retrieval.prepare import open_corpus
from repro.retrieval.run import RetrievalSession


class Search(Protocol):
    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        """Per query, the top-`topk` passages `{"id", "contents", "score"}`, best first."""


class LocalSearch:
    """A retriever of `repro.retrieval` (dense or BM25) over its passage store."""

    def __init__(self, retriever, store: PassageStore):
        self.retriever, self.store = retriever, store

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        if not queries:
            return []
        scores, rows = self.retriever.search(list(queries), topk)
        return [[{**self.store[int(r)], "score": float(s)} for r, s in zip(row, score) if r >= 0]
                for row, score in zip(rows, scores)]  # FAISS pads with -1 when the corpus has fewer than k


class RetrievalError(RuntimeError):
    """The retrieval server failed or answered something that is not a Search-R1 `/retrieve` response."""


class RetrievalClient:
    """Client of a Search-R1 retrieval server: `POST url {"queries", "topk", "return_scores": true}` →
    `{"result": [[{"document": {"id", "contents", ...}, "score"}, ...], ...]}`."""

    def __init__(self, url: str, timeout: float = 300.0):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL of a /retrieve endpoint, got {url!r}")
        self.url, self.timeout = url, timeout

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        if not queries:
            return []
        body = json.dumps({"queries": list(queries), "topk": topk, "return_scores": True}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as err:
            raise RetrievalError(f"{self.url}: HTTP {err.code}: {err.read().decode(errors='replace')[:500]}") from None
        except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as err:
            raise RetrievalError(f"{self.url}: {err}") from None
        return _hits(payload, len(queries), self.url)


def _hits(payload: object, n_queries: int, url: str) -> list[list[dict]]:
    result = payload.get("result") if isinstance(payload, dict) else None
    if not isinstance(result, list) or len(result) != n_queries:
        raise RetrievalError(f"{url}: expected {{'result': [...]}} with {n_queries} lists, got {str(payload)[:300]}")
    hits = []
    for ranked in result:
        if not isinstance(ranked, list):
            raise RetrievalError(f"{url}: a result entry is not a list: {str(ranked)[:200]}")
        row = []
        for item in ranked:
            document = item.get("document") if isinstance(item, dict) else None
            if not (isinstance(document, dict) and isinstance(document.get("contents"), str)
                    and isinstance(item.get("score"), (int, float))):
                raise RetrievalError(f"{url}: expected {{'document': {{'id', 'contents'}}, 'score'}}, got "
                                     f"{str(item)[:200]}")
            row.append({"id": str(document.get("id", "")), "contents": document["contents"],
                        "score": float(item["score"])})
        hits.append(row)
    return hits


def open_local_search(cfg: Profile) -> tuple[LocalSearch, PassageStore]:
    """The profile's agentic retriever (`retrieval.agentic`) over its corpus; close the store when done."""
    store, corpus_fingerprint = open_corpus(cfg)
    retriever = RetrievalSession(cfg, store, corpus_fingerprint).retriever(cfg.retrieval.agentic)
    return LocalSearch(retriever, store), store


@contextlib.contextmanager
def open_search(cfg: Profile) -> Iterator[Search]:
    """A client of `agentic.search_url` if set, else the in-process agentic retriever."""
    if cfg.agentic.search_url:
        yield RetrievalClient(cfg.agentic.search_url)
        return
    search, store = open_local_search(cfg)
    try:
        yield search
    finally:
        store.close()
