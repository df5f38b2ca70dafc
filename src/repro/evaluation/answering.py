"""The QA generator M_G of Algorithm 1: o = M_G(q, e).

With evidence, the prompt is Table 11 with `{document}` = the evidence (D5); without (Zero), Table 12. Both are
the user turn after the fixed system message (D3); decoding is greedy. The prediction is the first non-empty
line of the output (D47): the LoRA generator answers in one short line and stops, an untuned model may go on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from repro.config import Profile
from repro.data import layout
from repro.formulas.prompts import CLOSED_BOOK_QA_TEMPLATE, RAG_QA_TEMPLATE, qa_messages
from repro.generation import GenerationParams, Generator


def qa_adapter(cfg: Profile) -> Path | None:
    """The LoRA QA generator's adapter when the profile answers with it, else None (the base model)."""
    if not cfg.evaluation.qa_adapter:
        return None
    path = layout.qa_adapter_dir(cfg.name)
    if not (path / "adapter_model.safetensors").exists():
        raise FileNotFoundError(f"{path}: no QA generator adapter yet (run the qa_generator stage)")
    return path


def read_prediction(output: str) -> str:
    """The first non-empty line of a generator output, stripped ("" if there is none)."""
    return next((line.strip() for line in output.splitlines() if line.strip()), "")


class Answerer:
    """Answers questions from evidence with a generator (the base model or the LoRA QA generator)."""

    def __init__(self, generator: Generator, model_id: str, params: GenerationParams):
        if params.do_sample:
            raise ValueError("the QA generator decodes greedily")
        self.generator, self.model_id, self.params = generator, model_id, params

    def answer(self, questions: Sequence[str], evidences: Sequence[str | None]) -> list[str]:
        """The raw generator outputs, one per question."""
        prompts = [qa_messages(q, e) for q, e in zip(questions, evidences, strict=True)]
        return self.generator.generate(prompts, self.params)

    def config(self) -> dict:
        decoding = dataclasses.asdict(self.params)
        decoding.pop("batch_size")
        return {"model": self.model_id, "templates": [RAG_QA_TEMPLATE, CLOSED_BOOK_QA_TEMPLATE], "decoding": decoding}
