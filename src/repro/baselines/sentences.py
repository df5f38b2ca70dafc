"""Sentence splitting shared by the sentence-level baselines (SeleCtx, RECOMP).

The rule is Selective Context's released one (`sent_tokenize_pattern`): split at whitespace that follows
"." or "?", except after an abbreviation such as "e.g." or "Mr.". Whitespace runs are first collapsed to one
space, as Selective Context's `beautify_context` does (D60).
"""

from __future__ import annotations

import re

SENTENCE_BOUNDARY = r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?)\s"


def collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-empty sentence of `text`, surrounding whitespace excluded."""
    spans, start = [], 0
    for boundary in [*re.finditer(SENTENCE_BOUNDARY, text), None]:
        end = boundary.start() if boundary else len(text)
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + len(piece.rstrip())))
        start = boundary.end() if boundary else end
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` (whitespace collapsed), in order."""
    text = collapse_whitespace(text)
    return [text[s:e] for s, e in sentence_spans(text)]
