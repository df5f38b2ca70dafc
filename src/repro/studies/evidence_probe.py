"""The teacher-forced probe of the evidence experiment (issue #31, outcome (b) of docs/cpu-evidence.md): where does a
policy put its extract's probability, whatever the format it writes?

    items = probe_items(policy, rows, rollouts)   # per question: sentences, answer_sentences, answer_share, log_probs

After the policy's own greedy rollout up to and including its first `<extract>` (`probe_prefix`; a rollout without
one is cut after its first `</reason>`, or kept whole, and `<extract>` is appended), every sentence of the question's
passages (`repro.data.sentences.passage_sentences`) is scored as the extract: the total log-probability of
`sentence + "</extract>"` given GRPO's prompt (rendered as `repro.studies.heldout.score_policy` renders it) and the
prefix (`sentence_log_probs`). The outcome is the share of the normalised probability on the sentences that hold a
golden answer (DPR's `has_answer`, as the gate): `answer_share`, computed with log-sum-exp. A question whose passages
hold no sentence has no distribution to share: NaN. A policy that learned where the answer is moves probability onto
those sentences even when its free-running extract is cut, paraphrased or missing.

Tokenisation: prefix and continuation are tokenised together, as one text, which is how the model reads that text.
The scored tokens are those from the first one that reaches into the continuation (character offsets); the tokens
before it are context. A sentence that begins with punctuation can merge with the prefix's last `>` (`>"` is one
SmolLM2 token), and that token is then scored whole: it adds log p(`>` | `<extract`), about 0, to that sentence.

Cost: the prompt and prefix are prefilled once per question, continuing from the part the previous question shared
with it (the instruction of GRPO's template, `shared_prefill.PrefixCache`). The sentences then go through the model
packed into one row, each masked from the others and at its own positions, on those keys and values (no padding, no
copy of the cache per sentence). Nothing is sampled and all runs under `torch.no_grad`: the same inputs give the same
numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.special import logsumexp
from transformers import AutoModelForCausalLM, DynamicCache

from repro.data.answers import has_answer
from repro.data.sentences import passage_sentences
from repro.formulas import tags
from repro.generation.prompting import encode, load_tokenizer
from repro.generation.transformers_backend import resolve_dtype
from repro.train.grpo.data import extraction_row
from repro.train.speedups.shared_prefill import PrefixCache, common_prefix_length, supports

_REASON, _EXTRACT = tags.TAGS[:2]
REASON_CLOSE, EXTRACT_OPEN, EXTRACT_CLOSE = f"</{_REASON}>", f"<{_EXTRACT}>", f"</{_EXTRACT}>"
SEGMENT_TOKENS = 512  # sentence tokens packed into one forward pass on a question's keys and values


def probe_prefix(rollout: str) -> str:
    """The policy's text up to and including its first `<extract>`; without one, up to its first `</reason>`
    (inclusive; or all of it, without either) followed by `<extract>`, so that every question is probed whatever
    the format."""
    if EXTRACT_OPEN in rollout:
        return rollout[:rollout.index(EXTRACT_OPEN) + len(EXTRACT_OPEN)]
    if REASON_CLOSE in rollout:
        return rollout[:rollout.index(REASON_CLOSE) + len(REASON_CLOSE)] + EXTRACT_OPEN
    return rollout + EXTRACT_OPEN


def answer_share(log_probs: Sequence[float], holds_answer: Sequence[bool]) -> float:
    """Σ_{s holds an answer} p(s) / Σ_s p(s), from log-probabilities (log-sum-exp, no underflow); 0 when no
    sentence holds an answer, NaN without sentences."""
    lp, holds = np.asarray(log_probs, dtype=float), np.asarray(holds_answer, dtype=bool)
    if lp.shape != holds.shape:
        raise ValueError(f"{lp.size} log-probabilities but {holds.size} answer flags")
    if lp.size == 0:
        return float("nan")
    if not holds.any():
        return 0.0
    return float(np.exp(logsumexp(lp[holds]) - logsumexp(lp)))


def split_tokens(tokenizer, prefix: str, continuation: str) -> tuple[list[int], list[int]]:
    """The ids of `prefix + continuation` tokenised as one text (no special tokens), split before the first token
    that reaches into `continuation`: (context ids, scored ids)."""
    if not tokenizer.is_fast:
        raise ValueError(f"{tokenizer.name_or_path}: the probe needs a fast tokenizer (character offsets)")
    encoded = tokenizer(prefix + continuation, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoded["input_ids"]
    first = next(i for i, (_, end) in enumerate(encoded["offset_mapping"]) if end > len(prefix))
    return ids[:first], ids[first:]


def _chunks(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive indices whose lengths add up to at most `budget` (a longer one alone)."""
    chunks, size = [[]], 0
    for i, length in enumerate(lengths):
        if chunks[-1] and size + length > budget:
            chunks.append([])
            size = 0
        chunks[-1].append(i)
        size += length
    return chunks


