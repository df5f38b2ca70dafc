"""The LoRA steps' worker: `repro.train.lora.worker` itself, with the fused head's path and the peak memory measured
around it; `repro.gpucheck.steps.lora_step` has `train_lora` launch it in place of the runner's worker.

    python -m repro.gpucheck.lora_worker --params P --profile NAME --runs RUNS.json [--no-progress]
"""

from __future__ import annotations

import sys
from pathlib import Path

from repro.gpucheck import probes
from repro.gpucheck.grpo_worker import MEASURE
from repro.io import read_json, write_json
from repro.train.lora import worker


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = worker.parse_args(argv)
    fused = probes.count_fused_head_paths()
    probes.reset_peak_memory()
    worker.main(argv)
    from accelerate import PartialState

    if PartialState().is_main_process:
        for run in read_json(args.runs):  # one run per launch in the check
            write_json(Path(run["run_dir"]) / MEASURE, {"fused_head": fused, **probes.peak_memory()})


if __name__ == "__main__":
    main()
