"""The GRPO step's worker, which `accelerate launch` starts (`repro.gpucheck.steps.grpo`): the run's `build_trainer`
on the check's rows, trained for the profile's steps without checkpoints, timed and checked.

    python -m repro.gpucheck.grpo_worker --params P --profile NAME --rows ROWS.jsonl --run-dir DIR --memory-fraction F

It caps the device memory at F (what the profile leaves beside its colocated vLLM engine), times generation (every
call of the trainer's generation path: the rollouts and the masked answers o_r, o_e) apart from the rest of each step,
and checks that the losses are finite, that every trained parameter changed and which path the fused LM head took;
the main process writes it all to DIR/gpucheck.json.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from repro.config import load_profile
from repro.gpucheck import probes
from repro.io import read_jsonl, write_json

MEASURE = "gpucheck.json"


class StepClock:
    """Seconds of each optimizer step and of the generation calls inside it."""

    def __init__(self, trainer, cuda: bool):
        import torch
        from transformers import TrainerCallback

        self.steps: list[float] = []
        self.generation: list[float] = []
        self.calls: list[list[float]] = []  # [sequences, mean prompt tokens, longest completion] of each call
        self.rollout_tokens: list[int] = []  # completion lengths of the rollouts
        self._sync = torch.cuda.synchronize if cuda else (lambda: None)
        self._in_step = 0.0
        self._next_is_rollout = False
        clock = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                clock._sync()
                clock._begin, clock._in_step = time.perf_counter(), 0.0

            def on_step_end(self, args, state, control, **kwargs):
                clock._sync()
                clock.steps.append(time.perf_counter() - clock._begin)
                clock.generation.append(clock._in_step)

        self.callback = Callback()
        generate, score = trainer._generate_single_turn, trainer._generate_and_score_completions

        def timed_generate(prompt_ids, *args, **kwargs):
            self._sync()
            start = time.perf_counter()
            out = generate(prompt_ids, *args, **kwargs)
            self._sync()
            self._in_step += time.perf_counter() - start
            completions = out[0]
            self.calls.append([len(prompt_ids), sum(map(len, prompt_ids)) / len(prompt_ids),
                               max(map(len, completions))])
            if self._next_is_rollout:
                self.rollout_tokens += [len(c) for c in completions]
                self._next_is_rollout = False
            return out

        def marked_score(inputs):
            self._next_is_rollout = True  # TRL samples the rollouts first, then EviOmni's rewards ask for o_r, o_e
            return score(inputs)

        trainer._generate_single_turn, trainer._generate_and_score_completions = timed_generate, marked_score


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--rows", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--memory-fraction", type=float, default=1.0)
    args = parser.parse_args(argv)

    import torch
    from transformers.trainer_utils import SaveStrategy

    from repro.train.grpo.logs import TrainRun
    from repro.train.grpo.run import build_trainer

    cuda = torch.cuda.is_available()
    if cuda and args.memory_fraction < 1:
        torch.cuda.set_per_process_memory_fraction(args.memory_fraction)
    fused = probes.count_fused_head_paths()
    cfg = load_profile(args.profile, args.params)
    trainer = build_trainer(cfg, TrainRun(Path(args.run_dir)), list(read_jsonl(args.rows)), [], progress=False)
    trainer.args.save_strategy = SaveStrategy.NO  # a paper-size checkpoint is 16 bytes a parameter: none is written
    trained = {name: p.detach().to("cpu", copy=True) for name, p in trainer.model.named_parameters()
               if p.requires_grad}
    clock = StepClock(trainer, cuda)
    trainer.add_callback(clock.callback)
    probes.reset_peak_memory()
    trainer.train()
    memory = probes.peak_memory()
    unchanged = [name for name, p in trainer.model.named_parameters()
                 if name in trained and torch.equal(p.detach().cpu(), trained[name])]
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    checks = {"losses_finite": bool(losses) and all(math.isfinite(x) for x in losses),
              "every_trained_parameter_changed": not unchanged and bool(trained),
              "reference_model": trainer.ref_model is not None,
              "gradient_checkpointing": bool(trainer.args.gradient_checkpointing),
              "fused_head_triton": fused["triton"] > 0 if cuda else None}
    if trainer.accelerator.is_main_process:
        write_json(Path(args.run_dir) / MEASURE, {
            "checks": checks, "ok": all(v is not False for v in checks.values()), "losses": losses,
            "unchanged_parameters": unchanged[:20], "trained_parameters": len(trained),
            "step_seconds": clock.steps, "generation_seconds": clock.generation,
            "train_seconds": [s - g for s, g in zip(clock.steps, clock.generation)],
            "generate_calls": clock.calls,
            "mean_completion_tokens": sum(clock.rollout_tokens) / max(len(clock.rollout_tokens), 1),
            "fused_head": fused, "memory_fraction": args.memory_fraction if cuda else None,
            "deepspeed": trainer.is_deepspeed_enabled, "processes": trainer.accelerator.num_processes, **memory})
    trainer.accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
