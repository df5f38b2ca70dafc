"""A LoRA policy for GRPO (`train.lora`, D144): TRL's `peft_config`, and generation with the adapter merged (a merged
copy saved to disk is `repro.generation.adapters`).

TRL trains the adapter and, with a `peft_config`, keeps no reference model: the reference log-probabilities are the
policy's with the adapter disabled, i.e. the starting policy's. Generation through transformers would run every
adapted layer as three matmuls (base, A, B) per token; `merged_adapter` runs the generation call on merged weights
W + ΔW (what TRL merges before syncing LoRA weights to vLLM) with the adapter off, and then gives every layer its own
weight tensor back: unlike peft's `unmerge_adapter`, which subtracts ΔW in floating point, nothing drifts, so the
reference stays the starting policy bit for bit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from peft import LoraConfig, PeftModel
from peft.tuners.lora import LoraLayer

from repro.config import PolicyLoRAConfig


def peft_config(lora: PolicyLoRAConfig | None) -> LoraConfig | None:
    """TRL's `peft_config` for `train.lora` (dropout 0: GRPO runs without dropout)."""
    if lora is None:
        return None
    return LoraConfig(r=lora.rank, lora_alpha=lora.alpha, target_modules=list(lora.target_modules), lora_dropout=0.0,
                      task_type="CAUSAL_LM")


@contextlib.contextmanager
def merged_adapter(model) -> Iterator[None]:
    """Within the block the adapter is off and every adapted layer's base weight holds W + ΔW (peft's
    `get_delta_weight`), one matmul per layer; afterwards the layers get their own weight tensors back, untouched.
    A plain model (no adapter) is left as it is."""
    if not isinstance(model, PeftModel):
        yield
        return
    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    originals = [layer.get_base_layer().weight.data for layer in layers]
    with model.disable_adapter():
        try:
            with torch.no_grad():
                for layer, weight in zip(layers, originals, strict=True):
                    delta = sum(layer.get_delta_weight(name) for name in layer.active_adapters)
                    layer.get_base_layer().weight.data = weight + delta.to(weight.dtype)
            yield
        finally:
            for layer, weight in zip(layers, originals, strict=True):
                layer.get_base_layer().weight.data = weight
