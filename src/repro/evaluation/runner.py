"""One method on one question set: contexts rows → refiner → QA generator → per-item records.

    records = evaluate(rows, refiner, answerer, "…/fanoutqa/full.jsonl", length_tokenizer=tok, tokenizer_id=ref)

Questions are processed in chunks; each finished chunk is appended to the partial file, so an interrupted run
resumes where it stopped and a rerun of the same configuration reuses the finished file (repro.evaluation.records).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from tqdm.auto import tqdm

from repro.data.answers import has_answer
from repro.data.corpus import split_contents
from repro.evaluation.answering import Answerer, read_prediction
from repro.evaluation.records import RecordFile, fingerprint
from repro.evaluation.refiners import Refinement, Refiner, passages_document
from repro.metrics import compression_ratio, exact_match, f1, text_length


def answer_in_passages(row: dict) -> bool:
    """Whether a passage text (title line excluded) contains a golden answer: DPR's has_answer, as in Table 8."""
    return any(has_answer(split_contents(p["contents"])[1], row["golden_answers"]) for p in row["passages"])


def lengths(text: str, tokenizer) -> tuple[int, int]:
    """(tokens of `tokenizer`, whitespace words) of a text."""
    return text_length(text, "tokens", tokenizer), text_length(text, "words")


def make_record(row: dict, refinement: Refinement, generation: str, tokenizer, refine_seconds: float,
                answer_seconds: float) -> dict:
    """The per-item record (fields documented in repro.evaluation.records)."""
    prediction = read_prediction(generation)
    passage_tokens, passage_words = lengths(passages_document(row), tokenizer)
    evidence_tokens = evidence_words = cr = None
    if refinement.evidence is not None:
        evidence_tokens, evidence_words = lengths(refinement.evidence, tokenizer)
        cr = compression_ratio(passage_tokens, evidence_tokens)
    return {
        "id": row["id"], "question": row["question"], "golden_answers": row["golden_answers"],
        "evidence": refinement.evidence, "raw_output": refinement.raw, "generation": generation,
        "prediction": prediction, "em": exact_match(prediction, row["golden_answers"]),
        "f1": f1(prediction, row["golden_answers"]),
        "answer_in_passages": answer_in_passages(row),
        "passage_tokens": passage_tokens, "passage_words": passage_words,
        "evidence_tokens": evidence_tokens, "evidence_words": evidence_words, "cr": cr,
        "refine_seconds": refine_seconds, "answer_seconds": answer_seconds,
    }


def run_config(rows: Sequence[dict], refiner: Refiner, answerer: Answerer, tokenizer_id: str) -> dict:
    """Everything a prediction file depends on: the questions and their passages, the refiner, the generator
    and the tokenizer that measures lengths."""
    return {"rows": fingerprint(list(rows)), "refiner": refiner.config(), "answerer": answerer.config(),
            "length_tokenizer": tokenizer_id}


def evaluate(rows: Sequence[dict], refiner: Refiner, answerer: Answerer, out_path: str | os.PathLike, *,
             length_tokenizer, tokenizer_id: str, chunk_size: int = 64, progress: bool = True,
             desc: str = "evaluate") -> list[dict]:
    """Records of every row (in row order), written to `out_path`; finished records of the same configuration
    are reused, an interrupted run resumes."""
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("rows must have unique ids")
    store = RecordFile(out_path, run_config(rows, refiner, answerer, tokenizer_id))
    finished = store.finished()
    if finished is not None:
        return finished
    done = store.resume()
    todo = [row for row in rows if row["id"] not in done]
    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc=desc, unit="q", disable=not progress) as bar:
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start : start + chunk_size]
            started = time.perf_counter()
            refinements = refiner.refine(chunk)
            refined = time.perf_counter()
            generations = answerer.answer([row["question"] for row in chunk], [r.evidence for r in refinements])
            answered = time.perf_counter()
            records = [make_record(row, refinement, generation, length_tokenizer,
                                   (refined - started) / len(chunk), (answered - refined) / len(chunk))
                       for row, refinement, generation in zip(chunk, refinements, generations, strict=True)]
            store.append(records)
            done.update((record["id"], record) for record in records)
            bar.update(len(chunk))
    store.finish([done[i] for i in ids])
    return [done[i] for i in ids]
