"""The embedded QA sets: FanOutQA sub-questions answered by pages of the offline Wikipedia corpus.

FanOutQA (dev) decomposes each multi-hop question into single-hop leaf sub-questions, each with a gold
answer and the Wikipedia page that answers it. The leaves whose answer is a scalar (string, number or
yes/no) and whose evidence page is in the corpus form two sets:

- open-domain (stand-in for NQ/TriviaQA): question + golden answers; passages come from retrieval.
  `metadata.answer_in_page` records whether an answer string occurs in the page's passages (the corpus
  holds lead extracts only, so many answers are deeper in the page than the corpus goes).
- distractor setting (stand-in for 2WikiMultihopQA/MuSiQue): the same questions shipped with the gold
  page's passages plus hard distractors, in MuSiQue's `metadata.paragraphs` layout.

A sub-question that recurs under several parent questions (same FanOutQA id) is kept once.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator

from repro.data.answers import has_answer
from repro.data.corpus import PassageStore, split_contents
from repro.data.splits import split_of
from repro.io import InputError, read_json

SOURCE = "fanoutqa-dev"


def _leaves(node: dict) -> Iterator[dict]:
    children = node.get("decomposition") or []
    if not children:
        yield node
    for child in children:
        yield from _leaves(child)


def golden_answers(answer: object) -> list[str] | None:
    """Answer strings for a scalar FanOutQA answer; None for list/dict (fan-out) answers.
    Booleans become yes/no; a whole float also gets its integer form ("6.0" -> "6", "6.0")."""
    if isinstance(answer, bool):
        return ["yes" if answer else "no"]
    if isinstance(answer, float) and answer.is_integer():
        return [str(int(answer)), str(answer)]
    if isinstance(answer, (int, float)):
        return [str(answer)]
    if isinstance(answer, str) and answer.strip():
        return [answer.strip()]
    return None


def read_fanoutqa(path: str | os.PathLike) -> list[dict]:
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(path, f"expected a JSON list of questions, got {type(data).__name__}")
    return data


def leaf_occurrences(questions: list[dict], path: str | os.PathLike = "<fanoutqa>") -> Iterator[tuple[dict, dict]]:
    """(top-level question, leaf) for every leaf of every decomposition tree, duplicates included."""
    for item_no, question in enumerate(questions, start=1):
        for child in question.get("decomposition") or []:
            for leaf in _leaves(child):
                for field in ("id", "question", "answer", "evidence"):
                    if field not in leaf:
                        raise InputError(f"{path}[question {item_no}]", f"leaf {leaf.get('id')!r} has no {field}",
                                         field=field)
                yield question, leaf


def open_domain_rows(questions: list[dict], pages: dict[str, str], fractions: dict[str, float],
                     path: str | os.PathLike = "<fanoutqa>") -> tuple[list[dict], int]:
    """The open-domain set (one row per distinct leaf id, with its split in `metadata.split`) and the
    number of leaf occurrences it came from."""
    rows: dict[str, dict] = {}
    occurrences = 0
    for parent, leaf in leaf_occurrences(questions, path):
        answers = golden_answers(leaf["answer"])
        title = (leaf["evidence"] or {}).get("title")
        if answers is None or title not in pages:
            continue
        occurrences += 1
        if leaf["id"] in rows:
            rows[leaf["id"]]["metadata"]["parent_ids"].append(parent["id"])
            continue
        rows[leaf["id"]] = {
            "id": leaf["id"], "question": leaf["question"].strip(), "golden_answers": answers,
            "metadata": {"source": SOURCE, "split": split_of(leaf["id"], fractions),
                         "evidence_title": title, "answer_type": type(leaf["answer"]).__name__,
                         "answer_in_page": has_answer(pages[title], answers),
                         "parent_ids": [parent["id"]], "parent_question": parent["question"]}}
    return list(rows.values()), occurrences


def distractor_rows(rows: list[dict], store: PassageStore, search: Callable[[list[str], int], list[list[int]]],
                    paragraphs: int, min_distractors: int, seed: int, pool: int = 50) -> list[dict]:
    """Each open-domain row with its gold page's passages and distractors, shuffled (seeded per id).

    Distractors are the question's top BM25/dense hits (`search(questions, pool)` returns corpus rows)
    from other pages, skipping any passage that contains a golden answer, as HotpotQA drew its
    distractors by retrieval; there are max(min_distractors, paragraphs - #gold) of them.
    """
    rows_by_title = store.rows_by_title()
    hits = search([r["question"] for r in rows], pool)
    out = []
    for row, candidates in zip(rows, hits):
        title = row["metadata"]["evidence_title"]
        gold = rows_by_title[title]
        wanted = max(min_distractors, paragraphs - len(gold))
        distractors = []
        for cand in (c for c in candidates if c >= 0):  # -1: no hit (a corpus smaller than the pool)
            contents = store[cand]["contents"]
            if cand in gold or split_contents(contents)[0] == title or has_answer(contents, row["golden_answers"]):
                continue
            distractors.append(cand)
            if len(distractors) == wanted:
                break
        if len(distractors) < wanted:
            raise ValueError(f"question {row['id']}: only {len(distractors)} distractors among the top {pool} "
                             f"hits, {wanted} wanted; raise the pool size")
        order = [(r, True) for r in gold] + [(r, False) for r in distractors]
        random.Random(f"{seed}:{row['id']}").shuffle(order)
        paras = []
        for idx, (r, supporting) in enumerate(order):
            passage = store[r]
            p_title, text = split_contents(passage["contents"])
            paras.append({"idx": idx, "id": passage["id"], "title": p_title, "paragraph_text": text,
                          "is_supporting": supporting})
        out.append({**row, "metadata": {**row["metadata"], "paragraphs": paras}})
    return out
