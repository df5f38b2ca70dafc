"""What the stages still write to disk, for the preflight's free-disk check (repro.ops.preflight)."""

from __future__ import annotations

import os
from pathlib import Path
from repro.assets import EXTERNAL_DIR
from repro.config import Profile
from repro.io import PIPELINE_FILE, pipeline_stages
from repro.ops.costs.report import estimate
from repro.ops.costs.stages import FETCH


def stage_outputs(cfg: Profile, pipeline: str | Path = PIPELINE_FILE) -> dict[str, list[Path]]:
    """{stage: what it writes}: the fetch's data/external, each dvc.yaml stage's `outs` for the profile."""
    stages = pipeline_stages(pipeline)
    return {FETCH: [EXTERNAL_DIR], **{
        name: [Path(str(next(iter(out)) if isinstance(out, dict) else out).replace("${profile}", cfg.name))
               for out in stage.get("outs", [])] for name, stage in stages.items()}}


def tree_bytes(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes of the files under `path` not in `seen` (device, inode), which it extends: a file linked twice (DVC's
    cache links, the e5 index linked from data/external into the data stage's index) counts once."""
    files = [path] if path.is_file() else [Path(root, f) for root, _, names in os.walk(path) for f in names]
    total = 0
    for stat in (f.stat() for f in files if f.exists()):
        if (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_size
    return total


def disk_to_write(cfg: Profile, stage: str | None = None) -> tuple[float, dict[str, float]]:
    """(bytes, {stage: bytes}) the profile's stages (or `stage` alone) still write: each stage's disk less what its
    outputs hold already (`stage_outputs`), plus the largest transient of the stages left (a checkpoint written
    before the oldest is rotated away)."""
    outputs, left, scratch, seen = stage_outputs(cfg), {}, 0.0, set()
    for r in estimate(cfg):  # the fetch first: a file the data stage links from data/external is the fetch's
        present = sum(tree_bytes(p, seen) for p in outputs.get(r.stage, []))
        if (stage is None or r.stage == stage) and (r.disk > present or r.scratch > 0 and not present):
            left[r.stage], scratch = max(r.disk - present, 0.0), max(scratch, r.scratch)
    return sum(left.values()) + scratch, left
