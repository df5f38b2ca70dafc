"""Step 2 of the CPU evidence experiment (issue #31, docs/cpu-evidence.md): several GRPO seeds of one recipe, each
trained policy against the starting policy on held-out answerable questions, measured as the plan decided before
the run.

    study = run_seeds(cfg)        # trains (or resumes) every seed, scores the start and each seed (cached)
    evidence_recall(study.items)  # (a) evidence answer-recall, trained vs start: per seed and pooled (stratified)
    probe_shares(study.items)     # (b) the teacher-forced probe's answer share, trained vs start: per seed, pooled
    primary_outcomes(...)         # (a) and (b) pooled, Holm over the two
    baselines(study.items)        # each policy's evidence AR beside a random sentence, a random span of its
                                  # extract's length and the first sentence of passage 1
    seeds_verdict(cfg, ...)       # supported / contradicted / inconclusive at n = …, by the plan's rules

The recipe is the profile's `train` and `rewards` sections; a seed's run is the profile with `train.seed` set to it
(GRPO's sampling and data order; the warm-up, the data and the held-out draw keep the profile's `seed`) and
`train.max_steps` to `evidence.max_steps`, in data/<profile>/train/evidence_seeds/seed-<s>/ (resumable like the main
run, repro.train.grpo.run). Step 2 runs only when the gate passed (results/<profile>/evidence_gate/gate.json); otherwise
the experiment stops, as the plan says, and `study.json` records why.

Scoring (`score_items`): `evidence.heldout_questions` answerable questions of the training dataset's dev split
(repro.studies.heldout, after the first `train.dev_max_questions`; all of them when the recipe selects nothing), the
same for every policy; greedy rollouts and greedy o_e (`score_policy`, on `train.heldout_backend`), the answer recall
of the rollout's `<extract>`, and the probe (repro.studies.evidence_probe) after the policy's own rationale. Each
policy's items are cached in data/<profile>/train/evidence_seeds/scores/<policy>.jsonl under a key of everything
they depend on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.stats as sps

from repro.baselines.lead_sentence import lead_sentence
from repro.config import Profile, with_overrides
from repro.data import layout
from repro.data.corpus import split_contents
from repro.data.sentences import keyed_rng, random_sentence
from repro.formulas import metrics
from repro.io import fingerprint, model_fingerprint, read_json, read_jsonl, write_json, write_jsonl, write_text
from repro.reporting import stats
from repro.train.grpo.logs import TrainRun

STUDY = "evidence_seeds"
START = "start"
SAME_START = "same_weights"  # evidence.recipe_start: a control arm reuses its recipe's start scores (D244)
ALPHA = 0.05
PLAN = {"questions": 200, "seeds": 3}  # below these, the numbers show the mechanics, not a measurement
# the code a policy's scores depend on; named, not imported: a profile without the study loads no training stack
SCORING_MODULES = ("repro.studies.heldout", "repro.studies.evidence_probe", "repro.train.grpo.rollout",
                   "repro.train.grpo.rollout_reward", "repro.formulas.rewards", "repro.formulas.masking",
                   "repro.formulas.metrics", "repro.formulas.tags", "repro.generation.transformers_backend")
ITEM_COLUMNS = ["id", "answerable", "rollout", "o_e", "reward_format", "ar_evidence", "evidence_words",
                "ar_random_span", "sentences", "answer_sentences", "answer_share"]


def seed_name(seed: int) -> str:
    return f"seed-{seed}"


def seed_profile(cfg: Profile, seed: int) -> Profile:
    """The profile of one seed's run: GRPO's seed `train.seed` and `train.max_steps` (`evidence.max_steps`, when set)
    replaced; everything else, the warm-up it starts from included, is the profile's."""
    return with_overrides(cfg, {"train.seed": seed, "train.max_steps": cfg.evidence.max_steps or cfg.train.max_steps})


def seed_run(cfg: Profile, seed: int) -> TrainRun:
    return TrainRun(layout.train_run_dir(cfg.name, f"{STUDY}/{seed_name(seed)}"))


def reuses_recipe_start(cfg: Profile) -> bool:
    """Whether `cfg` is a control arm that takes its recipe's start scores as its own (same weights, D244) rather
    than scoring its own start beside them (`evidence.recipe_start: rescored`, D245)."""
    return bool(cfg.evidence.recipe_profile) and cfg.evidence.recipe_start == SAME_START


