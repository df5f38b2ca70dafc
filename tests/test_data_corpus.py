"""Passage format, word chunking, random access to a passages file and hashed splits."""

import json

import pytest

from repro.data.corpus import (PassageStore, chunk_words, first_passages, make_contents, page_passages,
                               split_contents, write_corpus)
from repro.data.splits import split_of
from repro.io import InputError


def test_chunks_are_consecutive_100_word_blocks():
    text = " ".join(f"w{i}" for i in range(250))
    chunks = chunk_words(text, 100)
    assert [len(c.split()) for c in chunks] == [100, 100, 50]
    assert " ".join(chunks) == text
    assert chunk_words(text, 300) == [text]
    with pytest.raises(ValueError):
        chunk_words(text, 0)


def test_contents_round_trip_in_search_r1_format():
    contents = make_contents("Mona Lisa", "The Mona Lisa is a portrait by Leonardo da Vinci.")
    assert contents == '"Mona Lisa"\nThe Mona Lisa is a portrait by Leonardo da Vinci.'
    assert split_contents(contents) == ("Mona Lisa", "The Mona Lisa is a portrait by Leonardo da Vinci.")


def test_page_passages_number_passages_across_pages():
    pages = {"A": " ".join(["a"] * 150), "B": "b b", "Empty": ""}
    passages = list(page_passages(pages, 100))
    assert [p["id"] for p in passages] == ["0", "1", "2"]
    assert [split_contents(p["contents"])[0] for p in passages] == ["A", "A", "B"]


def test_store_reads_rows_by_number_and_groups_pages(tmp_path):
    path = tmp_path / "passages.jsonl"
    write_corpus(path, page_passages({"A": " ".join(["a"] * 150), "B": "b b"}, 100))
    store = PassageStore(path)
    assert len(store) == 3
    assert store[2] == {"id": "2", "contents": '"B"\nb b'}
    assert [p["id"] for p in store] == ["0", "1", "2"]
    assert store.rows_by_title() == {"A": [0, 1], "B": [2]}
    assert [len(b) for b in store.contents_batches(2)] == [2, 1]


@pytest.mark.parametrize("line, field", [
    ({"contents": '"T"\nx'}, "id"),
    ({"id": "1"}, "contents"),
    ({"id": "1", "contents": ""}, "contents"),
    ({"id": True, "contents": "x"}, "id"),
])
def test_malformed_corpus_line_is_named(tmp_path, line, field):
    path = tmp_path / "passages.jsonl"
    path.write_text(json.dumps({"id": "0", "contents": '"T"\nx'}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError) as err:
        PassageStore(path)
    assert (err.value.line, err.value.field) == (2, field)


def test_hashed_splits_are_stable_and_follow_the_fractions():
    fractions = {"train": 0.5, "dev": 0.1, "test": 0.4}
    ids = [f"q{i}" for i in range(4000)]
    splits = [split_of(i, fractions) for i in ids]
    assert splits == [split_of(i, fractions) for i in ids]  # a pure function of the id
    shares = {s: splits.count(s) / len(ids) for s in fractions}
    assert all(abs(shares[s] - f) < 0.03 for s, f in fractions.items())
    assert split_of("q1", fractions, salt="other") in fractions
    with pytest.raises(ValueError, match="sum to 1"):
        split_of("q1", {"train": 0.5, "test": 0.4})


def test_first_passages_reads_only_the_slice(tmp_path):
    path = tmp_path / "wiki-18.jsonl"
    rows = [{"id": str(i), "contents": f'"Page {i // 2}"\npassage {i}'} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n{not json: the slice never reads this line\n")
    assert list(first_passages(path, 3)) == rows[:3]
    assert list(first_passages(path, 4)) == rows
    with pytest.raises(InputError, match=r"wiki-18.jsonl:6: invalid JSON"):  # blank line 5 skipped, line 6 read
        list(first_passages(path, 5))


def test_first_passages_of_a_short_file_name_the_key(tmp_path):
    path = tmp_path / "passages.jsonl"
    path.write_text(json.dumps({"id": "0", "contents": '"T"\nx'}) + "\n")
    with pytest.raises(InputError, match=r"holds 1 passages, fewer than the 2 asked for \(data\.corpus\.max_passages\)"):
        list(first_passages(path, 2))


def test_max_passages_needs_a_passages_file():
    from repro.config import ConfigError, CorpusConfig

    assert CorpusConfig("data/external/wiki-18.jsonl", "passages", max_passages=100_000).max_passages == 100_000
    with pytest.raises(ConfigError, match=r"data\.corpus\.max_passages: 5 needs format 'passages'"):
        CorpusConfig("embedded:ovos-wiki", "ovos-summaries", max_passages=5)
    with pytest.raises(ConfigError, match=r"data\.corpus\.max_passages: 0 needs"):
        CorpusConfig("data/external/wiki-18.jsonl", "passages", max_passages=0)
