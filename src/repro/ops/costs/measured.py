"""Training figures measured on a GPU by `python -m repro.gpucheck` (issue #46), read from a check's JSON committed
under docs/gpu-check/: per model shape and run kind (GRPO, LoRA SFT, LoRA DPO), the training tokens per second of one
GPU and its peak memory, at the paper profiles' per-GPU batches and lengths. The cost model uses them in place of its
assumed training throughput (`gpu_flops x train_mfu`) and memory formulas wherever a row's model has the measured
shape; generation, encoding and search stay estimates (the check's generation ran on transformers, not vLLM)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from repro.io import InputError

CHECK_DIR = Path("docs/gpu-check")
KINDS = ("grpo", "sft", "dpo")
SAME_SHAPE = 0.03  # a measured model and a priced one are the same shape when their parameter counts agree this well


@dataclasses.dataclass(frozen=True)
class MeasuredRun:
    kind: str  # grpo | sft | dpo
    params: float  # parameters of the measured model
    tokens_per_second: float  # training tokens one GPU processes per second (every sequence of a DPO pair counted)
    peak_bytes: float  # peak allocated device memory of the step's process
    processes: int  # processes the step ran in (GRPO under ZeRO-2: its states unsharded on one)


@dataclasses.dataclass(frozen=True)
class Measured:
    gpu: str
    source: str  # the check's JSON
    runs: tuple[MeasuredRun, ...]

    def run(self, kind: str, params: float) -> MeasuredRun | None:
        """The measured run of `kind` on a model of `params` parameters, or None."""
        return next((r for r in self.runs if r.kind == kind and abs(r.params - params) <= SAME_SHAPE * params), None)


def _field(path: Path, step: dict, name: str, key: str):
    if key not in step:
        raise InputError(path, f"no '{key}' (a `python -m repro.gpucheck` JSON has it)", field=f"steps.{name}.{key}")
    return step[key]


def read_check(path: str | Path) -> Measured | None:
    """The training figures of a check JSON, or None when it is not a CUDA run at the paper shapes. Steps that failed
    are left out; a passing step without a figure the model reads is an error naming the file and key."""
    path = Path(path)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        env = report["environment"]
        if env.get("device") != "cuda" or report.get("shapes") != "paper":
            return None
        steps, gpu = report["steps"], env["gpu"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(path, f"not a `python -m repro.gpucheck` JSON ({type(err).__name__}: {err})") from None
    runs = []
    for name, step in steps.items():
        kind = name.split("_", 1)[0]
        if kind not in KINDS or not step.get("ok"):
            continue
        def field(key: str):
            return _field(path, step, name, key)

        if kind == "grpo":
            tokens, seconds = field("train_tokens"), sum(field("train_seconds"))
        else:
            tokens, seconds = field("sequence_tokens") * field("sequences"), field("train_seconds")
        runs.append(MeasuredRun(kind, float(field("params")), tokens / seconds, float(field("peak_allocated_bytes")),
                                int(step.get("processes", 1))))
    return Measured(gpu, str(path), tuple(runs))


def committed(directory: str | Path = CHECK_DIR) -> list[Measured]:
    """Every CUDA check committed under `directory`, in file-name order."""
    found = (read_check(p) for p in sorted(Path(directory).glob("*.json")))
    return [m for m in found if m is not None]
