"""`sdpa_grouped_decode`: transformers' SDPA attention, except for one-token queries (decoding), which attend with
grouped-query matmuls (D146).

On a CPU, PyTorch's SDPA runs a decode step (one query token against the whole KV cache) through its flash-attention
kernel, which is built for query tiles and, for a 135M model at batch 4 with ~700 cached tokens, takes more than half of
the step; the eager path first copies the cache once per query head (`repeat_kv`). Here a decode step multiplies each
key/value head with the query heads that share it (a reshape, no copy), adds SDPA's mask, and takes the softmax in
float32, which is the eager computation. Every other call (prefill, scoring, training, sliding windows, soft-capping,
attention sinks, dropout) is SDPA's. Registering the name makes it a value of `attn_implementation`, with SDPA's masks.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

SDPA_GROUPED_DECODE = "sdpa_grouped_decode"


def grouped_decode_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, scaling: float) -> torch.Tensor:
    """Attention of one query token per row: query (batch, heads, 1, dim), key/value (batch, kv_heads, length, dim),
    query head h reading key/value head h // (heads / kv_heads); `attention_mask` is SDPA's (bool, True = attend, or
    additive float; batch, 1, 1, length) or None. Returns (batch, 1, heads, dim)."""
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim).to(key.dtype)
    scores = torch.matmul(grouped, key.transpose(-1, -2)) * scaling  # (batch, kv_heads, group, length)
    if attention_mask is not None:
        mask = attention_mask[..., -1:, : key.shape[-2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    return torch.matmul(probs, value).reshape(batch, 1, heads, dim)


def sdpa_grouped_decode_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    special = (kwargs.get("sliding_window") or kwargs.get("softcap") or kwargs.get("s_aux") is not None
               or (dropout and module.training) or kwargs.get("output_attentions"))
    if query.shape[2] != 1 or special:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return grouped_decode_attention(query, key, value, attention_mask, scale).contiguous(), None


AttentionInterface.register(SDPA_GROUPED_DECODE, sdpa_grouped_decode_forward)
ALL_MASK_ATTENTION_FUNCTIONS.register(SDPA_GROUPED_DECODE, sdpa_mask)
