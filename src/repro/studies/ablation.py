"""Table 3 (§4.3): the answer-reward ablation — one GRPO run per subset of {o_r, o_e, o_f} averaged into R^ans,
each extractor evaluated like Table 2's EviOmni column (D43).

    files = run_ablation(cfg)                  # DataFrame: subset, dataset, path (one prediction file each)
    summary = summarize_ablation(files)        # n, EM, F1, CR per (subset, dataset)
    table = table3(summary, labels, paper)     # Table 3's layout: EM per dataset and the average, paper beside
    tests = compare_subsets(files)             # each subset against all three answers, paired per item

Runs live in data/<profile>/train/ablation/<subset>/ (resumable like the main run, repro.train.grpo.run) and their
prediction files in data/<profile>/predictions/ablation_answer_rewards/<dataset>/<subset>.jsonl. A subset whose run
would repeat the main one (`repro.config.is_main_run`: the reference row on the paper profiles) reuses the main run's
extractor, data/<profile>/train/eviomni/extractor: Table 3's reference row is Table 2's EviOmni, as in the paper (D165).
With `ablation: null` the stage trains and evaluates nothing: both directories get a study.json saying the table was not
requested, and the notebook's tables hold the paper's rows only.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from repro.config import Profile, is_main_run, with_overrides
from repro.data import layout
from repro.evaluation.records import read_records
from repro.evaluation.tables import SUMMARY_COLUMNS, summarize
from repro.io import write_json
from repro.studies.trained_extractors import compare_with_reference, evaluate_extractors, main_run
from repro.train.grpo.logs import TrainRun
from repro.train.grpo.run import train_extractor

STUDY = "ablation_answer_rewards"
ANSWER_LABELS = {"rationale": "Rationale", "evidence": "Evidence", "full": "Full Ctx"}  # the paper's row names
LABEL_ORDER = ("evidence", "rationale", "full")  # "Evidence+Rationale+Full Ctx", as Table 3 writes them
ALL_ANSWERS = frozenset(ANSWER_LABELS)
FILE_COLUMNS = ["subset", "dataset", "path"]


def subset_label(subset: Sequence[str]) -> str:
    """Table 3's row name of an answer subset, e.g. ("full", "evidence") → "Evidence+Full Ctx"."""
    return "+".join(ANSWER_LABELS[key] for key in LABEL_ORDER if key in subset)


def subset_name(subset: Sequence[str]) -> str:
    """A file-safe name of an answer subset, e.g. "evidence+full"."""
    return "+".join(key for key in LABEL_ORDER if key in subset)


REFERENCE = subset_label(ALL_ANSWERS)  # Table 3's reference row: all three answers, the paper's setting


def ablation_run(cfg: Profile, subset: Sequence[str]) -> TrainRun:
    """The run of `subset`: the main run (stage train_eviomni) when it is that run, else its own directory."""
    if is_main_run(cfg, subset):
        return TrainRun(layout.train_run_dir(cfg.name))
    return TrainRun(layout.train_run_dir(cfg.name, f"ablation/{subset_name(subset)}"))


def trained_run(cfg: Profile, subset: Sequence[str]) -> TrainRun:
    """Train (or resume, or reuse) the run of `subset`; the main run is only read, never trained here."""
    if is_main_run(cfg, subset):
        return main_run(cfg, f"the {subset_label(subset)} row of Table 3", "D165")
    return train_extractor(ablation_profile(cfg, subset), ablation_run(cfg, subset).root)


def ablation_profile(cfg: Profile, subset: Sequence[str]) -> Profile:
    """The profile of one subset's run: R^ans averaged over `subset`, `ablation.max_steps` steps (when set), and no
    dev pass when its only checkpoint is its last (a one-step row has nothing to select, D172)."""
    return with_overrides(cfg, {"rewards.answer_subset": subset, "train.score_single_checkpoint": False,
                                "train.max_steps": cfg.ablation.max_steps or cfg.train.max_steps})


def run_ablation(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Train (or resume, or reuse) the extractor of every subset of `cfg.ablation` (the main run's where
    `is_main_run`), then evaluate each on its test sets with the profile's QA generator
    (repro.studies.trained_extractors); one row per prediction file (none with `ablation: null`)."""
    ab = cfg.ablation
    record = {"requested": ab is not None, "subsets": [subset_name(s) for s in ab.subsets] if ab else []}
    for directory in (layout.train_run_dir(cfg.name, "ablation"), layout.profile_dir(cfg.name) / "predictions" / STUDY):
        write_json(directory / "study.json", record)  # the stage's outputs exist even when it is not requested
    if ab is None:
        print(f"profiles.{cfg.name}.ablation is null: Table 3 is not requested", flush=True)
        return pd.DataFrame(columns=FILE_COLUMNS)
    runs = {subset_name(s): trained_run(cfg, s) for s in ab.subsets}
    labels = {subset_name(s): subset_label(s) for s in ab.subsets}
    files = evaluate_extractors(cfg, runs, STUDY, ab, progress, labels)
    return pd.DataFrame({"subset": files["variant"].map(labels), "dataset": files["dataset"], "path": files["path"]})


def summarize_ablation(files: pd.DataFrame) -> pd.DataFrame:
    """n, EM, F1 (×100) and CR of every prediction file of the ablation."""
    columns = ["subset", "dataset", *(c for c in SUMMARY_COLUMNS if c not in ("dataset", "method", "group"))]
    return pd.DataFrame([{"subset": f.subset, "dataset": f.dataset, **summarize(read_records(f.path))}
                         for f in files.itertuples(index=False)], columns=columns)


def table3(summary: pd.DataFrame, labels: dict[str, str] | None = None, paper: pd.DataFrame | None = None,
           source: str = "this run") -> pd.DataFrame:
    """Table 3's layout: one row per (source, answer subset), EM per dataset and their mean ("Average", as the
    paper computes it); `paper` (rows of repro.reporting.paper.load_paper_tables(3)) adds the paper's rows below."""
    ours = summary.assign(dataset=summary["dataset"].map(lambda d: (labels or {}).get(d, d)), source=source)
    wide = ours.pivot_table(index=["source", "subset"], columns="dataset", values="EM", sort=False)
    wide["Average"] = wide.mean(axis=1)
    blocks = [wide.reindex(pd.MultiIndex.from_product([[source], list(dict.fromkeys(summary["subset"]))]))]
    if paper is not None:
        paper = paper[paper["metric"] == "EM"].assign(source=lambda p: "paper (" + p["model_size"] + ")")
        blocks.append(paper.pivot_table(index=["source", "method"], columns="dataset", values="value", sort=False))
    table = pd.concat(blocks)
    table = table[[c for c in table.columns if c != "Average"] + ["Average"]]
    table.index.names = ["source", "answers"]
    return table.reset_index().rename_axis(columns=None)


def em_scores(entry: dict) -> dict[str, dict[str, float]]:
    """{id: {"em": EM}} of one prediction file (a row of the files table)."""
    return {r["id"]: {"em": r["em"]} for r in read_records(entry["path"])}


def compare_subsets(files: pd.DataFrame, reference: str = REFERENCE, n_resamples: int = 10_000,
                    seed: int = 0) -> pd.DataFrame:
    """Each subset against `reference` (all three answers, the paper's setting) on the same questions of each
    dataset: EM differences in points with exact McNemar and its exact 95% interval, and approximate randomization
    (repro.reporting.stats), Holm across rows."""
    return compare_with_reference(files, "subset", reference, em_scores, n_resamples=n_resamples, seed=seed)
