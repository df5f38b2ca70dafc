""""Passage contains a golden answer": the positive of Table 8, of `answer_in_page` and of noise filtering.

Matching is on SQuAD-normalised text (`repro.metrics.normalize_answer`) and on whole tokens, as DPR's
`has_answer` does, so "1889" does not match "18890" (plain substring matching, `repro.metrics.answer_recall`,
is the AR of §2.2).
"""

from __future__ import annotations

from collections.abc import Iterable

from repro.metrics import normalize_answer


def has_answer(text: str, answers: Iterable[str]) -> bool:
    """True if any non-empty normalised answer occurs in the normalised text on token boundaries."""
    padded = f" {normalize_answer(text)} "
    return any(norm and f" {norm} " in padded for norm in map(normalize_answer, answers))
