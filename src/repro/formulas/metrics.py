"""QA and efficiency metrics (§4.1, App. A.1): EM, unigram F1, answer recall (§2.2) and the compression
ratio (Eq. 9), per item and aggregated over a corpus.

EM and F1 follow the SQuAD v1.1 evaluation script: answers are normalised (lower-case, punctuation and the
articles a/an/the removed, whitespace folded), F1 is the unigram-token F1, and both take the maximum over the
golden answers (D10, D11). The paper's F1 sits far above its EM (NQ 1.5B Zero: EM 13.74 vs F1 53.16), which this
definition does not produce on short answers; we keep SQuAD's definition and do not treat the paper's F1
column as a target (docs/decisions.md D10, digest ambiguity 18).

Lengths (for CR and the length rewards) are counted in tokens of a given tokenizer (the extractor's, by
default) or in whitespace-separated words (D13).
"""

from __future__ import annotations

import dataclasses
import numbers
import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np

LengthUnit = Literal["tokens", "words"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, remove punctuation, remove articles, fold whitespace."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def golden_list(golden_answers: str | Sequence[str]) -> list[str]:
    """The golden answers as a non-empty list of strings (a single string is one answer)."""
    answers = [golden_answers] if isinstance(golden_answers, str) else list(golden_answers)
    if not answers:
        raise ValueError("golden_answers is empty")
    bad = [a for a in answers if not isinstance(a, str)]
    if bad:
        raise TypeError(f"golden answers must be strings, got {bad[:3]!r}")
    return answers


def _text(value: str, name: str = "prediction") -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value


def exact_match(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised golden answer, else 0.0."""
    pred = normalize_answer(_text(prediction))
    return float(any(pred == normalize_answer(g) for g in golden_list(golden_answers)))


def _token_f1(prediction_tokens: list[str], golden_tokens: list[str]) -> float:
    num_same = sum((Counter(prediction_tokens) & Counter(golden_tokens)).values())
    if num_same == 0:
        return 0.0
    precision, recall = num_same / len(prediction_tokens), num_same / len(golden_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, golden_answers: str | Sequence[str]) -> float:
    """Unigram token F1 between the normalised prediction and golden answer, maximised over golden answers.
    As in SQuAD v1.1, no shared token (including an empty side) gives 0.0."""
    pred = normalize_answer(_text(prediction)).split()
    return max(_token_f1(pred, normalize_answer(g).split()) for g in golden_list(golden_answers))


ANSWER_METRICS = {"em": exact_match, "f1": f1}  # the metrics of R^ans a reward design's row may name (answer_metric)


def answer_recall(text: str, golden_answers: str | Sequence[str]) -> float:
    """AR (§2.2): 1.0 if any normalised golden answer is a substring of the normalised text, else 0.0.
    Golden answers that normalise to nothing (e.g. "the") cannot be recalled and are skipped."""
    haystack = normalize_answer(_text(text, "text"))
    needles = [n for n in (normalize_answer(g) for g in golden_list(golden_answers)) if n]
    return float(any(n in haystack for n in needles))


def text_length(text: str, unit: LengthUnit = "tokens", tokenizer=None) -> int:
    """Length of `text` in tokens of `tokenizer` (no special tokens added) or in whitespace words."""
    _text(text, "text")
    if unit == "words":
        return len(text.split())
    if unit != "tokens":
        raise ValueError(f"unit must be 'tokens' or 'words', got {unit!r}")
    if tokenizer is None:
        raise ValueError("unit='tokens' needs a tokenizer (the extractor's)")
    encoded = tokenizer.encode(text, add_special_tokens=False)
    return len(getattr(encoded, "ids", encoded))  # a `tokenizers.Tokenizer` returns an Encoding


def _length(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite non-negative length, got {value}")
    return float(value)


def compression_ratio(
    passage_lengths: Sequence[float] | float, evidence_length: float, min_evidence_length: float = 1
) -> float:
    """CR (Eq. 9) = Σ_p L_p / L_e; `passage_lengths` are the L_p of the retrieved passages (or their sum).
    An empty evidence counts as `min_evidence_length` units (D14), so the ratio stays finite; pass 0 to get
    the bare formula (then L_e = 0 raises)."""
    if isinstance(passage_lengths, numbers.Real):
        passage_lengths = [passage_lengths]
    lengths = [_length(v, "passage length") for v in passage_lengths]
    if not lengths:
        raise ValueError("passage_lengths is empty")
    denominator = max(_length(evidence_length, "evidence_length"), min_evidence_length)
    if denominator == 0:
        raise ValueError("evidence_length is 0: the compression ratio is undefined")
    return sum(lengths) / denominator


@dataclasses.dataclass(frozen=True)
class CorpusCompression:
    """Both corpus aggregates of Eq. 9 (D14): the per-item mean is what "average CR" usually means; the ratio
    of sums weights items by their length and is not inflated by a few very short evidences."""

    mean_per_item: float
    ratio_of_sums: float
    n_items: int
    n_empty_evidence: int


def corpus_compression_ratio(
    passage_lengths: Sequence[Sequence[float]], evidence_lengths: Sequence[float], min_evidence_length: float = 1
) -> CorpusCompression:
    """Aggregate CR over items; `passage_lengths[i]` are item i's passage lengths, `evidence_lengths[i]` its L_e."""
    if len(passage_lengths) != len(evidence_lengths):
        raise ValueError(f"{len(passage_lengths)} passage-length lists but {len(evidence_lengths)} evidence lengths")
    if not evidence_lengths:
        raise ValueError("no items")
    per_item = [compression_ratio(p, e, min_evidence_length) for p, e in zip(passage_lengths, evidence_lengths)]
    total_passages = sum(sum(p) for p in passage_lengths)
    total_evidence = sum(max(e, min_evidence_length) for e in evidence_lengths)
    return CorpusCompression(
        mean_per_item=float(np.mean(per_item)),
        ratio_of_sums=total_passages / total_evidence,
        n_items=len(per_item),
        n_empty_evidence=sum(e == 0 for e in evidence_lengths),
    )


def per_item_qa_scores(
    predictions: Sequence[str], golden_answers: Sequence[str | Sequence[str]]
) -> dict[str, np.ndarray]:
    """Per-item EM and F1 arrays (in [0, 1]), the input of the paired tests in repro.reporting.stats."""
    if len(predictions) != len(golden_answers):
        raise ValueError(f"{len(predictions)} predictions but {len(golden_answers)} golden-answer lists")
    return {
        "em": np.array([exact_match(p, g) for p, g in zip(predictions, golden_answers)]),
        "f1": np.array([f1(p, g) for p, g in zip(predictions, golden_answers)]),
    }


def corpus_qa_scores(predictions: Sequence[str], golden_answers: Sequence[str | Sequence[str]]) -> dict[str, float]:
    """Corpus EM and F1: the mean over items, in [0, 1] (the paper prints them ×100)."""
    if not predictions:
        raise ValueError("no predictions")
    scores = per_item_qa_scores(predictions, golden_answers)
    return {name: float(values.mean()) for name, values in scores.items()}
