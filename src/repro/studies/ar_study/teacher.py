"""Teacher synthesis (§2.2): Table 14 responses `<reason>…</reason><extract>…</extract><answer>…</answer>` for
sampled training questions, with a verdict per response; the incorrect ones are filtered out.

    records = synthesize(cfg)            # one record per question, resumable (data/<profile>/ar_study/teacher/)
    kept = kept_records(records)         # the questions with a correct, usable response

The teacher is any backend of repro.generation: the paper profiles reach DeepSeek-R1 on an OpenAI-compatible
endpoint (or, switched, a local model on vLLM's engine or a `vllm serve` on 127.0.0.1: D140), `tiny` runs the
embedded SmolLM2-135M-Instruct locally. Its model lives in a `ModelPool` that `synthesize` closes when it returns.
A 135M model never writes Table 14's tags by itself, so a local teacher can be *scaffolded* (`teacher.scaffold`):
the tags are prefilled into the assistant turn one part at a time and the model writes each part's content (reason,
then extract, then answer). The `heuristic` backend is no model: a String Inclusion oracle (the passage sentence
holding a golden answer) for the `ci` profile, whose random model writes nothing usable, so that the pipeline's
mechanics run end to end.

A response is kept (D77) when it has a non-empty `<reason>`, a non-empty `<extract>` and an `<answer>` that is
correct: by default the golden answer occurs in it (answer recall of the answer, FlashRAG's `acc`), or exact match
with `correct_if: em`; no part may contain a stray tag. A reasoning model's `<think>…</think>` block, when the
server returns it inside the content, is removed first. With several samples per question the first kept one is
used (D78).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from repro.assets import resolve
from repro.config import ArTeacherConfig, Profile
from repro.data import layout
from repro.data.answers import answer_in_passages, first_answer_sentence
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.evaluation.records import RecordFile, process_resumably
from repro.formulas.metrics import answer_recall, exact_match
from repro.formulas.prompts import (EVIDENCE_EXTRACTION_TEMPLATE, chat_messages, evidence_extraction_prompt,
                                    passages_document, render_chat)
from repro.formulas.tags import extract_answer, extract_evidence, extract_rationale
from repro.generation import GenerationParams, Generator
from repro.generation.pool import ModelPool
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint
from repro.studies.ar_study.paths import teacher_path, teacher_requests_path

KEPT = "kept"
VERDICTS = (KEPT, "no_reason", "no_extract", "no_answer", "malformed", "wrong_answer")
TAG_STRINGS = ("<reason>", "</reason>", "<extract>", "</extract>", "<answer>", "</answer>")
TEACHER_FIELDS = ("id", "question", "golden_answers", "outputs", "verdicts", "kept_sample")
SCAFFOLD = ("<reason>", "</reason><extract>", "</extract><answer>")  # prefilled before each part


def extraction_messages(row: dict) -> list[dict[str, str]]:
    """Table 14 over the question's formatted passages (D1, D3): the teacher's prompt, both SFT sets' prompt and
    the prompt both variants extract with."""
    return chat_messages(evidence_extraction_prompt(row["question"], passages_document(row)))


def without_thinking(output: str) -> str:
    """The response after a reasoning model's `</think>` (DeepSeek-R1 served without a reasoning parser)."""
    return output.split("</think>", 1)[1] if "</think>" in output else output


def teacher_verdict(output: str, golden_answers: list[str], correct_if: str = "answer_recall") -> str:
    """Why a teacher response is unusable, or KEPT (D77). The parts are read leniently (repro.formulas.tags, D9), but
    `<extract>` and `<answer>` must be present: the whole text of an untagged output is no evidence here."""
    output = without_thinking(output)
    if not extract_rationale(output):
        return "no_reason"
    if "<extract>" not in output or not extract_evidence(output):
        return "no_extract"
    after_extract = output.split("</extract>", 1)[-1]
    if "<answer>" not in after_extract:
        return "no_answer"
    answer = extract_answer(after_extract)
    parts = (extract_rationale(output), extract_evidence(output), answer)
    if any(tag in part for part in parts for tag in TAG_STRINGS):
        return "malformed"  # a stray tag inside a part would end up in the SFT targets
    score = answer_recall if correct_if == "answer_recall" else exact_match
    return KEPT if score(answer, golden_answers) else "wrong_answer"


