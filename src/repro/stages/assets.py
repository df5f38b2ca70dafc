"""Stage `assets`: the embedded assets a profile refers to, materialised under data/<profile>/assets/ (external ones
of the paper profiles: `python -m repro.ops.remote fetch`). No preflight: this stage makes what the preflight checks.

    python -m repro.stages.assets materialize --profile P
    python -m repro.stages.assets list
"""

from __future__ import annotations

import argparse

from repro.assets import EMBEDDED, EMBEDDED_PREFIX, AssetError, materialize
from repro.config import load_profile


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m repro.stages.assets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("materialize")
    m.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    sub.add_parser("list")
    args = parser.parse_args(argv)
    if args.command == "list":
        for asset in EMBEDDED.values():
            print(f"{EMBEDDED_PREFIX}{asset.name:24s} {asset.description}")
        return
    try:
        for path in materialize(load_profile(args.profile)):
            print(path)
    except AssetError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
