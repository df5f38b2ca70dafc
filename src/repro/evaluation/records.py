"""Per-item prediction records and the resumable file that holds them.

A record is one question of one (study, dataset, method) run:

    id, question, golden_answers          the QA row
    evidence                              the text given to the generator as Table 11's {document}; null for
                                          Zero, which is answered closed-book with Table 12
    raw_output                            the refiner's own output where it differs from `evidence` (e.g. the
                                          extractor's <reason>…<extract>… text), else null
    generation, prediction                the QA generator's output and the answer read from it
    em, f1                                of the prediction against the golden answers (repro.formulas.metrics)
    answer_in_passages                    a passage text contains a golden answer (DPR's has_answer, as Table 8)
    passage_tokens, passage_words         L_P: the formatted top-k passages, i.e. Full's document
    evidence_tokens, evidence_words       L_e (null for Zero)
    cr                                    L_P / max(L_e, 1), Eq. 9 with an empty evidence counted as 1 (D14)
    refine_seconds, answer_seconds        wall time of the chunk's refinement / answering over its size
                                          (amortised over the batch; Table 4's harness is repro.studies.latency)

Tokens are the extractor's tokenizer's, words are whitespace words (D13).

`RecordFile` makes a run resumable. Finished records are appended, chunk by chunk (flushed and fsynced), to
`<name>.partial.jsonl`, whose first line holds the run's configuration fingerprint. A rerun reuses the final
`<name>.jsonl` only when its manifest (`<name>.manifest.json`) carries the same fingerprint and the file holds
exactly the records of the current rows, in order, as the manifest lists them (D100); a final file that lost or
damaged a line is not reused: its intact records seed the partial file and only the rest is recomputed, with a
warning naming the file, the damaged lines and the missing ids. Otherwise a rerun resumes from the partial file
when its fingerprint matches (a line torn by a kill is dropped, a damaged complete line is dropped with a warning
naming file and line, and its item recomputed) and starts afresh, with a warning, when it does not — records of
two configurations are never mixed. The final file is written atomically, then its manifest, and only then is
the partial file removed. `read_records`, which every table reads through, checks a file against its manifest:
a short file is an error naming it and the missing ids. `process_resumably` is the chunked loop over a
`RecordFile` that the evaluation runner, the answer-recall study and the agentic study share.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from repro.io import InputError, detach, enumerate_jsonl, fingerprint, write_json, write_jsonl, write_text

REQUIRED_FIELDS = ("id", "question", "golden_answers", "evidence", "prediction", "em", "f1", "passage_tokens",
                   "evidence_tokens", "cr")


def manifest_path(path: str | os.PathLike) -> Path:
    """`<name>.manifest.json` beside the per-item file `<name>.jsonl`."""
    return Path(path).with_suffix(".manifest.json")


def _parse_line(line: str, required: Sequence[str]) -> dict | str:
    """The record on one line, or why it is not one."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        return f"invalid JSON ({err.msg})"
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    missing = [f for f in ("id", *required) if f not in record]
    return f"missing {list(dict.fromkeys(missing))}" if missing else record


def _named(ids: Sequence[str]) -> str:
    return ", ".join(map(repr, ids[:10])) + (", …" if len(ids) > 10 else "")


def _id_differences(expected: Sequence[str], got: Sequence[str]) -> list[str]:
    """What keeps `got` from being `expected`: missing ids (the first ten named), foreign ids, another order."""
    expected_set, got_set = set(expected), set(got)
    missing, foreign = [i for i in expected if i not in got_set], [i for i in got if i not in expected_set]
    differences = []
    if missing:
        differences.append(f"{len(missing)} ids missing ({_named(missing)})")
    if foreign:
        differences.append(f"{len(foreign)} ids not among its rows ({_named(foreign)})")
    if not differences and list(got) != list(expected):
        differences.append("records out of order")
    return differences


