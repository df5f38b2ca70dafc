"""The sentences of a contexts row's passages, and one drawn at random: the unit String Inclusion selects by its
answer, and the format warm-up and the random-sentence extractor select by a seed alone (D141).

A passage is `{"contents": "title\\ntext"}`; its text (the title line excluded) is split after ".", "!" or "?"
followed by whitespace.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence

from repro.data.corpus import split_contents


@dataclasses.dataclass(frozen=True)
class PassageSentence:
    """One sentence of a passage: passage number (1-based), the passage's title, the sentence."""

    passage: int
    title: str
    sentence: str


def passage_sentences(passages: Sequence[dict]) -> list[PassageSentence]:
    """Every non-empty sentence of the passages' texts, in passage order."""
    found = []
    for number, passage in enumerate(passages, start=1):
        title, text = split_contents(passage["contents"])
        found += [PassageSentence(number, title, s) for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]
    return found


def keyed_rng(key: str, seed: int, purpose: str) -> random.Random:
    """A generator that depends only on (seed, key, purpose): string seeds are hashed with SHA-512, so the draw is
    the same in every process and independent of PYTHONHASHSEED."""
    return random.Random(f"{seed}:{purpose}:{key}")


def random_sentence(passages: Sequence[dict], key: str, seed: int) -> PassageSentence | None:
    """A sentence drawn uniformly from all the passages' sentences by a generator keyed on (seed, key), where key is
    the question id; None if the passages hold no sentence. The golden answers play no part in the draw."""
    sentences = passage_sentences(passages)
    return keyed_rng(key, seed, "sentence").choice(sentences) if sentences else None
