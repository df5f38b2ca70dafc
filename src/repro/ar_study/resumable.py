"""Chunked, resumable per-item processing into a `RecordFile` (repro.evaluation.records): finished chunks are
appended to the partial file, a rerun of the same configuration reuses the finished file."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tqdm.auto import tqdm

from repro.evaluation.records import RecordFile


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
