"""The resumable prediction file: partial records, torn lines, fingerprints, the atomic finish."""

import json

import pytest

from repro.evaluation.records import RecordFile, read_records
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
    assert store.finished() is None
    store.resume()
    store.append([record(1)])
    store.finish([record(0), record(1)])

    assert not store.partial_path.exists()
    assert [r["id"] for r in read_records(path)] == ["q0", "q1"]
    manifest = json.loads(store.manifest_path.read_text())
    assert manifest["fingerprint"] == store.fingerprint and manifest["records"] == 2
    assert RecordFile(path, CONFIG).finished() == [record(0), record(1)]
    assert RecordFile(path, {**CONFIG, "rows": "changed"}).finished() is None  # other config: not reused


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
