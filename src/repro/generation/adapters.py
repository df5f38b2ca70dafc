"""A LoRA adapter merged into its base model: a plain model directory, which an engine serves without LoRA kernels
(the format warm-up's policy, an exported LoRA checkpoint, Table 4's FilCo and SEER, D213)."""

from __future__ import annotations

from pathlib import Path

from repro.generation.prompting import load_tokenizer
from repro.io import atomic_dir


def merged_model(base: str, adapter: str | Path, dtype: str | None):
    """The LoRA adapter saved in `adapter` merged into its base model (loaded in `dtype`, safetensors only)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, use_safetensors=True)
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()


def merge_adapter(base: str, adapter: str | Path, out: Path, dtype: str | None) -> Path:
    """Merge a LoRA adapter into its base model and save model (safetensors) and tokenizer to `out`, atomically."""
    merged = merged_model(base, adapter, dtype)
    with atomic_dir(out) as tmp:
        merged.save_pretrained(tmp, safe_serialization=True)
        load_tokenizer(base).save_pretrained(tmp)
    return out
