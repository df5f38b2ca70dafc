"""Train the extractor of a profile: the entry point `accelerate launch -m repro.train` runs in each process.

    python -m repro.train.grpo --profile tiny [--params FILE] [--run-dir DIR]

A study's variant of a run (Table 3's answer subsets, a reward design, a step budget) is a profile of its own, written
to the params file the launcher passes (repro.config.with_overrides).
"""

from __future__ import annotations

import argparse

from repro.config import PARAMS_FILE, load_profile
from repro.data import layout
from repro.train.grpo.run import train_in_process


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile name (default: the `profile` key of the params file)")
    parser.add_argument("--params", default=PARAMS_FILE, help="params file holding the profile")
    parser.add_argument("--run-dir", help="run directory (default: data/<profile>/train/eviomni)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile, args.params)
    run = train_in_process(cfg, args.run_dir or layout.train_run_dir(cfg.name))
    print(run.extractor)


if __name__ == "__main__":
    main()
