"""Seconds per GRPO step with TRL's fused LM head scoring only the completion positions on the CPU
(`repro.train.fused_head`) versus TRL's default of scoring every position there.

One run, one trainer: optimizer steps alternate between the two modes, so both see the same model, data stream and
machine load. A step is timed from `on_step_begin` to `on_step_end` (rollouts, masked answers, rewards, reference
and policy passes, update); the first step of each mode is warm-up and dropped.

    python scripts/bench_fused_head.py --profile tiny --steps 6 [--out results/tiny/bench_fused_head.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import trl.trainer.utils as trl_utils
from transformers import AutoTokenizer, TrainerCallback

from repro.assets import resolve
from repro.config import load_profile
from repro.io import write_json
from repro.train import fused_head
from repro.train.callbacks import DevSelectionCallback
from repro.train.data import split_rows
from repro.train.run import TrainRun, build_trainer

MODES = {"completion_positions": fused_head._compact_positions, "every_position": fused_head._TRL_DEVICE_CHECK}


class AlternatePositions(TrainerCallback):
    """Switches the fused head's choice of positions at every step and times the step."""

    def __init__(self):
        self.times: dict[str, list[float]] = {mode: [] for mode in MODES}
        self.mode, self.started = next(iter(MODES)), 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self.mode = list(MODES)[state.global_step % 2]
        trl_utils._use_triton = MODES[self.mode]
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.times[self.mode].append(time.perf_counter() - self.started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps in total (half per mode)")
    parser.add_argument("--out", help="json report (default: results/<profile>/bench_fused_head.json)")
    args = parser.parse_args()

    cfg = load_profile(args.profile)
    train = dataclasses.replace(cfg.train, max_steps=args.steps, evaluate_initial=False, save_steps=10**6)
    cfg = dataclasses.replace(cfg, train=train)
    tokenizer = AutoTokenizer.from_pretrained(resolve(cfg.models.extractor, cfg.name))
    rows = split_rows(cfg, "train", tokenizer, train.max_train_questions)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(cfg, TrainRun(Path(tmp)), rows, rows[:1])
        trainer.remove_callback(DevSelectionCallback)
        timer = AlternatePositions()
        trainer.add_callback(timer)
        trainer.train()
    timed = {mode: times[1:] for mode, times in timer.times.items()}  # drop each mode's warm-up step
    summary = {mode: {"steps": len(t), "mean_s": statistics.fmean(t), "median_s": statistics.median(t)}
               for mode, t in timed.items()}
    fast, slow = MODES
    speedup = summary[slow]["mean_s"] / summary[fast]["mean_s"]
    report = {"profile": cfg.name, "model": cfg.models.extractor, "bf16": train.bf16,
              "completions_per_step": train.per_device_batch_size * train.gradient_accumulation_steps,
              "max_completion_length": train.max_completion_length, "step_seconds": timer.times,
              "summary": summary, "speedup_mean": speedup}
    out = Path(args.out or f"results/{cfg.name}/bench_fused_head.json")
    write_json(out, report)
    print(f"{fast}: {summary[fast]['mean_s']:.1f} s/step, {slow}: {summary[slow]['mean_s']:.1f} s/step, "
          f"speedup {speedup:.2f}x -> {out}")


if __name__ == "__main__":
    main()
