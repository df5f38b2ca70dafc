"""Keep an arm of the evidence experiment in git (issue #49; repro.studies.evidence_record): after `evidence_seeds`
ran for `--profile` in this clone, copy each policy's held-out items and each seed's GRPO log, with the weights'
fingerprints, keys and sha256s, into data/measured/<profile>/evidence_seeds/, to commit.

    .venv/bin/python scripts/evidence_record.py --profile cpu-evidence
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-evidence")
    args = parser.parse_args()

    from repro.config import load_profile
    from repro.studies import evidence_record
    from repro.studies.heldout import heldout_rows

    cfg = load_profile(args.profile)
    if cfg.evidence is None:
        raise SystemExit(f"profile {cfg.name}: evidence is null; nothing was scored")
    rows = heldout_rows(cfg, cfg.evidence.heldout_questions, answerable=True)
    manifest = evidence_record.write_record(cfg, rows)
    print(f"written {evidence_record.record_dir(cfg.name)}: {sorted(manifest['policies'])}, logs of "
          f"{sorted(manifest['logs'])}, commit {manifest['commit']}")


if __name__ == "__main__":
    main()
