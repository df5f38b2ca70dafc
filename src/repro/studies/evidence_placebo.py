"""Step 3 of the CPU evidence experiment (issue #49, docs/cpu-evidence.md): is the probe's rise caused by the
masked-answer reward? A placebo arm, paired seed by seed and question by question with the recipe arm.

    study = evidence_seeds.run_seeds(cfg)       # a control profile (`evidence.recipe_profile`): its seeds, and the
                                                # recipe arm's items (`study.recipe`) from the same clone or, where
                                                # that run is gone, from its record in git (evidence_record)
    primary = placebo_primary(study)            # the probe's answer share, recipe − placebo, per question averaged
                                                # over the seeds (approximate randomization); per seed beside it
    secondary = placebo_secondary(study, flags) # evidence AR, AR where the shortcut holds no answer, extracts equal
                                                # to the shortcut: recipe − placebo; each policy against the shortcut
    placebo_verdict(primary)                    # attributable / not attributable / inconclusive, by the plan's rules
    manipulation_check(cfg)                     # each arm's group reward spread and ε_std floor over its steps
    start_agreement(study)                      # the two starts, where the control scored its own (D245)

The placebo arm is the recipe with one switch, `rewards.design: eviomni_placebo`: each GRPO group's answer terms
λ1·R^ans are permuted among its rollouts before the advantages (`repro.formulas.rewards.placebo_final_rewards`), so
the rewards keep their marginals and the advantages their scale, but carry no information about which rollout's
evidence earned the answer reward. `arm_differences` holds the two profiles equal in everything else; the arms
share the warm-up (the start policies' weights are compared through their scores' keys) and the GRPO seeds, so seed
s of each arm samples its first step's rollouts alike. Where the recipe's record came from a CPU whose rounding gives
other warm-up weights (`evidence.recipe_start: rescored`, D245), the control scores its own start and
`start_agreement` measures how far the two starts' outcomes differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.stats as sps

from repro.config import ConfigError, Profile, load_profile
from repro.reporting import stats
from repro.studies import evidence_record
from repro.studies.evidence_seeds import (
    ALPHA,
    SAME_START,
    START,
    SeedsStudy,
    score_key,
    scored_items,
    scores_path,
    seed_level_test,
    seed_name,
    seed_run,
)
from repro.train.grpo.logs import read_log

SMALLEST_EFFECT = 0.02  # of the probe's answer share: half the recipe's pooled gain over the start (+0.042, step 2)
# what the arms may differ in: the switch, and the fields that name a profile
ARM_SWITCH = ("rewards.design",)
ARM_NAMES = ("name", "description", "evidence.recipe_profile", "evidence.recipe_start", "train.format_warmup.adapter")
ARM_SECTIONS = ("seed", "models", "rewards", "data", "retrieval", "train", "evidence")


def _flat(value, prefix: str) -> dict:
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}.{key}").items()}
    return {prefix: value}


def arm_differences(recipe: Profile, control: Profile) -> list[str]:
    """The settings (dotted keys) of the experiment's sections in which two arms' profiles differ, the switch and the
    profiles' names left out: [] when the control is the recipe with one switch."""
    a = {k: v for s in ARM_SECTIONS for k, v in _flat(getattr(recipe, s), s).items()}
    b = {k: v for s in ARM_SECTIONS for k, v in _flat(getattr(control, s), s).items()}
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and k not in ARM_SWITCH + ARM_NAMES)


def recipe_profile(cfg: Profile) -> Profile:
    """The recipe arm's profile of a control profile (`evidence.recipe_profile`), checked to differ from it only in
    the switch."""
    name = cfg.evidence.recipe_profile if cfg.evidence else None
    if not name or name == cfg.name:
        raise ConfigError(f"params.yaml: profiles.{cfg.name}.evidence.recipe_profile must name another profile")
    recipe = load_profile(name)
    differences = arm_differences(recipe, cfg)
    if differences:
        raise ConfigError(f"params.yaml: profiles.{cfg.name} must be profiles.{name} with only {list(ARM_SWITCH)} "
                          f"changed, but also differs in {differences}")
    return recipe


