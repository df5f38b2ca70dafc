"""The `data` stage of one profile: corpus, QA sets, indexes, retrieval results and noisy contexts.

It composes `repro.data` and `repro.retrieval` (distractor paragraphs are BM25 neighbours, noisy contexts start from
the retrieved ones), so it sits above both (docs/architecture.md, "Layers").

Each step is a function the 00_data notebook calls in turn; together they write everything listed in
`repro.data.layout`. Indexes and retrieval results are reused when their manifests match (see
`repro.retrieval.cache`), so re-running the stage after an unrelated change costs seconds.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pandas as pd

from repro.assets import resolve
from repro.config import ConfigError, DatasetConfig, Profile
from repro.data import fanoutqa, generated, layout
from repro.data.corpus import (PassageStore, file_fingerprint, first_passages, ovos_pages, page_passages,
                               split_contents, write_corpus)
from repro.data.loaders import distractor_passages, flashrag_path, read_flashrag, read_musique, read_wiki_multihop
from repro.data.noise import add_noise
from repro.data.qa import read_contexts, write_qa
from repro.io import enumerate_jsonl, write_json, write_jsonl
from repro.retrieval.bm25 import BM25Retriever
from repro.retrieval.run import RetrievalSession

PASSAGES_FILE, CORPUS_MANIFEST = "passages.jsonl", "corpus.json"
EMBEDDED_FORMATS = ("fanoutqa", "ovos-describe")  # built here, split by hashing ids


def _require_sections(cfg: Profile) -> None:
    missing = [s for s in ("data", "retrieval", "noise") if getattr(cfg, s) is None]
    if missing:
        raise ConfigError(f"profile {cfg.name} has no {', '.join(missing)} section(s); the data stage needs them")


def corpus_path(cfg: Profile) -> Path:
    """The passages file every later step reads: the source itself, or the profile's own copy (chunked pages, or
    the first `max_passages` passages of the source)."""
    c = cfg.data.corpus
    if c.format == "passages" and c.max_passages is None:
        return Path(resolve(c.source, cfg.name))
    return layout.corpus_dir(cfg.name) / PASSAGES_FILE


def build_corpus(cfg: Profile) -> dict:
    """Chunk the pages into passages (embedded corpus), cut the first `max_passages` passages of a passages file
    (D135), or take the passages file as it is; write the corpus manifest and return it."""
    _require_sections(cfg)
    c = cfg.data.corpus
    pages = None
    if c.max_passages is not None:
        write_corpus(corpus_path(cfg), first_passages(resolve(c.source, cfg.name), c.max_passages))
    if c.format == "ovos-summaries":
        pages = ovos_pages(resolve(c.source, cfg.name))
        if c.max_pages is not None:
            evidence = {r["metadata"]["evidence_title"] for spec in cfg.data.datasets if spec.format == "fanoutqa"
                        for rows in _fanoutqa_selection(cfg, spec, pages).values() for r in rows}
            keep = set(list(pages)[:c.max_pages]) | evidence
            pages = {t: text for t, text in pages.items() if t in keep}
        write_corpus(corpus_path(cfg), page_passages(pages, c.chunk_words))
    path = corpus_path(cfg)
    store = PassageStore(path)
    manifest = {"path": str(path), "fingerprint": file_fingerprint(path), "passages": len(store),
                "pages": len(pages) if pages is not None else None, "chunk_words": c.chunk_words,
                "source": c.source, "max_passages": c.max_passages}
    store.close()
    write_json(layout.corpus_dir(cfg.name) / CORPUS_MANIFEST, manifest)
    return manifest


def open_corpus(cfg: Profile) -> tuple[PassageStore, str]:
    """The corpus of a profile and its fingerprint (the cache key of everything retrieved from it)."""
    path = corpus_path(cfg)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no corpus yet; run the data stage (build_corpus) first")
    return PassageStore(path), file_fingerprint(path)


def page_texts(store: PassageStore) -> dict[str, str]:
    """Title -> the page's text as the corpus holds it (its passages joined)."""
    pages: dict[str, list[str]] = {}
    for passage in store:
        title, text = split_contents(passage["contents"])
        pages.setdefault(title, []).append(text)
    return {title: " ".join(texts) for title, texts in pages.items()}


def _limited(rows: list[dict], spec: DatasetConfig) -> list[dict]:
    return rows if spec.max_questions is None else rows[:spec.max_questions]


def _hashed_splits(rows: list[dict], spec: DatasetConfig) -> dict[str, list[dict]]:
    """Rows of an embedded set grouped by their hashed `metadata.split`, limited to `max_questions`."""
    return {ours: _limited([r for r in rows if r["metadata"]["split"] == theirs], spec)
            for ours, theirs in spec.splits.items()}


def _fanoutqa_selection(cfg: Profile, spec: DatasetConfig, pages: dict[str, str]) -> dict[str, list[dict]]:
    """The open-domain FanOutQA rows of each split (pages: title -> text)."""
    path = resolve(spec.source, cfg.name)
    rows, _ = fanoutqa.open_domain_rows(fanoutqa.read_fanoutqa(path), pages, cfg.data.split_fractions, path)
    return _hashed_splits(rows, spec)


