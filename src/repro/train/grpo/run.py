"""One call trains the extractor of a profile: `train_extractor(cfg)` (§3, App. A.2).

A run directory (default `data/<profile>/train/eviomni`) holds

    checkpoints/checkpoint-<step>/   TRL/transformers checkpoints (model, optimizer, RNG, trainer state)
    train_log.jsonl, dev_eval.jsonl  per-step and per-checkpoint logs (repro.train.grpo.logs)
    extractor/                       the selected checkpoint as a plain model directory (model + tokenizer),
                                     loadable by repro.generation like any other extractor (with `train.lora`,
                                     the checkpoints hold adapters: the selected one is merged into the policy)
    selection.json                   which step was selected, on which metric, with which value (or that no dev
                                     metric existed, or `train.selection_metric` is null, and the last step was
                                     exported)
    run_config.json                  everything the run depends on, with its fingerprint (and how many training
                                     questions `train.require_answer_in_passages` dropped)

The policy starts from `repro.train.grpo.warmup.starting_policy(cfg)`: `models.extractor`, or its format warm-up on the
CPU profiles (D90). Re-running with the same configuration resumes from the last checkpoint (a killed run continues
where it stopped); a different configuration discards the directory's checkpoints and starts afresh, as DVC would for
a changed stage. With `train.accelerate_config` set, the run is launched in worker processes
through `accelerate launch` (repro.train.launch: multi-GPU, DeepSpeed); otherwise it runs in this process.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from accelerate import PartialState
from datasets import Dataset
from transformers import AutoTokenizer, TrainerCallback, TrainerState
from trl import GRPOConfig

from repro.assets import resolve
from repro.config import Profile, RewardsConfig, TrainConfig
from repro.data import layout
from repro.generation import attention  # noqa: F401  (registers sdpa_grouped_decode)
from repro.generation.adapters import merged_model
from repro.io import fingerprint, read_json_object, write_json
from repro.nli import NLIScorer
from repro.registry import REWARD_DESIGNS
from repro.train.checkpoints import TRAINER_STATE, last_checkpoint, recorded_fingerprint
from repro.train.grpo.callbacks import DevSelectionCallback, TrainLogCallback
from repro.train.grpo.data import split_rows, training_rows
from repro.train.grpo.logs import TrainRun
from repro.train.grpo.rollout_reward import DesignReward
from repro.train.grpo.trainer import EviOmniTrainer
from repro.train.grpo.warmup import starting_policy
from repro.train.launch import PARAMS, launch, launch_dir
from repro.train.speedups.lora_policy import peft_config

RUN_STATE_FILES = {"optimizer.pt", "scheduler.pt", "scaler.pt", TRAINER_STATE, "training_args.bin"}
ADAPTER_FILES = {"adapter_config.json", "adapter_model.safetensors", "README.md"}  # what peft saves of a LoRA policy


def _train_config(cfg: Profile) -> TrainConfig:
    if cfg.train is None:
        raise ValueError(f"profile {cfg.name} has no train section")
    return cfg.train


def nli_scorer(cfg: Profile, rewards_cfg: RewardsConfig) -> NLIScorer | None:
    """The NLI model of R_EQR, loaded once per training process on that process's device (each GPU of a multi-process
    run holds its own copy), for the reward designs that need it (D126); else None."""
    if "nli" not in REWARD_DESIGNS[rewards_cfg.design].requires:
        return None
    if rewards_cfg.nli_model is None:
        raise ValueError(f"profiles.{cfg.name}.rewards.nli_model must name an NLI model for design "
                         f"{rewards_cfg.design!r}")
    return NLIScorer(resolve(rewards_cfg.nli_model, cfg.name), device=str(PartialState().device))


def grpo_seed(cfg: Profile, train: TrainConfig) -> int:
    """GRPO's seed: `train.seed`, or the profile's seed when it is null."""
    return cfg.seed if train.seed is None else train.seed


def grpo_args(cfg: Profile, train: TrainConfig, output_dir: Path, progress: bool = True) -> GRPOConfig:
    """TRL's config for a profile: the paper's values (lr, β, ε) and ours for what it omits
    (D38, D39); vLLM's importance-sampling correction only when the profile asks for it (D139)."""
    seed = grpo_seed(cfg, train)
    return GRPOConfig(
        output_dir=str(output_dir), seed=seed, data_seed=seed, report_to="none",
        learning_rate=train.learning_rate, beta=train.beta, epsilon=train.epsilon, loss_type=train.loss_type,
        num_generations=train.num_generations, per_device_train_batch_size=train.per_device_batch_size,
        gradient_accumulation_steps=train.gradient_accumulation_steps,
        steps_per_generation=train.steps_per_generation, num_iterations=train.num_iterations,
        max_completion_length=train.max_completion_length, temperature=train.temperature, top_p=train.top_p,
        num_train_epochs=train.epochs, max_steps=train.max_steps, lr_scheduler_type=train.lr_scheduler,
        warmup_steps=train.warmup_steps, weight_decay=train.weight_decay, max_grad_norm=train.max_grad_norm,
        bf16=train.bf16, fp16=False, gradient_checkpointing=train.gradient_checkpointing,
        use_cpu=not torch.cuda.is_available(), disable_dropout=True, dataloader_num_workers=0,
        model_init_kwargs={"dtype": cfg.models.dtype, "use_safetensors": True,
                           **({"attn_implementation": train.attn_implementation} if train.attn_implementation else {})},
        use_vllm=train.use_vllm, vllm_mode=train.vllm_mode, vllm_tensor_parallel_size=train.vllm_tensor_parallel_size,
        vllm_gpu_memory_utilization=train.vllm_gpu_memory_utilization,
        vllm_max_model_length=train.vllm_max_model_length, vllm_server_base_url=train.vllm_server_base_url,
        vllm_importance_sampling_correction=train.vllm_importance_sampling_correction,
        logging_steps=1, save_strategy="steps", save_steps=train.save_steps, save_total_limit=train.save_total_limit,
        disable_tqdm=not progress,
    )


