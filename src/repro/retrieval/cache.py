"""Manifests that tie an on-disk artefact (an index, a retrieval result file) to the inputs that made it.

A manifest is the JSON of a key: the retriever's full configuration, fingerprints of its model files, of
the corpus and (for results) of the QA split. An artefact is reused only when its manifest equals the key
of the current run, so a cache from another corpus, model or configuration is never silently reused; a
mismatch is reported with the parts of the key that differ.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from repro.config import RetrieverConfig
from repro.io import model_fingerprint, read_json_object, write_json

def retriever_key(cfg: RetrieverConfig, query_model: str | None, passage_model: str | None) -> dict:
    models = {"query": model_fingerprint(query_model) if query_model else None,
              "passage": model_fingerprint(passage_model) if passage_model else None}
    return {"config": dataclasses.asdict(cfg), "models": models}


def manifest_path(artefact: str | os.PathLike) -> Path:
    """<dir>/manifest.json for a directory, <name>.manifest.json beside a file."""
    artefact = Path(artefact)
    return artefact / "manifest.json" if artefact.is_dir() else artefact.with_suffix(".manifest.json")


def stale_reason(artefact: str | os.PathLike, key: dict) -> str | None:
    """None if `artefact` exists with a manifest equal to `key`, else why it cannot be reused; a damaged manifest
    (cut short, not an object) is an InputError naming it."""
    path = manifest_path(artefact)
    if not Path(artefact).exists() or not path.exists():
        return "not built yet"
    stored = read_json_object(path)
    if stored == key:
        return None
    changed = sorted(k for k in set(stored) | set(key) if stored.get(k) != key.get(k))
    return f"built from different {', '.join(changed)}"


def write_manifest(artefact: str | os.PathLike, key: dict) -> None:
    write_json(manifest_path(artefact), key)
