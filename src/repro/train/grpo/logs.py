"""The files of a training run (`TrainRun`) and its per-step logs, read by the notebooks.

`train_log.jsonl` has one row per optimisation step:

    step, epoch, wall_time
    f1_rationale, f1_evidence, f1_full       answer rewards R_r^ans, R_e^ans, R_f^ans (F1 of o_r, o_e, o_f)
    em_rationale, em_evidence, em_full       EM of the same answers
    reward_length_rationale, reward_length_evidence, reward_format, reward_final
    len_reason, len_extract, len_answer      mean lengths of r, e, o_f (rewards.length_unit)
    passages_length                          mean L_P
    kl, clip_frac, std_clip_frac             KL to the reference, fraction of clipped tokens (PPO ε),
                                             fraction of groups whose std was floored at ε_std
    group_reward_std                         mean population std of the rewards in a group, before the ε_std
                                             floor (under the placebo design, of the permuted rewards)
    loss, grad_norm, learning_rate, entropy, completion_length, truncated_frac, step_time

`dev_eval.jsonl` has one row per dev evaluation (greedy decoding, the same terms without the TRL ones).
Answers outside the training answer subset are not generated during training: their columns are null.
Both files are appended line by line (flushed and fsynced) and, on resume, cut back to the steps of the
checkpoint resumed from: the rows after it were logged by the killed run and are logged again, step by step, by
the resumed one. A last line without its newline was cut by a kill and is dropped; a damaged complete line is
an error naming file and line, never a reason to drop the rows after it (D101).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import pandas as pd

from repro.io import InputError, detach, read_json_object, write_jsonl

TRL_COLUMNS = {  # key in TRL's logs -> column of train_log.jsonl
    "kl": "kl", "clip_ratio/region_mean": "clip_frac", "loss": "loss", "grad_norm": "grad_norm",
    "learning_rate": "learning_rate", "entropy": "entropy", "completions/mean_length": "completion_length",
    "completions/clipped_ratio": "truncated_frac", "step_time": "step_time", "epoch": "epoch",
}
EVIOMNI_PREFIX = "eviomni/"
REPAIR_HINT = "restore the line (train_log rows are also in the log_history of each checkpoint's trainer_state.json)"


@dataclasses.dataclass(frozen=True)
class TrainRun:
    """The files of one run directory (the layout is in repro.train.grpo.run's docstring); paths only, so that reading a
    finished run loads neither torch nor TRL."""

    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def extractor(self) -> Path:
        return self.root / "extractor"

    @property
    def train_log(self) -> Path:
        return self.root / "train_log.jsonl"

    @property
    def dev_log(self) -> Path:
        return self.root / "dev_eval.jsonl"

    @property
    def selection_file(self) -> Path:
        return self.root / "selection.json"

    @property
    def config_file(self) -> Path:
        return self.root / "run_config.json"

    def selection(self) -> dict:
        return read_json_object(self.selection_file)


def train_log_row(logs: dict, step: int, wall_time: float) -> dict:
    """The train_log.jsonl row of one TRL `on_log` call."""
    row = {"step": step, "wall_time": wall_time}
    row |= {key.removeprefix(EVIOMNI_PREFIX): value for key, value in logs.items() if key.startswith(EVIOMNI_PREFIX)}
    row |= {column: logs.get(key) for key, column in TRL_COLUMNS.items()}
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


class StepLog:
    """A jsonl file of rows with a `step`, appended durably and cut back on resume."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def rows(self) -> list[dict]:
        """The complete rows; a last line cut off by a kill is ignored, a damaged complete line raises."""
        if not self.path.exists():
            return []
        rows = []
        for line_no, line in enumerate(self.path.read_text(encoding="utf-8").split("\n")[:-1], start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(self.path, f"damaged row, invalid JSON ({err.msg}); {REPAIR_HINT}",
                                 line=line_no) from None
            if not isinstance(row, dict) or not isinstance(row.get("step"), int):
                raise InputError(self.path, f"damaged row, not an object with an integer step; {REPAIR_HINT}",
                                 line=line_no, field="step")
            rows.append(row)
        return rows

    def truncate(self, last_step: int) -> None:
        """Keep the rows up to `last_step` (the step a resumed run restarts from), atomically; a damaged row
        raises before anything is rewritten."""
        if self.path.exists():
            write_jsonl(self.path, [r for r in self.rows() if r["step"] <= last_step])

    def append(self, row: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        detach(self.path)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())


def read_log(path: str | os.PathLike) -> pd.DataFrame:
    """A train_log.jsonl or dev_eval.jsonl as a frame indexed by step."""
    rows = StepLog(path).rows()
    if not rows:
        raise FileNotFoundError(f"{path}: no log rows (has the run started?)")
    return pd.DataFrame(rows).set_index("step")
