"""SeleCtx: Selective Context (Li, Dong, Guerin, Lin, 2023, "Compressing Context to Enhance Inference Efficiency
of Large Language Models", EMNLP; released code github.com/liyucheng09/Selective_Context).

A causal LM gives each token its self-information I(x_t) = -log p(x_t | x_<t); tokens are merged into lexical
units (LM tokens, phrases = spaCy tokens with noun chunks merged, or sentences) whose score aggregates their
tokens' (mean, as the released code; or the sum of the paper's additivity argument); units scoring below the
`reduce_ratio` percentile of all units of the context are removed and the rest kept in order.

    refiner = SelectiveContext(model, tokenizer, model_id, settings, nlp=spacy_pipeline, parser_id=...)
    refiner.refine(rows)          # one Refinement per contexts row

The context of an item is the Full document (one `Passage i (Title: t): text` line per passage, D1): sentences
never cross lines, the line breaks are kept, and the percentile is taken over every unit of the item.
Departures from the original and the choices it leaves open: docs/decisions.md D59-D61.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import torch

from repro.assets import resolve
from repro.config import Profile, SelectiveContextConfig
from repro.data.sentences import SENTENCE_BOUNDARY, collapse_whitespace, sentence_spans
from repro.evaluation.refiners import Refinement, Refiner
from repro.formulas.prompts import passages_document
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.generation.prompting import load_tokenizer
from repro.io import model_fingerprint

Span = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class TokenInformation:
    """The tokens of one text: character spans into the text and their self-information (nats)."""

    spans: list[Span]
    values: list[float]


def sequence_start_id(tokenizer) -> int:
    """The token each scored text is conditioned on first: BOS (GPT-2's <|endoftext|>, as the original
    prepends), else EOS for tokenizers without one (Qwen)."""
    token_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if token_id is None:
        raise ValueError("the tokenizer has neither a BOS nor an EOS token to start a sequence with")
    return token_id


@torch.no_grad()
def self_information(texts: Sequence[str], model, tokenizer, batch_size: int = 16) -> list[TokenInformation]:
    """I(x_t) = -log p(x_t | start, x_<t) for every token of every text. Texts are sorted by length and
    right-padded into batches of `batch_size`; padding never changes a causal LM's earlier positions."""
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    start = sequence_start_id(tokenizer)
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    results: list[TokenInformation | None] = [None] * len(ids)
    for first in range(0, len(order), batch_size):
        batch = order[first : first + batch_size]
        rows = [[start, *ids[i]] for i in batch]
        width = max(map(len, rows))
        input_ids = torch.tensor([row + [start] * (width - len(row)) for row in rows], device=model.device)
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], device=model.device)
        logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1].float()
        picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        values = (torch.logsumexp(logits, dim=-1) - picked).cpu()
        for row, i in enumerate(batch):
            results[i] = TokenInformation([tuple(o) for o in offsets[i]], values[row, : len(ids[i])].tolist())
    return results


def trimmed(span: Span, text: str) -> Span | None:
    """`span` without surrounding whitespace; None for a whitespace-only span."""
    start, end = span
    piece = text[start:end]
    if not piece.strip():
        return None
    return start + len(piece) - len(piece.lstrip()), start + len(piece.rstrip())


def unit_self_information(units: Sequence[Span], token_spans: Sequence[Span], token_values: Sequence[float],
                          aggregate: str = "mean") -> list[float]:
    """Each unit's self-information from the tokens overlapping it (spans sorted, non-overlapping, whitespace
    excluded). A token straddling k units gives each value/k, as the released `_unit_info`; a unit without
    tokens scores NaN and is never removed."""
    starts, ends = [s for s, _ in units], [e for _, e in units]
    parts: list[list[float]] = [[] for _ in units]
    for (start, end), value in zip(token_spans, token_values, strict=True):
        hit = range(bisect.bisect_right(ends, start), bisect.bisect_left(starts, end))
        for u in hit:
            parts[u].append(value / len(hit))
    combine = {"mean": np.mean, "sum": np.sum}[aggregate]
    return [float(combine(p)) if p else math.nan for p in parts]


def percentile_filter(scores: Sequence[float], reduce_ratio: float) -> list[bool]:
    """Which units are kept: those whose self-information is not below the `reduce_ratio` percentile of all
    scores (the original's `np.nanpercentile(self_info, mask_ratio * 100)` and `info < threshold` test)."""
    if not len(scores) or all(math.isnan(s) for s in scores):
        return [True] * len(scores)
    threshold = np.nanpercentile(scores, reduce_ratio * 100)
    return [not s < threshold for s in scores]


def kept_text(line: str, units: Sequence[Span], keep: Sequence[bool]) -> str:
    """The line with the removed units left out; each kept unit brings the whitespace before it, so a removed
    unit takes its own leading space with it (the original joins phrases carrying their leading space)."""
    pieces, previous_end = [], 0
    for (_, end), kept in zip(units, keep, strict=True):
        if kept:
            pieces.append(line[previous_end:end])
        previous_end = end
    return "".join(pieces).strip()


