"""Which checkpoint of a run directory a rerun resumes from.

transformers writes a checkpoint's files in order (model, optimizer, scheduler, RNG states) and `trainer_state.json`
last, so a checkpoint whose trainer state is missing or unreadable was cut by a kill while being saved (D102).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

from transformers import TrainerState

TRAINER_STATE = "trainer_state.json"


def last_checkpoint(checkpoints: Path) -> str | None:
    """The last checkpoint whose trainer_state.json (written last by transformers) is complete; a later one
    without it was cut by a kill while being saved and is skipped with a warning (it is saved again when the
    resumed run reaches its step)."""
    if not checkpoints.is_dir():
        return None
    found = sorted((int(m.group(1)), path) for path in checkpoints.iterdir()
                   if path.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", path.name)))
    for _, path in reversed(found):
        try:
            TrainerState.load_from_json(str(path / TRAINER_STATE))
            return str(path)
        except (FileNotFoundError, json.JSONDecodeError, TypeError) as err:
            warnings.warn(f"{path} is incomplete (a save cut by a kill: {TRAINER_STATE} "
                          f"{'missing' if isinstance(err, FileNotFoundError) else 'damaged'}); it is skipped")
    return None


def recorded_fingerprint(config_file: Path) -> str | None:
    """The configuration fingerprint a run directory's run_config.json records, or None when it has no readable one
    (missing, damaged, or cut by a kill)."""
    try:
        return json.loads(config_file.read_text(encoding="utf-8"))["fingerprint"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return None
