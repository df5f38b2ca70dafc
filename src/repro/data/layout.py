"""Where the data stage writes each artefact of a profile (all under data/<profile>/, DVC outputs).

    corpus/passages.jsonl, corpus/corpus.json       the passages (embedded) and the corpus manifest
    qa/<dataset>/<split>.jsonl                      FlashRAG-format questions
    index/<retriever>/                              FAISS or BM25 index + manifest.json
    retrieval/<retriever>/<dataset>/<split>.jsonl   top-k passages per question (+ .manifest.json)
    retrieval/distractor/<dataset>/<split>.jsonl    shipped paragraphs of distractor-setting questions
    noise/<dataset>/<split>/k<k>.jsonl              retrieved + k irrelevant passages (Figure 5)

A "contexts" row is a QA row plus `passages`: [{"id", "contents", "score"}...] in the order given to
the reader, the single format every downstream study consumes.
"""

from __future__ import annotations

from pathlib import Path

from repro.config import Profile

DATA_DIR = Path("data")
DISTRACTOR = "distractor"


def profile_dir(profile: str) -> Path:
    return DATA_DIR / profile


def corpus_dir(profile: str) -> Path:
    return profile_dir(profile) / "corpus"


def qa_path(profile: str, dataset: str, split: str) -> Path:
    return profile_dir(profile) / "qa" / dataset / f"{split}.jsonl"


def index_dir(profile: str, retriever: str) -> Path:
    return profile_dir(profile) / "index" / retriever


def retrieval_path(profile: str, retriever: str, dataset: str, split: str) -> Path:
    return profile_dir(profile) / "retrieval" / retriever / dataset / f"{split}.jsonl"


def noise_path(profile: str, dataset: str, split: str, k: int) -> Path:
    return profile_dir(profile) / "noise" / dataset / split / f"k{k}.jsonl"


def contexts_path(cfg: Profile, dataset: str, split: str, retriever: str | None = None) -> Path:
    """The contexts file of (dataset, split): the shipped paragraphs in the distractor setting, else the
    top-k of `retriever` (default: the profile's default retriever)."""
    spec = next((d for d in cfg.data.datasets if d.name == dataset), None)
    if spec is None:
        raise KeyError(f"profile {cfg.name} has no dataset '{dataset}'")
    if spec.setting == "distractor":
        return retrieval_path(cfg.name, DISTRACTOR, dataset, split)
    return retrieval_path(cfg.name, retriever or cfg.retrieval.default, dataset, split)
