""""Passage contains a golden answer": the positive of Table 8, of `answer_in_page` and of noise filtering; and the
first passage sentence that contains one (String Inclusion: the AR study's heuristic teacher, the format warm-up's
`string_inclusion` targets).

Matching is on SQuAD-normalised text (`repro.formulas.metrics.normalize_answer`) and on whole tokens, as DPR's
`has_answer` does, so "1889" does not match "18890" (plain substring matching, `repro.formulas.metrics.answer_recall`,
is the AR of §2.2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from repro.data.corpus import split_contents
from repro.data.sentences import passage_sentences
from repro.formulas.metrics import normalize_answer


def has_answer(text: str, answers: Iterable[str]) -> bool:
    """True if any non-empty normalised answer occurs in the normalised text on token boundaries."""
    padded = f" {normalize_answer(text)} "
    return any(norm and f" {norm} " in padded for norm in map(normalize_answer, answers))


def answer_in_passages(row: dict) -> bool:
    """Whether a passage text (title line excluded) of a contexts row contains a golden answer: DPR's has_answer,
    as in Table 8."""
    return any(has_answer(split_contents(p["contents"])[1], row["golden_answers"]) for p in row["passages"])


@dataclasses.dataclass(frozen=True)
class AnswerSentence:
    """The first passage sentence holding a golden answer: passage number (1-based), title, sentence, answer."""

    passage: int
    title: str
    sentence: str
    answer: str


def first_answer_sentence(passages: Sequence[dict], answers: Sequence[str]) -> AnswerSentence | None:
    """String Inclusion over contexts passages (`{"contents": "title\\ntext"}`): the first sentence, in passage order
    (`repro.data.sentences.passage_sentences`), whose text holds a golden answer (`has_answer`), with the first answer
    it holds; None if no sentence does."""
    for found in passage_sentences(passages):
        held = [a for a in answers if has_answer(found.sentence, [a])]
        if held:
            return AnswerSentence(found.passage, found.title, found.sentence, held[0])
    return None
