"""Worker processes that `accelerate launch` starts for a training run, which the process that asks for it waits for:
the LoRA SFT and DPO runs of their own stages always (repro.train.lora.runner.train_lora), GRPO when
`train.accelerate_config` is set (repro.train.grpo.run). With several GPUs visible to one plain process, transformers'
Trainer would wrap the model in `nn.DataParallel`, which TRL's trainers refuse.

    with launch_dir(cfg) as tmp:                   # tmp/params.yaml: the profile, exactly as the caller holds it
        launch(cfg.qa_generator.accelerate_config, "repro.train.lora.worker", ["--params", str(tmp / PARAMS), ...],
               key="params.yaml: profiles.tiny.qa_generator.accelerate_config")

The launcher's file (configs/accelerate/*.yaml) sets the process count and the distribution: DDP or DeepSpeed on GPUs,
one CPU process (`cpu-1proc.yaml`) or two joined by gloo (`cpu-2proc.yaml`, whose MULTI_GPU launch on a machine
without CUDA gives processes that set `use_cpu` and join as MULTI_CPU). The caller waits for the workers and reads
what they wrote to the run directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
import yaml

from repro.config import Profile
from repro.config import launchers

PARAMS = "params.yaml"  # the profile's file inside a launch directory


def write_profile(cfg: Profile, path: Path) -> None:
    """`cfg` as a one-profile params file, so that worker processes load exactly this profile."""
    body = json.loads(json.dumps({k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("name", "eviomni")}))
    path.write_text(yaml.safe_dump({"profile": cfg.name, "eviomni": cfg.eviomni, "profiles": {cfg.name: body}},
                                   sort_keys=False))


@contextlib.contextmanager
def launch_dir(cfg: Profile) -> Iterator[Path]:
    """A temporary directory holding `cfg` as PARAMS, for the workers (the caller may add its data files); removed
    when the launch is over."""
    with tempfile.TemporaryDirectory(prefix="repro-launch-") as tmp:
        write_profile(cfg, Path(tmp) / PARAMS)
        yield Path(tmp)


def launcher_processes(accelerate_config: str | Path, key: str) -> int:
    """The number of worker processes the launcher starts (repro.config.launchers), or an error naming `key`, the
    params.yaml key that gave the file (a path from the repository root, the working directory of every stage)."""
    if not Path(accelerate_config).is_file():
        raise FileNotFoundError(f"{key}: {accelerate_config} does not exist (a path from the repository root, e.g. "
                                f"configs/accelerate/cpu-1proc.yaml)")
    return launchers.processes(str(accelerate_config))


def accelerate_command(accelerate_config: str | Path, module: str, args: Sequence[str]) -> list[str]:
    """`accelerate launch --config_file <accelerate_config> -m <module> <args>` with this interpreter."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config),
            "-m", module, *args]


def launch(accelerate_config: str | Path, module: str, args: Sequence[str], *, key: str) -> None:
    """Run `python -m <module> <args>` in the processes of the launcher `accelerate_config` and wait for them; a
    failed worker raises CalledProcessError (its traceback is on this process's stderr)."""
    launcher_processes(accelerate_config, key)
    if torch.cuda.is_available():  # models this process has freed give their cached GPU memory to the workers
        gc.collect()
        torch.cuda.empty_cache()
    subprocess.run(accelerate_command(accelerate_config, module, args), check=True)