def segment_mask(lengths: Sequence[int], cached: int, dtype: torch.dtype) -> torch.Tensor:
    """The additive attention mask (1, 1, n, cached + n) of segments of `lengths` packed into one row of n tokens
    after `cached` cached tokens: each token sees the cached tokens and the earlier tokens of its own segment."""
    segment = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    index = torch.arange(len(segment))
    own = (segment[:, None] == segment[None, :]) & (index[:, None] >= index[None, :])
    sees = torch.cat([torch.ones(len(segment), cached, dtype=torch.bool), own], dim=1)
    return torch.zeros(sees.shape, dtype=dtype).masked_fill(~sees, torch.finfo(dtype).min)[None, None]


@torch.no_grad()
def sentence_log_probs(model, tokenizer, prompt_ids: Sequence[int], prefix: str, sentences: Sequence[str],
                       prefixes: PrefixCache | None = None) -> list[float]:
    """log p(sentence + `</extract>` | prompt, prefix) for each sentence, prefix and continuation tokenised together
    (`split_tokens`). The context all sentences share, but its last token, is prefilled once (continued from
    `prefixes`, if given). Each sentence is then a segment: that last token, the rest of its own context (a token
    merged across the boundary), its scored tokens. Up to SEGMENT_TOKENS tokens of segments go through the model as
    one row of batch 1 on the shared keys and values, each segment at the positions it has in its own sequence and
    masked from the others (`segment_mask`): one full forward pass per sentence, without copying the cache."""
    if not prompt_ids:
        raise ValueError("the prompt encodes to no tokens")
    if not supports(model.config):
        raise ValueError(f"{model.config.name_or_path}: the probe reuses a full-attention cache; this model has "
                         f"sliding-window layers")
    if not sentences:
        return []
    splits = [split_tokens(tokenizer, prefix, sentence + EXTRACT_CLOSE) for sentence in sentences]
    contexts = [list(prompt_ids) + context for context, _ in splits]
    shared = min(common_prefix_length(contexts[0], c) for c in contexts) - 1  # >= 0: the prompt is non-empty
    past = (prefixes or PrefixCache()).prefill(model, contexts[0][:shared], model.device)
    segments = [context[shared:] + scored for context, (_, scored) in zip(contexts, splits)]
    scores = []
    for chunk in _chunks([len(s) for s in segments], SEGMENT_TOKENS):
        ids = [token for i in chunk for token in segments[i]]
        positions = [shared + j for i in chunk for j in range(len(segments[i]))]
        predicting, targets, counts, offset = [], [], [], 0  # for each scored token: the logits that predict it
        for i in chunk:
            first = len(contexts[i]) - shared  # the segment index of its first scored token, >= 1
            predicting += range(offset + first - 1, offset + len(segments[i]) - 1)
            targets += segments[i][first:]
            counts.append(len(segments[i]) - first)
            offset += len(segments[i])
        cache = DynamicCache(ddp_cache_data=past) if past else None
        logits = model(input_ids=torch.tensor([ids], device=model.device),
                       position_ids=torch.tensor([positions], device=model.device),
                       attention_mask=segment_mask([len(segments[i]) for i in chunk], shared,
                                                   model.dtype).to(model.device),
                       past_key_values=cache, use_cache=cache is not None).logits[0, predicting].float()
        token_lp = logits.gather(-1, torch.tensor(targets, device=model.device)[:, None])[:, 0] \
            - torch.logsumexp(logits, dim=-1)
        scores += [part.sum().item() for part in token_lp.double().split(counts)]
    return scores


def probe_items(policy: str, rows: Sequence[dict], rollouts: Sequence[str], dtype: str = "float32") -> pd.DataFrame:
    """One row per question (contexts rows, as `repro.studies.heldout.heldout_rows` gives them; `rollouts` the policy's
    greedy rollouts, one per row): `id`, the number of passage `sentences`, the `answer_sentences` among them, the
    policy's `answer_share` after its own rollout (NaN for a question whose passages hold no sentence) and each
    sentence's `log_probs`, in `passage_sentences` order. `dtype` as `models.inference` ("auto" included)."""
    if len(rows) != len(rollouts):
        raise ValueError(f"{len(rows)} questions but {len(rollouts)} rollouts")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # as the transformers engine
    tokenizer = load_tokenizer(policy)
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=resolve_dtype(dtype, device), device_map=device,
                                                 use_safetensors=True, trust_remote_code=False).eval()
    prefixes = PrefixCache()  # GRPO's instruction, which every question's prompt begins with, is prefilled once
    items = []
    for row, rollout in zip(rows, rollouts):
        sentences = [s.sentence for s in passage_sentences(row["passages"])]
        holds = [has_answer(s, row["golden_answers"]) for s in sentences]
        # the length unit only sets `passages_length`, which the probe does not read
        prompt_ids = encode(tokenizer, extraction_row(row, tokenizer, "words")["prompt"])
        prefixes.next_call()
        log_probs = sentence_log_probs(model, tokenizer, prompt_ids, probe_prefix(rollout), sentences, prefixes)
        items.append({"id": str(row["id"]), "sentences": len(sentences), "answer_sentences": int(sum(holds)),
                      "answer_share": answer_share(log_probs, holds), "log_probs": log_probs})
    return pd.DataFrame(items)