def scored_policies(cfg: Profile) -> dict[str, str]:
    """The policies `cfg`'s own `evidence_seeds` run scores, by name: the start (unless `cfg` is a control arm that
    reuses its recipe's start) and each seed's exported extractor."""
    from repro.train.grpo.warmup import starting_policy

    start = {} if reuses_recipe_start(cfg) else {START: starting_policy(cfg, progress=False)}
    return start | {seed_name(s): str(seed_run(cfg, s).extractor) for s in cfg.evidence.seeds}


def gate_file(cfg: Profile) -> Path:
    """The gate's verdict (stage evidence_gate), which step 2 waits for."""
    return layout.results_dir(cfg.name, "evidence_gate") / "gate.json"


def random_span(passages: Sequence[dict], words: int, key: str, seed: int) -> str:
    """`words` consecutive words of the passages' texts (titles left out, passages in order), the first word drawn
    uniformly by question id; "" for 0 words, every word when the passages hold fewer. The random-span baseline:
    evidence of the policy's own length that knows nothing."""
    text = " ".join(split_contents(p["contents"])[1] for p in passages).split()
    if words <= 0:
        return ""
    if words >= len(text):
        return " ".join(text)
    start = keyed_rng(key, seed, "span").randrange(len(text) - words + 1)
    return " ".join(text[start:start + words])


def first_sentence(passages: Sequence[dict]) -> str:
    """The first sentence of passage 1 ("" when it holds none): the lead-sentence baseline's evidence."""
    return lead_sentence(passages)


def policy_baselines(rows: Sequence[dict], seed: int) -> pd.DataFrame:
    """The baselines that do not depend on a policy, per question: the AR of a random passage sentence (drawn by
    question id, as the warm-up's recall check) and of the first sentence of passage 1."""
    items = []
    for row in rows:
        drawn = random_sentence(row["passages"], str(row["id"]), seed)
        items.append({"id": str(row["id"]),
                      "ar_random_sentence": metrics.answer_recall(drawn.sentence if drawn else "", row["golden_answers"]),
                      "ar_first_sentence": metrics.answer_recall(first_sentence(row["passages"]), row["golden_answers"])})
    return pd.DataFrame(items)


def score_items(cfg: Profile, policy: str, rows: Sequence[dict], progress: bool = True) -> pd.DataFrame:
    """One row per question (ITEM_COLUMNS) for `policy`: its greedy rollout, o_e, format reward and evidence AR
    (`score_policy`), its evidence's length in words and the AR of a random span of that length (0 words, and so
    AR 0, without an `<extract>`: format learning alone cannot look like evidence learning), and the probe's answer
    share after its own rollout's rationale."""
    from repro.studies.evidence_probe import probe_items
    from repro.studies.heldout import policy_evidence, score_policy
    from repro.train.grpo.rollout import MASKED_TARGETS

    masked = [t for t in MASKED_TARGETS if t == "evidence" or t in cfg.rewards.answer_subset]  # o_r if R^ans needs it
    scored = score_policy(cfg, policy, rows, progress=progress, masked=masked)
    probe = probe_items(policy, rows, scored["rollout"].tolist(), cfg.models.inference)
    items = scored.merge(probe, on="id", validate="one_to_one")
    items["evidence_words"] = [len(policy_evidence(r).split()) for r in items["rollout"]]
    items["ar_random_span"] = [
        metrics.answer_recall(random_span(row["passages"], words, str(row["id"]), cfg.seed), row["golden_answers"])
        for row, words in zip(rows, items["evidence_words"])]
    return items[ITEM_COLUMNS]


def scoring_code() -> str:
    """sha256 of the code that scores a policy (SCORING_MODULES): the scores' cache is kept across stage runs, which
    DVC starts again when any of its code changes."""
    return fingerprint([Path(importlib.util.find_spec(name).origin).read_text(encoding="utf-8")
                        for name in SCORING_MODULES])


def scores_path(cfg: Profile, name: str) -> Path:
    """data/<profile>/train/evidence_seeds/scores/<name>.jsonl: one policy's items (its key beside it, `.key`)."""
    return layout.train_run_dir(cfg.name, f"{STUDY}/scores") / f"{name}.jsonl"


