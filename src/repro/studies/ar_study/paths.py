"""Where the answer-recall study reads and writes, per profile (DVC outputs, kept across reruns):

    data/<profile>/ar_study/teacher/outputs.jsonl        the teacher's responses and verdicts (+ .manifest.json)
    data/<profile>/ar_study/teacher/summary.json         verdict counts and the number of questions kept
    data/<profile>/ar_study/teacher/requests.partial.jsonl   finished HTTP requests of an unfinished run (openai)
    data/<profile>/ar_study/sft_data/<variant>.jsonl     the two SFT sets (prompt-completion examples)
    data/<profile>/ar_study/runs/<variant>/              LoRA runs: adapter/, checkpoints/, train_log.jsonl, ...
    data/<profile>/ar_study/predictions/<dataset>/<variant>.jsonl   per-item AR records (+ .manifest.json)
"""

from __future__ import annotations

from pathlib import Path

from repro.data import layout

VARIANTS = ("rational", "vanilla")  # 𝕄: <reason> + <extract> targets; ℕ: <extract> only


def study_dir(profile: str) -> Path:
    return layout.profile_dir(profile) / "ar_study"


def teacher_path(profile: str) -> Path:
    return study_dir(profile) / "teacher" / "outputs.jsonl"


def teacher_requests_path(profile: str) -> Path:
    return study_dir(profile) / "teacher" / "requests.partial.jsonl"


def sft_data_path(profile: str, variant: str) -> Path:
    return study_dir(profile) / "sft_data" / f"{_checked(variant)}.jsonl"


def run_dir(profile: str, variant: str) -> Path:
    return study_dir(profile) / "runs" / _checked(variant)


def adapter_dir(profile: str, variant: str) -> Path:
    return run_dir(profile, variant) / "adapter"


def recall_records_path(profile: str, dataset: str, variant: str) -> Path:
    return study_dir(profile) / "predictions" / dataset / f"{_checked(variant)}.jsonl"


def _checked(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; the study has {list(VARIANTS)}")
    return variant