def _embedded_splits(cfg: Profile, spec: DatasetConfig, store: PassageStore, pages: dict[str, str]
                     ) -> dict[str, list[dict]]:
    if spec.format == "ovos-describe":
        rows = generated.describe_rows(resolve(spec.source, cfg.name), set(pages), cfg.data.split_fractions)
        return _hashed_splits(rows, spec)
    by_split = _fanoutqa_selection(cfg, spec, pages)
    if spec.setting == "distractor":
        bm25 = BM25Retriever.build(store, progress=False)
        search = lambda questions, k: bm25.search(questions, k)[1].tolist()  # noqa: E731
        by_split = {split: fanoutqa.distractor_rows(rows, store, search, cfg.data.distractor_paragraphs,
                                                    cfg.data.min_distractors, cfg.seed)
                    for split, rows in by_split.items()}
    return by_split


def _external_split(cfg: Profile, spec: DatasetConfig, source_split: str) -> list[dict]:
    source = resolve(spec.source, cfg.name)
    if spec.format == "flashrag":
        rows = read_flashrag(flashrag_path(source, spec.name, source_split), spec.setting)
    elif spec.format == "musique":
        rows = read_musique(Path(source) / source_split)
    else:
        rows = read_wiki_multihop(Path(source) / source_split)
    out = []
    for row in rows:
        if spec.max_questions is not None and len(out) == spec.max_questions:
            break
        out.append(row)
    return out


def build_qa_sets(cfg: Profile, store: PassageStore) -> pd.DataFrame:
    """Write every dataset split (and the shipped contexts of distractor-setting ones); one summary row
    per split."""
    _require_sections(cfg)
    pages = page_texts(store) if any(d.format in EMBEDDED_FORMATS for d in cfg.data.datasets) else {}
    summary = []
    for spec in cfg.data.datasets:
        if spec.format in EMBEDDED_FORMATS:
            splits = _embedded_splits(cfg, spec, store, pages)
        else:
            splits = {ours: _external_split(cfg, spec, theirs) for ours, theirs in spec.splits.items()}
        for split, rows in splits.items():
            write_qa(layout.qa_path(cfg.name, spec.name, split), rows)
            if spec.setting == "distractor":
                write_jsonl(layout.contexts_path(cfg, spec.name, split),
                            ({**r, "passages": distractor_passages(r)} for r in rows))
            summary.append(_split_summary(spec, split, rows))
    return pd.DataFrame(summary)


def _split_summary(spec: DatasetConfig, split: str, rows: list[dict]) -> dict:
    meta = [r["metadata"] for r in rows]
    in_page = [m["answer_in_page"] for m in meta if "answer_in_page" in m]
    types = Counter(m.get("type") for m in meta if m.get("type"))
    return {"dataset": spec.name, "setting": spec.setting, "split": split, "questions": len(rows),
            "answer_in_page": sum(in_page) if in_page else None,
            "paragraphs_per_question": (sum(len(distractor_passages(r)) for r in rows) / len(rows)
                                        if spec.setting == "distractor" and rows else None),
            "types": dict(types) or None}


def run_retrieval(cfg: Profile, store: PassageStore, corpus_fingerprint: str, progress: bool = True) -> pd.DataFrame:
    """Top-k of every evaluated retriever for every open-domain split (cached), and the agentic
    retriever's index; one row per (retriever, dataset, split) saying whether it was cached."""
    session = RetrievalSession(cfg, store, corpus_fingerprint, progress)
    log = []
    for spec in cfg.data.datasets:
        if spec.setting != "open":
            continue
        for name in cfg.retrieval.evaluate:
            for split in spec.splits:
                path, status = session.retrieve_split(name, spec.name, split)
                log.append({"retriever": name, "dataset": spec.name, "split": split, "status": status,
                            "path": str(path)})
    log.append({"retriever": cfg.retrieval.agentic, "dataset": None, "split": None,
                "status": session.ensure_index(cfg.retrieval.agentic),
                "path": str(layout.index_dir(cfg.name, cfg.retrieval.agentic))})
    return pd.DataFrame(log)


def build_noise_sets(cfg: Profile, store: PassageStore) -> pd.DataFrame:
    """The default retriever's contexts of `noise.split` plus k irrelevant passages, for every k."""
    noise, log = cfg.noise, []
    open_sets = {d.name for d in cfg.data.datasets if d.setting == "open"}
    for dataset in noise.datasets:
        if dataset not in open_sets:
            raise ConfigError(f"noise.datasets: '{dataset}' is not an open-domain dataset of profile {cfg.name}")
        rows = read_contexts(layout.contexts_path(cfg, dataset, noise.split))
        for k in noise.counts:
            path = layout.noise_path(cfg.name, dataset, noise.split, k)
            write_jsonl(path, (add_noise(r, store, k, noise.seed, noise.position) for r in rows))
            log.append({"dataset": dataset, "split": noise.split, "k": k, "questions": len(rows), "path": str(path)})
    write_json(layout.profile_dir(cfg.name) / "noise" / "noise.json",
               {"counts": noise.counts, "position": noise.position, "seed": noise.seed, "sets": log})
    return pd.DataFrame(log)


def examples(path: str | os.PathLike, n: int = 2) -> list[dict]:
    """The first n rows of a jsonl file, for display."""
    out = []
    for _, row in enumerate_jsonl(path):
        out.append(row)
        if len(out) == n:
            break
    return out
