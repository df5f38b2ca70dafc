"""The mirror's files as bytes: `Files` (a repo's paths and their contents), JSON and JSON lines as the hub's files are
written, sha256 digests, each repo's own torch seed, a repo's 40-hex commit (the sha1 of its file list with each file's
sha256, so that two builds from one seed have the same commits) and the README every repo of the mirror carries."""

from __future__ import annotations

import hashlib
import json

Files = dict[str, bytes]


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def jsonl_bytes(rows: list[dict]) -> bytes:
    """JSON lines with non-ASCII characters escaped, as FlashRAG's and Search-R1's files are."""
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def repo_seed(seed: int, repo: str) -> int:
    """Each repo's own torch seed, so a fine-tuned checkpoint's weights differ from its base model's."""
    return int(sha256(f"{seed}:{repo}".encode())[:8], 16)


def commit_of(files: Files) -> str:
    """The repo's 40-hex commit: sha1 of its sorted `path sha256` lines."""
    listing = "".join(f"{path} {sha256(data)}\n" for path, data in sorted(files.items()))
    return hashlib.sha1(listing.encode()).hexdigest()


def readme(repo: str, seed: int, what: str) -> bytes:
    return (f"# {repo} (rehearsal mirror)\n\nA seeded tiny stand-in (seed {seed}) for the hub repo `{repo}`: {what}, "
            f"in the real repo's file layout. Built by `python -m repro.ops.rehearsal mirror`; its weights are noise.\n"
            ).encode()
