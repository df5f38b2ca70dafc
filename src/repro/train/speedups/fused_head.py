"""Score only the completion positions in TRL's fused LM head on every device.

TRL (1.16) replaces the LM head of the models its GRPO, SFT and DPO trainers train with a chunked log-prob kernel
(`trl.trainer.utils.add_fused_lm_head`). On Triton devices it projects only the positions that carry a label; on
any other device it projects every position, prompt included, to keep tile shapes fixed for compilers such as
Neuron's. On a CPU nothing is compiled, and the waste is the prompt-to-completion ratio: a Table 14 prompt of ~850
tokens before a completion of ~100 multiplies the LM-head and log-softmax work of every policy and reference pass
about ninefold. `compact_fused_lm_head_on_cpu`, called by `EviOmniTrainer` and `repro.train.lora.runner.fit_in_run_dir`,
makes the kernel score only the labelled positions on CPUs too; the per-token maths (TRL's torch path of the same
kernel) is unchanged, and so are the results (tests/test_train_fused_head.py). Speed: `scripts/bench_grpo.py
--compare fused_head`.
"""

from __future__ import annotations

import torch
import trl.trainer.utils as trl_utils

_TRL_DEVICE_CHECK = trl_utils._use_triton  # the kernel module keeps its own reference: its maths stays as it was


def _compact_positions(device: torch.device) -> bool:
    return device.type == "cpu" or _TRL_DEVICE_CHECK(device)


def compact_fused_lm_head_on_cpu() -> None:
    """Idempotent; affects only the choice of positions in `add_fused_lm_head`'s forward."""
    trl_utils._use_triton = _compact_positions
