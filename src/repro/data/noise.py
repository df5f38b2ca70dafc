"""Irrelevant-passage injection for the robustness study (Figure 5: k = 0, 2, 4, 6, 8 extra passages).

Noise passages are drawn uniformly from the corpus with a generator seeded by (seed, question id), and a
draw is rejected if it contains a golden answer or is already among the question's passages. Because the
draws for a question form one fixed sequence, the k noise passages are a prefix of the k+2 ones: each
step of the curve adds passages and changes nothing else.

`position` says where they go: "append" (after the retrieved passages; the paper's "5 retrieved
passages paired with sampled irrelevant passages"), "prepend", or "random" (interleaved at seeded
positions; the retrieved passages keep their order). Injected passages carry `"noise": true`.
"""

from __future__ import annotations

import random
from typing import Literal

from repro.data.answers import has_answer
from repro.data.corpus import PassageStore

Position = Literal["append", "prepend", "random"]


def draw_noise(store: PassageStore, k: int, answers: list[str], exclude_ids: set[str], rng: random.Random,
               max_draws: int = 10_000) -> list[dict]:
    chosen: list[dict] = []
    taken = set(exclude_ids)
    for _ in range(max_draws):
        if len(chosen) == k:
            return chosen
        passage = store[rng.randrange(len(store))]
        if passage["id"] in taken or has_answer(passage["contents"], answers):
            continue
        taken.add(passage["id"])
        chosen.append({"id": passage["id"], "contents": passage["contents"], "noise": True})
    if len(chosen) < k:
        raise ValueError(f"found only {len(chosen)} of {k} answer-free passages in {max_draws} draws")
    return chosen


def add_noise(row: dict, store: PassageStore, k: int, seed: int, position: Position = "append") -> dict:
    """A copy of a retrieval row (`{"id", ..., "passages": [...]}`) with k irrelevant passages added."""
    rng = random.Random(f"{seed}:{row['id']}")
    passages = list(row["passages"])
    noise = draw_noise(store, k, row["golden_answers"], {p["id"] for p in passages}, rng)
    if position == "append":
        passages = passages + noise
    elif position == "prepend":
        passages = noise + passages
    elif position == "random":
        for passage in noise:
            passages.insert(rng.randint(0, len(passages)), passage)
    else:
        raise ValueError(f"unknown noise position {position!r}; expected append, prepend or random")
    return {**row, "passages": passages, "metadata": {**row["metadata"], "noise_passages": k}}
