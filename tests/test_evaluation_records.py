"""The resumable prediction file: partial records, torn lines, fingerprints, the atomic finish."""

import json

import pytest

from repro.evaluation.records import RecordFile, process_resumably, read_records
from repro.io import InputError, fingerprint

CONFIG = {"refiner": {"refiner": "full_passages"}, "rows": "abc"}


def record(i: int, **extra) -> dict:
    return {"id": f"q{i}", "question": f"question {i}?", "golden_answers": ["a"], "evidence": "e", "prediction": "a",
            "em": 1.0, "f1": 1.0, "passage_tokens": 10, "evidence_tokens": 2, "cr": 5.0, **extra}


def test_fingerprint_ignores_key_order_and_sees_values():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


def test_partial_records_are_resumed_and_a_torn_last_line_is_dropped(tmp_path):
    path = tmp_path / "full.jsonl"
    store = RecordFile(path, CONFIG)
    assert store.resume() == {}
    store.append([record(0), record(1)])
    with open(store.partial_path, "a") as f:
        f.write('{"id": "q2", "quest')  # a kill in the middle of a write

    resumed = RecordFile(path, CONFIG).resume()
    assert list(resumed) == ["q0", "q1"] and resumed["q1"] == record(1)
    lines = store.partial_path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["fingerprint"] == store.fingerprint  # header + 2 records


def test_a_partial_file_of_another_configuration_is_discarded_with_a_warning(tmp_path):
    path = tmp_path / "full.jsonl"
    old = RecordFile(path, CONFIG)
    old.resume()
    old.append([record(0)])

    new = RecordFile(path, {**CONFIG, "rows": "changed"})
    with pytest.warns(UserWarning, match="another configuration"):
        assert new.resume() == {}
    header, *rest = new.partial_path.read_text().splitlines()
    assert json.loads(header)["fingerprint"] == new.fingerprint and rest == []


def test_finish_writes_the_final_file_and_manifest_then_drops_the_partial_file(tmp_path):
    path = tmp_path / "sub" / "full.jsonl"
    store = RecordFile(path, CONFIG)
    assert store.finished(["q0", "q1"]) is None
    store.resume()
    store.append([record(1)])
    store.finish([record(0), record(1)])

    assert not store.partial_path.exists()
    assert [r["id"] for r in read_records(path)] == ["q0", "q1"]
    manifest = json.loads(store.manifest_path.read_text())
    assert manifest["fingerprint"] == store.fingerprint and manifest["ids"] == ["q0", "q1"]
    assert RecordFile(path, CONFIG).finished(["q0", "q1"]) == [record(0), record(1)]
    assert RecordFile(path, {**CONFIG, "rows": "changed"}).finished(["q0", "q1"]) is None  # other config


def test_read_records_rejects_missing_fields_and_duplicate_ids(tmp_path):
    path = tmp_path / "bad.jsonl"
    incomplete = record(0)
    del incomplete["em"]
    path.write_text(json.dumps(incomplete) + "\n")
    with pytest.raises(InputError, match="bad.jsonl:1.*'em'"):
        read_records(path)
    path.write_text(json.dumps(record(0)) + "\n" + json.dumps(record(0)) + "\n")
    with pytest.raises(InputError, match="bad.jsonl:2: field 'id': duplicate"):
        read_records(path)


ROWS = [{"id": f"q{i}"} for i in range(5)]


class Counting:
    """A `process` that makes the records of a chunk and remembers which rows it ran."""

    def __init__(self):
        self.rows = []

    def __call__(self, chunk):
        self.rows += [row["id"] for row in chunk]
        return [record(int(row["id"][1:])) for row in chunk]


def finished_run(path) -> list[dict]:
    return process_resumably(ROWS, RecordFile(path, CONFIG), Counting(), chunk_size=2, progress=False)


def test_a_final_file_missing_its_last_line_is_recomputed_not_reused(tmp_path):
    path = tmp_path / "full.jsonl"
    records = finished_run(path)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))  # the last complete line is lost

    rerun = Counting()
    with pytest.warns(UserWarning, match=r"full.jsonl is not a complete run.*1 ids missing \('q4'\)"):
        assert process_resumably(ROWS, RecordFile(path, CONFIG), rerun, chunk_size=2, progress=False) == records
    assert rerun.rows == ["q4"] and read_records(path) == records


def test_a_damaged_line_of_the_final_file_is_named_and_only_its_item_recomputed(tmp_path):
    path = tmp_path / "full.jsonl"
    records = finished_run(path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2] + ['{"id": "q2", "em": \n'] + lines[3:]))

    rerun = Counting()
    with pytest.warns(UserWarning, match=r"full.jsonl is not a complete run of its rows \(line 3: invalid JSON"):
        assert process_resumably(ROWS, RecordFile(path, CONFIG), rerun, chunk_size=2, progress=False) == records
    assert rerun.rows == ["q2"]


def test_a_finished_file_is_reused_only_for_the_ids_of_the_current_rows(tmp_path):
    path = tmp_path / "full.jsonl"
    finished_run(path)
    assert RecordFile(path, CONFIG).finished([row["id"] for row in ROWS]) is not None
    with pytest.warns(UserWarning, match=r"1 ids missing \('q9'\)"):
        assert RecordFile(path, CONFIG).finished([*(row["id"] for row in ROWS), "q9"]) is None


def test_a_damaged_complete_line_of_the_partial_file_is_dropped_naming_file_and_line(tmp_path):
    path = tmp_path / "full.jsonl"
    store = RecordFile(path, CONFIG)
    store.resume()
    store.append([record(0)])
    with open(store.partial_path, "a") as f:
        f.write('{"id": "q1", "que\n')  # complete, but not a record
    store.append([record(2)])

    with pytest.warns(UserWarning, match=r"full.partial.jsonl: damaged records dropped.*line 3: invalid JSON"):
        resumed = RecordFile(path, CONFIG).resume()
    assert list(resumed) == ["q0", "q2"]
    assert len(store.partial_path.read_text().splitlines()) == 3  # header + the two intact records


def test_tables_refuse_a_file_shorter_than_its_manifest_naming_the_missing_ids(tmp_path):
    path = tmp_path / "full.jsonl"
    finished_run(path)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    with pytest.raises(InputError, match=r"full.jsonl: holds 3 records where full.manifest.json lists 5: "
                                         r"2 ids missing \('q3', 'q4'\)"):
        read_records(path)


def test_read_records_names_file_and_line_of_a_damaged_line(tmp_path):
    path = tmp_path / "full.jsonl"
    path.write_text(json.dumps(record(0)) + "\n" + '{"id": "q1"\n')
    with pytest.raises(InputError, match=r"full.jsonl:2: invalid JSON"):
        read_records(path)
