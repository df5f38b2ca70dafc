"""A study = every configured method on every configured question set; Table 2 is the `main_comparison` study.

    files = run_main_comparison(cfg)     # DataFrame: dataset, method, path (one prediction file each)

Models are loaded once and shared across methods and datasets; each (dataset, method) file is resumable and
reused when its configuration is unchanged (repro.evaluation.records).
"""

from __future__ import annotations

import random

import pandas as pd
from transformers import AutoTokenizer

from repro.assets import resolve
from repro.config import Profile
from repro.data import layout
from repro.evaluation.methods import METHODS, ModelPool, build_answerer, build_refiner
from repro.evaluation.paths import predictions_path
from repro.evaluation.runner import evaluate
from repro.generation import GenerationParams
from repro.retrieval.quality import read_contexts

MAIN_COMPARISON = "main_comparison"


def sample_rows(rows: list[dict], max_questions: int | None, seed: int) -> list[dict]:
    """All rows, or a seeded random subset of `max_questions` kept in file order (FanOutQA lists the sub-questions
    of one parent question together, so the first N would cover few topics)."""
    if max_questions is None or max_questions >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), max_questions))
    return [rows[i] for i in keep]


def evaluation_rows(cfg: Profile, dataset: str, split: str, max_questions: int | None = None) -> list[dict]:
    """The contexts rows a study evaluates on (the profile's default retriever for open-domain sets)."""
    return sample_rows(read_contexts(layout.contexts_path(cfg, dataset, split)), max_questions, cfg.seed)


def length_tokenizer(cfg: Profile):
    """The extractor's tokenizer, in which every length and CR is counted (D13)."""
    return AutoTokenizer.from_pretrained(resolve(cfg.models.extractor, cfg.name))


def run_main_comparison(cfg: Profile, study: str = MAIN_COMPARISON, progress: bool = True) -> pd.DataFrame:
    """Run (or reuse) every method of `cfg.evaluation` on every dataset; one row per prediction file."""
    ev = cfg.evaluation
    if ev is None:
        raise ValueError(f"profile {cfg.name} has no evaluation section")
    pool = ModelPool(ev.backend, cfg.models.dtype, progress=False)
    answerer = build_answerer(cfg, pool)
    tokenizer = length_tokenizer(cfg)
    params = GenerationParams(max_new_tokens=ev.evidence_max_new_tokens, batch_size=ev.batch_size)
    sets = {dataset: evaluation_rows(cfg, dataset, ev.split, ev.max_questions) for dataset in ev.datasets}
    files = []
    for key in ev.methods:
        refiner = build_refiner(key, cfg, pool, params)
        for dataset, rows in sets.items():
            path = predictions_path(cfg.name, study, dataset, key)
            evaluate(rows, refiner, answerer, path, length_tokenizer=tokenizer, tokenizer_id=cfg.models.extractor,
                     chunk_size=ev.chunk_size, progress=progress, desc=f"{METHODS[key].label} on {dataset}")
            files.append({"dataset": dataset, "method": key, "path": str(path)})
    return pd.DataFrame(files)
