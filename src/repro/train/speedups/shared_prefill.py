"""Generation that prefills a prefix shared by several prompts once (D145).

A GRPO generation batch holds every prompt G times, and the o_r contexts of a group's rollouts all begin with that
prompt (Eq. 4 masks only the evidence, which comes after it). transformers' `generate` prefills each row in full.
`generate_sharing_prefixes` groups the rows by shared prefix (`prefix_groups`), prefills each group's prefix once at
batch size 1 and continues every row in one `generate` call from a KV cache in which the row holds its group's
prefix (left-padded to the longest group prefix), followed by the rest of its prompt (padded in between, masked).
Position ids come from the attention mask, so each row sees its tokens at the positions of a full prefill. Under
causal attention a row's keys and values depend only on its own earlier tokens and masked padding adds nothing, so
this is the computation of a full prefill, up to float rounding: the same method, fewer FLOPs. A `PrefixCache` also
carries prefixes from one call to the next while the weights stay the same: the o_r contexts of a step begin with the
prompt that its rollouts prefilled (D163).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache, GenerationConfig
from transformers.cache_utils import DynamicLayer

GROUP_OVERHEAD_TOKENS = 16  # the cost of one more batch-1 prefill call, in prompt tokens (a guess; small either way)


def supports(config) -> bool:
    """True when transformers caches every layer of the model in full (no sliding window), which the padded cache of
    `generate_sharing_prefixes` assumes."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefix_groups(prompts: Sequence[Sequence[int]], overhead: int = GROUP_OVERHEAD_TOKENS
                  ) -> list[tuple[list[int], int]]:
    """Groups of row indices with the length of the prefix each group prefills once, chosen among runs of the
    lexicographically sorted prompts to minimise the tokens prefilled (each prefix once, every row's remainder, plus
    `overhead` per group). A prefix leaves every row of its group at least one token to feed `generate`."""
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    order = sorted(range(len(prompts)), key=lambda i: list(prompts[i]))
    adjacent = [common_prefix_length(prompts[a], prompts[b]) for a, b in zip(order, order[1:])]
    best = [0.0] + [float("inf")] * len(order)  # best[e]: cost of grouping order[:e]
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        shared, shortest, total = None, None, 0
        for start in range(end - 1, -1, -1):
            length = len(prompts[order[start]])
            total += length
            shortest = length if shortest is None else min(shortest, length)
            if start < end - 1:
                shared = adjacent[start] if shared is None else min(shared, adjacent[start])
            prefix = min(shortest if shared is None else shared, shortest - 1)
            cost = best[start] + prefix + (total - prefix * (end - start)) + overhead
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], len(order)
    while end > 0:
        start = cut[end]
        rows = order[start:end]
        shared = min((common_prefix_length(prompts[rows[0]], prompts[r]) for r in rows[1:]), default=None)
        shortest = min(len(prompts[r]) for r in rows)
        groups.append((rows, min(shortest if shared is None else shared, shortest - 1)))
        end = start
    return groups[::-1]


KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values) of one sequence, batch 1


def _prefill(model, prefix: Sequence[int], device, past: KV | None = None) -> KV:
    """Per layer (keys, values) of one prefix, batch 1 ([] for an empty prefix); with `past`, the keys and values of
    the prefix's first tokens, only the others run."""
    done = past[0][0].shape[-2] if past else 0
    if len(prefix) == done:
        return past or []
    cache = DynamicCache(ddp_cache_data=past) if past else None
    out = model(input_ids=torch.tensor([list(prefix[done:])], device=device), past_key_values=cache, use_cache=True,
                logits_to_keep=1)
    return [(keys, values) for keys, values, *_ in out.past_key_values]


