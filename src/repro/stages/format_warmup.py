"""Stage `format_warmup`: the policy GRPO starts from, `models.extractor` or on the CPU profiles its format warm-up
(`train.format_warmup`, D90); data/<profile>/train/format_warmup/policy.json names it (repro.train.grpo.warmup).

    python -m repro.stages.format_warmup --profile P
"""

from __future__ import annotations

import dataclasses

from repro.config import Profile
from repro.data import layout
from repro.io import write_json
from repro.stages import command_line
from repro.train.grpo.warmup import starting_policy


def record_starting_policy(cfg: Profile) -> str:
    """The starting policy (trained on first use), recorded in policy.json for every profile."""
    policy = starting_policy(cfg)
    warmup = cfg.train.format_warmup
    write_json(layout.warmup_dir(cfg.name) / "policy.json",
               {"policy": policy, "extractor": cfg.models.extractor,
                "format_warmup": dataclasses.asdict(warmup) if warmup is not None else None})
    return policy


main = command_line("format_warmup", __doc__, record_starting_policy)

if __name__ == "__main__":
    main()
