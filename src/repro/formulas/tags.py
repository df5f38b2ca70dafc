"""The response format `<reason>r</reason><extract>e</extract><answer>o</answer>` (§3.1-3.2).

Two readers, on purpose different:
- `is_well_formatted` is the check behind the format reward R^fmt: exactly one of each tag pair, in that order,
  non-empty contents, and nothing but whitespace outside the tags (`check="strict"`, D18); `check="lenient"` also
  tolerates text without tags before, between and after the parts (`rewards.format_check`, D147).
- `parse_response`, `extract_rationale`, `extract_evidence` and `extract_answer` are lenient readers for
  evaluation and for the other rewards: at inference generation stops at `</extract>` (which the engine
  may or may not return), and a malformed response must still yield the best available text (D9).
"""

from __future__ import annotations

import dataclasses
import re

TAGS = ("reason", "extract", "answer")

_STRICT = re.compile(
    r"\s*<reason>(?P<reason>.*?)</reason>\s*<extract>(?P<extract>.*?)</extract>\s*<answer>(?P<answer>.*?)</answer>\s*",
    re.DOTALL,
)
_STRICT_NO_ANSWER = re.compile(
    r"\s*<reason>(?P<reason>.*?)</reason>\s*<extract>(?P<extract>.*?)</extract>\s*", re.DOTALL
)
_FREE = r"(?:(?!</?(?:reason|extract|answer)>).)*"  # any text that holds none of the six tags
_LENIENT = re.compile(
    rf"{_FREE}<reason>(?P<reason>{_FREE})</reason>{_FREE}<extract>(?P<extract>{_FREE})</extract>{_FREE}"
    rf"<answer>(?P<answer>{_FREE})</answer>{_FREE}", re.DOTALL
)
_LENIENT_NO_ANSWER = re.compile(
    rf"{_FREE}<reason>(?P<reason>{_FREE})</reason>{_FREE}<extract>(?P<extract>{_FREE})</extract>{_FREE}", re.DOTALL
)
FORMAT_CHECKS = ("strict", "lenient")


def _check_text(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected a response string, got {type(text).__name__}")
    return text


def is_well_formatted(response: str, with_answer: bool = True, check: str = "strict") -> bool:
    """`check="strict"` (D18): True iff `response` is exactly
    `<reason>…</reason><extract>…</extract><answer>…</answer>` (whitespace allowed between and around the parts),
    each tag pair appears once and encloses non-blank text.
    `check="lenient"` (D147): the same tags, once each, in that order, around non-blank text, with any text that holds
    no tag before, between and after them. `with_answer=False` checks the inference form that ends at `</extract>`."""
    _check_text(response)
    tags = TAGS if with_answer else TAGS[:2]
    if check == "lenient":
        match = (_LENIENT if with_answer else _LENIENT_NO_ANSWER).fullmatch(response)
        return match is not None and all(match.group(t).strip() for t in tags)
    if check != "strict":
        raise ValueError(f"format check must be one of {list(FORMAT_CHECKS)}, got {check!r}")
    match = (_STRICT if with_answer else _STRICT_NO_ANSWER).fullmatch(response)
    if match is None:
        return False
    if any(response.count(f"<{t}>") != 1 or response.count(f"</{t}>") != 1 for t in TAGS if t in tags):
        return False
    if not with_answer and ("<answer>" in response or "</answer>" in response):
        return False
    return all(match.group(t).strip() for t in tags)


def _span(text: str, tag: str, until: tuple[str, ...] = ()) -> str | None:
    """Content after the first `<tag>` up to `</tag>` (or the first of `until`, or the end); None if absent."""
    start = text.find(f"<{tag}>")
    if start < 0:
        return None
    body = text[start + len(tag) + 2 :]
    ends = [i for i in (body.find(marker) for marker in (f"</{tag}>", *until)) if i >= 0]
    return body[: min(ends)].strip() if ends else body.strip()


def extract_rationale(text: str) -> str:
    """The rationale r: inside `<reason>` (up to `</reason>`, `<extract>` or the end); "" if there is none."""
    return _span(_check_text(text), "reason", until=("<extract>", "<answer>")) or ""


def extract_evidence(text: str) -> str:
    """The evidence e for the generator (Algorithm 1). In order of preference: the text inside `<extract>`
    (up to `</extract>`, `<answer>` or the end, since generation stops at `</extract>`); else whatever
    follows `</reason>`; else "" when the output is a reasoning cut off before extracting; else, for an
    output without `<reason>` or `<extract>`, the whole text. The last two also end at a stray `</extract>`
    or `<answer>` (a continuation of a prefilled `<extract>`), so no tag reaches the generator (D109)."""
    _check_text(text)
    span = _span(text, "extract", until=("<answer>",))
    if span is not None:
        return span
    if "</reason>" in text:
        text = text.split("</reason>", 1)[1]
    elif "<reason>" in text:
        return ""
    return text.split("</extract>", 1)[0].split("<answer>", 1)[0].strip()


def extract_answer(text: str) -> str:
    """The answer o: inside the last `<answer>` (up to `</answer>` or the end); else the text before a
    closing `</answer>` (a continuation of a prefilled `<answer>`); else the whole text, stripped."""
    _check_text(text)
    if "<answer>" in text:
        return text.rsplit("<answer>", 1)[1].split("</answer>", 1)[0].strip()
    if "</answer>" in text:
        return text.split("</answer>", 1)[0].strip()
    return text.strip()


@dataclasses.dataclass(frozen=True)
class ParsedResponse:
    rationale: str
    evidence: str
    answer: str | None  # None when the response has no answer part (inference stops at </extract>)
    well_formatted: bool


def parse_response(text: str) -> ParsedResponse:
    """Lenient parse of one extractor response, plus the strict format verdict."""
    _check_text(text)
    has_answer = "<answer>" in text or "</answer>" in text
    return ParsedResponse(
        rationale=extract_rationale(text),
        evidence=extract_evidence(text),
        answer=extract_answer(text.split("</extract>", 1)[-1]) if has_answer else None,
        well_formatted=is_well_formatted(text),
    )
