"""A LoRA adapter merged into its base model: a plain model directory, which an engine serves without LoRA kernels
(the format warm-up's policy, an exported LoRA checkpoint, Table 4's FilCo and SEER, D213).

    merge_adapter(base, adapter, out, dtype)              # peft's merge_and_unload
    merge_adapter(base, adapter, out, dtype, exact=True)  # the same bytes on every CPU (exactly_merged_model, D246)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from repro.generation.prompting import load_tokenizer
from repro.io import InputError, atomic_dir

PEFT_PREFIX = "base_model.model."  # peft's prefix of a LoRA module's name in adapter_model.safetensors


def merged_model(base: str, adapter: str | Path, dtype: str | None):
    """The LoRA adapter saved in `adapter` merged into its base model (loaded in `dtype`, safetensors only)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, use_safetensors=True)
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()


def lora_scaling(adapter_config: dict, path: Path) -> float:
    """LoRA's scale of B·A from an adapter_config.json (α/r, or α/√r with rsLoRA), refusing what a plain
    W + scale·B·A merge does not cover (naming the file and the key)."""
    unsupported = {"use_dora": True, "fan_in_fan_out": True}
    for key, value in unsupported.items():
        if adapter_config.get(key) == value:
            raise InputError(path, f"{key} is {value}: the exact merge covers plain LoRA only")
    for key in ("rank_pattern", "alpha_pattern", "modules_to_save"):
        if adapter_config.get(key):
            raise InputError(path, f"{key} is set: the exact merge covers one rank and alpha for every module")
    if adapter_config.get("bias", "none") != "none":
        raise InputError(path, "bias is not 'none': the exact merge covers LoRA without trained biases")
    rank, alpha = adapter_config["r"], adapter_config["lora_alpha"]
    return alpha / (math.sqrt(rank) if adapter_config.get("use_rslora") else rank)


def exactly_merged_model(base: str, adapter: str | Path, dtype: str | None):
    """`merged_model` computed so that its bytes depend on the adapter and the base alone, not on the CPU's kernels:
    W + scale·Σ_k b_k a_kᵀ in float64, one rank at a time, by elementwise products and sums (each rounded once, in
    a fixed order, on every CPU; a matmul's blocking and fused multiply-adds vary with the kernels), rounded to W's
    dtype once at the end. peft's merge multiplies B·A in W's dtype; the two differ in the last bits (D246)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    adapter = Path(adapter)
    config_path = adapter / "adapter_config.json"
    scaling = lora_scaling(json.loads(config_path.read_text(encoding="utf-8")), config_path)
    weights_path = adapter / "adapter_model.safetensors"
    tensors = load_file(weights_path)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype, use_safetensors=True)
    parameters = dict(model.named_parameters())
    pairs = {key.removeprefix(PEFT_PREFIX).removesuffix(".lora_A.weight") for key in tensors if "lora_A" in key}
    used = set()
    with torch.no_grad():
        for module in sorted(pairs):
            a_key, b_key = (f"{PEFT_PREFIX}{module}.lora_{m}.weight" for m in "AB")
            weight = parameters.get(f"{module}.weight")
            if weight is None:
                raise InputError(weights_path, f"{a_key}: the base model {base} has no {module}.weight")
            if b_key not in tensors:
                raise InputError(weights_path, f"{a_key}: no {b_key} beside it")
            a, b = tensors[a_key].double(), tensors[b_key].double()
            delta = torch.zeros(weight.shape, dtype=torch.float64)
            for k in range(a.shape[0]):
                delta += b[:, k:k + 1] * a[k:k + 1, :]
            weight.copy_((weight.double() + delta * scaling).to(weight.dtype))
            used |= {a_key, b_key}
    if set(tensors) - used:
        raise InputError(weights_path, f"tensors the exact merge does not cover: {sorted(set(tensors) - used)[:3]}")
    return model


def merge_adapter(base: str, adapter: str | Path, out: Path, dtype: str | None, exact: bool = False) -> Path:
    """Merge a LoRA adapter into its base model and save model (safetensors) and tokenizer to `out`, atomically; with
    `exact`, the same bytes on every CPU (`exactly_merged_model`)."""
    merged = (exactly_merged_model if exact else merged_model)(base, adapter, dtype)
    with atomic_dir(out) as tmp:
        merged.save_pretrained(tmp, safe_serialization=True)
        load_tokenizer(base).save_pretrained(tmp)
    return out
