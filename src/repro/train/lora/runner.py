"""The LoRA runner every fine-tuned model of the pipeline shares: SFT (TRL's SFTTrainer) or DPO (TRL's DPOTrainer) of
a peft adapter, resumable, in the worker processes of the section's `accelerate_config`.

    adapter = train_lora(cfg, [LoRARun(section, "sft", model, examples, root, config)])[0]

Its users: the QA generator (App. A.2, `repro.stages.qa_generator`), FilCo's filter and SEER's DPO-aligned extractor
(repro.baselines), the AR study's two runs (repro.studies.ar_study, one launch for both); the format warm-up of the
CPU profiles (repro.train.grpo.warmup) calls `fit_lora_sft` in its own process. Examples longer than `max_length`
tokens are dropped, never truncated (truncation would cut the answer), and the loss covers the completion only
(TRL's completion_only_loss).

The run directory holds checkpoints/ (HF Trainer checkpoints), adapter/ (adapter_model.safetensors and
adapter_config.json, written atomically at the end), train_log.jsonl (the trainer's log history) and
run_config.json (configuration, launcher's process count and fingerprint). A rerun of the same configuration reuses
the adapter or resumes from the last checkpoint; another configuration discards the directory and starts afresh.

The stage's process builds the examples, prepares the run directory and, unless its adapter is finished, writes the
examples to a file and starts the workers of the section's `accelerate_config` (repro.train.launch); each worker
(`python -m repro.train.lora.worker`) reads the same file and trains with `fit_lora`, the main one alone writing the
log and the adapter.
"""

from __future__ import annotations

import dataclasses
import shutil
import typing
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from accelerate import PartialState
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer, Trainer, TrainerCallback, TrainingArguments
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

from repro.config import LaunchedLoRAConfig, LoRASFTConfig, Profile, SEERConfig
from repro.io import atomic_dir, fingerprint, write_json, write_jsonl
from repro.train.checkpoints import last_checkpoint, recorded_fingerprint
from repro.train.launch import PARAMS, launch, launch_dir, launcher_processes
from repro.train.speedups.fused_head import compact_fused_lm_head_on_cpu

LoRAKind = typing.Literal["sft", "dpo"]  # TRL's SFTTrainer on prompt-completion examples, DPOTrainer on pairs
WORKER = "repro.train.lora.worker"  # the module each launched process runs
RUNS = "runs.json"  # the runs of a launch (section, kind, model, rows file, run directory) in its directory


def example_length(example: dict, tokenizer) -> int:
    """Tokens of a prompt-completion example as the trainer sees it (chat template applied)."""
    text = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def fitting_examples(examples: list[dict], tokenizer, max_length: int) -> tuple[list[dict], int]:
    """The examples of at most `max_length` tokens, and how many longer ones were dropped."""
    kept = [e for e in examples if example_length(e, tokenizer) <= max_length]
    return kept, len(examples) - len(kept)


def trainer_arguments(cfg: Profile, sft: LoRASFTConfig, output_dir: Path, progress: bool = True) -> dict:
    """Keyword arguments of a TRL config (SFTConfig, DPOConfig) for a LoRA run on `sft`'s settings."""
    return dict(
        output_dir=str(output_dir), seed=cfg.seed, data_seed=cfg.seed, report_to="none",
        learning_rate=sft.learning_rate, num_train_epochs=sft.epochs, max_steps=sft.max_steps,
        per_device_train_batch_size=sft.per_device_batch_size,
        gradient_accumulation_steps=sft.gradient_accumulation_steps, lr_scheduler_type=sft.lr_scheduler,
        warmup_steps=sft.warmup_steps, max_length=sft.max_length,
        bf16=sft.bf16, fp16=False, gradient_checkpointing=False, use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0, model_init_kwargs={"dtype": cfg.models.dtype, "use_safetensors": True},
        ddp_find_unused_parameters=False,  # every LoRA matrix is used in each forward pass
        logging_steps=1,
        save_strategy="steps", save_steps=sft.save_steps, save_total_limit=sft.save_total_limit,
        disable_tqdm=not progress,
    )


