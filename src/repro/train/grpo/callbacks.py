"""Trainer callbacks: the per-step log and model selection on the dev split.

Model selection (digest #30): "the best-performing model on the dev set". Every checkpoint is scored on the
dev split just before it is saved, with greedy rollouts and greedy masked answers of the current policy;
the metric is `train.selection_metric` (default: F1 of o_e, the policy's answer from (q, e) alone, the
training-time proxy of Algorithm 1's o = M_G(q, e); D41). The best step goes into TrainerState's
`best_metric`/`best_global_step`, so it is saved with each checkpoint, survives a resume, and keeps the best
checkpoint from being rotated away (transformers protects `best_model_checkpoint`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from transformers import TrainerCallback

from repro.train.grpo.logs import StepLog, train_log_row
from repro.train.grpo.rollout_reward import mean_summary


class TrainLogCallback(TrainerCallback):
    """Writes one `train_log.jsonl` row per logged training step (logging_steps = 1)."""

    def __init__(self, path):
        self.log = StepLog(path)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.log.truncate(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs and "loss" in logs:
            self.log.append(train_log_row(logs, state.global_step, time.time()))


class DevSelectionCallback(TrainerCallback):
    """Scores the policy on the dev rows before each checkpoint is saved (and the initial policy once, as
    the reference row `checkpoint: null`), appends the means to `dev_eval.jsonl`, and tracks the best.

    With `score_single_checkpoint` False, a run whose only checkpoint is its last (max_steps <= save_steps) skips
    the pass: there is nothing to select, and the last step is exported, saying so (Table 3's one-step rows, D172)."""

    def __init__(self, trainer, rows: Sequence[dict], metric: str, path, evaluate_initial: bool = True,
                 score_single_checkpoint: bool = True):
        if not rows:
            raise ValueError("model selection needs at least one dev row")
        self.trainer, self.rows, self.metric = trainer, list(rows), metric
        self.log = StepLog(path)
        self.evaluate_initial = evaluate_initial
        self.score_single_checkpoint = score_single_checkpoint

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:  # a run that starts afresh evaluates the initial policy again
            self.log.truncate(state.global_step if state.global_step > 0 else -1)
        if state.global_step == 0 and self.evaluate_initial:
            self._evaluate(state, checkpoint=None)

    def on_step_end(self, args, state, control, **kwargs):
        if not control.should_save:
            return
        if not self.score_single_checkpoint and state.max_steps <= args.save_steps:
            print(f"no dev pass: checkpoint-{state.global_step} is the run's only checkpoint", flush=True)
            return
        self._evaluate(state, checkpoint=f"checkpoint-{state.global_step}")

    def _evaluate(self, state, checkpoint: str | None) -> None:
        started = time.monotonic()
        row = {"step": state.global_step, "checkpoint": checkpoint, "questions": len(self.rows),
               **mean_summary(self.trainer.score_greedy(self.rows))}
        row["eval_time"] = time.monotonic() - started
        value = row[self.metric]
        if checkpoint is not None and (state.best_metric is None or value > state.best_metric):
            state.best_metric, state.best_global_step = value, state.global_step
        if state.is_world_process_zero:
            self.log.append(row)
