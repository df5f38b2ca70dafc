"""Generation from a plain copy of the policy, its LoRA adapter merged in (`train.rollout_model: merged_copy`, D162).

A LoRA policy generates through peft's model: its frozen weights in `models.dtype` (float32), every adapted layer a
peft module, and only the prefill under the bf16 autocast that accelerate puts on the policy's forward (peft's
`generate` calls the inner model, whose forward accelerate did not wrap), so every decode step streams float32
weights. `MergedCopy` is a second, adapter-free transformers model of the same architecture whose weights are the
policy's W + ΔW (`merged_adapter`) in the training precision: bfloat16 under `train.bf16`, as TRL's own transformers
paged generation casts its model, else the policy's dtype. It is refreshed from the policy when the optimizer step
has changed since the last refresh (as TRL syncs vLLM's weights), so every rollout, o_r/o_e answer and dev-selection
generation comes from the current policy up to rounding. Its `PrefixCache` carries the prompt's keys and values from
the rollouts to the o_r and o_e contexts of the same step (D163), and is emptied at each refresh. The loss, the
reference and the log-probabilities stay the policy's.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, GenerationConfig
from transformers.initialization import no_init_weights

from repro.train.speedups.lora_policy import merged_adapter
from repro.train.speedups.shared_prefill import PrefixCache, generate_sharing_prefixes


def _inner(policy):
    """The transformers model inside a peft model (with its LoRA layers), or the policy itself."""
    return policy.get_base_model() if isinstance(policy, PeftModel) else policy


def _merged_parameters(policy) -> dict[str, torch.Tensor]:
    """The policy's parameters by the names of a plain model of its architecture (LoRA layers' base weights, adapters
    left out). Within `merged_adapter(policy)` the LoRA layers' weights hold W + ΔW."""
    return {name.replace(".base_layer.", "."): param for name, param in _inner(policy).named_parameters()
            if "lora_" not in name}


class MergedCopy:
    """A plain model holding `policy`'s merged weights in `dtype` (default: the policy's); `generate` refreshes it for
    a new `step`."""

    def __init__(self, policy, dtype: torch.dtype | None = None):
        inner = _inner(policy)
        with no_init_weights():  # every weight is copied from the policy by `refresh`
            self.model = AutoModelForCausalLM.from_config(copy.deepcopy(inner.config), dtype=dtype or inner.dtype,
                                                          attn_implementation=inner.config._attn_implementation)
        self.model.tie_weights()  # skipped with the initialisation: tied embeddings are one parameter, as the policy's
        self.model.generation_config = copy.deepcopy(inner.generation_config)
        self.model.requires_grad_(False).eval().to(inner.device)
        self.prefixes = PrefixCache()
        self.step: int | None = None  # the optimizer step whose weights the copy holds; None: not yet filled

    def refresh(self, policy, step: int) -> None:
        """Copy W + ΔW (and every other parameter) from `policy` unless the copy already holds `step`'s weights."""
        if step == self.step:
            return
        with torch.no_grad(), merged_adapter(policy):
            source = _merged_parameters(policy)
            for name, param in self.model.named_parameters():
                if name not in source:
                    raise ValueError(f"train.rollout_model=merged_copy: the policy has no parameter {name!r} "
                                     f"(peft modules other than LoRA layers are not supported)")
                param.copy_(source[name])
        self.prefixes.clear()
        self.step = step

    def generate(self, policy, step: int, prompts: Sequence[Sequence[int]], generation_config: GenerationConfig,
                 pad_token_id: int, share_prefixes: bool) -> torch.Tensor:
        """Generated token ids of every prompt (rows in order, padded by `generate`) with `policy`'s weights at
        `step`: each group's shared prefix prefilled once (`share_prefixes`, D145), else left-padded rows."""
        self.refresh(policy, step)
        device = self.model.device
        with torch.no_grad():
            if share_prefixes:
                return generate_sharing_prefixes(self.model, prompts, generation_config, pad_token_id, device,
                                                 self.prefixes)
            width = max(map(len, prompts))
            ids = torch.tensor([[pad_token_id] * (width - len(p)) + list(p) for p in prompts], device=device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
            return self.model.generate(input_ids=ids, attention_mask=mask,
                                       generation_config=generation_config)[:, width:]