def sft_args(cfg: Profile, sft: LoRASFTConfig, output_dir: Path, progress: bool = True) -> SFTConfig:
    return SFTConfig(**trainer_arguments(cfg, sft, output_dir, progress), completion_only_loss=True)


def dpo_args(cfg: Profile, seer: SEERConfig, output_dir: Path, progress: bool = True) -> DPOConfig:
    """TRL's DPO config for SEER's LoRA run (`seer.beta`)."""
    return DPOConfig(**trainer_arguments(cfg, seer, output_dir, progress), beta=seer.beta)


def lora_config(sft: LoRASFTConfig) -> LoraConfig:
    return LoraConfig(r=sft.lora_rank, lora_alpha=sft.lora_alpha, lora_dropout=sft.lora_dropout,
                      target_modules=list(sft.target_modules), task_type="CAUSAL_LM")


def _prepare(root: Path, config: dict) -> bool:
    """Clear `root` if it holds a run of another configuration, or files without a readable run_config.json (a
    deletion cut by a kill, D102); True if its adapter is already finished."""
    config_file = root / "run_config.json"
    if recorded_fingerprint(config_file) != config["fingerprint"]:
        if root.exists() and any(root.iterdir()):
            warnings.warn(f"{root} holds a run of another configuration (or no run_config.json); it is discarded",
                          stacklevel=3)
            shutil.rmtree(root)
        write_json(config_file, config)
    return (root / "adapter" / "adapter_model.safetensors").exists()


def fit_in_run_dir(make_trainer: Callable[[], Trainer], args: TrainingArguments, root: Path, config: dict) -> Path:
    """Train the LoRA adapter of `make_trainer()` (built on `args`) in run directory `root`, resuming from the last
    checkpoint in args.output_dir, or reuse the finished adapter of the same `config`; returns the adapter directory.
    Of several processes, the main one alone prepares the directory and writes the log and the adapter; the others
    wait for it."""
    config = {**config, "fingerprint": fingerprint(config)}
    if config.get("processes", args.world_size) != args.world_size:
        raise ValueError(f"{root}/run_config.json: the run was launched for {config['processes']} processes, "
                         f"{args.world_size} run it")
    main, adapter = args.process_index == 0, root / "adapter"
    if main:
        _prepare(root, config)
    PartialState().wait_for_everyone()
    if (adapter / "adapter_model.safetensors").exists():
        return adapter
    compact_fused_lm_head_on_cpu()
    trainer = make_trainer()
    trainer.train(resume_from_checkpoint=last_checkpoint(Path(args.output_dir)))
    if main:
        write_jsonl(root / "train_log.jsonl", trainer.state.log_history)
        shutil.rmtree(adapter, ignore_errors=True)
        with atomic_dir(adapter) as tmp:
            trainer.model.save_pretrained(tmp)
    PartialState().wait_for_everyone()
    return adapter


def fit_lora_sft(model: str, examples: list[dict], args: SFTConfig, sft: LoRASFTConfig, root: Path,
                 config: dict, callbacks: Sequence[TrainerCallback] = ()) -> Path:
    """LoRA SFT on prompt-completion `examples` in run directory `root` (see `fit_in_run_dir`); returns the
    adapter directory."""
    return fit_in_run_dir(
        lambda: SFTTrainer(model=model, args=args, processing_class=AutoTokenizer.from_pretrained(model),
                           train_dataset=Dataset.from_list(examples), peft_config=lora_config(sft),
                           callbacks=list(callbacks)),
        args, root, config)


def fit_lora_dpo(model: str, pairs: list[dict], args: DPOConfig, lora: LoRASFTConfig, root: Path,
                 config: dict) -> Path:
    """DPO of a LoRA adapter on `model` over preference `pairs` ({"prompt", "chosen", "rejected"}) in run directory
    `root` (see `fit_in_run_dir`); the reference is the adapter-free model."""
    return fit_in_run_dir(
        lambda: DPOTrainer(model=model, args=args, train_dataset=Dataset.from_list(pairs),
                           processing_class=AutoTokenizer.from_pretrained(model), peft_config=lora_config(lora)),
        args, root, config)