def _prepare_run_dir(run: TrainRun, config: dict, is_main: bool) -> None:
    """Keep the run directory when it belongs to `config` (resume), else clear it (on the main process; every
    process waits for it before looking for checkpoints). A directory without a readable run_config.json (e.g.
    a deletion cut by a kill) is cleared too: its checkpoints cannot be told to belong to this run."""
    expected = fingerprint(config)
    if is_main and recorded_fingerprint(run.config_file) != expected:
        if run.root.exists() and any(run.root.iterdir()):
            warnings.warn(f"{run.root} holds a run of another configuration (or no run_config.json); its "
                          f"checkpoints and logs are discarded")
            shutil.rmtree(run.root)
        write_json(run.config_file, {"fingerprint": expected, **config})
    PartialState().wait_for_everyone()


def export_checkpoint(checkpoint: Path, out: Path, dtype: str | None = None) -> None:
    """Copy a checkpoint's model and tokenizer files (no optimizer/RNG/trainer state) to `out`, atomically:
    the new directory is complete before it replaces the old one. A LoRA checkpoint (`train.lora`) is merged into
    the policy it was trained from (loaded in `dtype`), so `out` is a plain model directory either way."""
    tmp, old = out.with_name(f".{out.name}.tmp"), out.with_name(f".{out.name}.old")
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    adapter = (checkpoint / "adapter_config.json").exists()
    skipped = RUN_STATE_FILES | (ADAPTER_FILES if adapter else set())
    for item in checkpoint.iterdir():
        if item.is_file() and item.name not in skipped and not item.name.startswith("rng_state"):
            shutil.copy2(item, tmp / item.name)
    if adapter:
        base = read_json_object(checkpoint / "adapter_config.json")["base_model_name_or_path"]
        merged_model(base, checkpoint, dtype).save_pretrained(tmp, safe_serialization=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def selected_step(state: TrainerState, metric: str | None) -> tuple[int, str]:
    """The step to export and how it was chosen: the best dev score of `metric`, or, when the run has none
    (`metric` None: no dev selection; `state.best_metric` None or NaN: no checkpoint was scored on dev), the last
    step, saying so."""
    if metric is None:
        return state.global_step, "last step: train.selection_metric is null (no dev selection)"
    if state.best_metric is not None and math.isfinite(state.best_metric) and state.best_global_step:
        return state.best_global_step, f"best dev {metric} = {state.best_metric:.4g}"
    return state.global_step, f"last step: no dev {metric} was recorded (best_metric = {state.best_metric})"


def _export_selected(state: TrainerState, run: TrainRun, metric: str | None, dtype: str) -> None:
    step, selected_by = selected_step(state, metric)
    checkpoint = run.checkpoints / f"checkpoint-{step}"
    export_checkpoint(checkpoint, run.extractor, dtype)
    value = state.best_metric if state.best_metric is not None and math.isfinite(state.best_metric) else None
    write_json(run.selection_file, {"metric": metric, "value": value, "step": step, "selected_by": selected_by,
                                    "checkpoint": str(checkpoint), "extractor": str(run.extractor),
                                    "last_step": state.global_step})
    print(f"{run.root}: exported checkpoint-{step} of {state.global_step} steps ({selected_by})", flush=True)


def _finished_state(checkpoint: str | None) -> TrainerState | None:
    """The trainer state of `checkpoint` if it is the end of its run (transformers would train on)."""
    if checkpoint is None:
        return None
    state = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE))
    return state if state.global_step >= state.max_steps else None


