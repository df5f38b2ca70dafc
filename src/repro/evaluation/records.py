"""Per-item prediction records and the resumable file that holds them.

A record is one question of one (study, dataset, method) run:

    id, question, golden_answers          the QA row
    evidence                              the text given to the generator as Table 11's {document}; null for
                                          Zero, which is answered closed-book with Table 12
    raw_output                            the refiner's own output where it differs from `evidence` (e.g. the
                                          extractor's <reason>…<extract>… text), else null
    generation, prediction                the QA generator's output and the answer read from it
    em, f1                                of the prediction against the golden answers (repro.metrics)
    answer_in_passages                    a passage text contains a golden answer (DPR's has_answer, as Table 8)
    passage_tokens, passage_words         L_P: the formatted top-k passages, i.e. Full's document
    evidence_tokens, evidence_words       L_e (null for Zero)
    cr                                    L_P / max(L_e, 1), Eq. 9 with an empty evidence counted as 1 (D14)
    refine_seconds, answer_seconds        wall time of the chunk's refinement / answering over its size
                                          (amortised over the batch; Table 4's harness is repro.evaluation.latency)

Tokens are the extractor's tokenizer's, words are whitespace words (D13).

`RecordFile` makes a run resumable. Finished records are appended, chunk by chunk (flushed and fsynced), to
`<name>.partial.jsonl`, whose first line holds the run's configuration fingerprint. A rerun reuses the final
`<name>.jsonl` when its manifest (`<name>.manifest.json`) carries the same fingerprint; otherwise it resumes
from the partial file when that fingerprint matches (a line torn by a kill is dropped) and starts afresh,
with a warning, when it does not — records of two configurations are never mixed. The final file is written
atomically, then its manifest, and only then is the partial file removed. `process_resumably` is the chunked loop
over a `RecordFile` that the evaluation runner and the answer-recall study share.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from repro.io import InputError, fingerprint, read_jsonl, write_json, write_jsonl

REQUIRED_FIELDS = ("id", "question", "golden_answers", "evidence", "prediction", "em", "f1", "passage_tokens",
                   "evidence_tokens", "cr")


def read_records(path: str | os.PathLike, required: Sequence[str] = REQUIRED_FIELDS) -> list[dict]:
    """The records of a finished prediction file, checked for the required fields and unique ids."""
    records, seen = [], set()
    for line, record in enumerate(read_jsonl(path), start=1):
        missing = [f for f in required if f not in record]
        if missing:
            raise InputError(path, f"missing {missing}", line=line)
        if record["id"] in seen:
            raise InputError(path, f"duplicate id {record['id']!r}", line=line, field="id")
        seen.add(record["id"])
        records.append(record)
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
        self.manifest_path = self.path.with_suffix(".manifest.json")

    def finished(self) -> list[dict] | None:
        """The records of a finished run of this configuration, or None."""
        if not (self.path.exists() and self.manifest_path.exists()):
            return None
        manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        return read_records(self.path, self.required) if manifest.get("fingerprint") == self.fingerprint else None

    def resume(self) -> dict[str, dict]:
        """Records already in the partial file of this configuration, by id; the partial file is (re)started
        with this configuration's header when it is missing or belongs to another configuration."""
        done = self._read_partial()
        if done is None:
            self.partial_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.partial_path, "w", encoding="utf-8") as f:
                f.write(json.dumps({"fingerprint": self.fingerprint, "config": self.config}, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
            done = {}
        return done

    def append(self, records: Iterable[dict]) -> None:
        """Append finished records to the partial file and force them to disk."""
        with open(self.partial_path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def finish(self, records: Sequence[dict]) -> Path:
        """Write the final file (atomically) and its manifest, then drop the partial file."""
        write_jsonl(self.path, records)
        write_json(self.manifest_path,
                   {"fingerprint": self.fingerprint, "records": len(records), "config": self.config})
        self.partial_path.unlink(missing_ok=True)
        return self.path

    def _read_partial(self) -> dict[str, dict] | None:
        if not self.partial_path.exists():
            return None
        lines = self.partial_path.read_text(encoding="utf-8").split("\n")
        complete, torn = lines[:-1], lines[-1]  # text after the last newline was cut by a kill
        if torn:
            self.partial_path.write_text("".join(line + "\n" for line in complete), encoding="utf-8")
        header = json.loads(complete[0]) if complete else {}
        if header.get("fingerprint") != self.fingerprint:
            warnings.warn(f"{self.partial_path} belongs to another configuration; its records are discarded and "
                          f"the run starts afresh", stacklevel=3)
            return None
        done = {}
        for line_no, line in enumerate(complete[1:], start=2):
            record = json.loads(line)
            if record["id"] in done:
                raise InputError(self.partial_path, f"duplicate id {record['id']!r}", line=line_no, field="id")
            done[record["id"]] = record
        return done


def process_resumably(rows: Sequence[dict], store: RecordFile, process: Callable[[list[dict]], list[dict]],
                      chunk_size: int, progress: bool = True, desc: str = "items") -> list[dict]:
    """One record per row (in row order, keyed by `id`): `process(chunk)` makes the records of a chunk."""
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("rows must have unique ids")
    finished = store.finished()
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
