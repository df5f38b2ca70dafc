"""`python -m repro.ops.costs`: a profile's table, or `--markdown` for docs/gpu-costs.md."""

from __future__ import annotations

import argparse
from repro.config import load_profile
from repro.io import write_text
from repro.ops.costs.measured import read_check
from repro.ops.costs.model import GB
from repro.ops.costs.report import PAGE, PAGE_PROFILES, markdown, table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ESTIMATED GPU-hours, wall time, disk and GPU memory per stage of a "
                                                 "profile (formulas and assumptions: repro/ops/costs/, D137)")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    parser.add_argument("--gpu-memory", type=float, default=80, help="GB per GPU (default 80; try 40)")
    parser.add_argument("--gpus", type=int, help="GPUs on the node, which the held GPU-hours count (default: the most "
                                                 "processes a launcher of the profile starts)")
    parser.add_argument("--markdown", nargs="?", const=str(PAGE), metavar="PATH",
                        help=f"write the tables of {', '.join(PAGE_PROFILES)} to PATH (default {PAGE}) and exit")
    parser.add_argument("--measured", metavar="CHECK.json",
                        help="a `python -m repro.gpucheck` JSON whose training figures replace the assumed ones")
    args = parser.parse_args(argv)
    if args.markdown:
        write_text(args.markdown, markdown())
        print(f"wrote {args.markdown}")
        return
    try:
        measured = read_check(args.measured) if args.measured else None
        if args.measured and measured is None:
            raise ValueError(f"{args.measured} is not a CUDA check at the paper shapes")
        print(table(load_profile(args.profile), args.gpu_memory * GB, args.gpus, measured=measured))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
