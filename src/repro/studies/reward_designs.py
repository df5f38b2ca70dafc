"""The reward-design study (issue #18): one GRPO run per row of `reward_designs.designs` from the same starting
policy, data and step budget, each extractor evaluated like Table 2's EviOmni column and by what its evidence holds,
and compared with EviOmni's reward (D158-D161).

    files = run_reward_designs(cfg)          # DataFrame: design, dataset, path (one prediction file each)
    files = score_evidence(cfg, files)       # + evidence_scores: per item AR, NLI support, ARENA's relevance
    summary = summarize_designs(files)       # n, EM, F1, CR, evidence AR, NLI support, relevance P/R per design
    tests = compare_designs(files)           # each design against `eviomni` on the same items, Holm

A row is a `rewards.design` and optionally a `train.kl_estimator` (repro.config.DesignRow), named `eviomni_k2`
is EviOmni's reward under ARENA's k2 KL estimator, `arena_k2` ARENA as published. Runs live in
data/<profile>/train/reward_designs/<row>/ (resumable like the main run, repro.train.grpo.run), except the row that
would repeat the main run (repro.config.is_main_design_run), which reuses data/<profile>/train/eviomni/ (D170).
Prediction files live in data/<profile>/predictions/reward_designs/<dataset>/<row>.jsonl and the per-item evidence
scores in data/<profile>/predictions/reward_designs/evidence_scores/<dataset>/<row>.jsonl (resumable,
repro.evaluation.records). A profile without the section (`reward_designs: null`) writes `study.json` saying so into
both directories.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from repro.assets import resolve
from repro.config import DesignRow, Profile, is_main_design_run, with_overrides
from repro.data import layout
from repro.evaluation.records import RecordFile, process_resumably, read_records
from repro.evaluation.tables import SUMMARY_COLUMNS, summarize
from repro.formulas import metrics, rewards
from repro.io import fingerprint, model_fingerprint, write_json
from repro.nli import NLIScorer
from repro.registry import REWARD_DESIGNS
from repro.studies.comparison import evaluation_rows
from repro.studies.trained_extractors import compare_with_reference, evaluate_extractors, main_run
from repro.train.grpo.data import gold_passages
from repro.train.grpo.logs import TrainRun
from repro.train.grpo.run import train_extractor

STUDY = "reward_designs"
REFERENCE = "eviomni"  # every row is compared with EviOmni's reward (Eq. 5)
SUPPORT_THRESHOLD = 0.5  # the evidence supports the answer: P(entailment) above this, for some golden answer (D160)
SCORE_FIELDS = ("id", "ar_evidence", "nli_entailment", "nli_support", "relevance", "gold_passages")
FILE_COLUMNS = ["design", "dataset", "path"]
EVIDENCE_COLUMNS = ["evidence AR", "NLI support", "NLI entailment", "relevance tagged", "relevance precision",
                    "relevance recall"]
BINARY_METRICS = ("em", "ar_evidence", "nli_support")  # McNemar and its exact interval; F1 a bootstrap interval


def design_profile(cfg: Profile, row: DesignRow) -> Profile:
    """The profile of one row's run: `cfg` with `rewards.design`, and for a row with a KL estimator
    `train.kl_estimator`, replaced; everything else (starting policy, data, steps, dev selection) is the main run's."""
    return with_overrides(cfg, {"rewards.design": row.design} | (
        {"train.kl_estimator": row.kl_estimator} if row.kl_estimator else {}))


def design_run(cfg: Profile, row: DesignRow) -> TrainRun:
    """The run of `row`: the main run (stage train_eviomni) when it is that run (D170), else its own directory."""
    if is_main_design_run(cfg, row):
        return TrainRun(layout.train_run_dir(cfg.name))
    return TrainRun(layout.train_run_dir(cfg.name, f"{STUDY}/{row.name}"))


def trained_design_run(cfg: Profile, row: DesignRow) -> TrainRun:
    """Train (or resume, or reuse) the run of `row`; the main run is only read, never trained here."""
    if is_main_design_run(cfg, row):
        return main_run(cfg, f"the {row.name} row of the reward-design study", "D170")
    budget = {"train.max_steps": cfg.reward_designs.max_steps or cfg.train.max_steps,
              "train.score_single_checkpoint": False}  # a one-step row has nothing to select (D172, D177)
    return train_extractor(with_overrides(design_profile(cfg, row), budget), design_run(cfg, row).root)


