"""The entry point each process of a launch of LoRA runs executes (repro.train.lora.runner.train_lora starts it through
`accelerate launch`):

    python -m repro.train.lora.worker --params P --profile NAME --runs RUNS.json [--no-progress]

RUNS.json lists the runs, trained one after the other: {"section", "kind", "model", "rows", "run_dir"}. The profile
comes from the params file the caller wrote, a run's examples (or DPO pairs) from its rows file, the same file for every
process, and its configuration from its run directory's run_config.json, which the caller wrote before the launch (so
every process trains exactly the run the caller fingerprinted).
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

import torch

from repro.config import load_profile
from repro.io import read_json, read_jsonl
from repro.train.lora.runner import fit_lora


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", required=True, help="params file holding the profile")
    parser.add_argument("--profile", required=True, help="profile name")
    parser.add_argument("--runs", required=True, help="json list of the runs to train")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cfg = load_profile(args.profile, args.params)
    for run in read_json(args.runs):
        root = Path(run["run_dir"])
        config = {k: v for k, v in read_json(root / "run_config.json").items() if k != "fingerprint"}
        fit_lora(cfg, run["section"], run["kind"], run["model"], list(read_jsonl(run["rows"])), root, config,
                 progress=not args.no_progress)
        gc.collect()  # the finished run's model and optimizer, before the next run loads its own
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
