"""Benchmark of two fixed costs paid by every process that starts a stage or builds an embedded model (D176).

    python scripts/bench_stage_startup.py [--repeats 3] [--out bench.json]

Side by side, each in fresh Python processes (median of `--repeats`):
- a stage's preflight on the CPU profile `ci` as it ran before D176 (counting the GPUs, which imports torch) and as
  it runs now (a CPU profile asks nothing of the GPUs, so nothing is counted);
- SmolLM2's tokenizer converted from its GGUF against the same tokenizer loaded from the user's cache.
A benchmark, not a test: numbers depend on the machine and its load. Run it alone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from repro.io import write_json

CASES = {
    "preflight, GPUs counted (before D176)": "from repro import preflight; from repro.config import load_profile; "
    "preflight.gpu_errors(load_profile('ci'), preflight.visible_gpus())",
    "preflight, nothing counted (now)": "from repro import preflight; from repro.config import load_profile; "
    "preflight.gpu_errors(load_profile('ci'))",
    "tokenizer converted from the GGUF": "from repro import assets; "
    "assets._convert_smollm2_tokenizer(assets.SMOLLM2_GGUF.verified())",
    "tokenizer loaded from the cache": "from repro import assets; assets._load_smollm2_tokenizer()",
}


def seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the results as JSON")
    args = parser.parse_args()
    seconds(CASES["tokenizer loaded from the cache"])  # fills the cache if it is empty
    results = {name: statistics.median(seconds(code) for _ in range(args.repeats)) for name, code in CASES.items()}
    for name, value in results.items():
        print(f"{name:40s} {value:6.2f} s")
    names = list(CASES)
    print(f"preflight: {results[names[0]] / results[names[1]]:.1f}x faster; "
          f"tokenizer: {results[names[2]] / results[names[3]]:.1f}x faster")
    if args.out:
        write_json(args.out, results)


if __name__ == "__main__":
    main()