def section_config(cfg: Profile, section: str) -> LaunchedLoRAConfig:
    """The LoRA section at dotted path `section` of a profile (`qa_generator`, `ar_study.sft`)."""
    node = cfg
    for part in section.split("."):
        node = getattr(node, part, None)
    if not isinstance(node, LaunchedLoRAConfig):
        raise ValueError(f"params.yaml: profiles.{cfg.name}.{section}: not a LoRA section of this profile")
    return node


def fit_lora(cfg: Profile, section: str, kind: LoRAKind, model: str, rows: list[dict], root: Path, config: dict,
             progress: bool = True) -> Path:
    """A LoRA run of `section` in this process (a worker of `train_lora`): SFT on examples or DPO on pairs."""
    lora = section_config(cfg, section)
    if kind == "sft":
        return fit_lora_sft(model, rows, sft_args(cfg, lora, root / "checkpoints", progress), lora, root, config)
    if kind == "dpo":
        return fit_lora_dpo(model, rows, dpo_args(cfg, lora, root / "checkpoints", progress), lora, root, config)
    raise ValueError(f"unknown LoRA run kind {kind!r}; expected one of {list(typing.get_args(LoRAKind))}")


@dataclasses.dataclass(frozen=True)
class LoRARun:
    """A LoRA run of `section`: SFT on prompt-completion examples or DPO on pairs (`rows`) of `model`, in run directory
    `root`; `config` is what the run depends on (its fingerprint decides reuse and resumption)."""

    section: str
    kind: LoRAKind
    model: str
    rows: list[dict]
    root: Path
    config: dict


def worker_args(cfg: Profile, launch_root: Path, progress: bool = True) -> list[str]:
    """The command line of `python -m repro.train.lora.worker` for the runs listed in `launch_root` (a
    repro.train.launch.launch_dir holding the profile, RUNS and the rows files)."""
    return ["--params", str(launch_root / PARAMS), "--profile", cfg.name, "--runs", str(launch_root / RUNS),
            *([] if progress else ["--no-progress"])]


def train_lora(cfg: Profile, runs: Sequence[LoRARun], progress: bool = True, worker: str = WORKER) -> list[Path]:
    """Train (or reuse, or resume) LoRA runs of one launcher in the worker processes of its `accelerate_config`,
    one launch for those not finished, one run after the other; returns their adapter directories. Each run's
    configuration gains the launcher's process count; a finished adapter of the same configuration is reused
    without a launch. `worker`: the module each process runs, WORKER or one that runs it (the GPU check's measures
    around it)."""
    configs = {section_config(cfg, run.section).accelerate_config for run in runs}
    if len(configs) != 1:
        raise ValueError(f"profile {cfg.name}: runs of one launch need one accelerate_config, got {sorted(configs)}")
    (accelerate_config,) = configs
    key = f"params.yaml: profiles.{cfg.name}.{runs[0].section}.accelerate_config"
    processes = launcher_processes(accelerate_config, key)
    todo = []
    for run in runs:
        config = {**run.config, "processes": processes}
        if not _prepare(run.root, {**config, "fingerprint": fingerprint(config)}):
            todo.append(run)
    if todo:
        with launch_dir(cfg) as tmp:
            listed = []
            for i, run in enumerate(todo):
                write_jsonl(tmp / f"rows-{i}.jsonl", run.rows)
                listed.append({"section": run.section, "kind": run.kind, "model": run.model,
                               "rows": str(tmp / f"rows-{i}.jsonl"), "run_dir": str(run.root)})
            write_json(tmp / RUNS, listed)
            launch(accelerate_config, worker, worker_args(cfg, tmp, progress), key=key)
    adapters = [run.root / "adapter" for run in runs]
    if missing := [str(a) for a in adapters if not (a / "adapter_model.safetensors").exists()]:
        raise RuntimeError(f"the workers of {accelerate_config} ended without writing {missing}")
    return adapters
