"""The lead sentence: the first sentence of passage 1, the retriever's top passage, as the evidence; no model.

The sentences are the project's (`repro.data.sentences.passage_sentences`: the text, title line excluded, split after
".", "!" or "?", D141), as String Inclusion and the random-sentence extractor read them. An extractor that keeps no
more of the answer than the retriever's first sentence has learned nothing the ranking did not give: the honest floor
of Table 2's extractors, a column of the CPU profiles' Table 2 only (D209).

    refiner = LeadSentence()
    refiner.refine(rows)          # one Refinement per contexts row: passage 1's first sentence, "" if it has none
"""

from __future__ import annotations

from collections.abc import Sequence

from repro.config import Profile
from repro.data.sentences import PUNCTUATION_BOUNDARY, passage_sentences
from repro.evaluation.refiners import Refinement, Refiner
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool


def lead_sentence(passages: Sequence[dict]) -> str:
    """The first sentence of passage 1 ("" when it holds none); the other passages play no part."""
    found = passage_sentences(passages[:1])
    return found[0].sentence if found else ""


class LeadSentence(Refiner):
    """Passage 1's first sentence as the evidence (Table 11's `{document}`)."""

    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        return [Refinement(lead_sentence(row["passages"])) for row in rows]

    def config(self) -> dict:
        return {"refiner": "lead_sentence", "sentence_boundary": PUNCTUATION_BOUNDARY}


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> LeadSentence:
    """The registry's builder (repro.registry): no model, no settings."""
    return LeadSentence()
