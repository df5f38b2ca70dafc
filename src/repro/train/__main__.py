"""Train the extractor of a profile: the entry point `accelerate launch -m repro.train` runs in each process.

    python -m repro.train --profile tiny [--run-dir DIR] [--answer-subset rationale,evidence] [--max-steps N]
                          [--no-single-checkpoint-dev-pass]
"""

from __future__ import annotations

import argparse

from repro.config import PARAMS_FILE, load_profile
from repro.data import layout
from repro.train.run import train_in_process


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile name (default: the `profile` key of the params file)")
    parser.add_argument("--params", default=PARAMS_FILE, help="params file holding the profile")
    parser.add_argument("--run-dir", help="run directory (default: data/<profile>/train/eviomni)")
    parser.add_argument("--answer-subset", help="comma-separated answers averaged into R^ans (Table 3)")
    parser.add_argument("--max-steps", type=int, help="override train.max_steps")
    parser.add_argument("--no-single-checkpoint-dev-pass", action="store_true",
                        help="no dev pass when the last checkpoint is the run's only one (nothing to select)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile, args.params)
    subset = args.answer_subset.split(",") if args.answer_subset else None
    run = train_in_process(cfg, args.run_dir or layout.train_run_dir(cfg.name), answer_subset=subset,
                           max_steps=args.max_steps, score_single_checkpoint=not args.no_single_checkpoint_dev_pass)
    print(run.extractor)


if __name__ == "__main__":
    main()