def string_inclusion_response(row: dict) -> str:
    """The `heuristic` teacher (ci only, no model): the first passage sentence that holds a golden answer becomes
    the evidence, the answer is that golden answer; without one, the response has an empty `<extract>`."""
    found = first_answer_sentence(row["passages"], row["golden_answers"])
    if found is None:
        return f"<reason>The question asks: {row['question']} No passage states the answer.</reason><extract></extract>"
    reason = f"The question asks: {row['question']} Passage {found.passage} ({found.title}) states: {found.sentence}"
    return f"<reason>{reason}</reason><extract>{found.sentence}</extract><answer>{found.answer}</answer>"


def teacher_rows(cfg: Profile) -> list[dict]:
    """The seeded sample of training questions the teacher answers (contexts rows of `teacher.dataset`)."""
    teacher = cfg.ar_study.teacher
    rows = read_contexts(layout.contexts_path(cfg, teacher.dataset, teacher.split))
    if teacher.require_answer_in_passages:
        rows = [row for row in rows if answer_in_passages(row)]
    return sample_rows(rows, teacher.questions, cfg.seed)


def teacher_params(teacher: ArTeacherConfig, seed: int) -> GenerationParams:
    return GenerationParams(max_new_tokens=teacher.max_new_tokens, do_sample=teacher.do_sample,
                            temperature=teacher.temperature, top_p=teacher.top_p, seed=seed, n=teacher.samples,
                            batch_size=teacher.batch_size)


def scaffolded_responses(generator: Generator, tokenizer, rows: list[dict], params: GenerationParams,
                         budgets: Sequence[int]) -> list[list[str]]:
    """`params.n` responses per row whose tags are prefilled and whose contents the model writes: each part is
    generated (up to its token budget or any tag the model starts to write) as the continuation of the assistant
    turn so far; the first part draws the n samples, the later ones continue each sample once."""
    n = params.n
    turns = [render_chat(tokenizer, extraction_messages(row)) for row in rows for _ in range(n)]  # one per response
    responses = [""] * len(turns)
    for part, (opening, budget) in enumerate(zip(SCAFFOLD, budgets, strict=True)):
        responses = [response + opening for response in responses]
        step = dataclasses.replace(params, max_new_tokens=budget, stop=TAG_STRINGS, include_stop=False)
        if part == 0:
            texts = generator.generate([turn + opening for turn in turns[::n]], step)
        else:
            step = dataclasses.replace(step, n=1, seed=params.seed + part)
            texts = generator.generate([turn + response for turn, response in zip(turns, responses)], step)
        responses = [response + text.strip() for response, text in zip(responses, texts, strict=True)]
    return [[response + "</answer>" for response in responses[i * n : (i + 1) * n]] for i in range(len(rows))]


def make_record(row: dict, outputs: list[str], correct_if: str) -> dict:
    """The teacher record of one question: every sample, its verdict, and the parts of the first kept one."""
    verdicts = [teacher_verdict(output, row["golden_answers"], correct_if) for output in outputs]
    kept = verdicts.index(KEPT) if KEPT in verdicts else None
    parts = {"rationale": None, "evidence": None, "answer": None}
    if kept is not None:
        output = without_thinking(outputs[kept])
        parts = {"rationale": extract_rationale(output), "evidence": extract_evidence(output),
                 "answer": extract_answer(output.split("</extract>", 1)[-1])}
    return {"id": row["id"], "question": row["question"], "golden_answers": row["golden_answers"],
            "outputs": outputs, "verdicts": verdicts, "kept_sample": kept, **parts}


def teacher_pool(teacher: ArTeacherConfig) -> ModelPool:
    """Where the teacher's model lives while it answers: closing the pool ends a vLLM engine before the study's
    LoRA runs start (D94, D140); a teacher takes no adapter, so its engine has no LoRA slots (`adapters_on`). The
    openai backend's pool holds a client of the served model."""
    return ModelPool(teacher.backend, progress=False, options=teacher.options)