def recipe_arm(cfg: Profile, start: str, rows: Sequence[dict]) -> dict[str, pd.DataFrame]:
    """The recipe arm's items (START and each seed) on `rows`: as its own `evidence_seeds` run wrote them in this
    clone, each checked by its key (the start's under the recipe's settings with this profile's start policy `start`:
    the two warm-ups must be the same weights; each seed's with the recipe's exported extractor); else, when that
    run is not in this clone, its record in git (`evidence_record.recorded_items`, checked the same way)."""
    recipe = recipe_profile(cfg)
    policies = {START: start} | {seed_name(s): str(seed_run(recipe, s).extractor) for s in recipe.evidence.seeds}
    items = {name: scored_items(recipe, name, score_key(recipe, policy, rows))
             if scores_path(recipe, name).exists() else None for name, policy in policies.items()}
    missing = [name for name, found in items.items() if found is None]
    if not missing:
        return items
    recorded = evidence_record.recorded_items(recipe, start, rows, same_start=cfg.evidence.recipe_start == SAME_START)
    if recorded is None:
        raise FileNotFoundError(
            f"{scores_path(recipe, missing[0])}: no scores of the recipe arm's {missing[0]} for this start policy and "
            f"these questions, and no record of the arm in {evidence_record.record_dir(recipe.name)}; run `dvc exp "
            f"run -S profile={recipe.name} evidence_seeds` in this clone first (the arms must share the warm-up's "
            f"weights and the held-out questions)")
    return recorded


def recipe_logs(cfg: Profile) -> dict[str, pd.DataFrame]:
    """Each seed's GRPO log of the recipe arm, by seed name: from its run in this clone, else from its record."""
    recipe = recipe_profile(cfg)
    runs = {seed_name(s): seed_run(recipe, s).train_log for s in recipe.evidence.seeds}
    paths = runs if all(path.exists() for path in runs.values()) else evidence_record.recorded_logs(recipe)
    return {name: read_log(path) for name, path in paths.items()}


