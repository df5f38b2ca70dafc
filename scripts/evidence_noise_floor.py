"""The evaluation's noise floor of the evidence experiment, as docs/cpu-evidence.md planned it (issue #49,
deliverable 3): each policy's held-out scores computed a second time, beside other work, and byte-compared with the
scores its `evidence_seeds` run wrote (alone).

For each policy of `--policies` (default: every policy the profile's run scored: the start, unless the profile is a
control arm that reuses its recipe's, and each seed), `repro.studies.evidence_seeds.repeat_scores` scores it again
from scratch while `--load` Python processes spin on the cores (`machine.cores_busy`; 0: alone), and compares the jsonl
bytes. Prints one line per policy and writes every comparison, the load and the minutes to `--out` (default
results/<profile>/evidence_noise_floor.json, beside the stage outputs, not one of them).

    .venv/bin/python scripts/evidence_noise_floor.py --profile cpu-evidence
    .venv/bin/python scripts/evidence_noise_floor.py --profile cpu-evidence-placebo --policies seed-0 --load 2
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from machine import cores_busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-evidence")
    parser.add_argument("--policies", nargs="+", default=None, help="start, seed-<s>, ... (default: all scored)")
    parser.add_argument("--load", type=int, default=2, help="spinning processes beside the scoring (0: alone)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from repro.config import load_profile
    from repro.data import layout
    from repro.io import write_json
    from repro.studies import evidence_seeds as es
    from repro.studies.heldout import heldout_rows

    cfg = load_profile(args.profile)
    if cfg.evidence is None:
        raise SystemExit(f"profile {cfg.name}: evidence is null; nothing was scored")
    rows = heldout_rows(cfg, cfg.evidence.heldout_questions, answerable=True)
    policies = es.scored_policies(cfg)
    names = args.policies or list(policies)
    unknown = sorted(set(names) - set(policies))
    if unknown:
        raise SystemExit(f"profile {cfg.name} scored {list(policies)}, not {unknown}")
    results = []
    for name in names:
        started = time.perf_counter()
        with cores_busy(args.load) if args.load else contextlib.nullcontext():
            result = es.repeat_scores(cfg, name, policies[name], rows, progress=False)
        results.append({"policy": name, "load_processes": args.load,
                        "minutes": round((time.perf_counter() - started) / 60, 2), **result})
        print(f"{name}: {'identical' if result['identical'] else 'DIFFERENT'} bytes over {result['questions']} "
              f"questions ({len(result['differing_ids'])} lines differ), {results[-1]['minutes']} min", flush=True)
    out = args.out or layout.results_dir(cfg.name, "") / "evidence_noise_floor.json"
    write_json(out, {"profile": cfg.name, "results": results})
    print(f"written {out}")


if __name__ == "__main__":
    main()