def evidence_scores_path(cfg: Profile, dataset: str, row: str) -> Path:
    return layout.predictions_path(cfg.name, f"{STUDY}/evidence_scores", dataset, row)


def design_table(cfg: Profile) -> pd.DataFrame:
    """The rows of the study: the reward design and the KL estimator each run trains with, and the design's source."""
    rows = []
    for row in cfg.reward_designs.designs if cfg.reward_designs else []:
        run = design_profile(cfg, row)
        design = REWARD_DESIGNS[run.rewards.design]
        knobs = ", ".join(f"{k}={getattr(run.rewards, k)}" for k in design.knobs)
        rows.append({"design": row.name, "rewards.design": design.name, "train.kl_estimator": run.train.kl_estimator,
                     "knobs": knobs, "source": design.source})
    return pd.DataFrame(rows, columns=["design", "rewards.design", "train.kl_estimator", "knobs", "source"])


def run_reward_designs(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Train (or resume, or reuse) the run of every row of `cfg.reward_designs` (the main run's where
    `is_main_design_run`), then evaluate each extractor on the section's test sets with the profile's QA generator;
    one row per prediction file (none without the section)."""
    rd = cfg.reward_designs
    record = {"requested": rd is not None, "designs": [row.name for row in rd.designs] if rd else []}
    for directory in (layout.train_run_dir(cfg.name, STUDY), layout.profile_dir(cfg.name) / "predictions" / STUDY):
        write_json(directory / "study.json", record)  # the stage's outputs exist even when it is not requested
    if rd is None:
        print(f"profiles.{cfg.name}.reward_designs is null: the study is not requested", flush=True)
        return pd.DataFrame(columns=FILE_COLUMNS)
    runs = {row.name: trained_design_run(cfg, row) for row in rd.designs}
    return evaluate_extractors(cfg, runs, STUDY, rd, progress).rename(columns={"variant": "design"})


def evidence_scores(record: dict, gold: Sequence[int], nli: Callable) -> dict:
    """What one item's evidence holds (D160): `ar_evidence`, a golden answer in the evidence (repro.formulas.metrics.
    answer_recall, as the held-out check scores it); `nli_entailment`, R_EQR's entailment probability of evidence ⇒
    `{gold} is the answer to the question:"{question}?"`, max over the golden answers, and `nli_support`, whether it
    exceeds SUPPORT_THRESHOLD; `relevance`, the passage numbers of a leading `<relevance>` list in the extractor's
    output (None without one), beside ARENA's `gold_passages` (D129)."""
    evidence = record["evidence"] or ""
    entailment = rewards.evidence_quality_reward(evidence, record["question"], record["golden_answers"], nli, "max")
    return {"id": record["id"], "ar_evidence": metrics.answer_recall(evidence, record["golden_answers"]),
            "nli_entailment": entailment, "nli_support": float(entailment > SUPPORT_THRESHOLD),
            "relevance": rewards.relevance_ids(record.get("raw_output") or evidence), "gold_passages": list(gold)}


def _score_chunk(chunk: list[dict], gold: dict[str, list[int]], nli: Callable[[], Callable]) -> list[dict]:
    return [evidence_scores(record, gold[record["id"]], nli()) for record in chunk]


