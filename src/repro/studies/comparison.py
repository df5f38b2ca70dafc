"""A study = every configured method on every configured question set, one prediction file each.

    files = run_main_comparison(cfg)     # Table 2: cfg.evaluation; DataFrame: dataset, method, path
    files = run_distractor_setting(cfg)  # Tables 9-10: cfg.distractor (gold + distractor paragraphs)
    files = run_noise_robustness(cfg)    # Figure 5: cfg.noise_robustness over the noisy contexts; + noise column
    files = run_reading_check(cfg)       # Zero vs Full where the top-k hold an answer: does the generator read?

Models are loaded once and shared across methods and datasets; each (dataset, method) file is resumable and
reused when its configuration is unchanged (repro.evaluation.records).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from repro.assets import resolve
from repro.config import EvaluationConfig, Profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.evaluation.methods import adapter_models, build_answerer, build_refiner
from repro.evaluation.refiners import Refiner
from repro.evaluation.runner import evaluate
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.generation.prompting import load_tokenizer
from repro.io import write_json
from repro.registry import METHODS

MAIN_COMPARISON = "main_comparison"
DISTRACTOR_SETTING = "distractor_setting"
NOISE_ROBUSTNESS = "noise_robustness"
READING_CHECK = f"{MAIN_COMPARISON}/reading_check"  # part of the main comparison's predictions
READING_CHECK_METHODS = ("zero", "full")


def evaluation_rows(cfg: Profile, dataset: str, split: str, max_questions: int | None = None) -> list[dict]:
    """The contexts rows a study evaluates on (the profile's default retriever for open-domain sets)."""
    return sample_rows(read_contexts(layout.contexts_path(cfg, dataset, split)), max_questions, cfg.seed)


def length_tokenizer(cfg: Profile):
    """The extractor's tokenizer, in which every length and CR is counted (D13)."""
    return load_tokenizer(resolve(cfg.models.extractor, cfg.name))


class Study:
    """What the methods of a study share: the QA generator, the length tokenizer, the decoding settings and the
    loaded models (a context manager: leaving it ends the models' engines)."""

    def __init__(self, cfg: Profile, ev: EvaluationConfig):
        self.cfg, self.ev = cfg, ev
        self.pool = ModelPool(ev.backend, cfg.models.inference, progress=False, options=ev.options,
                              adapters_on=adapter_models(cfg, ev.methods))
        self.answerer = build_answerer(cfg, self.pool)
        self.tokenizer = length_tokenizer(cfg)
        self.params = GenerationParams(max_new_tokens=ev.evidence_max_new_tokens, batch_size=ev.batch_size)
        self._refiners = {}

    def refiner(self, method: str):
        if method not in self._refiners:
            self._refiners[method] = build_refiner(method, self.cfg, self.pool, self.params)
        return self._refiners[method]

    def evaluate(self, rows: list[dict], refiner: Refiner, path, desc: str, progress: bool = True) -> list[dict]:
        return evaluate(rows, refiner, self.answerer, path, length_tokenizer=self.tokenizer,
                        tokenizer_id=self.cfg.models.extractor, chunk_size=self.ev.chunk_size, progress=progress,
                        desc=desc)

    def close(self) -> None:
        self._refiners.clear()
        self.pool.close()

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_study(cfg: Profile, ev: EvaluationConfig | None, study: str, progress: bool = True,
              sets: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """Run (or reuse) every method of `ev` on every dataset of `ev` (or on the rows of `sets`, by dataset); one row
    per prediction file."""
    if ev is None:
        raise ValueError(f"profile {cfg.name} has no configuration for the {study} study")
    if sets is None:
        sets = {dataset: evaluation_rows(cfg, dataset, ev.split, ev.max_questions) for dataset in ev.datasets}
    files = []
    with Study(cfg, ev) as runner:
        for method in ev.methods:
            for dataset, rows in sets.items():
                path = layout.predictions_path(cfg.name, study, dataset, method)
                runner.evaluate(rows, runner.refiner(method), path, f"{METHODS[method].label} on {dataset}", progress)
                files.append({"dataset": dataset, "method": method, "path": str(path)})
    return pd.DataFrame(files, columns=["dataset", "method", "path"])


def run_main_comparison(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Table 2: the methods of `cfg.evaluation` on its (open-domain) sets."""
    return run_study(cfg, cfg.evaluation, MAIN_COMPARISON, progress)


def with_evaluation_settings(cfg: Profile, **study) -> EvaluationConfig:
    """`cfg.evaluation` (decoding, QA generator, batching) with a study's own datasets, methods and size."""
    if cfg.evaluation is None:
        raise ValueError(f"profile {cfg.name} has no evaluation section")
    return dataclasses.replace(cfg.evaluation, **study)


def run_distractor_setting(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Tables 9-10: the methods of `cfg.distractor` on distractor-setting sets (gold + distractor paragraphs)."""
    if cfg.distractor is None:
        raise ValueError(f"profile {cfg.name} has no distractor section")
    return run_study(cfg, with_evaluation_settings(cfg, **dataclasses.asdict(cfg.distractor)), DISTRACTOR_SETTING,
                     progress)


def run_noise_robustness(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Figure 5: the methods of `cfg.noise_robustness` on the same questions with k = each of `noise.counts`
    irrelevant passages added (data/<profile>/noise); one row per (dataset, noise, method) prediction file; none with
    `noise_robustness: null` (not requested, recorded in the predictions' study.json)."""
    settings, noise = cfg.noise_robustness, cfg.noise
    write_json(layout.profile_dir(cfg.name) / "predictions" / NOISE_ROBUSTNESS / "study.json",
               {"requested": settings is not None})  # the stage's output exists either way
    if settings is None:
        print(f"profiles.{cfg.name}.noise_robustness is null: Figure 5 is not requested", flush=True)
        return pd.DataFrame(columns=["dataset", "noise", "method", "path"])
    if noise is None:
        raise ValueError(f"profile {cfg.name}: noise_robustness needs the noise section (the data stage's noise sets)")
    ev = with_evaluation_settings(cfg, datasets=noise.datasets, split=noise.split, methods=settings.methods,
                                  max_questions=settings.max_questions)
    files = []
    with Study(cfg, ev) as runner:
        for dataset in noise.datasets:
            for k in noise.counts:
                contexts = read_contexts(layout.noise_path(cfg.name, dataset, noise.split, k))
                rows = sample_rows(contexts, ev.max_questions, cfg.seed)
                for method in ev.methods:
                    path = layout.predictions_path(cfg.name, NOISE_ROBUSTNESS, f"{dataset}/k{k}", method)
                    runner.evaluate(rows, runner.refiner(method), path, f"{METHODS[method].label}, {dataset} + {k}",
                                    progress)
                    files.append({"dataset": dataset, "noise": k, "method": method, "path": str(path)})
    return pd.DataFrame(files)


def sample_answerable(rows: list[dict], max_questions: int | None, seed: int) -> list[dict]:
    """A seeded subset of the rows whose passages hold a golden answer (`answer_in_passages`)."""
    return sample_rows([row for row in rows if answer_in_passages(row)], max_questions, seed)


def run_reading_check(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Zero and Full on `evaluation.reading_check_questions` test questions per Table 2 set whose passages hold an
    answer: does the QA generator read the passages? Table 2's few questions hold too few such items to tell (D91).
    Sets without such a question are skipped; one row per prediction file."""
    ev = cfg.evaluation
    if ev is None or ev.reading_check_questions is None:
        raise ValueError(f"profile {cfg.name} sets no evaluation.reading_check_questions")
    sets = {dataset: rows for dataset in ev.datasets
            if (rows := sample_answerable(read_contexts(layout.contexts_path(cfg, dataset, ev.split)),
                                        ev.reading_check_questions, cfg.seed))}
    return run_study(cfg, with_evaluation_settings(cfg, methods=list(READING_CHECK_METHODS)), READING_CHECK,
                     progress, sets)
