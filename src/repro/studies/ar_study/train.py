"""The data stages of the answer-recall study: the teacher's responses (`run_teacher`, stage `ar_study_teacher`: an
API on the paper profiles, so no GPU), then the two SFT sets and the two LoRA runs (`train_variants`, stage
`ar_study_train`).

    run_teacher(cfg)                       # data/<profile>/ar_study/teacher/outputs.jsonl, summary.json
    adapters = train_variants(cfg)         # {"rational": …/adapter, "vanilla": …/adapter}

Both runs fine-tune `ar_study.student` with TRL's SFTTrainer and peft through repro.train.lora.runner (rank 16, 3 epochs
in §2.2; the rest of `ar_study.sft` is ours, D83), one after the other in the worker processes of one launch of
`ar_study.sft.accelerate_config`. Each run directory resumes from its last checkpoint and is reused when its
configuration (student, examples, settings, process count) is unchanged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.assets import resolve
from repro.config import Profile
from repro.evaluation.records import read_records
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint, write_json, write_jsonl
from repro.studies.ar_study.paths import VARIANTS, run_dir, sft_data_path, teacher_path
from repro.studies.ar_study.targets import sft_set
from repro.studies.ar_study.teacher import TEACHER_FIELDS, synthesize, teacher_rows, verdict_counts
from repro.train.lora.runner import LoRARun, fitting_examples, train_lora


def run_teacher(cfg: Profile, progress: bool = True) -> Path:
    """The teacher's record of every sampled question and their verdict counts (summary.json); an error when it kept
    no response."""
    if cfg.ar_study is None:
        raise ValueError(f"profile {cfg.name} has no ar_study section")
    counts = verdict_counts(synthesize(cfg, progress))
    write_json(teacher_path(cfg.name).parent / "summary.json", counts)
    if counts["questions_kept"] == 0:
        raise ValueError(f"the teacher kept no response out of {counts['responses']} ({counts}); "
                         "raise ar_study.teacher.samples or .questions, or use another teacher")
    return teacher_path(cfg.name)


def build_sft_sets(cfg: Profile) -> dict[str, list[dict]]:
    """Both variants' examples from the teacher's finished records (written to sft_data/ for inspection)."""
    records = read_records(teacher_path(cfg.name), TEACHER_FIELDS)
    rows = teacher_rows(cfg)
    sets = {variant: sft_set(rows, records, variant) for variant in VARIANTS}
    for variant, examples in sets.items():
        write_jsonl(sft_data_path(cfg.name, variant), examples)
    return sets


def variant_run(cfg: Profile, variant: str, examples: list[dict]) -> LoRARun:
    """One variant's LoRA run: its examples that fit `ar_study.sft.max_length`, in its run directory."""
    sft = cfg.ar_study.sft
    model = resolve(cfg.ar_study.student, cfg.name)
    fitting, dropped = fitting_examples([{k: e[k] for k in ("prompt", "completion")} for e in examples],
                                        load_tokenizer(model), sft.max_length)
    if not fitting:
        raise ValueError(f"no {variant} example fits ar_study.sft.max_length={sft.max_length}")
    config = {"study": "ar_study", "variant": variant, "student": cfg.ar_study.student,
              "model": model_fingerprint(model), "dtype": cfg.models.dtype, "seed": cfg.seed,
              "sft": dataclasses.asdict(sft), "examples": fingerprint(fitting), "n_examples": len(fitting),
              "dropped_too_long": dropped}
    return LoRARun("ar_study.sft", "sft", model, fitting, run_dir(cfg.name, variant), config)


def train_variants(cfg: Profile, progress: bool = True) -> dict[str, Path]:
    """Both variants' SFT sets and LoRA runs (one launch), from the teacher's records; each adapter directory."""
    if cfg.ar_study is None:
        raise ValueError(f"profile {cfg.name} has no ar_study section")
    sets = build_sft_sets(cfg)
    adapters = train_lora(cfg, [variant_run(cfg, variant, sets[variant]) for variant in VARIANTS], progress)
    return dict(zip(VARIANTS, adapters, strict=True))
