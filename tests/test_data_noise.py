"""Irrelevant-passage injection for the robustness study."""

import pytest

from repro.data.answers import has_answer
from repro.data.corpus import PassageStore, make_contents, write_corpus
from repro.data.noise import add_noise


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    texts = [f"Passage number {i} about topic {i % 7}." for i in range(60)]
    texts[5] = "The Eiffel Tower was completed in 1889."
    texts[17] = "Construction ended in 1889 in Paris."
    write_corpus(path, ({"id": str(i), "contents": make_contents(f"T{i}", t)} for i, t in enumerate(texts)))
    return PassageStore(path)


def _row(store):
    retrieved = [{**store[i], "score": 1.0 - i / 10} for i in (5, 0, 1, 2, 3)]
    return {"id": "q1", "question": "When was the Eiffel Tower completed?", "golden_answers": ["1889"],
            "metadata": {}, "passages": retrieved}


def test_noise_never_contains_an_answer_nor_repeats_a_passage(store):
    row = _row(store)
    for k in (0, 2, 4, 6, 8):
        noisy = add_noise(row, store, k, seed=0)
        assert noisy["passages"][:5] == row["passages"]  # appended after the retrieved passages
        noise = noisy["passages"][5:]
        assert len(noise) == k and all(p["noise"] for p in noise)
        assert not any(has_answer(p["contents"], ["1889"]) for p in noise)
        assert len({p["id"] for p in noisy["passages"]}) == 5 + k
        assert noisy["metadata"]["noise_passages"] == k


def test_noise_is_seeded_and_nested_across_k(store):
    row = _row(store)
    k8 = add_noise(row, store, 8, seed=3)["passages"][5:]
    assert add_noise(row, store, 8, seed=3)["passages"][5:] == k8
    assert add_noise(row, store, 4, seed=3)["passages"][5:] == k8[:4]
    assert add_noise(row, store, 8, seed=4)["passages"][5:] != k8


def test_insertion_positions(store):
    row = _row(store)
    prepended = add_noise(row, store, 3, seed=0, position="prepend")["passages"]
    assert prepended[3:] == row["passages"] and all(p.get("noise") for p in prepended[:3])
    mixed = add_noise(row, store, 6, seed=0, position="random")["passages"]
    assert [p for p in mixed if not p.get("noise")] == row["passages"]  # retrieved order kept
    with pytest.raises(ValueError, match="position"):
        add_noise(row, store, 2, seed=0, position="middle")


def test_impossible_request_fails_loudly(store):
    with pytest.raises(ValueError, match="answer-free"):
        add_noise(_row(store), store, 200, seed=0)