def score_key(cfg: Profile, policy: str, rows: Sequence[dict]) -> str:
    """What a policy's items depend on: its weights, the questions, the settings scoring reads and its code."""
    return weights_score_key(cfg, model_fingerprint(policy), rows)


def weights_score_key(cfg: Profile, weights: str, rows: Sequence[dict]) -> str:
    """`score_key` of a policy whose weights have the fingerprint `weights` (`model_fingerprint`): a recorded arm's,
    whose files are gone (repro.studies.evidence_record)."""
    return fingerprint({"policy": weights, "rows": [str(r["id"]) for r in rows],
                        "code": scoring_code(),
                        "rewards": dataclasses.asdict(cfg.rewards), "seed": cfg.seed, "inference": cfg.models.inference,
                        "train": {k: getattr(cfg.train, k) for k in ("max_completion_length", "max_answer_length",
                                                                      "heldout_backend", "heldout_options")}})


def scored_items(cfg: Profile, name: str, key: str) -> pd.DataFrame | None:
    """The items of `name` in `cfg`'s scores (`scores_path`) if they were written under `key`, else None."""
    path = scores_path(cfg, name)
    key_file = path.with_suffix(".key")
    if path.exists() and key_file.exists() and key_file.read_text(encoding="utf-8") == key:
        return pd.DataFrame(list(read_jsonl(path)), columns=ITEM_COLUMNS)
    return None


def cached_items(cfg: Profile, name: str, policy: str, rows: Sequence[dict], progress: bool = True) -> pd.DataFrame:
    """`score_items`, read from `scores_path` when its key (`score_key`) matches, else computed and written there
    atomically."""
    path, key = scores_path(cfg, name), score_key(cfg, policy, rows)
    key_file = path.with_suffix(".key")
    cached = scored_items(cfg, name, key)
    if cached is not None:
        return cached
    items = score_items(cfg, policy, rows, progress)
    key_file.unlink(missing_ok=True)  # the key is written last: a kill between the two leaves no stale key
    write_jsonl(path, items.to_dict("records"))
    write_text(key_file, key)
    return items


