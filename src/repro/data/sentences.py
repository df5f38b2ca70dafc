"""Every sentence splitter of the project, one function per source whose rule it follows, and the sentences of a
contexts row's passages with one drawn at random:

- `punctuation_sentences`        this project's rule (D141): split after ".", "!" or "?" followed by whitespace; the
                                 unit String Inclusion selects by its answer, the format warm-up and the
                                 random-sentence extractor by a seed alone, and the lead-sentence baseline by place
- `selective_context_sentences`  Selective Context's released `sent_tokenize_pattern` (D60), SeleCtx's and RECOMP's
- `punkt_sentences`              nltk's Punkt algorithm with default parameters (D66), FilCo's

A passage is `{"contents": "title\\ntext"}`; `passage_sentences` splits its text (the title line excluded) by the
project's rule.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Sequence

from repro.data.corpus import split_contents

PUNCTUATION_BOUNDARY = r"(?<=[.!?])\s+"
SENTENCE_BOUNDARY = r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?)\s"  # Selective Context's `sent_tokenize_pattern`


def punctuation_sentences(text: str) -> list[str]:
    """This project's String Inclusion rule (D141): the non-empty pieces of `text` split after ".", "!" or "?"."""
    return [s for s in re.split(PUNCTUATION_BOUNDARY, text.strip()) if s.strip()]


def collapse_whitespace(text: str) -> str:
    """Whitespace runs as one space, ends stripped, as Selective Context's `beautify_context` (D60)."""
    return re.sub(r"\s+", " ", text).strip()


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-empty sentence of `text` by Selective Context's rule, surrounding whitespace
    excluded: split at whitespace that follows "." or "?", except after an abbreviation such as "e.g." or "Mr."."""
    spans, start = [], 0
    for boundary in [*re.finditer(SENTENCE_BOUNDARY, text), None]:
        end = boundary.start() if boundary else len(text)
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = boundary.end() if boundary else end
    return spans


def selective_context_sentences(text: str) -> list[str]:
    """Selective Context's released rule (D60): the sentences of `text`, whitespace collapsed, in order."""
    text = collapse_whitespace(text)
    return [text[s:e] for s, e in sentence_spans(text)]


@functools.cache
def _punkt():
    from nltk.tokenize.punkt import PunktSentenceTokenizer  # nltk takes seconds to import: only where FilCo splits

    return PunktSentenceTokenizer()  # Punkt's algorithm with default parameters (no trained model offline)


def punkt_sentences(text: str) -> list[str]:
    """FilCo's splitter, nltk's Punkt with default parameters (D66): the stripped non-empty sentences of `text`."""
    return [s.strip() for s in _punkt().tokenize(text) if s.strip()]


@dataclasses.dataclass(frozen=True)
class PassageSentence:
    """One sentence of a passage: passage number (1-based), the passage's title, the sentence."""

    passage: int
    title: str
    sentence: str


def passage_sentences(passages: Sequence[dict]) -> list[PassageSentence]:
    """Every non-empty sentence of the passages' texts (`punctuation_sentences`), in passage order."""
    found = []
    for number, passage in enumerate(passages, start=1):
        title, text = split_contents(passage["contents"])
        found += [PassageSentence(number, title, s) for s in punctuation_sentences(text)]
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
