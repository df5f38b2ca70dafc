"""The LoRA merge (repro.generation.adapters): peft's, and the exact one whose bytes do not depend on the CPU's
kernels (D246), which lets a control arm rebuild its recipe's warm-up from the recorded adapter on another machine."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

from repro.generation.adapters import PEFT_PREFIX, lora_scaling, merge_adapter
from repro.io import InputError

MERGE = ("import sys; from pathlib import Path; from repro.generation.adapters import merge_adapter; "
         "merge_adapter(sys.argv[1], sys.argv[2], Path(sys.argv[3]), 'float32', exact=True)")


@pytest.fixture(scope="module")
def adapter(tiny_llama_dir, tmp_path_factory):
    """A rank-4 adapter on the tiny Llama's attention projections with random (non-zero) A and B."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_" in name:
                parameter.normal_(0, 0.5)
    path = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(path, safe_serialization=True)
    return path


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_exact_merge_is_w_plus_scale_ba_and_agrees_with_peft_to_the_last_bits(tiny_llama_dir, adapter, tmp_path):
    exact = merge_adapter(str(tiny_llama_dir), adapter, tmp_path / "exact", "float32", exact=True)
    peft = merge_adapter(str(tiny_llama_dir), adapter, tmp_path / "peft", "float32")
    merged, reference = load_file(exact / "model.safetensors"), load_file(peft / "model.safetensors")
    base = load_file(tiny_llama_dir / "model.safetensors")
    lora = load_file(adapter / "adapter_model.safetensors")
    assert merged.keys() == reference.keys()

    name = "model.layers.1.self_attn.v_proj"
    a, b = lora[f"{PEFT_PREFIX}{name}.lora_A.weight"].double(), lora[f"{PEFT_PREFIX}{name}.lora_B.weight"].double()
    by_hand = (base[f"{name}.weight"].double() + 2.0 * (b @ a)).float()  # α/r = 8/4
    torch.testing.assert_close(merged[f"{name}.weight"], by_hand, rtol=0, atol=1e-6)
    for key, tensor in merged.items():  # the weights LoRA did not touch are the base's, bit for bit
        if not key.endswith(("q_proj.weight", "v_proj.weight")):
            assert torch.equal(tensor, base[key]), key
        torch.testing.assert_close(tensor, reference[key], rtol=1e-6, atol=1e-6)
    assert not torch.equal(merged[f"{name}.weight"], base[f"{name}.weight"])


def test_the_exact_merge_gives_the_same_bytes_under_other_cpu_kernels(tiny_llama_dir, adapter, tmp_path):
    here = merge_adapter(str(tiny_llama_dir), adapter, tmp_path / "here", "float32", exact=True)
    for capability in ("default", "avx2"):  # ATen's scalar and AVX2 kernels beside this machine's own
        out = tmp_path / capability
        env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "ONEDNN_MAX_CPU_ISA": "AVX2",
               "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
        subprocess.run([sys.executable, "-c", MERGE, str(tiny_llama_dir), str(adapter), str(out)], env=env,
                       check=True, capture_output=True)
        assert sha256(out / "model.safetensors") == sha256(here / "model.safetensors"), capability


def test_the_exact_merge_refuses_what_a_plain_lora_merge_does_not_cover(tiny_llama_dir, adapter, tmp_path):
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert lora_scaling(config, adapter) == 2.0
    assert lora_scaling({**config, "use_rslora": True}, adapter) == 4.0  # α/√r
    for change in ({"use_dora": True}, {"rank_pattern": {"q_proj": 2}}, {"bias": "all"}):
        with pytest.raises(InputError, match=next(iter(change))):
            lora_scaling({**config, **change}, adapter)

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "adapter_config.json").write_text(json.dumps(config))
    tensors = load_file(adapter / "adapter_model.safetensors")
    save_file({k: v for k, v in tensors.items() if not k.endswith("layers.0.self_attn.q_proj.lora_B.weight")},
              damaged / "adapter_model.safetensors")
    with pytest.raises(InputError, match="layers.0.self_attn.q_proj.lora_B.weight beside it"):
        merge_adapter(str(tiny_llama_dir), damaged, tmp_path / "out", "float32", exact=True)
