"""One method on one question set: contexts rows → refiner → QA generator → per-item records.

    records = evaluate(rows, refiner, answerer, "…/fanoutqa/full.jsonl", length_tokenizer=tok, tokenizer_id=ref)

Questions are processed in chunks; each finished chunk is appended to the partial file, so an interrupted run
resumes where it stopped and a rerun of the same configuration reuses the finished file (repro.evaluation.records).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from repro.data.answers import answer_in_passages
from repro.evaluation.answering import Answerer, read_prediction
from repro.evaluation.records import RecordFile, process_resumably
from repro.evaluation.refiners import Refinement, Refiner
from repro.formulas.metrics import compression_ratio, exact_match, f1, text_length
from repro.formulas.prompts import passages_document
from repro.io import fingerprint


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

    def process(chunk: list[dict]) -> list[dict]:
        started = time.perf_counter()
        refinements = refiner.refine(chunk)
        refined = time.perf_counter()
        generations = answerer.answer([row["question"] for row in chunk], [r.evidence for r in refinements])
        answered = time.perf_counter()
        return [make_record(row, refinement, generation, length_tokenizer,
                            (refined - started) / len(chunk), (answered - refined) / len(chunk))
                for row, refinement, generation in zip(chunk, refinements, generations, strict=True)]

    store = RecordFile(out_path, run_config(rows, refiner, answerer, tokenizer_id))
    return process_resumably(rows, store, process, chunk_size, progress, desc)
