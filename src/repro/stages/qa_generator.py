"""Stage `qa_generator`: LoRA SFT of the QA generator (App. A.2) with TRL's SFTTrainer and peft.

    adapter = train_qa_generator(cfg)        # data/<profile>/qa_generator/adapter/
    python -m repro.stages.qa_generator --profile tiny

For each question of the configured training splits there is one conversational prompt-completion example per
`qa_generator.inputs` entry: "passages" = Table 11 over the formatted top-k passages, "question" = Table 12
(for Zero). The prompts are built by the same function the evaluation uses (repro.formulas.prompts.qa_messages), the
completion is the first golden answer, and the loss covers the completion only (TRL's completion_only_loss).
`require_answer_in_passages` keeps only questions whose passages hold an answer (the CPU profiles: a few dozen
examples must teach reading, and FanOutQA's top-5 hold the answer for a fifth of the questions, NQ's for three
quarters).
Examples longer than `max_length` tokens are dropped, never truncated (truncation would cut the answer).

The LoRA run itself is `repro.train.lora.runner`'s (checkpoints, resume, the accelerate launch).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.assets import resolve
from repro.config import Profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.formulas.prompts import passages_document, qa_messages
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint
from repro.stages import command_line
from repro.train.lora.runner import LoRARun, fitting_examples, train_lora


def sft_examples(rows: list[dict], inputs: list[str]) -> list[dict]:
    """Prompt-completion examples (chat messages) of contexts rows: Table 11 and/or Table 12 → first golden answer."""
    examples = []
    for row in rows:
        completion = [{"role": "assistant", "content": row["golden_answers"][0]}]
        for kind in inputs:
            evidence = passages_document(row) if kind == "passages" else None
            examples.append({"prompt": qa_messages(row["question"], evidence), "completion": completion})
    return examples


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


main = command_line("qa_generator", __doc__, train_qa_generator)

if __name__ == "__main__":
    main()