def build_trainer(cfg: Profile, run: TrainRun, train_rows: Sequence[dict], dev_rows: Sequence[dict], *,
                  progress: bool = True, callbacks: Sequence[TrainerCallback] = (),
                  train_questions: dict | None = None) -> EviOmniTrainer:
    """The trainer of a run on `train_rows`, selecting on `dev_rows` (rows of repro.train.grpo.data); clears the run
    directory first if it holds a run of another configuration. `train_questions` (from
    repro.train.grpo.data.training_rows: how many questions the filter of D149 dropped) goes into run_config.json."""
    train, rewards_cfg = _train_config(cfg), cfg.rewards
    model_path = starting_policy(cfg, progress=progress)
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    args = grpo_args(cfg, train, run.checkpoints, progress)
    config = {"profile": cfg.name, "seed": grpo_seed(cfg, train), "extractor": cfg.models.extractor,
              "dtype": cfg.models.dtype, "train": dataclasses.asdict(train), "rewards": dataclasses.asdict(rewards_cfg),
              "train_rows": fingerprint(list(train_rows)), "dev_rows": fingerprint(list(dev_rows)),
              "processes": args.world_size, "train_questions": train_questions}
    _prepare_run_dir(run, config, args.process_index == 0)
    trainer = EviOmniTrainer(
        model=model_path, reward_funcs=[DesignReward(rewards_cfg, tokenizer, nli_scorer(cfg, rewards_cfg))],
        args=args, train_dataset=Dataset.from_list(list(train_rows)), processing_class=tokenizer,
        rewards_config=rewards_cfg, max_answer_length=train.max_answer_length, sample_answers=train.sample_answers,
        kl_estimator=train.kl_estimator, shared_prefill=train.shared_prefill, rollout_model=train.rollout_model,
        peft_config=peft_config(train.lora))
    trainer.add_callback(TrainLogCallback(run.train_log))
    if train.selection_metric is not None:
        trainer.add_callback(DevSelectionCallback(trainer, dev_rows, train.selection_metric, run.dev_log,
                                                  evaluate_initial=train.evaluate_initial,
                                                  score_single_checkpoint=train.score_single_checkpoint))
    for callback in callbacks:
        trainer.add_callback(callback)
    return trainer


def fit(cfg: Profile, run: TrainRun, train_rows: Sequence[dict], dev_rows: Sequence[dict], *, progress: bool = True,
        callbacks: Sequence[TrainerCallback] = (), train_questions: dict | None = None) -> TrainRun:
    """Train (resuming from the run's last checkpoint if there is one) and export the selected extractor."""
    trainer = build_trainer(cfg, run, train_rows, dev_rows, progress=progress, callbacks=callbacks,
                            train_questions=train_questions)
    checkpoint = last_checkpoint(run.checkpoints)
    state = _finished_state(checkpoint)
    if state is None:
        trainer.train(resume_from_checkpoint=checkpoint)
        state = trainer.state
    if trainer.accelerator.is_main_process:
        _export_selected(state, run, _train_config(cfg).selection_metric, cfg.models.dtype)
    trainer.accelerator.wait_for_everyone()
    return run


def train_in_process(cfg: Profile, root: str | Path | None = None, *, progress: bool = True) -> TrainRun:
    """Train on the profile's train split and select on its dev split, in this process."""
    train = _train_config(cfg)
    tokenizer = AutoTokenizer.from_pretrained(resolve(cfg.models.extractor, cfg.name))
    rows, questions = training_rows(cfg, tokenizer)
    if questions["require_answer_in_passages"]:
        print(f"train.require_answer_in_passages: dropped {questions['dropped']} of {questions['questions']} "
              f"training questions whose top-k passages hold no golden answer", flush=True)
    selects = train.selection_metric is not None  # without dev selection no dev row is read (D192)
    dev_rows = split_rows(cfg, "dev", tokenizer, train.dev_max_questions) if selects else []
    run = TrainRun(Path(root) if root is not None else layout.train_run_dir(cfg.name))
    return fit(cfg, run, rows, dev_rows, progress=progress, train_questions=questions)


def train_extractor(cfg: Profile, root: str | Path | None = None) -> TrainRun:
    """Train the extractor of `cfg` into `root` (default: data/<profile>/train/eviomni); returns the run. A study's
    variant is a profile of its own (`repro.config.with_overrides`).

    Runs in this process, or under `accelerate launch --config_file <train.accelerate_config>` for multi-process
    training, whose workers read `cfg` from the launch's params file."""
    accelerate_config = _train_config(cfg).accelerate_config
    root = Path(root) if root is not None else layout.train_run_dir(cfg.name)
    if accelerate_config is None:
        return train_in_process(cfg, root)
    starting_policy(cfg)  # the format warm-up, if any, runs once, before any worker process starts
    with launch_dir(cfg) as tmp:
        launch(accelerate_config, "repro.train.grpo",
               ["--params", str(tmp / PARAMS), "--profile", cfg.name, "--run-dir", str(root)],
               key=f"params.yaml: profiles.{cfg.name}.train.accelerate_config")
    return TrainRun(root)
