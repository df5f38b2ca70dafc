"""LoRA SFT of the QA generator (App. A.2) with TRL's SFTTrainer and peft.

    adapter = train_qa_generator(cfg)        # data/<profile>/qa_generator/adapter/
    python -m repro.train.sft --profile tiny

For each question of the configured training splits there is one conversational prompt-completion example per
`qa_generator.inputs` entry: "passages" = Table 11 over the formatted top-k passages, "question" = Table 12
(for Zero). The prompts are built by the same function the evaluation uses (repro.prompts.qa_messages), the
completion is the first golden answer, and the loss covers the completion only (TRL's completion_only_loss).
`require_answer_in_passages` keeps only questions whose passages hold an answer (the CPU profiles: a few dozen
examples must teach reading, and FanOutQA's top-5 hold the answer for a fifth of the questions, NQ's for three
quarters).
Examples longer than `max_length` tokens are dropped, never truncated (truncation would cut the answer).

The run directory holds checkpoints/ (HF Trainer checkpoints), adapter/ (adapter_model.safetensors and
adapter_config.json, written atomically at the end), train_log.jsonl (the trainer's log history) and
run_config.json (configuration, launcher's process count and fingerprint). A rerun of the same configuration reuses
the adapter or resumes from the last checkpoint; another configuration discards the directory and starts afresh.

`train_lora` serves every LoRA run with a stage of its own: the QA generator here, FilCo's filter and SEER's
DPO-aligned extractor (repro.baselines), the AR study's two runs (repro.ar_study, one launch for both). The stage's
process builds the examples, prepares the run directory and, unless its adapter is finished, writes the examples to a
file and starts the workers of the section's `accelerate_config` (repro.train.launch); each worker (`python -m
repro.train.lora_worker`) reads the same file and trains with `fit_lora`, the main one alone writing the log and the
adapter. The format warm-up of the CPU profiles (repro.train.warmup) calls `fit_lora_sft` in its own process.
"""

from __future__ import annotations

import argparse
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

from repro.assets import resolve
from repro.config import LaunchedLoRAConfig, LoRASFTConfig, Profile, SEERConfig, load_profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.generation.prompting import load_tokenizer
from repro.io import atomic_dir, fingerprint, model_fingerprint, write_json, write_jsonl
from repro.preflight import require
from repro.prompts import passages_document, qa_messages
from repro.train.checkpoints import last_checkpoint, recorded_fingerprint
from repro.train.fused_head import compact_fused_lm_head_on_cpu
from repro.train.launch import PARAMS, launch, launch_dir, launcher_processes

LoRAKind = typing.Literal["sft", "dpo"]  # TRL's SFTTrainer on prompt-completion examples, DPOTrainer on pairs
WORKER = "repro.train.lora_worker"  # the module each launched process runs
RUNS = "runs.json"  # the runs of a launch (section, kind, model, rows file, run directory) in its directory


def sft_examples(rows: list[dict], inputs: list[str]) -> list[dict]:
    """Prompt-completion examples (chat messages) of contexts rows: Table 11 and/or Table 12 → first golden answer."""
    examples = []
    for row in rows:
        completion = [{"role": "assistant", "content": row["golden_answers"][0]}]
        for kind in inputs:
            evidence = passages_document(row) if kind == "passages" else None
            examples.append({"prompt": qa_messages(row["question"], evidence), "completion": completion})
    return examples


def example_length(example: dict, tokenizer) -> int:
    """Tokens of a prompt-completion example as the trainer sees it (chat template applied)."""
    text = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def fitting_examples(examples: list[dict], tokenizer, max_length: int) -> tuple[list[dict], int]:
    """The examples of at most `max_length` tokens, and how many longer ones were dropped."""
    kept = [e for e in examples if example_length(e, tokenizer) <= max_length]
    return kept, len(examples) - len(kept)


def training_examples(cfg: Profile, tokenizer) -> tuple[list[dict], int]:
    """The examples of the profile's training splits that fit `max_length`, and how many were dropped."""
    sft = cfg.qa_generator
    examples = []
    for dataset in sft.datasets:
        rows = read_contexts(layout.contexts_path(cfg, dataset, sft.split))
        if sft.require_answer_in_passages:
            rows = [row for row in rows if answer_in_passages(row)]
        examples += sft_examples(sample_rows(rows, sft.max_train_questions, cfg.seed), sft.inputs)
    return fitting_examples(examples, tokenizer, sft.max_length)


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
    """The command line of `python -m repro.train.lora_worker` for the runs listed in `launch_root` (a
    repro.train.launch.launch_dir holding the profile, RUNS and the rows files)."""
    return ["--params", str(launch_root / PARAMS), "--profile", cfg.name, "--runs", str(launch_root / RUNS),
            *([] if progress else ["--no-progress"])]


def train_lora(cfg: Profile, runs: Sequence[LoRARun], progress: bool = True) -> list[Path]:
    """Train (or reuse, or resume) LoRA runs of one launcher in the worker processes of its `accelerate_config`,
    one launch for those not finished, one run after the other; returns their adapter directories. Each run's
    configuration gains the launcher's process count; a finished adapter of the same configuration is reused
    without a launch."""
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
            launch(accelerate_config, WORKER, worker_args(cfg, tmp, progress), key=key)
    adapters = [run.root / "adapter" for run in runs]
    if missing := [str(a) for a in adapters if not (a / "adapter_model.safetensors").exists()]:
        raise RuntimeError(f"the workers of {accelerate_config} ended without writing {missing}")
    return adapters


def train_qa_generator(cfg: Profile, root: str | Path | None = None, *, progress: bool = True) -> Path:
    """Fine-tune (or reuse, or resume) the LoRA QA generator of `cfg`; returns the adapter directory."""
    sft = cfg.qa_generator
    if sft is None:
        raise ValueError(f"profile {cfg.name} has no qa_generator section")
    root = Path(root) if root is not None else layout.qa_generator_dir(cfg.name)
    model = resolve(cfg.models.generator, cfg.name)
    examples, dropped = training_examples(cfg, load_tokenizer(model))
    if not examples:
        raise ValueError(f"no training example fits qa_generator.max_length={sft.max_length}")
    config = {"generator": cfg.models.generator, "model": model_fingerprint(model), "dtype": cfg.models.dtype,
              "seed": cfg.seed, "qa_generator": dataclasses.asdict(sft), "examples": fingerprint(examples),
              "n_examples": len(examples), "dropped_too_long": dropped}
    return train_lora(cfg, [LoRARun("qa_generator", "sft", model, examples, root, config)], progress)[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="LoRA SFT of the QA generator (App. A.2).")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile)
    require(cfg, "qa_generator")
    print(train_qa_generator(cfg))


if __name__ == "__main__":
    main()
