"""RECOMP, extractive compressor (Xu, Shi, Choi, 2024, "RECOMP: Improving Retrieval-Augmented LMs with
Compression and Selective Augmentation", ICLR; code github.com/carriex/recomp).

The retrieved passages are split into sentences; a dual encoder embeds the query and every sentence (mean
pooling) and scores each sentence by the inner product with the query; the top-n sentences are kept and given
to the generator in their original order. RECOMP's released compressors (fangyuan/nq_extractive_compressor,
Contriever fine-tuned on NQ) load in sentence-transformers as mean pooling; the embedded default uses
all-MiniLM-L6-v2 (mean pooling, normalised: the inner product is the cosine).

    refiner = RecompExtractive(encoder, model_id, settings)
    refiner.refine(rows)          # one Refinement per contexts row

Choices (sentence splitting, n, one compressor for every dataset): docs/decisions.md D61, D64, D65.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from repro.assets import resolve
from repro.config import Profile, RecompConfig
from repro.data.corpus import split_contents
from repro.data.sentences import SENTENCE_BOUNDARY, selective_context_sentences
from repro.evaluation.refiners import Refinement, Refiner
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.io import model_fingerprint


def recomp_sentences(row: dict) -> list[str]:
    """The sentences of a row's passages, in passage order then text order (titles are not sentences), split as
    FlashRAG's RECOMP refiner splits them (`repro.data.sentences.selective_context_sentences`; D61)."""
    return [s for passage in row["passages"]
            for s in selective_context_sentences(split_contents(passage["contents"])[1])]


def top_sentences(scores: Sequence[float], n: int) -> list[int]:
    """Indices of the `n` highest-scoring sentences in their original order (ties: the earlier sentence)."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(ranked[:n])


class RecompExtractive(Refiner):
    """RECOMP's extractive compressor with a sentence-transformers dual encoder."""

    def __init__(self, encoder, model_id: str, settings: RecompConfig):
        self.encoder, self.model_id, self.settings = encoder, model_id, settings

    def sentence_scores(self, rows: Sequence[dict]) -> list[tuple[list[str], list[float]]]:
        """Per row: its sentences and their inner products with the question embedding."""
        sentences = [recomp_sentences(row) for row in rows]
        encode = dict(batch_size=self.settings.batch_size, convert_to_tensor=True, show_progress_bar=False)
        queries = self.encoder.encode([row["question"] for row in rows], **encode)
        flat = [s for row_sentences in sentences for s in row_sentences]
        embeddings = self.encoder.encode(flat, **encode) if flat else None
        scored, used = [], 0
        for query, row_sentences in zip(queries, sentences, strict=True):
            block = embeddings[used : used + len(row_sentences)] if row_sentences else torch.empty(0)
            scored.append((row_sentences, (block @ query).tolist() if row_sentences else []))
            used += len(row_sentences)
        return scored

    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        refinements = []
        for sentences, scores in self.sentence_scores(rows):
            keep = top_sentences(scores, self.settings.top_n)
            refinements.append(Refinement(" ".join(sentences[i] for i in keep)))
        return refinements

    def config(self) -> dict:
        return {"refiner": "recomp_extractive", "model": self.model_id, "top_n": self.settings.top_n,
                "sentence_boundary": SENTENCE_BOUNDARY, "score": "inner product"}


def load_encoder(model: str, device: str | None = None):
    """A sentence-transformers model (safetensors, no remote code); a plain encoder gets mean pooling."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model, device=device, trust_remote_code=False,
                               model_kwargs={"use_safetensors": True})


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> RecompExtractive:
    """The registry's builder (repro.registry): the dual encoder of baselines.recomp."""
    model = resolve(cfg.baselines.recomp.model, cfg.name)
    return RecompExtractive(load_encoder(model), model_fingerprint(model), cfg.baselines.recomp)
