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
run_config.json (configuration and fingerprint). A rerun of the same configuration reuses the adapter or
resumes from the last checkpoint; another configuration discards the directory and starts afresh.
`fit_in_run_dir`, `trainer_arguments` and `lora_config` serve every LoRA run of the project: the QA generator
here, FilCo's filter and SEER's DPO-aligned extractor (repro.baselines).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer, Trainer, TrainerCallback
from trl import SFTConfig, SFTTrainer

from repro.assets import resolve
from repro.config import LoRASFTConfig, Profile, load_profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.splits import sample_rows
from repro.io import atomic_dir, fingerprint, model_fingerprint, write_json, write_jsonl
from repro.preflight import require
from repro.prompts import passages_document, qa_messages
from repro.retrieval.quality import read_contexts
from repro.train.checkpoints import last_checkpoint, recorded_fingerprint
from repro.train.fused_head import compact_fused_lm_head_on_cpu


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
        logging_steps=1,
        save_strategy="steps", save_steps=sft.save_steps, save_total_limit=sft.save_total_limit,
        disable_tqdm=not progress,
    )


def sft_args(cfg: Profile, sft: LoRASFTConfig, output_dir: Path, progress: bool = True) -> SFTConfig:
    return SFTConfig(**trainer_arguments(cfg, sft, output_dir, progress), completion_only_loss=True)


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


def fit_in_run_dir(make_trainer: Callable[[], Trainer], root: Path, config: dict) -> Path:
    """Train the LoRA adapter of `make_trainer()` in run directory `root` (resuming from the last checkpoint in
    its args.output_dir), or reuse the finished adapter of the same `config`; returns the adapter directory."""
    config = {**config, "fingerprint": fingerprint(config)}
    adapter = root / "adapter"
    if _prepare(root, config):
        return adapter
    compact_fused_lm_head_on_cpu()
    trainer = make_trainer()
    checkpoints = Path(trainer.args.output_dir)
    trainer.train(resume_from_checkpoint=last_checkpoint(checkpoints))
    write_jsonl(root / "train_log.jsonl", trainer.state.log_history)
    shutil.rmtree(adapter, ignore_errors=True)
    with atomic_dir(adapter) as tmp:
        trainer.model.save_pretrained(tmp)
    return adapter


def fit_lora_sft(model: str, examples: list[dict], args: SFTConfig, sft: LoRASFTConfig, root: Path,
                     config: dict, callbacks: Sequence[TrainerCallback] = ()) -> Path:
    """LoRA SFT on prompt-completion `examples` in run directory `root` (see `fit_in_run_dir`); returns the
    adapter directory."""
    return fit_in_run_dir(
        lambda: SFTTrainer(model=model, args=args, processing_class=AutoTokenizer.from_pretrained(model),
                           train_dataset=Dataset.from_list(examples), peft_config=lora_config(sft),
                           callbacks=list(callbacks)),
        root, config)


def train_qa_generator(cfg: Profile, root: str | Path | None = None, *, progress: bool = True) -> Path:
    """Fine-tune (or reuse, or resume) the LoRA QA generator of `cfg`; returns the adapter directory."""
    sft = cfg.qa_generator
    if sft is None:
        raise ValueError(f"profile {cfg.name} has no qa_generator section")
    root = Path(root) if root is not None else layout.qa_generator_dir(cfg.name)
    model = resolve(cfg.models.generator, cfg.name)
    examples, dropped = training_examples(cfg, AutoTokenizer.from_pretrained(model))
    if not examples:
        raise ValueError(f"no training example fits qa_generator.max_length={sft.max_length}")
    config = {"generator": cfg.models.generator, "model": model_fingerprint(model), "dtype": cfg.models.dtype,
              "seed": cfg.seed, "qa_generator": dataclasses.asdict(sft), "examples": fingerprint(examples),
              "n_examples": len(examples), "dropped_too_long": dropped}
    return fit_lora_sft(model, examples, sft_args(cfg, sft, root / "checkpoints", progress), sft, root, config)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="LoRA SFT of the QA generator (App. A.2).")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    args = parser.parse_args(argv)
    cfg = load_profile(args.profile)
    require(cfg, "qa_generator")
    print(train_qa_generator(cfg))


if __name__ == "__main__":
    main()