def _arms(study: SeedsStudy) -> tuple[list[str], dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    if study.recipe is None:
        raise ValueError("the study has no recipe arm: its profile sets no evidence.recipe_profile")
    seeds = [name for name in study.items if name != START]
    if seeds != [name for name in study.recipe if name != START]:
        raise ValueError(f"the arms' seeds differ: {seeds} against {[n for n in study.recipe if n != START]}")
    for name in seeds:
        if study.items[name]["id"].tolist() != study.recipe[name]["id"].tolist():
            raise ValueError(f"the arms' {name} were scored on other questions")
    return seeds, study.recipe, study.items


def paired_arms(recipe: dict[str, np.ndarray], placebo: dict[str, np.ndarray], binary: bool = False,
                seed: int = 0) -> pd.DataFrame:
    """Recipe − placebo on one per-question outcome, seed s of one arm against seed s of the other: per seed the
    paired test (`stats.paired_test`: exact McNemar for 0/1 outcomes, else approximate randomization with a paired
    bootstrap interval); pooled, each question's outcome averaged over the seeds in each arm (approximate
    randomization, paired bootstrap interval), with the seed-level test of the per-seed differences beside it.
    Questions where an outcome is not finite in any seed are left out of the pooled row (and of that seed's); with
    fewer than two questions left a row has no test (NaN)."""
    rows = [{"seed": name, **_paired_row(recipe[name], placebo[name], binary, seed)} for name in recipe]
    differences = [row["difference"] for row in rows if np.isfinite(row["difference"])]
    pooled = _paired_row(np.mean(list(recipe.values()), axis=0), np.mean(list(placebo.values()), axis=0), False, seed)
    rows.append({"seed": "pooled", **pooled, "positive_seeds": int(sum(d > 0 for d in differences)),
                 "seed_level_p": seed_level_test(differences).p_value if len(differences) > 1 else float("nan")})
    return pd.DataFrame(rows)


def _paired_row(a: np.ndarray, b: np.ndarray, binary: bool, seed: int) -> dict:
    kept = np.isfinite(a) & np.isfinite(b)
    a, b = a[kept], b[kept]
    row = {"questions": int(kept.sum()), "recipe": float(a.mean()) if a.size else float("nan"),
           "placebo": float(b.mean()) if b.size else float("nan"),
           "difference": float(a.mean() - b.mean()) if a.size else float("nan"), "ci_low": float("nan"),
           "ci_high": float("nan"), "test": None, "p_value": float("nan")}
    if a.size >= 2:
        test, interval = stats.paired_test(a, b, binary=binary, seed=seed)
        row |= {"difference": test.effect, "ci_low": interval.ci_low, "ci_high": interval.ci_high,
                "test": test.test, "p_value": test.p_value}
    return row


def _column(items: dict[str, pd.DataFrame], seeds: Sequence[str], column: str) -> dict[str, np.ndarray]:
    return {name: items[name][column].to_numpy(float) for name in seeds}


def placebo_primary(study: SeedsStudy, seed: int = 0) -> pd.DataFrame:
    """The primary outcome: the probe's answer share, recipe − placebo (`paired_arms`; the pooled row decides)."""
    seeds, recipe, placebo = _arms(study)
    return paired_arms(_column(recipe, seeds, "answer_share"), _column(placebo, seeds, "answer_share"), seed=seed)


def placebo_secondary(study: SeedsStudy, flags: pd.DataFrame, recipe_flags: pd.DataFrame, seed: int = 0
                      ) -> pd.DataFrame:
    """The secondary outcomes, recipe − placebo (`paired_arms`, deciding nothing; Holm over their pooled p-values
    beside): evidence AR; evidence AR on the questions whose shortcut sentence holds no answer; the share of
    extracts equal to the shortcut. `flags` and `recipe_flags` are `evidence_shortcut.shortcut_items` of the
    placebo's and the recipe's items."""
    seeds, recipe, placebo = _arms(study)
    tables = []
    arms = {"recipe": (recipe, recipe_flags), "placebo": (placebo, flags)}
    by_flags = {arm: {name: f[f["policy"] == name].reset_index(drop=True) for name in seeds}
                for arm, (_, f) in arms.items()}
    no_shortcut = ~by_flags["recipe"][seeds[0]]["shortcut_holds_answer"].to_numpy(bool)  # a property of the question
    outcomes = {
        "evidence AR": ({a: _column(items, seeds, "ar_evidence") for a, (items, _) in arms.items()}, True),
        "evidence AR, shortcut holds no answer": (
            {a: {n: v[no_shortcut] for n, v in _column(items, seeds, "ar_evidence").items()}
             for a, (items, _) in arms.items()}, True),
        "extract is the shortcut": (
            {a: {n: by_flags[a][n]["extract_is_shortcut"].to_numpy(float) for n in seeds} for a in arms}, True),
    }
    for outcome, (values, binary) in outcomes.items():
        tables.append(paired_arms(values["recipe"], values["placebo"], binary, seed).assign(outcome=outcome))
    table = pd.concat(tables, ignore_index=True)
    tested = (table["seed"] == "pooled") & table["p_value"].notna()
    table["p_holm"] = np.nan
    if tested.any():
        table.loc[tested, "p_holm"] = stats.holm(table.loc[tested, "p_value"])[0]
    return table[["outcome", *table.columns.drop("outcome")]]


def start_agreement(study: SeedsStudy, seed: int = 0) -> pd.DataFrame:
    """The two arms' starts on the same questions, when the control scored its own (`evidence.recipe_start:
    rescored`, D245): the share of questions whose greedy rollout is the same text, and the recipe's start − the
    control's on evidence AR (exact McNemar) and on the probe's answer share (approximate randomization). The
    starts differ only in the float rounding of their machines; this is how far that moves the outcomes."""
    _arms(study)
    recipe, placebo = study.recipe[START], study.items[START]
    if recipe["id"].tolist() != placebo["id"].tolist():
        raise ValueError("the arms' starts were scored on other questions")
    same = (recipe["rollout"] == placebo["rollout"]).to_numpy(float)
    rows = [{"outcome": "same greedy rollout", "questions": len(same), "recipe": float(same.mean()),
             "placebo": float("nan"), "difference": float("nan")}]
    for outcome, column, binary in (("evidence AR", "ar_evidence", True),
                                    ("probe answer share", "answer_share", False)):
        rows.append({"outcome": outcome, **_paired_row(recipe[column].to_numpy(float),
                                                       placebo[column].to_numpy(float), binary, seed)})
    return pd.DataFrame(rows)


def placebo_verdict(primary: pd.DataFrame, smallest_effect: float = SMALLEST_EFFECT, alpha: float = ALPHA) -> dict:
    """The verdict on the primary outcome's pooled row, by the rules written before the run (docs/cpu-evidence.md,
    step 3), checked in this order:

    - "not attributable": the 95% interval's upper end lies below `smallest_effect` (whatever the answer reward adds
      to the probe is smaller than the smallest effect of interest);
    - "attributable": the difference is at least `smallest_effect` and the two-sided p is below `alpha`;
    - "inconclusive" otherwise.

    The unit is the question (these three seed pairs' policies, on new questions); `positive_seeds` and
    `seed_level_p` say what the seeds allow about the recipe, and decide nothing."""
    pooled = primary[primary["seed"] == "pooled"].iloc[0]
    if pooled["ci_high"] < smallest_effect:
        verdict = "not attributable"
    elif pooled["difference"] >= smallest_effect and pooled["p_value"] < alpha:
        verdict = "attributable"
    else:
        verdict = "inconclusive"
    return {"verdict": verdict, "smallest_effect": smallest_effect, "questions": int(pooled["questions"]),
            "seeds": int(len(primary) - 1), "difference": float(pooled["difference"]),
            "ci_low": float(pooled["ci_low"]), "ci_high": float(pooled["ci_high"]),
            "p_value": float(pooled["p_value"]), "positive_seeds": int(pooled["positive_seeds"]),
            "seed_level_p": float(pooled["seed_level_p"])}


MANIPULATION_COLUMNS = ("group_reward_std", "std_clip_frac")


def manipulation_table(logs: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """The manipulation check of step 3's plan: for each arm (`logs`: arm -> seed name -> GRPO log), each seed's
    mean over its steps of the groups' reward spread before Eq. 7's floor (`group_reward_std`) and of the share of
    groups floored at ε_std (`std_clip_frac`), then the arm's mean over its seeds (seed "mean")."""
    rows = []
    for arm, by_seed in logs.items():
        seeds = [{"arm": arm, "seed": name, "steps": len(log),
                  **{column: float(log[column].mean()) for column in MANIPULATION_COLUMNS}}
                 for name, log in by_seed.items()]
        rows += seeds + [{"arm": arm, "seed": "mean", "steps": sum(row["steps"] for row in seeds),
                          **{column: float(np.mean([row[column] for row in seeds])) for column in MANIPULATION_COLUMNS}}]
    return pd.DataFrame(rows)


def manipulation_check(cfg: Profile) -> pd.DataFrame:
    """`manipulation_table` of a control profile's seeds beside its recipe arm's (`recipe_logs`)."""
    placebo = {seed_name(s): read_log(seed_run(cfg, s).train_log) for s in cfg.evidence.seeds}
    return manipulation_table({"recipe": recipe_logs(cfg), "placebo": placebo})


def normal_detectable_difference(standard_error: float, alpha: float = ALPHA, power: float = 0.8) -> float:
    """The smallest true difference a two-sided test at `alpha` detects with `power`, under a normal approximation
    of the estimate with `standard_error`: (z_{1−α/2} + z_{power})·SE."""
    if not standard_error > 0 or not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"need standard_error > 0 and alpha, power in (0, 1), got {standard_error}, {alpha}, {power}")
    return float((sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)) * standard_error)