@dataclasses.dataclass
class _Line:
    text: str
    sentences: list[Span]
    tokens: list[Span] = dataclasses.field(default_factory=list)
    values: list[float] = dataclasses.field(default_factory=list)
    units: list[Span] = dataclasses.field(default_factory=list)


class SelectiveContext(Refiner):
    """SeleCtx over the Full document of each row. `nlp` is a spaCy pipeline with `merge_noun_chunks`
    (needed for unit "phrase"); `model_id` and `parser_id` fingerprint the LM and the pipeline."""

    def __init__(self, model, tokenizer, model_id: str, settings: SelectiveContextConfig, nlp=None,
                 parser_id: str | None = None):
        if settings.unit == "phrase" and nlp is None:
            raise ValueError("SeleCtx with unit 'phrase' needs a spaCy pipeline (nlp)")
        self.model, self.tokenizer, self.model_id, self.settings = model, tokenizer, model_id, settings
        self.nlp, self.parser_id = nlp, parser_id

    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        return [Refinement(text) for text in self.compress([passages_document(row) for row in rows])]

    def compress(self, documents: Sequence[str]) -> list[str]:
        """Each document with its lowest-self-information units removed."""
        lines = [[_Line(text, sentence_spans(text)) for text in map(collapse_whitespace, doc.split("\n")) if text]
                 for doc in documents]
        flat = [line for doc in lines for line in doc]
        self._score_tokens(flat)
        self._segment(flat)
        compressed = []
        for doc in lines:
            scores = [unit_self_information(line.units, line.tokens, line.values, self.settings.aggregate)
                      for line in doc]
            keep = percentile_filter([s for line_scores in scores for s in line_scores], self.settings.reduce_ratio)
            texts, used = [], 0
            for line in doc:
                texts.append(kept_text(line.text, line.units, keep[used : used + len(line.units)]))
                used += len(line.units)
            compressed.append("\n".join(t for t in texts if t))
        return compressed

    def score(self, texts: list[str]) -> list[TokenInformation]:
        """The self-information of every token of `texts` under the LM."""
        return self_information(texts, self.model, self.tokenizer, self.settings.batch_size)

    def _score_tokens(self, lines: list[_Line]) -> None:
        """Token spans (line coordinates, whitespace trimmed) and self-information, every text of the batch
        scored together: each sentence on its own (released code) or each whole line."""
        pieces = [(line, s, e) for line in lines
                  for s, e in (line.sentences if self.settings.condition_on == "sentence" else [(0, len(line.text))])]
        infos = self.score([line.text[s:e] for line, s, e in pieces])
        for (line, offset, _), info in zip(pieces, infos, strict=True):
            text = line.text
            for (s, e), value in zip(info.spans, info.values, strict=True):
                span = trimmed((s + offset, e + offset), text)
                if span is not None:
                    line.tokens.append(span)
                    line.values.append(value)

    def _segment(self, lines: list[_Line]) -> None:
        """The lexical units of each line."""
        unit = self.settings.unit
        if unit == "token":
            for line in lines:
                line.units = list(line.tokens)
        elif unit == "sentence":
            for line in lines:
                line.units = list(line.sentences)
        else:
            sentences = [(line, s) for line in lines for s, _ in line.sentences]
            docs = self.nlp.pipe([line.text[s:e] for line in lines for s, e in line.sentences])
            for (line, offset), doc in zip(sentences, docs, strict=True):
                line.units.extend((offset + t.idx, offset + t.idx + len(t.text)) for t in doc if t.text.strip())

    def config(self) -> dict:
        settings = dataclasses.asdict(self.settings)
        settings.pop("batch_size")  # batching changes the scores by float noise only
        settings.update(model=self.model_id, phrase_parser=self.parser_id if self.settings.unit == "phrase" else None)
        return {"refiner": "selective_context", "sentence_boundary": SENTENCE_BOUNDARY,
                "dtype": str(self.model.dtype), **settings}


def load_phrase_parser(path: str):
    """A spaCy pipeline that splits text into tokens with noun chunks merged (the original's phrase units)."""
    import spacy

    nlp = spacy.load(path, exclude=["ner"])
    nlp.add_pipe("merge_noun_chunks")
    return nlp


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> SelectiveContext:
    """The registry's builder (repro.registry): the causal LM of baselines.selective_context, and its phrase parser
    for phrase units; models load here."""
    from transformers import AutoModelForCausalLM

    from repro.generation.transformers_backend import resolve_dtype

    settings = cfg.baselines.selective_context
    model = resolve(settings.model, cfg.name)
    tokenizer = load_tokenizer(model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lm = AutoModelForCausalLM.from_pretrained(model, dtype=resolve_dtype(cfg.models.inference, device),
                                              device_map=device, use_safetensors=True, trust_remote_code=False)
    parser = resolve(settings.phrase_parser, cfg.name) if settings.unit == "phrase" else None
    return SelectiveContext(lm.eval(), tokenizer, model_fingerprint(model), settings,
                            nlp=load_phrase_parser(parser) if parser else None,
                            parser_id=model_fingerprint(parser) if parser else None)
