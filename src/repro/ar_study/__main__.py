"""`python -m repro.ar_study --profile P`: the answer-recall study's data stage (teacher, SFT sets, LoRA runs)."""

from __future__ import annotations

import argparse

from repro.ar_study.train import train_variants
from repro.config import load_profile
from repro.preflight import require


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Teacher synthesis and the two LoRA SFT variants of §2.2.")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile)
    require(cfg, "ar_study_train")
    for variant, adapter in train_variants(cfg).items():
        print(f"{variant}: {adapter}")


if __name__ == "__main__":
    main()
