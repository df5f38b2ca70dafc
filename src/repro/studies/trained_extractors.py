"""Studies that train one extractor per variant of the profile's GRPO run and evaluate each like Table 2's EviOmni
column: Table 3's answer subsets (repro.studies.ablation) and the reward designs (repro.studies.reward_designs).

    runs = {variant: train_extractor(...), ...}                     # every run trained before any model is loaded
    files = evaluate_extractors(cfg, runs, study, section)          # DataFrame: variant, dataset, path
    tests = compare_with_reference(files, "variant", reference, scores)   # paired per item, Holm across rows

Each variant's prediction file is data/<profile>/predictions/<study>/<dataset>/<variant>.jsonl
(repro.evaluation.records): Table 14's prompt stopped at `</extract>`, the evidence answered by the QA generator (D43).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from repro.config import AblationConfig, Profile, RewardDesignsConfig
from repro.data import layout
from repro.evaluation.refiners import RationalExtractor
from repro.reporting import stats
from repro.studies.comparison import Study, evaluation_rows, with_evaluation_settings
from repro.train.grpo.logs import TrainRun

TEST_COLUMNS = ("dataset", "reference", "metric", "test", "n", "effect", "ci_low", "ci_high", "p_value", "p_holm")


def main_run(cfg: Profile, variant: str, decision: str) -> TrainRun:
    """The main GRPO run (stage train_eviomni), for a `variant` of a study that would repeat it (D165, D170): only read,
    never trained here; an error naming the stage if it has not run."""
    run = TrainRun(layout.train_run_dir(cfg.name))
    if not run.extractor.is_dir():
        raise FileNotFoundError(f"{run.extractor}: no trained extractor yet; {variant} is the main run's ({decision}): "
                                f"run the train_eviomni stage first")
    return run


def evaluate_extractors(cfg: Profile, runs: Mapping[str, TrainRun], study: str,
                        section: AblationConfig | RewardDesignsConfig, progress: bool = True,
                        labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The extractor of every run (keyed by a file-safe variant name) on the test sets of `section` (datasets,
    split, max_questions) with the profile's `evaluation` settings; one row per prediction file. Every extractor
    is loaded after every run was trained, so training workers never share the devices with an inference engine."""
    sets = {dataset: evaluation_rows(cfg, dataset, section.split, section.max_questions)
            for dataset in section.datasets}
    ev = with_evaluation_settings(cfg, datasets=section.datasets, split=section.split,
                                  max_questions=section.max_questions)
    files = []
    with Study(cfg, ev) as runner:
        for variant, run in runs.items():
            extractor = str(run.extractor)
            generator, model_id = runner.pool.get(extractor)
            refiner = RationalExtractor(generator, model_id, runner.params)
            for dataset, rows in sets.items():
                path = layout.predictions_path(cfg.name, study, dataset, variant)
                runner.evaluate(rows, refiner, path, f"{(labels or {}).get(variant, variant)} on {dataset}", progress)
                files.append({"variant": variant, "dataset": dataset, "path": str(path)})
            runner.pool.release(extractor)  # one extractor in memory at a time
    return pd.DataFrame(files, columns=["variant", "dataset", "path"])


def compare_with_reference(files: pd.DataFrame, column: str, reference: str,
                           scores: Callable[[dict], dict[str, dict[str, float]]], binary: Sequence[str] = ("em",),
                           n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Every value of `files[column]` against `reference` on the same questions of each dataset. `scores(entry)`
    gives the per-item scores in [0, 1] of one row of `files` ({id: {metric: value}}); each metric's difference is
    reported in points with approximate randomization and a 95% interval: exact McNemar's exact interval for the 0/1
    metrics in `binary`, a paired bootstrap's (BCa) for the others (`repro.reporting.stats.compare_per_item`); Holm
    across every row of the returned table."""
    columns = ["dataset", column, *TEST_COLUMNS[1:]]
    rows = []
    for dataset, group in files.groupby("dataset", sort=False):
        entries = {entry[column]: entry for entry in group.to_dict("records")}
        if reference not in entries:
            continue
        base = scores(entries[reference])
        for name, entry in entries.items():
            if name == reference:
                continue
            other = scores(entry)
            if set(other) != set(base):
                raise ValueError(f"{entry['path']} and {entries[reference]['path']} hold different questions")
            ids, metrics = list(base), list(next(iter(base.values())))
            a, b = ({m: [s[i][m] for i in ids] for m in metrics} for s in (other, base))
            tests = stats.compare_per_item(a, b, n_resamples=n_resamples, seed=seed, binary=binary)
            rows.append(tests.assign(dataset=dataset, reference=reference, **{column: name}))
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.concat(rows, ignore_index=True)
    table[["effect", "ci_low", "ci_high"]] *= 100  # points, like the scores
    table["p_holm"] = stats.holm(table["p_value"])[0]
    return table[columns]
