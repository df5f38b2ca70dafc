"""The accelerate launchers a profile names (`<section>.accelerate_config`, configs/accelerate/*.yaml): how many
processes each starts and which DeepSpeed ZeRO stage it runs. The preflight checks the processes against the visible
GPUs; the cost model reads the node's size and the checkpoints' layout from them.
"""

from __future__ import annotations

import functools
from pathlib import Path

from repro.config import Profile, walk
from repro.io import read_json_object, read_yaml


def launchers(cfg: Profile) -> dict[str, str]:
    """{params.yaml key: accelerate config file} of every section of `cfg` that launches workers through accelerate."""
    return {key: value for key, value in walk(cfg, f"params.yaml: profiles.{cfg.name}")
            if key.endswith(".accelerate_config") and value}


def _read(path: str) -> dict:
    stat = Path(path).stat()
    return _parse(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parse(path: str, mtime_ns: int, size: int) -> dict:
    """A launcher file's contents, parsed once per version of the file (the cost model reads them hundreds of times)."""
    return read_yaml(path) or {}


def processes(path: str) -> int:
    """`num_processes` of an accelerate config file (accelerate's default, 1, when it sets none)."""
    return int(_read(path).get("num_processes", 1))


def zero_stage(path: str | None) -> int | None:
    """The DeepSpeed ZeRO stage an accelerate config runs (its `deepspeed_config_file`'s `zero_optimization.stage`, or
    an inline `zero_stage`; 0 when the DeepSpeed file sets none); None without DeepSpeed (no launcher, or DDP)."""
    launcher = _read(path) if path else {}
    if launcher.get("distributed_type") != "DEEPSPEED":
        return None
    deepspeed = launcher.get("deepspeed_config") or {}
    if deepspeed.get("deepspeed_config_file"):
        config = read_json_object(deepspeed["deepspeed_config_file"])
        return int((config.get("zero_optimization") or {}).get("stage", 0))
    return int(deepspeed.get("zero_stage", 0))


def node_gpus(cfg: Profile) -> int:
    """The GPUs of the node a profile is written for: the most processes any of its launchers starts (at least 1)."""
    found = launchers(cfg)
    missing = [f"{key}: {path} does not exist" for key, path in found.items() if not Path(path).exists()]
    if missing:
        raise FileNotFoundError("; ".join(missing))
    return max([1, *(processes(path) for path in found.values())])
