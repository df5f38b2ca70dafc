"""τ and γ chosen on the dev set, as App. A.2 did over {0.1, 0.2, 0.5, 1.0} × {0.1, 0.3, 0.5, 0.8, 1.0} (#21, D150).

    python -m repro.stages.length_tuning --profile tiny

An optional stage. With `length_tuning: null` (every profile as shipped) it writes `{"requested": false}` and loads
nothing, so the profiles that do not ask for it pay only the process start. With a grid it trains one short GRPO run
per (τ, γ), in grid order (τ-major), with `repro.train.grpo.train_extractor` (the profile's trainer, starting policy,
rows and dev selection; `length_tuning.max_steps` steps each), scores each run by its best dev value of the metric
(`length_tuning.metric`, default `train.selection_metric`: the value its own checkpoint selection used) and selects
the pair with the highest one (ties: the earlier pair in grid order). It does not change `rewards.tau` /
`rewards.gamma`: the selection names the pair and the command that sets it, so that the main run's τ and γ stay
params DVC tracks.

data/<profile>/train/length_tuning/ holds

    selection.json               {"requested": false}, or the metric, every pair's score and the selected pair
    tau=<τ>-gamma=<γ>/           the pair's run: run_config.json, train_log.jsonl, dev_eval.jsonl, selection.json and
                                 result.json (its score and configuration key); checkpoints and the exported extractor
                                 are deleted once the score is read, since only the dev scores are kept
A pair whose result.json carries the current configuration key is not trained again (its kept dev log is scored
again); a run cut by a kill resumes from its last checkpoint (repro.train.grpo.run).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from repro.config import Profile, with_overrides
from repro.data import layout
from repro.io import fingerprint, read_json, write_json
from repro.train.grpo.logs import StepLog, TrainRun

SELECTION = "selection.json"
RESULT = "result.json"


def tuning_dir(profile: str) -> Path:
    return layout.train_run_dir(profile, "length_tuning")


def grid(tau: Sequence[float], gamma: Sequence[float]) -> list[tuple[float, float]]:
    """Every (τ, γ) pair, τ-major, in the order the profile lists the values."""
    return list(itertools.product(tau, gamma))


def point_name(tau: float, gamma: float) -> str:
    return f"tau={tau:g}-gamma={gamma:g}"


def point_profile(cfg: Profile, tau: float, gamma: float) -> Profile:
    """The profile of one pair's run: `rewards.tau` and `rewards.gamma` replaced, `length_tuning.max_steps` steps."""
    return with_overrides(cfg, {"rewards.tau": tau, "rewards.gamma": gamma,
                                "train.max_steps": cfg.length_tuning.max_steps})


def best_dev_score(rows: Sequence[dict], metric: str) -> tuple[float, int] | None:
    """(value, step) of the best checkpoint in a run's dev_eval.jsonl rows, the rule of the run's own checkpoint
    selection: rows of checkpoints only (not the initial policy's), finite values, the first of equal values.
    None when no checkpoint has one."""
    best = None
    for row in rows:
        value = row.get(metric)
        if row.get("checkpoint") is None or value is None or not math.isfinite(value):
            continue
        if best is None or value > best[0]:
            best = (float(value), int(row["step"]))
    return best


def select(results: Sequence[dict]) -> dict:
    """The result (dicts with tau, gamma, value) with the highest value; the earliest of equal ones. Results without
    a value (no dev score) are never selected; ValueError when none has one."""
    scored = [r for r in results if r["value"] is not None]
    if not scored:
        raise ValueError("no (tau, gamma) run has a dev score; see each run's dev_eval.jsonl")
    return max(scored, key=lambda r: r["value"])  # max keeps the first of equal values


def point_key(cfg: Profile) -> str:
    """What a pair's run depends on: the seed, models, data, retrieval, rewards and train settings (its steps)."""
    parts = {name: dataclasses.asdict(getattr(cfg, name)) for name in ("models", "data", "retrieval", "rewards",
                                                                        "train") if getattr(cfg, name) is not None}
    return fingerprint({"seed": cfg.seed, **parts})


Trainer = Callable[..., object]  # train_extractor(cfg, root) -> a TrainRun


def tune_point(cfg: Profile, tau: float, gamma: float, root: Path, train: Trainer) -> dict:
    """The dev score of one pair, read from its run's dev log: the run is trained unless its result.json carries the
    same key (then its kept log is read again, so a changed `length_tuning.metric` retrains nothing); after training,
    its checkpoints and extractor are deleted once the result is written."""
    tuning = cfg.length_tuning
    if cfg.train.selection_metric is None:
        raise ValueError(f"profiles.{cfg.name}.train.selection_metric is null: the pairs are scored by the dev passes "
                         f"of train's checkpoint selection, which then do not run")
    metric = tuning.metric or cfg.train.selection_metric
    point_cfg = point_profile(cfg, tau, gamma)
    key = point_key(point_cfg)
    run_dir = root / point_name(tau, gamma)
    result_file = run_dir / RESULT
    trained = None
    if not (result_file.exists() and read_json(result_file).get("key") == key):
        result_file.unlink(missing_ok=True)
        trained = train(point_cfg, run_dir)
    best = best_dev_score(StepLog(TrainRun(run_dir).dev_log).rows(), metric)
    result = {"tau": tau, "gamma": gamma, "metric": metric, "value": best[0] if best else None,
              "step": best[1] if best else None, "key": key}
    write_json(result_file, result)
    if trained is not None:
        for heavy in (trained.checkpoints, trained.extractor):
            shutil.rmtree(heavy, ignore_errors=True)
    return result


def tune_length_rewards(cfg: Profile, root: Path | None = None, train: Trainer | None = None) -> dict:
    """The stage: every pair of `cfg.length_tuning` trained and scored, the best selected; `{"requested": False}`
    without a grid. Writes and returns selection.json. `train` defaults to repro.train.grpo.train_extractor."""
    root = Path(root) if root is not None else tuning_dir(cfg.name)
    tuning = cfg.length_tuning
    if tuning is None:
        record = {"requested": False}
        write_json(root / SELECTION, record)
        print(f"profiles.{cfg.name}.length_tuning is null: tau and gamma stay rewards.tau = {cfg.rewards.tau}, "
              f"rewards.gamma = {cfg.rewards.gamma} (D16)", flush=True)
        return record
    if train is None:  # imported here: the stage without a grid loads no deep-learning framework
        from repro.train.grpo.run import train_extractor

        train = train_extractor
    results = []
    for tau, gamma in grid(tuning.tau, tuning.gamma):
        results.append(tune_point(cfg, tau, gamma, root, train))
        print(f"tau = {tau:g}, gamma = {gamma:g}: best dev {results[-1]['metric']} = {results[-1]['value']}",
              flush=True)
    best = select(results)
    record = {"requested": True, "metric": best["metric"], "max_steps": tuning.max_steps,
              "points": [{k: r[k] for k in ("tau", "gamma", "value", "step")} for r in results],
              "selected": {k: best[k] for k in ("tau", "gamma", "value", "step")},
              "apply": f"dvc exp run -S 'profiles.{cfg.name}.rewards.tau={best['tau']}' "
                       f"-S 'profiles.{cfg.name}.rewards.gamma={best['gamma']}'"}
    write_json(root / SELECTION, record)
    print(f"selected tau = {best['tau']:g}, gamma = {best['gamma']:g} (dev {best['metric']} = {best['value']:.4g}); "
          f"the profile has tau = {cfg.rewards.tau:g}, gamma = {cfg.rewards.gamma:g}; to train with the selected pair: "
          f"{record['apply']}", flush=True)
    return record
