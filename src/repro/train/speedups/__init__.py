"""The CPU speed-ups of training, each exact (the same losses, to rounding) and each switchable:

- `fused_head`      TRL's fused LM head scores only completion positions, on CPUs too
- `shared_prefill`  a prefix the rows share is prefilled and scored once, and carried to the next call (D145, D162)
- `rollout_copy`    generation on a plain copy of the policy with its adapter merged in (D162)
- `lora_policy`     a LoRA policy's `peft_config` and its merged generation (D144)
"""