def score_evidence(cfg: Profile, files: pd.DataFrame, progress: bool = True, nli: Callable | None = None
                   ) -> pd.DataFrame:
    """`files` with an `evidence_scores` column: the per-item file of `evidence_scores` for each prediction file,
    computed (or resumed, or reused) with the NLI model `rewards.nli_model` (loaded only if something is left to
    score; `nli` replaces it) and the gold passages of the evaluated rows."""
    if files.empty:
        return files.assign(evidence_scores=pd.Series(dtype=str))
    rd = cfg.reward_designs
    if rd is None:
        raise ValueError(f"profile {cfg.name} has no reward_designs section")
    if cfg.rewards.nli_model is None:
        raise ValueError(f"profiles.{cfg.name}.rewards.nli_model must name an NLI model for the NLI support rate")
    model = resolve(cfg.rewards.nli_model, cfg.name)

    @functools.cache
    def scorer() -> Callable:  # after evaluation: the engines are closed, the device is free
        return nli or NLIScorer(model, device="cuda" if torch.cuda.is_available() else "cpu")

    config = {"nli_model": model_fingerprint(model), "support_threshold": SUPPORT_THRESHOLD}
    passages = {dataset: {row["id"]: row for row in evaluation_rows(cfg, dataset, rd.split, rd.max_questions)}
                for dataset in files["dataset"].unique()}
    paths = []
    for entry in files.to_dict("records"):
        records = read_records(entry["path"])
        rows = passages[entry["dataset"]]
        gold = {r["id"]: gold_passages(rows[r["id"]]["passages"], r["golden_answers"]) for r in records}
        items = [[r["id"], r["question"], r["golden_answers"], r["evidence"], r.get("raw_output"), gold[r["id"]]]
                 for r in records]
        path = evidence_scores_path(cfg, entry["dataset"], entry["design"])
        store = RecordFile(path, {**config, "items": fingerprint(items)}, required=SCORE_FIELDS)
        process_resumably(records, store, functools.partial(_score_chunk, gold=gold, nli=scorer),
                          cfg.evaluation.chunk_size, progress, f"evidence of {entry['design']} on {entry['dataset']}")
        paths.append(str(path))
    return files.assign(evidence_scores=paths)


def evidence_summary(scores: Sequence[dict]) -> dict:
    """One file's evidence scores: AR and NLI support (%), the mean entailment probability, the share (%) of items
    whose output opens with a parseable `<relevance>` list, and ARENA's relevance precision and recall (%) over those
    items, pooled: shared / listed and shared / gold passage numbers (NaN when none is listed or none is gold)."""
    tagged = [s for s in scores if s["relevance"] is not None]
    shared = sum(len(set(s["relevance"]) & set(s["gold_passages"])) for s in tagged)
    listed, gold = (sum(len(s[key]) for s in tagged) for key in ("relevance", "gold_passages"))
    return {"evidence AR": 100 * np.mean([s["ar_evidence"] for s in scores]),
            "NLI support": 100 * np.mean([s["nli_support"] for s in scores]),
            "NLI entailment": np.mean([s["nli_entailment"] for s in scores]),
            "relevance tagged": 100 * len(tagged) / len(scores),
            "relevance precision": 100 * shared / listed if listed else math.nan,
            "relevance recall": 100 * shared / gold if gold else math.nan}


def summarize_designs(files: pd.DataFrame) -> pd.DataFrame:
    """Table 2's summary (n, EM, F1 ×100, CR, untagged evidence) of every prediction file, with its evidence scores."""
    columns = ["design", "dataset", *(c for c in SUMMARY_COLUMNS if c not in ("dataset", "method", "group")),
               *EVIDENCE_COLUMNS]
    rows = [{"design": f["design"], "dataset": f["dataset"], **summarize(read_records(f["path"]), tagged=True),
             **evidence_summary(read_records(f["evidence_scores"], SCORE_FIELDS))} for f in files.to_dict("records")]
    return pd.DataFrame(rows, columns=columns)


def item_scores(entry: dict) -> dict[str, dict[str, float]]:
    """{id: {em, f1, ar_evidence, nli_support}} of one prediction file and its evidence scores."""
    evidence = {s["id"]: s for s in read_records(entry["evidence_scores"], SCORE_FIELDS)}
    records = read_records(entry["path"])
    if set(evidence) != {r["id"] for r in records}:
        raise ValueError(f"{entry['evidence_scores']} and {entry['path']} hold different questions")
    return {r["id"]: {"em": r["em"], "f1": r["f1"], **{k: evidence[r["id"]][k] for k in ("ar_evidence", "nli_support")}}
            for r in records}


def compare_designs(files: pd.DataFrame, reference: str = REFERENCE, n_resamples: int = 10_000,
                    seed: int = 0) -> pd.DataFrame:
    """Each design against `reference` on the same questions of each dataset, for EM, F1, evidence AR and NLI
    support: differences in points with approximate randomization and a 95% interval, exact McNemar's exact interval
    on the 0/1 metrics and a paired bootstrap's on F1; Holm across every row
    (repro.studies.trained_extractors.compare_with_reference)."""
    return compare_with_reference(files, "design", reference, item_scores, BINARY_METRICS, n_resamples, seed)
