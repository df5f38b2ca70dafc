"""The retrieval corpus in Search-R1/FlashRAG passage format: one `{"id", "contents"}` object per line,
where `contents` is `"Title"` on the first line and the passage text after it (wiki-18 uses this layout).

The embedded default is built from the offline Wikipedia lead extracts by cutting each page into
`chunk_words`-word passages, as DPR cut the December-2018 dump into 100-word passages; a paper-scale
profile points at an existing passages file instead. Passages are addressed by their row number, which
is also their FAISS id.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from repro.io import InputError, read_json, write_jsonl


def make_contents(title: str, text: str) -> str:
    return f'"{title}"\n{text}'


def split_contents(contents: str) -> tuple[str, str]:
    """(title, text) of a passage's `contents`; the title line's surrounding quotes are removed."""
    title, _, text = contents.partition("\n")
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


def chunk_words(text: str, size: int) -> list[str]:
    """Consecutive non-overlapping chunks of `size` whitespace-separated words (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"chunk size must be a positive number of words, got {size}")
    words = text.split()
    return [" ".join(words[i:i + size]) for i in range(0, len(words), size)]


def ovos_pages(path: str | os.PathLike) -> dict[str, str]:
    """Title -> lead extract of the offline Wikipedia summaries (`summaries_en-us.json`), in file order."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected an object of pages, got {type(data).__name__}")
    pages = {}
    for key, entry in data.items():
        for field in ("title", "extract"):
            if not isinstance(entry, dict) or not isinstance(entry.get(field), str):
                raise InputError(path, f"page {key!r}: missing or not a string", field=field)
        pages[entry["title"]] = entry["extract"]
    return pages


def page_passages(pages: dict[str, str], words: int) -> Iterator[dict]:
    """Chunk every page into passages with ids "0", "1", ... (pages without text are skipped)."""
    n = 0
    for title, text in pages.items():
        for chunk in chunk_words(text, words):
            yield {"id": str(n), "contents": make_contents(title, chunk)}
            n += 1


def write_corpus(path: str | os.PathLike, passages: Iterable[dict]) -> int:
    return write_jsonl(path, passages)


def file_fingerprint(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes: the identity of a corpus or QA split in cache keys."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _validate_passage(row: object, path: str | os.PathLike, line: int) -> dict:
    if not isinstance(row, dict):
        raise InputError(path, f"expected a JSON object, got {type(row).__name__}", line=line)
    for field in ("id", "contents"):
        if field not in row:
            raise InputError(path, "missing", line=line, field=field)
    if not isinstance(row["contents"], str) or not row["contents"].strip():
        raise InputError(path, "expected a non-empty string", line=line, field="contents")
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        raise InputError(path, f"expected a string, got {type(row['id']).__name__}", line=line, field="id")
    return {"id": str(row["id"]), "contents": row["contents"]}


def _parse(text: bytes, path: str | os.PathLike, line: int) -> dict:
    try:
        row = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(path, f"invalid JSON ({err})", line=line) from None
    return _validate_passage(row, path, line)


def first_passages(path: str | os.PathLike, n: int) -> Iterator[dict]:
    """The first `n` passages of a passages jsonl file in file order, each validated; reads only those lines, so a
    slice of wiki-18's 21M passages costs what the slice does (D135). InputError if the file holds fewer."""
    taken = 0
    with open(path, "rb") as f:
        for line, text in enumerate(f, start=1):
            if taken == n:
                return
            if text.strip():
                yield _parse(text, path, line)
                taken += 1
    if taken < n:
        raise InputError(path, f"holds {taken} passages, fewer than the {n} asked for (data.corpus.max_passages)")


class PassageStore:
    """Random access to a passages jsonl file by row number without loading it into memory.

    Opening validates every line once and records its byte offset (8 bytes per passage: 170 MB for the
    21M passages of wiki-18), so `store[i]` is a seek and a readline.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        offsets, lines, position = [], [], 0
        with open(self.path, "rb") as f:
            for line, text in enumerate(f, start=1):
                if text.strip():
                    _parse(text, self.path, line)
                    offsets.append(position)
                    lines.append(line)
                position += len(text)
        if not offsets:
            raise InputError(self.path, "the corpus has no passages")
        self._offsets, self._lines = offsets, lines
        self._file = open(self.path, "rb")

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, row: int) -> dict:
        self._file.seek(self._offsets[row])
        return _parse(self._file.readline(), self.path, self._lines[row])

    def __iter__(self) -> Iterator[dict]:
        with open(self.path, "rb") as f:
            for line, text in enumerate(f, start=1):
                if text.strip():
                    yield _parse(text, self.path, line)

    def contents_batches(self, size: int) -> Iterator[list[str]]:
        """The passages' `contents` in row order, in lists of `size`."""
        batch = []
        for passage in self:
            batch.append(passage["contents"])
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    def rows_by_title(self) -> dict[str, list[int]]:
        """Title -> row numbers of that page's passages, in order."""
        rows: dict[str, list[int]] = {}
        for row, passage in enumerate(self):
            rows.setdefault(split_contents(passage["contents"])[0], []).append(row)
        return rows

    def close(self) -> None:
        self._file.close()
