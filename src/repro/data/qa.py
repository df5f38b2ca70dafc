"""QA rows in FlashRAG's jsonl format: `{"id", "question", "golden_answers": [...], "metadata": {}}`.

A contexts file (see `repro.data.layout`) holds the same rows plus `passages`, the passages given to the
reader. Every QA file the pipeline reads or writes goes through `validate_qa_row`, so a malformed row fails with
the file, line and field it came from instead of surfacing later as a KeyError deep inside a study.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

from repro.io import InputError, enumerate_jsonl, write_jsonl


def validate_qa_row(row: dict, path: str | os.PathLike, line: int) -> dict:
    """Check one FlashRAG row; `id` may be an int in some upstream files and is returned as str."""
    for field in ("id", "question", "golden_answers"):
        if field not in row:
            raise InputError(path, "missing", line=line, field=field)
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        raise InputError(path, f"expected a string, got {type(row['id']).__name__}", line=line, field="id")
    if not isinstance(row["question"], str) or not row["question"].strip():
        raise InputError(path, "expected a non-empty string", line=line, field="question")
    answers = row["golden_answers"]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise InputError(path, f"expected a non-empty list of strings, got {answers!r}", line=line,
                         field="golden_answers")
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InputError(path, f"expected an object, got {type(metadata).__name__}", line=line, field="metadata")
    return {"id": str(row["id"]), "question": row["question"], "golden_answers": answers, "metadata": metadata}


def read_qa(path: str | os.PathLike, check: Callable[[dict, str | os.PathLike, int], object] | None = None
            ) -> Iterator[dict]:
    """Yield the validated rows of a FlashRAG-format QA file; `check(row, path, line)` may validate more."""
    seen: set[str] = set()
    for line, row in enumerate_jsonl(path):
        row = validate_qa_row(row, path, line)
        if check is not None:
            check(row, path, line)
        if row["id"] in seen:
            raise InputError(path, f"duplicate id {row['id']!r}", line=line, field="id")
        seen.add(row["id"])
        yield row


def write_qa(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    return write_jsonl(path, rows)


def read_contexts(path: str | os.PathLike) -> list[dict]:
    """Rows of a contexts file: validated QA rows plus `passages` ([{"id", "contents", ...}], reader order)."""
    rows = []
    for line, row in enumerate_jsonl(path):
        passages = row.get("passages")
        if not isinstance(passages, list) or not all(
                isinstance(p, dict) and isinstance(p.get("contents"), str) for p in passages):
            raise InputError(path, "expected a list of {id, contents, ...} objects", line=line, field="passages")
        rows.append({**validate_qa_row(row, path, line), "passages": passages})
    return rows
