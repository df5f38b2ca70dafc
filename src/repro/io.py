"""Atomic file output, validated jsonl input, and the fingerprints that decide whether an artefact is reused.

Every artefact of the pipeline is written through these helpers: the content goes to a temporary file in
the destination directory and is renamed into place, so an interrupted stage never leaves a truncated file
that a later stage (or DVC) would take for a finished one. `fingerprint` (a configuration) and
`model_fingerprint` (a model directory's files) key every resumable run and cached result. A file appended to
in place is `detach`ed first, so that a write never reaches DVC's cache through a link. A binary kept in git is
written in parts (`write_parts`, read back whole by `read_parted`): the repository tracks no file over 2 MiB.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml


class InputError(ValueError):
    """Bad input data, with the file, line and field it came from."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None, field: str | None = None):
        where = str(path) + (f":{line}" if line is not None else "")
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{message}")
        self.path, self.line, self.field = str(path), line, field


MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.model")


def fingerprint(config: Any) -> str:
    """sha256 of a JSON-able configuration, independent of key order."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


def model_fingerprint(ref: str) -> str:
    """sha256 over a local model directory's config, weight and vocabulary files; a hub id stands for
    itself (pin a revision by downloading it to a directory)."""
    path = Path(ref)
    if not path.is_dir():
        return ref
    digest = hashlib.sha256()
    for file in sorted(f for pattern in MODEL_FILES for f in path.rglob(pattern)):
        digest.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` with the same suffix (writers that check it, e.g. papermill, accept
    it); on success rename it onto `path`, on failure delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory beside `path`; on success rename it onto `path` (which must not
    exist), on failure delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def file_sha256(path: str | os.PathLike) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


PART_BYTES = 2**20  # a part of a file kept in git (`write_parts`): the repository tracks no file over 2 MiB


def parts_index(path: str | os.PathLike) -> Path:
    """<path>.parts.json: the index of a file kept in parts, the whole file's sha256 and each part's name and sha256."""
    path = Path(path)
    return path.with_name(f"{path.name}.parts.json")


def write_parts(source: str | os.PathLike, path: str | os.PathLike, part_bytes: int = PART_BYTES) -> Path:
    """Write the bytes of `source` as <path>.part-00, -01, ... of `part_bytes` each and their `parts_index`; returns
    the index. `read_parted(path)` gives the bytes back."""
    path, data = Path(path), Path(source).read_bytes()
    parts = {}
    for number, start in enumerate(range(0, max(len(data), 1), part_bytes)):
        part, chunk = path.with_name(f"{path.name}.part-{number:02d}"), data[start:start + part_bytes]
        with atomic_path(part) as tmp:
            tmp.write_bytes(chunk)
        parts[part.name] = hashlib.sha256(chunk).hexdigest()
    write_json(parts_index(path), {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "parts": parts})
    return parts_index(path)


def read_parted(path: str | os.PathLike) -> bytes:
    """The bytes of `path`, or, when it is kept in parts (`write_parts`), its parts joined, each part and the whole
    checked against the index's sha256 (InputError naming the part or the index otherwise)."""
    path = Path(path)
    index = parts_index(path)
    if path.exists() or not index.exists():
        return path.read_bytes()
    entry = read_json_object(index)
    if not isinstance(entry.get("parts"), dict) or not entry["parts"]:
        raise InputError(index, "lists no parts", field="parts")
    chunks = []
    for name, sha256 in entry["parts"].items():
        part = path.with_name(name)
        if not part.exists():
            raise FileNotFoundError(f"{part}: {index} lists it, but the part is missing")
        chunks.append(part.read_bytes())
        if hashlib.sha256(chunks[-1]).hexdigest() != sha256:
            raise InputError(part, f"its sha256 is not the one {index} records: the part was changed or damaged")
    data = b"".join(chunks)
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise InputError(index, "the joined parts do not have the whole file's sha256", field="sha256")
    return data


def detach(path: str | os.PathLike) -> None:
    """Give `path` its own copy of its data if it shares them with another name: a hardlink or a symlink, which is
    how DVC links an output to its cache (D133). Call it before writing a file in place (append, truncate): a write
    through a link would change the cache object behind every checkout of it. Renames (`atomic_path`) need not."""
    path = Path(path)
    if not path.is_symlink() and (not path.exists() or path.stat().st_nlink == 1):
        return
    with atomic_path(path) as tmp:
        shutil.copyfile(path, tmp)  # a fresh file: the cache's read-only mode is not copied


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    """Write rows as jsonl atomically; returns the number of rows."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


PIPELINE_FILE = Path("dvc.yaml")  # read from the working directory, the repository root of every stage


def pipeline_stages(path: str | os.PathLike = PIPELINE_FILE) -> dict[str, dict]:
    """dvc.yaml's stages, in their order: the one list of stages that the cost model, the preflight and the derived
    code dependencies read."""
    stages = (yaml.load(Path(path).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader) or {}).get("stages")
    if not isinstance(stages, dict) or not stages:
        raise InputError(path, "no `stages:` mapping")
    return stages


def read_utf8(path: str | os.PathLike) -> str:
    """A text file's contents; invalid UTF-8 raises InputError naming file and line."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, f"invalid UTF-8 at byte {err.start}", line=data.count(b"\n", 0, err.start) + 1) from None


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value of a file; invalid UTF-8 or JSON raises InputError naming file and line."""
    text = read_utf8(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(path, f"invalid JSON ({err.msg})", line=err.lineno) from None


def read_json_object(path: str | os.PathLike) -> dict:
    """`read_json` of a file that must hold a JSON object (a manifest, a configuration)."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise InputError(path, f"expected a JSON object, got {type(value).__name__}")
    return value


def read_yaml(path: str | os.PathLike) -> Any:
    """The YAML value of a file (None when empty); invalid UTF-8 or YAML raises InputError naming file and line."""
    text = read_utf8(path)
    try:
        return yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(path, f"invalid YAML ({problem})", line=mark.line + 1 if mark else None) from None


def enumerate_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a jsonl file; a malformed line (invalid UTF-8 or JSON)
    raises InputError naming file and line."""
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InputError(path, f"invalid UTF-8 at byte {err.start} of the line", line=line_no) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(path, f"invalid JSON ({err.msg})", line=line_no) from None
            if not isinstance(row, dict):
                raise InputError(path, f"expected a JSON object, got {type(row).__name__}", line=line_no)
            yield line_no, row


def read_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the objects of a jsonl file; a malformed line raises InputError naming file and line."""
    for _, row in enumerate_jsonl(path):
        yield row
