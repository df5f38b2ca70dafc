"""The teacher-forced probe of the evidence experiment (issue #31, outcome (b) of docs/cpu-evidence.md): where does a
policy put its extract's probability, whatever the format it writes?

    items = probe_items(policy, rows, rollouts)   # per question: sentences, answer_sentences, answer_share

After the policy's own greedy rollout up to its `<extract>` (`probe_prefix`), every sentence of the question's
passages (`repro.data.sentences.passage_sentences`) is scored as the extract: the total log-probability of its tokens
followed by `</extract>` (`sentence_log_probs`). The share is the normalised probability of the sentences that hold a
golden answer (DPR's `has_answer`, as the gate): `answer_share`. A policy that learned where the answer is moves
probability onto those sentences even when its free-running extract is cut, paraphrased or missing.

The context (GRPO's prompt through the chat template, then the prefix) is prefilled once per question and its keys
and values reused for batches of sentences. The prefix and each sentence are tokenised apart, as the model writes
them: a token ends at `<extract>`'s `>` and the sentence's tokens follow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.special import logsumexp
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

from repro.data.answers import has_answer
from repro.data.sentences import passage_sentences
from repro.generation.prompting import encode
from repro.train.data import extraction_row

EXTRACT_OPEN, EXTRACT_CLOSE, REASON_CLOSE = "<extract>", "</extract>", "</reason>"
SENTENCE_BATCH = 16  # sentences scored at once against one context's keys and values


def probe_prefix(rollout: str) -> str:
    """The policy's text up to and including its first `<extract>`; without one, up to its first `</reason>` (or all
    of it) followed by `<extract>`, so that every question is probed whatever the format."""
    if EXTRACT_OPEN in rollout:
        return rollout[:rollout.index(EXTRACT_OPEN) + len(EXTRACT_OPEN)]
    if REASON_CLOSE in rollout:
        return rollout[:rollout.index(REASON_CLOSE) + len(REASON_CLOSE)] + EXTRACT_OPEN
    return rollout + EXTRACT_OPEN


def answer_share(log_probs: Sequence[float], holds_answer: Sequence[bool]) -> float:
    """Σ_{s holds an answer} p(s) / Σ_s p(s), from log-probabilities (log-sum-exp); NaN without sentences."""
    lp, holds = np.asarray(log_probs, dtype=float), np.asarray(holds_answer, dtype=bool)
    if lp.size == 0:
        return math.nan
    if not holds.any():
        return 0.0
    return float(np.exp(logsumexp(lp[holds]) - logsumexp(lp)))


@torch.no_grad()
def sentence_log_probs(model, tokenizer, context_ids: Sequence[int], sentences: Sequence[str]) -> list[float]:
    """log p(sentence + `</extract>` | context) for each sentence: the context is prefilled once, and each batch of
    SENTENCE_BATCH sentences, padded on the right, attends to its keys and values."""
    device = model.device
    out = model(input_ids=torch.tensor([list(context_ids)], device=device), use_cache=True)
    first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # the distribution of each sentence's first token
    past = [(keys, values) for keys, values, *_ in out.past_key_values]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    scores = []
    for start in range(0, len(sentences), SENTENCE_BATCH):
        batch = [tokenizer(s + EXTRACT_CLOSE, add_special_tokens=False)["input_ids"]
                 for s in sentences[start:start + SENTENCE_BATCH]]
        width = max(map(len, batch))
        ids = torch.tensor([t + [pad] * (width - len(t)) for t in batch], device=device)
        real = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in batch], device=device)
        cache = DynamicCache(ddp_cache_data=[(k.expand(len(batch), -1, -1, -1), v.expand(len(batch), -1, -1, -1))
                                             for k, v in past])
        mask = torch.cat([real.new_ones(len(batch), len(context_ids)), real], dim=1)
        logits = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True).logits
        following = torch.log_softmax(logits[:, :-1].float(), dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
        token_scores = torch.cat([first[ids[:, 0]][:, None], following], dim=1) * real
        scores += token_scores.sum(dim=1).tolist()
    return scores


def probe_items(policy: str, rows: Sequence[dict], rollouts: Sequence[str], dtype: str = "float32") -> pd.DataFrame:
    """One row per question (contexts rows, as `repro.train.heldout.heldout_rows` gives them): `id`, the number of
    passage `sentences`, the `answer_sentences` among them, and the policy's `answer_share` after its own rollout
    (`probe_prefix`; NaN for a question whose passages hold no sentence)."""
    if len(rows) != len(rollouts):
        raise ValueError(f"{len(rows)} questions but {len(rollouts)} rollouts")
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=getattr(torch, dtype), use_safetensors=True,
                                                 trust_remote_code=False).eval()
    items = []
    for row, rollout in zip(rows, rollouts):
        sentences = [s.sentence for s in passage_sentences(row["passages"])]
        holds = [has_answer(s, row["golden_answers"]) for s in sentences]
        prompt = extraction_row(row, tokenizer, "tokens")["prompt"]
        context = encode(tokenizer, prompt) + tokenizer(probe_prefix(rollout), add_special_tokens=False)["input_ids"]
        log_probs = sentence_log_probs(model, tokenizer, context, sentences) if sentences else []
        items.append({"id": str(row["id"]), "sentences": len(sentences), "answer_sentences": int(sum(holds)),
                      "answer_share": answer_share(log_probs, holds)})
    return pd.DataFrame(items)
