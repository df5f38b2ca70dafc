"""The mirror's weights: a transformers architecture initialised from a seed with the config a repo's config.json holds,
its state dict, and that state in the files the hub holds it in (safetensors, one file or save_pretrained's shards with
model.safetensors.index.json, and `torch.save`'s pytorch_model.bin). The weights are noise: the mirror rehearses code
paths and file handling, never quality."""

from __future__ import annotations

import tempfile
from pathlib import Path

from repro.ops.rehearsal.files import Files, json_bytes


def model(config: dict, architecture: str, seed: int, dtype: str = "float32"):
    """`architecture` (a transformers class name) initialised from `seed` with the config the repo's config.json
    holds, so that config.json is exactly what transformers reads back."""
    import torch
    import transformers

    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(cfg).eval()
    return model.to(getattr(torch, dtype))


def state(model, drop: tuple[str, ...] = ()) -> dict:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k not in drop}


def safetensors(state: dict) -> bytes:
    from safetensors.torch import save

    return save(state, metadata={"format": "pt"})


def torch_bin(state: dict, name: str = "pytorch_model.bin") -> bytes:
    """torch.save's zip file; saved under its hub name, whose stem torch writes as the archive's root folder."""
    import torch

    with tempfile.TemporaryDirectory() as d:
        torch.save(state, Path(d) / name)
        return (Path(d) / name).read_bytes()


def sharded(state: dict, shards: int, total_digits: int = 5) -> Files:
    """`shards` safetensors files in key order plus model.safetensors.index.json, as save_pretrained shards; the
    DeepSeek distills write the total with six digits (`model-00001-of-000008.safetensors`)."""
    if shards == 1:
        return {"model.safetensors": safetensors(state)}
    keys = list(state)
    files, weight_map = {}, {}
    for i in range(shards):
        part = keys[i * len(keys) // shards:(i + 1) * len(keys) // shards]
        name = f"model-{i + 1:05d}-of-{shards:0{total_digits}d}.safetensors"
        files[name] = safetensors({k: state[k] for k in part})
        weight_map.update({k: name for k in part})
    total = sum(t.numel() * t.element_size() for t in state.values())
    files["model.safetensors.index.json"] = json_bytes({"metadata": {"total_size": total},
                                                        "weight_map": dict(sorted(weight_map.items()))})
    return files
