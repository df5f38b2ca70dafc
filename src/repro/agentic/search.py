"""The agent's search tool, in process or over HTTP; both return, per query, the top-k passages as
`{"id", "contents", "score"}` dicts, best first.

    search = LocalSearch(session.retriever(cfg.retrieval.agentic), store)     # in process
    search = RetrievalClient("http://127.0.0.1:8000/retrieve")               # Search-R1-compatible server
    hits = search.search(["who painted the mona lisa"], topk=3)

A busy server (503, or 429, with `Retry-After`) is asked again after the delay it names, at most `MAX_RETRY_AFTER`
seconds, up to `retries` times (verl's search tool retries 10 times); then the client fails naming the server (D236).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import time
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


BUSY_STATUSES = (429, 503)  # "ask again later": retried after the answer's Retry-After
MAX_RETRY_AFTER = 30.0  # seconds: a longer Retry-After is cut to this
DEFAULT_RETRY_AFTER = 1.0  # seconds, when a busy answer names no (readable) delay


def retry_after_seconds(value: str | None, cap: float = MAX_RETRY_AFTER) -> float:
    """The wait a `Retry-After` header asks for (delay-seconds or an HTTP date, RFC 9110 §10.2.3), within [0, cap];
    DEFAULT_RETRY_AFTER when there is none or it is unreadable."""
    seconds = DEFAULT_RETRY_AFTER
    if value and value.strip().isdigit():
        seconds = float(value.strip())
    elif value:
        with contextlib.suppress(TypeError, ValueError):
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    return min(max(seconds, 0.0), cap)


class RetrievalClient:
    """Client of a Search-R1 retrieval server: `POST url {"queries", "topk", "return_scores": true}` →
    `{"result": [[{"document": {"id", "contents", ...}, "score"}, ...], ...]}`. A busy answer (`BUSY_STATUSES`) is
    retried after its Retry-After (at most `max_retry_after` seconds) up to `retries` times."""

    def __init__(self, url: str, timeout: float = 300.0, retries: int = 10, max_retry_after: float = MAX_RETRY_AFTER):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL of a /retrieve endpoint, got {url!r}")
        if retries < 0 or not max_retry_after >= 0:
            raise ValueError(f"need retries >= 0 and max_retry_after >= 0, got {retries} and {max_retry_after}")
        self.url, self.timeout = url, timeout
        self.retries, self.max_retry_after = retries, max_retry_after

    def search(self, queries: list[str], topk: int) -> list[list[dict]]:
        if not queries:
            return []
        body = json.dumps({"queries": list(queries), "topk": topk, "return_scores": True}).encode()
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        waited = 0.0
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return _hits(json.loads(response.read()), len(queries), self.url)
            except urllib.error.HTTPError as err:
                message = f"HTTP {err.code}: {err.read().decode(errors='replace')[:500]}"
                if err.code not in BUSY_STATUSES:
                    raise RetrievalError(f"{self.url}: {message}") from None
                if attempt == self.retries:
                    raise RetrievalError(f"{self.url}: still busy after {self.retries} retries over {waited:.1f} s "
                                         f"of the waits it asked for: {message}") from None
                delay = retry_after_seconds(err.headers.get("Retry-After"), self.max_retry_after)
            except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as err:
                raise RetrievalError(f"{self.url}: {err}") from None
            time.sleep(delay)
            waited += delay


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
