"""The evidence extractor inside the agent loop (Algorithm 2, lines 11-13).

For each search, the context-aware query q_c = q ⊕ y_t ⊕ q_s (original question, the step's reasoning,
the sub-query) fills the `Question:` slot of Table 14's prompt, the retrieved passages fill `Passages:`,
and the extractor reasons and extracts, stopping at `</extract>`. Its evidence (the `<extract>` content, read
leniently as in D9) is what the agent sees in place of the retrieved text; the rationale is discarded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from repro.formulas.prompts import EVIDENCE_STOP, chat_messages, evidence_extraction_prompt, format_passages
from repro.formulas.tags import extract_evidence
from repro.generation import GenerationParams, Generator

CONTEXT_QUERY_PARTS = ("{question}", "<think> {reasoning} </think>", "<search> {sub_query} </search>")


def compose_query(question: str, reasoning: str, sub_query: str) -> str:
    """q_c = q ⊕ y_t ⊕ q_s: one line each, the reasoning and sub-query inside the tags the agent wrote them
    in (so the extractor can tell the three apart); a step without reasoning leaves its line out."""
    parts = {"question": question.strip(), "reasoning": reasoning.strip(), "sub_query": sub_query.strip()}
    return "\n".join(template.format(**parts) for template, key in zip(CONTEXT_QUERY_PARTS, parts) if parts[key])


@dataclasses.dataclass(frozen=True)
class Extraction:
    query: str  # q_c
    output: str  # the extractor's text, rationale included (up to </extract>)
    evidence: str  # y_e, what replaces the retrieved documents


class EvidenceExtractor:
    """Runs `generator` (EviOmni, or any model prompted with Table 14) greedily on a batch of searches."""

    def __init__(self, generator: Generator, max_new_tokens: int = 768, batch_size: int = 8):
        self.generator = generator
        self.params = GenerationParams(max_new_tokens=max_new_tokens, stop=(EVIDENCE_STOP,), include_stop=True,
                                       batch_size=batch_size)

    def extract(self, queries: Sequence[str], documents: Sequence[Sequence[dict]]) -> list[Extraction]:
        """One generation call for all (q_c, passages) pairs of a turn."""
        if len(queries) != len(documents):
            raise ValueError(f"{len(queries)} queries but {len(documents)} passage lists")
        prompts = [chat_messages(evidence_extraction_prompt(q, format_passages(docs)))
                   for q, docs in zip(queries, documents)]
        outputs = self.generator.generate(prompts, self.params)
        return [Extraction(q, out, extract_evidence(out)) for q, out in zip(queries, outputs)]