def jsonl_bytes(items: pd.DataFrame) -> bytes:
    """The bytes `write_jsonl` writes for `items`' records: what a rescoring is compared with."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in items.to_dict("records")).encode("utf-8")


def compare_scores(path: Path, items: pd.DataFrame) -> dict:
    """A policy's cached scores file against the same policy scored again (`items`): byte for byte, and the ids of the
    questions whose lines differ (a different number of lines: every id of the longer file past the shorter's end)."""
    cached, repeated = path.read_bytes(), jsonl_bytes(items)
    old, new = cached.splitlines(), repeated.splitlines()
    differing = [str(items["id"].iloc[i]) if i < len(items) else f"line {i + 1}"
                 for i in range(max(len(old), len(new))) if i >= len(old) or i >= len(new) or old[i] != new[i]]
    return {"file": str(path), "identical": cached == repeated, "questions": len(items),
            "sha256_cached": hashlib.sha256(cached).hexdigest(),
            "sha256_repeated": hashlib.sha256(repeated).hexdigest(), "differing_ids": differing}


def repeat_scores(cfg: Profile, name: str, policy: str, rows: Sequence[dict], progress: bool = True) -> dict:
    """The noise floor of one policy (issue #49, deliverable 3): its items scored again from scratch (`score_items`,
    nothing read from the cache) and compared byte for byte with the cached scores the stage wrote
    (`compare_scores`), which must have been written for this policy, these questions and these settings."""
    if scored_items(cfg, name, score_key(cfg, policy, rows)) is None:
        raise FileNotFoundError(f"{scores_path(cfg, name)}: no scores of {name} for this policy and these questions "
                                f"to compare with; run `dvc exp run -S profile={cfg.name} evidence_seeds` first")
    return compare_scores(scores_path(cfg, name), score_items(cfg, policy, rows, progress))


@dataclasses.dataclass(frozen=True)
class SeedsStudy:
    """The held-out rows, the policy-free baselines per question, and each policy's items (START first, then the
    seeds in the order of `evidence.seeds`), all on the same questions in the same order."""

    rows: list[dict]
    fixed_baselines: pd.DataFrame
    items: dict[str, pd.DataFrame]
    recipe: dict[str, pd.DataFrame] | None = None  # a control arm's recipe arm, by the same names (evidence_placebo)


def study_record(cfg: Profile) -> dict:
    """What `study.json` says before anything runs: whether step 2 is requested and, if so, whether the gate let it
    run."""
    if cfg.evidence is None:
        return {"profile": cfg.name, "requested": False}
    gate = gate_file(cfg)
    if not gate.exists():
        raise FileNotFoundError(f"{gate}: the gate has not run; run stage evidence_gate first (step 2 waits for it)")
    verdict = read_json(gate)
    return {"profile": cfg.name, "requested": True, "gate_passes": bool(verdict.get("passes")),
            "seeds": list(cfg.evidence.seeds), "heldout_questions": cfg.evidence.heldout_questions}


def record_study(cfg: Profile, out_dir: str | Path) -> dict:
    """`study_record`, written as `study.json` into `out_dir` and the runs' directory: both outputs of the stage
    exist even when step 2 is not requested or the gate stopped it."""
    record = study_record(cfg)
    for directory in (Path(out_dir), layout.train_run_dir(cfg.name, STUDY)):
        write_json(directory / "study.json", record)
    return record


def run_seeds(cfg: Profile, progress: bool = True) -> SeedsStudy:
    """Train (or resume, or reuse) every seed of `evidence.seeds`, then score the starting policy and each seed's
    exported extractor on the held-out answerable questions. A control arm (`evidence.recipe_profile`) first checks
    that its recipe arm ran from the same start, in this clone or as its record in git
    (`repro.studies.evidence_placebo.recipe_arm`), reuses the recipe's start scores (or, with `evidence.recipe_start:
    rescored`, scores its own beside them), and carries the recipe arm's items in `recipe`."""
    from repro.studies.evidence_placebo import recipe_arm
    from repro.studies.heldout import heldout_rows
    from repro.train.grpo.run import train_extractor
    from repro.train.grpo.warmup import starting_policy

    evidence = cfg.evidence
    rows = heldout_rows(cfg, evidence.heldout_questions, answerable=True)
    if len(rows) < evidence.heldout_questions:
        raise ValueError(f"profile {cfg.name}: evidence.heldout_questions={evidence.heldout_questions}, but the dev "
                         f"split of {cfg.train.dataset} holds only {len(rows)} answerable questions to hold out")
    start = starting_policy(cfg, progress=progress)
    recipe = recipe_arm(cfg, start, rows) if evidence.recipe_profile else None  # before any training: fails fast
    policies = {START: start}
    for seed in evidence.seeds:
        policies[seed_name(seed)] = str(train_extractor(seed_profile(cfg, seed), seed_run(cfg, seed).root).extractor)
    items = {name: recipe[START] if name == START and reuses_recipe_start(cfg)
             else cached_items(cfg, name, policy, rows, progress)
             for name, policy in policies.items()}
    return SeedsStudy(rows, policy_baselines(rows, cfg.seed), items, recipe)


def _trained(items: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    if list(items)[0] != START or len(items) < 2:
        raise ValueError(f"expected the {START!r} policy first and at least one seed, got {list(items)}")
    start = items[START]
    for name, frame in items.items():
        if frame["id"].tolist() != start["id"].tolist():
            raise ValueError(f"policy {name} was scored on other questions than {START}")
    return {name: frame for name, frame in items.items() if name != START}


def evidence_recall(items: dict[str, pd.DataFrame], seed: int = 0) -> pd.DataFrame:
    """Outcome (a): greedy evidence answer-recall of each seed's policy against the start's on the same questions,
    exact McNemar with its conditional exact interval per seed; pooled over the seeds as strata (discordant pairs
    summed, exact binomial test, Tango's score interval: `stats.stratified_mcnemar`), with the spread (standard
    deviation) of the per-seed differences. The strata share their questions, so the pooled test counts a question
    once per seed; `item_level_p`, deciding nothing, tests each question's AR averaged over the seeds against the
    start's (approximate randomization), the unit that generalises to new questions, and `seed_level_p` the per-seed
    differences against 0 (`seed_level_test`), the unit that generalises to new seeds of the recipe."""
    start = items[START]["ar_evidence"].to_numpy(float)
    rows, strata = [], []
    for name, frame in _trained(items).items():
        trained = frame["ar_evidence"].to_numpy(float)
        strata.append((trained, start))
        rows.append(_recall_row(name, stats.paired_test(trained, start, binary=True).test, trained, start))
    pooled = stats.stratified_mcnemar(strata)
    differences = [row["difference"] for row in rows]
    per_question = np.mean([trained for trained, _ in strata], axis=0)
    rows.append(_recall_row("pooled", pooled, np.concatenate([t for t, _ in strata]), np.tile(start, len(strata)))
                | {"seed_sd": float(np.std(differences, ddof=1)) if len(differences) > 1 else float("nan"),
                   "item_level_p": stats.paired_test(per_question, start, seed=seed).test.p_value,
                   "seed_level_p": seed_level_test(differences).p_value if len(differences) > 1 else float("nan")})
    return pd.DataFrame(rows)


def seed_level_test(differences: Sequence[float]) -> stats.SignificanceResult:
    """The seeds as the unit: a two-sided one-sample t-test of the per-seed differences (trained − start) against 0
    (`scipy.stats.ttest_1samp`, n − 1 degrees of freedom) with its 95% t interval of the mean difference. A statement
    about the recipe, i.e. about the policy a new seed trains, generalises at this level; with 3 seeds a sign-flip
    test cannot go below p = 0.25, and the t-test leans on normality it cannot check."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"the seed-level test needs at least 2 finite per-seed differences, got {differences!r}")
    result = sps.ttest_1samp(d, 0.0)
    interval = result.confidence_interval(0.95)
    return stats.SignificanceResult("one-sample t-test over seeds", float(d.mean()), float(result.statistic),
                                    float(result.pvalue), int(d.size), float(interval.low), float(interval.high))


def _recall_row(policy: str, test: stats.SignificanceResult, trained: np.ndarray, start: np.ndarray) -> dict:
    trained_only, start_only = stats.discordant_pairs(trained, start)
    return {"policy": policy, "questions": test.n, "start": float(start.mean()), "trained": float(trained.mean()),
            "difference": test.effect, "ci_low": test.ci_low, "ci_high": test.ci_high, "test": test.test,
            "p_value": test.p_value, "trained_only": trained_only, "start_only": start_only}


def probe_shares(items: dict[str, pd.DataFrame], seed: int = 0) -> pd.DataFrame:
    """Outcome (b): the probe's answer share of each seed's policy against the start's, per question: approximate
    randomization (paired permutation) and a paired bootstrap interval (BCa), per seed and pooled (each question's
    share averaged over the seeds against the start's). Questions without a probed sentence are left out."""
    start = items[START]["answer_share"].to_numpy(float)
    shares = {name: frame["answer_share"].to_numpy(float) for name, frame in _trained(items).items()}
    shares["pooled"] = np.mean(list(shares.values()), axis=0)
    rows = []
    for name, trained in shares.items():
        kept = np.isfinite(trained) & np.isfinite(start)
        a, b = trained[kept], start[kept]
        test, interval = stats.paired_test(a, b, seed=seed)
        rows.append({"policy": name, "questions": int(kept.sum()), "start": float(b.mean()),
                     "trained": float(a.mean()), "difference": test.effect, "ci_low": interval.ci_low,
                     "ci_high": interval.ci_high, "test": test.test, "p_value": test.p_value})
    return pd.DataFrame(rows)


def primary_outcomes(recall: pd.DataFrame, probe: pd.DataFrame) -> pd.DataFrame:
    """The two pooled primary outcomes side by side, with Holm's correction over the two."""
    pooled = pd.concat([recall[recall["policy"] == "pooled"].assign(outcome="(a) evidence AR"),
                        probe[probe["policy"] == "pooled"].assign(outcome="(b) probe answer share")],
                       ignore_index=True)
    pooled["p_holm"] = stats.holm(pooled["p_value"])[0]
    return pooled[["outcome", *pooled.columns.drop(["outcome", "policy"])]]


def baselines(study: SeedsStudy) -> pd.DataFrame:
    """Each policy's evidence AR beside the baselines on the same questions, and its exact McNemar test against the
    random span of its own extract's length; a pooled row over the seeds (stratified McNemar)."""
    fixed = study.fixed_baselines
    rows, strata = [], []
    for name, frame in study.items.items():
        evidence, span = frame["ar_evidence"].to_numpy(float), frame["ar_random_span"].to_numpy(float)
        test = stats.paired_test(evidence, span, binary=True).test
        if name != START:
            strata.append((evidence, span))
        rows.append({"policy": name, "questions": len(frame), "ar_evidence": float(evidence.mean()),
                     "ar_random_span": float(span.mean()), "ar_random_sentence": float(fixed["ar_random_sentence"].mean()),
                     "ar_first_sentence": float(fixed["ar_first_sentence"].mean()),
                     "evidence_words": float(frame["evidence_words"].mean()),
                     "vs_span_difference": test.effect, "vs_span_ci_low": test.ci_low,
                     "vs_span_ci_high": test.ci_high, "vs_span_p": test.p_value})
    pooled = stats.stratified_mcnemar(strata)
    rows.append({"policy": "pooled", "questions": pooled.n, "vs_span_difference": pooled.effect,
                 "vs_span_ci_low": pooled.ci_low, "vs_span_ci_high": pooled.ci_high, "vs_span_p": pooled.p_value})
    return pd.DataFrame(rows)


def seeds_verdict(recall: pd.DataFrame, primary: pd.DataFrame, baseline: pd.DataFrame) -> dict:
    """The verdict word by the rules written before the run (docs/cpu-evidence.md, with its amendment):

    - "supported at this scale": (a) pooled is positive with Holm p < 0.05, positive in at least two thirds of the
      seeds (two of three), and the trained evidence beats the random span (pooled exact McNemar, p < 0.05);
    - "contradicted at this scale": the upper end of (a)'s pooled Tango interval lies below the effect the pooled
      pairs can detect at the observed discordance (80% power, `stats.mcnemar_detectable_difference`);
    - "inconclusive at n = …" otherwise."""
    seeds = recall[recall["policy"] != "pooled"]
    pooled = recall[recall["policy"] == "pooled"].iloc[0]
    a = primary[primary["outcome"] == "(a) evidence AR"].iloc[0]
    span = baseline[baseline["policy"] == "pooled"].iloc[0]
    n = int(pooled["questions"])
    discordance = (pooled["trained_only"] + pooled["start_only"]) / n
    detectable = stats.mcnemar_detectable_difference(discordance, n) if discordance > 0 else 0.0
    positive_seeds = int((seeds["difference"] > 0).sum())
    supported = (a["difference"] > 0 and a["p_holm"] < ALPHA and 3 * positive_seeds >= 2 * len(seeds)
                 and span["vs_span_difference"] > 0 and span["vs_span_p"] < ALPHA)
    contradicted = pooled["ci_high"] < detectable
    verdict = ("supported at this scale" if supported else "contradicted at this scale" if contradicted
               else f"inconclusive at n = {n}")
    questions = int(recall.iloc[0]["questions"])
    planned = questions >= PLAN["questions"] and len(seeds) >= PLAN["seeds"]
    reading = "measurement" if planned else (f"mechanics only: {questions} questions x {len(seeds)} seeds, below the "
                                             f"plan's {PLAN['questions']} x {PLAN['seeds']}")
    return {"verdict": verdict, "reading": reading, "pairs": n, "seeds": len(seeds), "positive_seeds": positive_seeds,
            "ar_difference": float(pooled["difference"]), "ci_low": float(pooled["ci_low"]),
            "ci_high": float(pooled["ci_high"]), "p_holm": float(a["p_holm"]), "discordance": float(discordance),
            "detectable_difference": float(detectable), "vs_span_difference": float(span["vs_span_difference"]),
            "vs_span_p": float(span["vs_span_p"])}


def write_items(study: SeedsStudy, path: Path) -> None:
    """Every policy's items with the baselines, one row per (policy, question), for reading cases."""
    frames = [frame.merge(study.fixed_baselines, on="id").assign(policy=name) for name, frame in study.items.items()]
    write_jsonl(path, pd.concat(frames, ignore_index=True).to_dict("records"))
