"""The rehearsal's two commands:

    python -m repro.ops.rehearsal mirror DIR [--seed N]        build the local hub mirror (repro.ops.rehearsal.mirror)
    python -m repro.ops.rehearsal run [--workdir DIR] [--keep]  the rehearsal itself (repro.ops.rehearsal.run)
"""

from __future__ import annotations

import argparse
import time

from repro.assets import AssetError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m repro.ops.rehearsal",
                                     description="The rehearsal of the paper profiles on a CPU (issue #30).")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mirror", help="build a local hub mirror of seeded tiny models and data in the real repos' "
                                      "layout (read by `python -m repro.ops.remote fetch --from DIR`)")
    m.add_argument("dir", metavar="DIR", help="the mirror's root; rebuilt unless this code built it from this seed")
    m.add_argument("--seed", type=int, default=0, help="seed of the weights and of the question draw (default 0)")
    r = sub.add_parser("run", help="paper-1p5b's stage graph on this CPU: mirror, fetch, preflight, dvc repro, "
                                   "dvc status, in a scratch copy of the repository")
    r.add_argument("--workdir", help="an empty or new directory for the scratch copy (default: a temporary one)")
    r.add_argument("--keep", action="store_true", help="keep the scratch copy after a successful run")
    args = parser.parse_args(argv)
    if args.command == "run":
        from repro.ops.rehearsal.run import main as rehearse

        rehearse(args.workdir, args.keep)
        return
    from repro.ops.rehearsal.mirror import build_mirror

    start = time.perf_counter()
    try:
        built = build_mirror(args.dir, args.seed)
    except (AssetError, FileExistsError) as err:
        raise SystemExit(f"error: {err}") from None
    size = sum(f["size"] for repo in built["repos"].values() for f in repo["files"].values())
    for repo, entry in built["repos"].items():
        kind = "datasets/" if entry["repo_type"] == "dataset" else ""
        print(f"{kind}{repo}@{entry['commit'][:12]}  {len(entry['files'])} file(s)")
    print(f"{args.dir}: {len(built['repos'])} repos, {size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
