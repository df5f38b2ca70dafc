"""Deterministic train/dev/test assignment by hashing ids, and seeded question subsets.

An id's split depends only on the id, the salt and the fractions, never on file order or on which other
questions exist, so adding questions never moves existing ones between splits.
"""

from __future__ import annotations

import hashlib
import random


def split_of(key: str, fractions: dict[str, float], salt: str = "") -> str:
    """The split of `key`: its sha256 mapped to [0, 1) and cut at the cumulative fractions (in the
    mapping's order, which must sum to 1)."""
    total = sum(fractions.values())
    if abs(total - 1.0) > 1e-9 or any(f < 0 for f in fractions.values()):
        raise ValueError(f"split fractions must be non-negative and sum to 1, got {fractions}")
    digest = hashlib.sha256(f"{salt}:{key}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    cumulative = 0.0
    for name, fraction in fractions.items():
        cumulative += fraction
        if u < cumulative:
            return name
    return list(fractions)[-1]


def sample_rows(rows: list[dict], max_questions: int | None, seed: int) -> list[dict]:
    """All rows, or a seeded random subset of `max_questions` kept in file order (FanOutQA lists the sub-questions
    of one parent question together, so the first N would cover few topics)."""
    if max_questions is None or max_questions >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), max_questions))
    return [rows[i] for i in keep]