def _read_manifest(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(path, f"invalid JSON ({err.msg})", line=err.lineno) from None


def read_records(path: str | os.PathLike, required: Sequence[str] = REQUIRED_FIELDS) -> list[dict]:
    """The records of a finished prediction file, checked for the required fields and unique ids and, when its
    manifest is beside it, against the ids the manifest lists: a short file is an error naming the missing ids,
    never a table on fewer items."""
    records, seen = [], set()
    for line, record in enumerate_jsonl(path):
        missing = [f for f in required if f not in record]
        if missing:
            raise InputError(path, f"missing {missing}", line=line)
        if record["id"] in seen:
            raise InputError(path, f"duplicate id {record['id']!r}", line=line, field="id")
        seen.add(record["id"])
        records.append(record)
    if manifest_path(path).exists():
        manifest = _read_manifest(manifest_path(path))
        ids = [r["id"] for r in records]
        expected = manifest.get("ids")
        if expected is not None and ids != expected:
            raise InputError(path, f"holds {len(ids)} records where {manifest_path(path).name} lists "
                                   f"{len(expected)}: {'; '.join(_id_differences(expected, ids))}; rerun its stage "
                                   f"to recompute them")
        if expected is None and len(ids) != manifest.get("records"):
            raise InputError(path, f"holds {len(ids)} records where {manifest_path(path).name} counts "
                                   f"{manifest.get('records')}; rerun its stage to recompute them")
    return records


class RecordFile:
    """The prediction file at `path` (…/<method>.jsonl) for the run described by `config`; other per-item files
    (e.g. SEER's scored candidates) name their own `required` fields."""

    def __init__(self, path: str | os.PathLike, config: dict, required: Sequence[str] = REQUIRED_FIELDS):
        self.path = Path(path)
        self.config = config
        self.required = tuple(required)
        self.fingerprint = fingerprint(config)
        self.partial_path = self.path.with_suffix(".partial.jsonl")
        self.manifest_path = manifest_path(self.path)

    def finished(self, ids: Sequence[str]) -> list[dict] | None:
        """The records of a finished run of this configuration over `ids` (the current rows, in order), or None.
        A final file that does not hold exactly those records, as its manifest lists them, is not reused: its
        intact records of `ids` seed the partial file, so that only the damaged and missing ones are recomputed."""
        if not (self.path.exists() and self.manifest_path.exists()):
            return None
        try:
            manifest = _read_manifest(self.manifest_path)
        except InputError:
            return None  # written atomically, so damaged after the fact: not a finished run
        if manifest.get("fingerprint") != self.fingerprint:
            return None
        records, damaged = self._intact_records(self.path.read_text(encoding="utf-8").split("\n"), first_line=1)
        got = [r["id"] for r in records]
        if not damaged and got == list(ids) and manifest.get("ids", got) == got and manifest.get("records") == len(got):
            self.partial_path.unlink(missing_ok=True)  # left by a kill between the manifest and its removal
            return records
        wanted = set(ids)
        kept = {r["id"]: r for r in records if r["id"] in wanted}
        problems = damaged + _id_differences(ids, got) or [f"{self.manifest_path.name} lists other records"]
        warnings.warn(f"{self.path} is not a complete run of its rows ({'; '.join(problems)}); "
                      f"its {len(kept)} intact records are kept and the rest is recomputed", stacklevel=3)
        self._start_partial(kept.values())
        self.manifest_path.unlink()
        return None

    def resume(self) -> dict[str, dict]:
        """Records already in the partial file of this configuration, by id; the partial file is (re)started
        with this configuration's header when it is missing or belongs to another configuration."""
        done = self._read_partial()
        if done is None:
            self._start_partial([])
            done = {}
        return done

    def append(self, records: Iterable[dict]) -> None:
        """Append finished records to the partial file and force them to disk."""
        detach(self.partial_path)
        with open(self.partial_path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def finish(self, records: Sequence[dict]) -> Path:
        """Write the final file (atomically) and its manifest, then drop the partial file."""
        write_jsonl(self.path, records)
        write_json(self.manifest_path, {"fingerprint": self.fingerprint, "records": len(records),
                                        "ids": [r["id"] for r in records], "config": self.config})
        self.partial_path.unlink(missing_ok=True)
        return self.path

    def _header(self) -> str:
        return json.dumps({"fingerprint": self.fingerprint, "config": self.config}, default=str) + "\n"

    def _start_partial(self, records: Iterable[dict]) -> None:
        """The partial file with this configuration's header and `records`, written atomically."""
        write_text(self.partial_path, self._header() + "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                              for r in records))

    def _intact_records(self, lines: list[str], first_line: int) -> tuple[list[dict], list[str]]:
        """The records of complete `lines` (numbered from `first_line`; the text after the last newline is
        ignored), and a description of each damaged line."""
        records, damaged, seen = [], [], set()
        for line_no, line in enumerate(lines[:-1], start=first_line):
            record = _parse_line(line, self.required)
            if isinstance(record, str):
                damaged.append(f"line {line_no}: {record}")
            elif record["id"] in seen:
                damaged.append(f"line {line_no}: duplicate id {record['id']!r}")
            else:
                seen.add(record["id"])
                records.append(record)
        return records, damaged

    def _read_partial(self) -> dict[str, dict] | None:
        if not self.partial_path.exists():
            return None
        lines = self.partial_path.read_text(encoding="utf-8").split("\n")  # after the last newline: cut by a kill
        try:
            header = json.loads(lines[0]) if len(lines) > 1 else {}
        except json.JSONDecodeError:
            header = {}
        if not isinstance(header, dict) or header.get("fingerprint") != self.fingerprint:
            warnings.warn(f"{self.partial_path} belongs to another configuration (or has no valid header); its "
                          f"records are discarded and the run starts afresh", stacklevel=3)
            return None
        records, damaged = self._intact_records(lines[1:], first_line=2)
        if damaged:
            warnings.warn(f"{self.partial_path}: damaged records dropped and recomputed ({'; '.join(damaged)})",
                          stacklevel=3)
        if damaged or lines[-1]:
            self._start_partial(records)
        return {record["id"]: record for record in records}


def process_resumably(rows: Sequence[dict], store: RecordFile, process: Callable[[list[dict]], list[dict]],
                      chunk_size: int, progress: bool = True, desc: str = "items") -> list[dict]:
    """One record per row (in row order, keyed by `id`): `process(chunk)` makes the records of a chunk."""
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("rows must have unique ids")
    finished = store.finished(ids)
    if finished is not None:
        return finished
    done = store.resume()
    todo = [row for row in rows if row["id"] not in done]
    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc=desc, unit="q", disable=not progress) as bar:
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start : start + chunk_size]
            records = process(chunk)
            if [r["id"] for r in records] != [row["id"] for row in chunk]:
                raise RuntimeError("process() must return one record per row, in order")
            store.append(records)
            done.update((record["id"], record) for record in records)
            bar.update(len(chunk))
    store.finish([done[i] for i in ids])
    return [done[i] for i in ids]
