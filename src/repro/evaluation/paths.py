"""Where the evaluation layer reads and writes, per profile (DVC outputs, kept across reruns):

    data/<profile>/qa_generator/adapter/                       the LoRA QA generator (repro.train.sft)
    data/<profile>/predictions/<study>/<dataset>/<method>.jsonl per-item records (+ .manifest.json,
                                                               + .partial.jsonl while running)
    data/<profile>/predictions/main_comparison/reading_check/<dataset>/<method>.jsonl   Zero and Full on the
                                                               questions whose passages hold an answer (D91)

Per-item records live under data/ (not results/): they are the intermediate every table and significance test of
a study reads, and must survive a rerun of the notebook that renders them.
"""

from __future__ import annotations

from pathlib import Path

from repro.data import layout


def qa_generator_dir(profile: str) -> Path:
    return layout.profile_dir(profile) / "qa_generator"


def adapter_dir(profile: str) -> Path:
    return qa_generator_dir(profile) / "adapter"


def predictions_path(profile: str, study: str, dataset: str, method: str) -> Path:
    return layout.profile_dir(profile) / "predictions" / study / dataset / f"{method}.jsonl"