class Teacher:
    """Responses of the configured teacher for contexts rows, `samples` per row; its model comes from `pool`."""

    def __init__(self, cfg: Profile, pool: ModelPool, request_cache: Path | None = None):
        self.teacher, self.pool = cfg.ar_study.teacher, pool
        self.request_cache = request_cache  # the openai backend keeps finished requests there (D106)
        self.params = teacher_params(self.teacher, cfg.seed)
        self.model = None if self.teacher.backend == "heuristic" else resolve(self.teacher.model, cfg.name)
        self.model_id = "string-inclusion oracle" if self.model is None else model_fingerprint(self.model)
        self._generator = None  # loaded on first use: a finished run needs no model

    def respond(self, rows: list[dict]) -> list[list[str]]:
        n = self.teacher.samples
        if self.model is None:
            return [[string_inclusion_response(row)] * n for row in rows]
        if self._generator is None:
            cache = (self.teacher.backend == "openai" and self.request_cache is not None
                     and "cache_path" not in self.teacher.options)
            options = {"cache_path": str(self.request_cache)} if cache else None
            self._generator, _ = self.pool.get(self.model, options=options)
        if self.teacher.scaffold is not None:
            tokenizer = load_tokenizer(self.model)
            return scaffolded_responses(self._generator, tokenizer, rows, self.params, self.teacher.scaffold)
        outputs = self._generator.generate([extraction_messages(row) for row in rows], self.params)
        return [outputs[i * n : (i + 1) * n] for i in range(len(rows))]

    def config(self, rows: list[dict]) -> dict:
        """What the teacher records depend on (the endpoint's address and key are not part of it)."""
        decoding = dataclasses.asdict(self.params)
        decoding.pop("batch_size")
        return {"rows": fingerprint(rows), "backend": self.teacher.backend, "model": self.model_id,
                "template": EVIDENCE_EXTRACTION_TEMPLATE, "decoding": decoding, "correct_if": self.teacher.correct_if,
                "scaffold": self.teacher.scaffold and {"budgets": self.teacher.scaffold, "parts": SCAFFOLD,
                                                        "stops": TAG_STRINGS}}


def synthesize(cfg: Profile, progress: bool = True) -> list[dict]:
    """The teacher record of every sampled training question (reused when the configuration is unchanged); the
    teacher's model is released when it returns."""
    if cfg.ar_study is None:
        raise ValueError(f"profile {cfg.name} has no ar_study section")
    requests = teacher_requests_path(cfg.name)
    rows = teacher_rows(cfg)
    if not rows:
        raise ValueError(f"no training question for the teacher in {cfg.ar_study.teacher.dataset}")
    correct_if = cfg.ar_study.teacher.correct_if
    with teacher_pool(cfg.ar_study.teacher) as pool:
        teacher = Teacher(cfg, pool, request_cache=requests)
        store = RecordFile(teacher_path(cfg.name), teacher.config(rows), required=TEACHER_FIELDS)

        def process(chunk: list[dict]) -> list[dict]:
            return [make_record(row, outputs, correct_if) for row, outputs in zip(chunk, teacher.respond(chunk))]

        records = process_resumably(rows, store, process, cfg.ar_study.teacher.chunk_size, progress,
                                    desc="teacher")
    requests.unlink(missing_ok=True)  # every finished request is in the records now
    return records


def kept_records(records: list[dict]) -> list[dict]:
    return [r for r in records if r["kept_sample"] is not None]


def verdict_counts(records: list[dict]) -> dict[str, int]:
    """How the teacher's responses (every sample) were judged, plus the questions kept (at most one each)."""
    counts = {verdict: 0 for verdict in VERDICTS}
    for record in records:
        for verdict in record["verdicts"]:
            counts[verdict] += 1
    return {"questions": len(records), "responses": sum(counts.values()), **counts,
            "questions_kept": len(kept_records(records))}
