"""Step 3 of the evidence experiment (issue #49): the placebo profile is the recipe with one switch, the paired
analysis and the verdict's rules by hand, and the detectable effect's formula."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from repro.config import ConfigError, load_profile
from repro.studies import evidence_placebo as ep
from repro.studies import evidence_record as er
from repro.studies import evidence_seeds as es
from repro.studies import evidence_shortcut as esc


def test_the_placebo_profile_is_the_recipe_with_one_switch():
    recipe, placebo = load_profile("cpu-evidence"), load_profile("cpu-evidence-placebo")
    assert placebo.rewards.design == "eviomni_placebo" and recipe.rewards.design == "eviomni"
    assert placebo.evidence.recipe_profile == "cpu-evidence" and recipe.evidence.recipe_profile is None
    assert ep.arm_differences(recipe, placebo) == []  # warm-up, data, 40 steps, G = 8, seeds 0-2: the recipe's
    assert ep.recipe_profile(placebo).name == "cpu-evidence"
    changed = dataclasses.replace(placebo, train=dataclasses.replace(placebo.train, num_generations=4))
    assert ep.arm_differences(recipe, changed) == ["train.num_generations"]
    with pytest.raises(ConfigError, match=r"also differs in \['train.num_generations'\]"):
        ep.recipe_profile(changed)
    with pytest.raises(ConfigError, match="recipe_profile must name another profile"):
        ep.recipe_profile(recipe)


def test_the_paired_arms_share_one_start_the_recipes_recorded_adapter():
    """D246: the paired recipe is cpu-evidence under its own name; its placebo merges the adapter the recipe's record
    keeps, with the default `recipe_start` (the same weights, checked by fingerprint)."""
    recipe, placebo = load_profile("cpu-evidence-paired"), load_profile("cpu-evidence-paired-placebo")
    original = load_profile("cpu-evidence")
    assert dataclasses.replace(original, name=recipe.name, description=recipe.description) == recipe
    assert ep.recipe_profile(placebo).name == "cpu-evidence-paired" and placebo.rewards.design == "eviomni_placebo"
    assert es.reuses_recipe_start(placebo) and recipe.train.format_warmup.adapter is None
    assert placebo.train.format_warmup.adapter == str(er.record_dir(recipe.name) / er.ADAPTER)
    assert dataclasses.replace(placebo.train.format_warmup, adapter=None) == recipe.train.format_warmup


def arm(values: dict[str, list[float]], column: str = "answer_share") -> dict[str, pd.DataFrame]:
    n = len(next(iter(values.values())))
    return {name: pd.DataFrame({"id": [f"q{i}" for i in range(n)], column: v}) for name, v in values.items()}


def test_paired_arms_by_hand_on_three_questions_and_two_seeds():
    recipe = {"seed-0": np.array([0.3, 0.5, 0.2]), "seed-1": np.array([0.5, 0.3, 0.4])}
    placebo = {"seed-0": np.array([0.1, 0.5, 0.2]), "seed-1": np.array([0.3, 0.3, 0.0])}
    table = ep.paired_arms(recipe, placebo).set_index("seed")
    assert table.loc["seed-0", "difference"] == pytest.approx(0.2 / 3)
    assert table.loc["seed-1", "difference"] == pytest.approx(0.6 / 3)
    pooled = table.loc["pooled"]  # per question, averaged over the seeds: 0.4 − 0.2, 0.4 − 0.4, 0.3 − 0.1
    assert pooled["difference"] == pytest.approx(0.4 / 3) and pooled["questions"] == 3
    # approximate randomization, exact at 2^3 sign flips: |mean| >= 0.4/3 when the two 0.2s share a sign, 4 of 8
    assert pooled["p_value"] == pytest.approx(0.5)
    # seed level: differences 0.2/3 and 0.6/3, mean 0.4/3, sd (0.4/3)/√2, SE sd/√2 = 0.2/3: t = 2 on 1 df
    assert pooled["seed_level_p"] == pytest.approx(1 - 2 / math.pi * math.atan(2))
    assert pooled["positive_seeds"] == 2


def test_the_primary_outcome_pairs_seed_s_of_each_arm_and_skips_unprobed_questions():
    recipe = arm({"start": [0.1] * 3, "seed-0": [0.3, 0.5, float("nan")], "seed-1": [0.5, 0.3, 0.4]})
    placebo = arm({"start": [0.1] * 3, "seed-0": [0.1, 0.5, 0.2], "seed-1": [0.3, 0.3, 0.0]})
    study = es.SeedsStudy([], pd.DataFrame(), placebo, recipe)
    table = ep.placebo_primary(study).set_index("seed")
    assert table.loc["seed-0", "questions"] == 2 and table.loc["pooled", "questions"] == 2
    assert table.loc["pooled", "difference"] == pytest.approx(0.1)  # (0.4 − 0.2 + 0.4 − 0.4) / 2
    with pytest.raises(ValueError, match="no recipe arm"):
        ep.placebo_primary(es.SeedsStudy([], pd.DataFrame(), placebo))
    with pytest.raises(ValueError, match="seeds differ"):
        ep.placebo_primary(es.SeedsStudy([], pd.DataFrame(), placebo, {"start": recipe["start"]}))


def test_the_secondary_outcomes_by_hand():
    ids = [f"q{i}" for i in range(4)]

    def items(ar):
        return {name: pd.DataFrame({"id": ids, "ar_evidence": v, "answer_share": 0.5}) for name, v in ar.items()}

    def flags(ar, shortcut):
        return pd.DataFrame([{"policy": name, "id": i, "ar_evidence": a, "shortcut_holds_answer": i in ("q0", "q1"),
                              "extract_is_shortcut": s, "extract_has_shortcut": s, "title_outside_copy": False,
                              "f1_evidence": 0.0}
                             for name in ar for i, a, s in zip(ids, ar[name], shortcut[name])],
                            columns=esc.FLAG_COLUMNS)

    recipe_ar = {"start": [1, 0, 0, 0], "seed-0": [1, 1, 1, 1], "seed-1": [1, 0, 1, 0]}
    placebo_ar = {"start": [1, 0, 0, 0], "seed-0": [1, 1, 0, 0], "seed-1": [0, 0, 0, 0]}
    shortcut = {"start": [0, 0, 0, 0], "seed-0": [1, 0, 0, 0], "seed-1": [0, 0, 0, 0]}
    study = es.SeedsStudy([], pd.DataFrame(), items(placebo_ar), items(recipe_ar))
    table = ep.placebo_secondary(study, flags(placebo_ar, shortcut), flags(recipe_ar, shortcut)).set_index(
        ["outcome", "seed"])
    assert table.loc[("evidence AR", "seed-0"), "difference"] == pytest.approx(0.5)  # 4/4 − 2/4
    assert table.loc[("evidence AR", "seed-1"), "difference"] == pytest.approx(0.5)
    assert table.loc[("evidence AR", "pooled"), "difference"] == pytest.approx(0.5)
    # q2, q3 (the shortcut holds no answer): recipe (1 + 1)/2 and (1 + 0)/2, placebo 0 and 0
    assert table.loc[("evidence AR, shortcut holds no answer", "pooled"), "difference"] == pytest.approx(0.75)
    assert table.loc[("extract is the shortcut", "pooled"), "difference"] == 0.0  # the same flags in both arms
    pooled = table.xs("pooled", level="seed")
    assert pooled["p_holm"].notna().all() and table.xs("seed-0", level="seed")["p_holm"].isna().all()


def test_the_verdict_follows_the_rules_written_before_the_run():
    def primary(difference, low, high, p):
        return pd.DataFrame([{"seed": "seed-0", "difference": difference},
                             {"seed": "pooled", "questions": 200, "difference": difference, "ci_low": low,
                              "ci_high": high, "p_value": p, "positive_seeds": 1, "seed_level_p": 0.5}])

    assert ep.placebo_verdict(primary(0.005, -0.01, 0.019, 0.4))["verdict"] == "not attributable"
    assert ep.placebo_verdict(primary(0.012, 0.004, 0.019, 0.01))["verdict"] == "not attributable"  # real, below
    assert ep.placebo_verdict(primary(0.03, 0.01, 0.05, 0.004))["verdict"] == "attributable"
    assert ep.placebo_verdict(primary(0.015, 0.001, 0.03, 0.04))["verdict"] == "inconclusive"  # below the effect
    assert ep.placebo_verdict(primary(0.025, -0.002, 0.05, 0.07))["verdict"] == "inconclusive"  # not significant
    verdict = ep.placebo_verdict(primary(0.03, 0.01, 0.05, 0.004))
    assert (verdict["smallest_effect"], verdict["seeds"], verdict["questions"]) == (0.02, 1, 200)


def test_the_detectable_difference_of_a_normal_estimate():
    # (z_0.975 + z_0.8)·SE = (1.959964 + 0.841621)·0.01
    assert ep.normal_detectable_difference(0.01) == pytest.approx(0.0280159, abs=1e-6)
    with pytest.raises(ValueError, match="standard_error > 0"):
        ep.normal_detectable_difference(0.0)


def test_the_starts_agreement_by_hand():
    """D245: the recipe's start against the control's own on the same questions: identical greedy rollouts, evidence
    AR (exact McNemar) and the probe's share (approximate randomization, exact at 2^3 sign flips)."""
    def start(rollouts, ar, share):
        return pd.DataFrame({"id": ["q0", "q1", "q2"], "rollout": rollouts, "ar_evidence": ar, "answer_share": share})

    recipe = {"start": start(["a", "b", "c"], [1.0, 0.0, 0.0], [0.3, 0.2, 0.1]), "seed-0": arm({"s": [0.0] * 3})["s"]}
    placebo = {"start": start(["a", "x", "c"], [1.0, 1.0, 0.0], [0.3, 0.1, 0.1]), "seed-0": recipe["seed-0"]}
    table = ep.start_agreement(es.SeedsStudy([], pd.DataFrame(), placebo, recipe)).set_index("outcome")
    assert table.loc["same greedy rollout", "recipe"] == pytest.approx(2 / 3)
    assert table.loc["evidence AR", "difference"] == pytest.approx(-1 / 3)
    assert table.loc["evidence AR", "p_value"] == pytest.approx(1.0)  # one discordant pair
    assert table.loc["probe answer share", "difference"] == pytest.approx(0.1 / 3)
    assert table.loc["probe answer share", "p_value"] == pytest.approx(1.0)  # one nonzero difference: 2 of 2 flips
    moved = placebo | {"start": placebo["start"].assign(id=["q0", "q1", "q9"])}
    with pytest.raises(ValueError, match="starts were scored on other questions"):
        ep.start_agreement(es.SeedsStudy([], pd.DataFrame(), moved, recipe))
