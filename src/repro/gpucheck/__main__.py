"""`python -m repro.gpucheck`: the check (docs/gpu.md, step 0), or `bundle DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bundle"]:
        from repro.gpucheck.bundle import main as bundle_main

        bundle_main(argv[1:])
        return
    from repro.gpucheck.run import STEPS, run_check

    parser = argparse.ArgumentParser(prog="python -m repro.gpucheck", description=__doc__)
    parser.add_argument("--shapes", choices=("paper", "tiny"), help="paper (default on CUDA) or tiny (default on CPU)")
    parser.add_argument("--out", type=Path, help="where the JSON and summary go (default: docs/gpu-check/ for a CUDA "
                                                 "run at the paper shapes, else data/gpucheck/)")
    parser.add_argument("--tokenizers", type=Path, help="the bundle's tokenizers/ (default: trained by the rehearsal)")
    parser.add_argument("--work", type=Path, help="models and runs (default data/gpucheck/work-<shapes>)")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="a subset, in this order")
    args = parser.parse_args(argv)
    report = run_check(args.shapes, args.out, args.tokenizers, args.work, tuple(s for s in STEPS if s in args.steps))
    raise SystemExit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
