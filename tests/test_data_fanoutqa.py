"""The embedded QA sets built from the packaged FanOutQA dev set and offline Wikipedia extracts."""

import collections

import pytest

from repro.assets import FANOUTQA_DEV, OVOS_SUMMARIES
from repro.data.answers import has_answer
from repro.data.corpus import PassageStore, ovos_pages, page_passages, split_contents, write_corpus
from repro.data.fanoutqa import distractor_rows, golden_answers, leaf_occurrences, open_domain_rows, read_fanoutqa
from repro.retrieval.bm25 import BM25Retriever

FRACTIONS = {"train": 0.5, "dev": 0.1, "test": 0.4}


@pytest.fixture(scope="module")
def questions():
    return read_fanoutqa(FANOUTQA_DEV.locate())


@pytest.fixture(scope="module")
def pages():
    return ovos_pages(OVOS_SUMMARIES.locate())


@pytest.mark.parametrize("answer, expected", [
    ("Asia ", ["Asia"]), (680000, ["680000"]), (6.0, ["6", "6.0"]), (61.6, ["61.6"]),
    (True, ["yes"]), (False, ["no"]), (["a", "b"], None), ({"x": 1}, None), ("", None),
])
def test_scalar_answers_become_golden_strings(answer, expected):
    assert golden_answers(answer) == expected


def test_open_domain_set_keeps_every_scalar_leaf_with_its_page_in_the_corpus(questions, pages):
    rows, occurrences = open_domain_rows(questions, pages, FRACTIONS)
    expected = [leaf for _, leaf in leaf_occurrences(questions)
                if golden_answers(leaf["answer"]) is not None and leaf["evidence"]["title"] in pages]
    assert occurrences == len(expected) == 509
    assert len(rows) == len({leaf["id"] for leaf in expected})  # recurring sub-questions kept once
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        meta = row["metadata"]
        assert meta["evidence_title"] in pages and meta["split"] in FRACTIONS
        assert meta["answer_in_page"] == has_answer(pages[meta["evidence_title"]], row["golden_answers"])
    assert 0 < sum(r["metadata"]["answer_in_page"] for r in rows) < len(rows)
    assert sum(len(r["metadata"]["parent_ids"]) for r in rows) == occurrences


def test_splits_do_not_depend_on_which_questions_are_present(questions, pages):
    rows, _ = open_domain_rows(questions, pages, FRACTIONS)
    fewer, _ = open_domain_rows(questions[::2], pages, FRACTIONS)
    split = {r["id"]: r["metadata"]["split"] for r in rows}
    assert all(split[r["id"]] == r["metadata"]["split"] for r in fewer)
    assert set(split.values()) == set(FRACTIONS)


def test_distractor_set_has_gold_passages_and_answer_free_distractors(tmp_path, questions, pages):
    rows, _ = open_domain_rows(questions, pages, FRACTIONS)
    rows = rows[:20]
    titles = {r["metadata"]["evidence_title"] for r in rows}
    keep = titles | set(list(pages)[:300])
    path = tmp_path / "passages.jsonl"
    write_corpus(path, page_passages({t: x for t, x in pages.items() if t in keep}, 100))
    store = PassageStore(path)
    bm25 = BM25Retriever.build(store, progress=False)
    search = lambda qs, k: bm25.search(qs, k)[1].tolist()  # noqa: E731
    built = distractor_rows(rows, store, search, paragraphs=10, min_distractors=8, seed=0)
    assert built == distractor_rows(rows, store, search, paragraphs=10, min_distractors=8, seed=0)
    padded = lambda qs, k: [[-1] + hits for hits in search(qs, k)]  # noqa: E731  (-1: no hit, as FAISS pads)
    assert distractor_rows(rows, store, padded, paragraphs=10, min_distractors=8, seed=0) == built
    gold_rows = store.rows_by_title()
    for row in built:
        paras = row["metadata"]["paragraphs"]
        gold = [p for p in paras if p["is_supporting"]]
        distractors = [p for p in paras if not p["is_supporting"]]
        n_gold = len(gold_rows[row["metadata"]["evidence_title"]])
        assert len(gold) == n_gold and len(distractors) == max(8, 10 - n_gold)
        assert all(p["title"] == row["metadata"]["evidence_title"] for p in gold)
        assert not any(has_answer(p["paragraph_text"], row["golden_answers"]) for p in distractors)
        assert len({p["id"] for p in paras}) == len(paras)
        assert [p["idx"] for p in paras] == list(range(len(paras)))
    positions = collections.Counter(next(p["idx"] for p in r["metadata"]["paragraphs"] if p["is_supporting"])
                                    for r in built)
    assert len(positions) > 1, "gold paragraphs are shuffled among the distractors, not always first"
    assert split_contents(store[0]["contents"])[0] in keep