class PrefixCache:
    """The keys and values of the prefixes one model prefilled in its last two `generate_sharing_prefixes` calls: a
    prefix that begins with one of them prefills only the rest. Valid while the model's weights stay the same;
    `clear` when they change."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self._previous: dict[tuple[int, ...], KV] = {}
        self._current: dict[tuple[int, ...], KV] = {}

    def next_call(self) -> None:
        self._previous, self._current = self._current, {}

    def prefill(self, model, prefix: Sequence[int], device) -> KV:
        """`_prefill` of `prefix`, continued from the cached prefix that shares the most tokens with it."""
        stored = {**self._previous, **self._current}
        shared, kv = max(((common_prefix_length(key, prefix), kv) for key, kv in stored.items()),
                         key=lambda item: item[0], default=(0, None))
        past = [(k[..., :shared, :], v[..., :shared, :]) for k, v in kv] if shared else None
        kv = _prefill(model, prefix, device, past)
        if prefix:
            self._current[tuple(prefix)] = kv
        return kv


def _left_pad(x: torch.Tensor, length: int) -> torch.Tensor:
    """Zeros before x along the sequence dimension (-2) up to `length`."""
    pad = length - x.shape[-2]
    return x if pad == 0 else torch.cat([x.new_zeros(*x.shape[:-2], pad, x.shape[-1]), x], dim=-2)


def generate_sharing_prefixes(model, prompts: Sequence[Sequence[int]], generation_config: GenerationConfig,
                              pad_token_id: int, device, prefixes: PrefixCache | None = None) -> torch.Tensor:
    """Generated token ids (rows in `prompts` order, padded by `generate`) of every prompt, each group's shared
    prefix prefilled once (continued from `prefixes`, if given). `model` is a decoder-only model (or PEFT model)
    whose cache is full attention."""
    if prefixes is not None:
        prefixes.next_call()
    prefill = prefixes.prefill if prefixes is not None else _prefill
    groups = prefix_groups(prompts)
    if min(n for _, n in groups) == 0:  # a one-token prompt: nothing to prefill ahead for it, so for no row
        groups = [(rows, 0) for rows, _ in groups]
    width = max(n for _, n in groups)
    rest = max(len(prompts[row]) - n for rows, n in groups for row in rows)
    ids, mask = [None] * len(prompts), [None] * len(prompts)
    kv: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in prompts]  # per row, per layer: (keys, values)
    for rows, n in groups:
        padded = [(_left_pad(k, width), _left_pad(v, width)) for k, v in prefill(model, prompts[rows[0]][:n], device)]
        for row in rows:
            head, tail = list(prompts[row][:n]), list(prompts[row][n:])
            ids[row] = [pad_token_id] * (width - n) + head + [pad_token_id] * (rest - len(tail)) + tail
            mask[row] = [0] * (width - n) + [1] * n + [0] * (rest - len(tail)) + [1] * len(tail)
            kv[row] = padded
    cache = None
    if width > 0:
        cache = DynamicCache(ddp_cache_data=[
            tuple(torch.cat([row_kv[layer][j] for row_kv in kv], dim=0) for j in (0, 1))
            for layer in range(len(kv[0]))])
    input_ids = torch.tensor(ids, device=device)
    out = model.generate(input_ids=input_ids, attention_mask=torch.tensor(mask, device=device),
                         past_key_values=cache, generation_config=generation_config)
    return out[:, input_ids.shape[1]:]


def shared_columns(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """How many leading columns every row of the batch has in common (tokens and mask)."""
    same = ((input_ids == input_ids[:1]) & (attention_mask == attention_mask[:1])).all(dim=0)
    return int(same.long().cumprod(dim=0).sum())


def score_sharing_prefixes(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                           batch_size: int | None, compute_entropy: bool, autocast
                           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """TRL's per-token log-probabilities (and entropies) of the last `logits_to_keep` tokens of each row
    (`GRPOTrainer._get_per_token_logps_and_entropies`, text only), with the columns all rows of a chunk share
    (a group's prompt) run through the model once: the rows continue from that prefix's KV cache, repeated without
    a copy, and gradients reach the prefix through it. Positions, masks and the fused LM head are TRL's."""
    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids, mask = input_ids[start:start + batch_size], attention_mask[start:start + batch_size]
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-logits_to_keep] = -100
        shared = min(shared_columns(ids, mask), ids.size(1) - logits_to_keep - 1) if ids.size(0) > 1 else 0
        with autocast():
            if shared > 0:
                prefix = model(input_ids=ids[:1, :shared], attention_mask=mask[:1, :shared], use_cache=True,
                               logits_to_keep=1).past_key_values
                rows = ids.size(0)
                cache = DynamicCache(ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1))
                                                     for k, v, *_ in prefix])
                out = model(input_ids=ids[:, shared:], attention_mask=mask, past_key_values=cache,
                            labels=labels[:, shared:], fused_lm_head=True)
            else:
                out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        logps.append(out.log_probs[:, -logits_to_keep:])
        if compute_entropy:
            entropies.append(out.entropy[:, -logits_to_keep:])
    return torch.cat(logps, dim=0), torch.cat(entropies, dim=0) if compute_entropy else None
