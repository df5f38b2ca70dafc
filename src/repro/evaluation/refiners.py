"""Evidence refiners: the M_E of the paper's pipeline (§2.1, Algorithm 1), one interface for every method.

`refine(rows)` takes a batch of contexts rows (QA row + `passages` [{"id", "contents", "score"}], see
repro.data.layout) and returns one `Refinement` per row: `evidence` fills `{document}` of the generator's
Table 11 prompt (None: answer closed-book with Table 12), `raw` is the refiner's own output where it differs
from the evidence. `config()` is everything the output depends on; it enters the prediction file's
fingerprint, so a changed prompt, model or decoding setting never reuses old records.

- `ClosedBook`        Zero: no evidence (Table 12).
- `FullPassages`      Full: all top-k passages, formatted as in D1.
- `ChainOfThought`    CoT: Table 13's prompt; its whole output is the evidence (D46).
- `RationalExtractor` Table 14's prompt, generation stopped at `</extract>`, the evidence read with
                      repro.formulas.tags (D9): EviOmni's trained extractor, the released checkpoints, or an untrained
                      model prompted the same way ("prompted extraction").

The later baselines (SeleCtx, LLMLingua-2, RECOMP, FilCo, SEER) are further subclasses (repro.baselines).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence

from repro.formulas.prompts import (
    COT_TEMPLATE,
    EVIDENCE_EXTRACTION_TEMPLATE,
    EVIDENCE_STOP,
    chat_messages,
    cot_prompt,
    evidence_extraction_prompt,
    passages_document,
)
from repro.formulas.tags import extract_evidence
from repro.generation import GenerationParams, Generator


@dataclasses.dataclass(frozen=True)
class Refinement:
    evidence: str | None  # None: no document at all (closed-book)
    raw: str | None = None  # the refiner's output where it differs from the evidence


class Refiner(abc.ABC):
    """Turns contexts rows into the evidence the generator answers from."""

    @abc.abstractmethod
    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        """One refinement per row, in order."""

    @abc.abstractmethod
    def config(self) -> dict:
        """What the refinements depend on (JSON-able)."""


class ClosedBook(Refiner):
    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        return [Refinement(None) for _ in rows]

    def config(self) -> dict:
        return {"refiner": "closed_book"}


class FullPassages(Refiner):
    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        return [Refinement(passages_document(row)) for row in rows]

    def config(self) -> dict:
        return {"refiner": "full_passages"}


class PromptedRefiner(Refiner):
    """A model prompted with a template over (question, `document(row)`: by default the formatted passages);
    `read` maps its output to the evidence. `model_id` identifies the model (and adapter) in the configuration,
    e.g. a weights fingerprint."""

    name: str
    template: str

    def __init__(self, generator: Generator, model_id: str, params: GenerationParams):
        self.generator, self.model_id, self.params = generator, model_id, params

    @abc.abstractmethod
    def prompt(self, question: str, passages: str) -> str:
        """The filled template (the user turn)."""

    def read(self, output: str) -> str:
        """The evidence in one output: by default the whole output (CoT, FilCo, SEER)."""
        return output.strip()

    def document(self, row: dict) -> str:
        """The passages as the template's slot shows them."""
        return passages_document(row)

    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        prompts = [chat_messages(self.prompt(row["question"], self.document(row))) for row in rows]
        outputs = self.generator.generate(prompts, self.params)
        refinements = []
        for output in outputs:
            evidence = self.read(output)
            refinements.append(Refinement(evidence, None if evidence == output else output))
        return refinements

    def config(self) -> dict:
        decoding = dataclasses.asdict(self.params)
        decoding.pop("batch_size")  # forward batching does not change greedy outputs beyond padding noise
        return {"refiner": self.name, "template": self.template, "model": self.model_id, "decoding": decoding}


class ChainOfThought(PromptedRefiner):
    """CoT (Table 13): "Let's think step by step" over the passages; the reasoning is the evidence."""

    name, template = "chain_of_thought", COT_TEMPLATE

    def prompt(self, question: str, passages: str) -> str:
        return cot_prompt(question, passages)


class RationalExtractor(PromptedRefiner):
    """Table 14's prompt, stopped at `</extract>`; the evidence is the `<extract>` content (D9)."""

    name, template = "rational_extractor", EVIDENCE_EXTRACTION_TEMPLATE

    def __init__(self, generator: Generator, model_id: str, params: GenerationParams,
                 stop: tuple[str, ...] = (EVIDENCE_STOP,)):
        super().__init__(generator, model_id, dataclasses.replace(params, stop=stop, include_stop=True))

    def prompt(self, question: str, passages: str) -> str:
        return evidence_extraction_prompt(question, passages)

    def read(self, output: str) -> str:
        return extract_evidence(output)

