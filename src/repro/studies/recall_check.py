"""Does the starting policy already know where the answer is? Its evidence answer-recall against a random-sentence
extractor on the same held-out questions (D141).

    start = score_policy(cfg, policy, rows)                    # repro.studies.heldout: held-out rows, greedy rollouts
    check = warmup_recall_check(rows, start["rollout"], cfg.seed)
    check.summary                                # per subset (all, answerable): AR of both, their difference
                                                 # with an exact interval, McNemar's p, format rate

The policy's rollouts are greedy, from GRPO's prompt with GRPO's completion length, as the dev selection scores
checkpoints; its evidence is the text inside `<extract>` ("" when it opened none). The random-sentence extractor
returns `repro.data.sentences.random_sentence` keyed on the question id: the draw the format-only warm-up teaches on
the training questions. Evidence answer-recall is the AR of §2.2 (`repro.formulas.metrics.answer_recall`). The two are
paired per question: an exact McNemar test and its exact interval of the difference
(`repro.reporting.stats.mcnemar_exact_interval`), on every question and on the answerable ones, whose top-k passages
hold a golden answer (`repro.data.answers.answer_in_passages`, D149; the others hold no answer to find). Also listed:
the expected AR of a uniformly drawn sentence (the share of a question's sentences that hold an answer), a reference
free of the one draw's noise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from repro.data.answers import answer_in_passages
from repro.data.sentences import passage_sentences, random_sentence
from repro.formulas import metrics, tags
from repro.reporting import stats
from repro.studies.heldout import policy_evidence


@dataclasses.dataclass(frozen=True)
class RecallCheck:
    items: pd.DataFrame  # one row per question (see recall_items)
    summary: pd.DataFrame  # one row per subset, see compare_recall


def expected_random_recall(row: dict) -> float:
    """The AR a uniformly drawn passage sentence has in expectation: the share of the sentences holding an answer."""
    sentences = passage_sentences(row["passages"])
    if not sentences:
        return 0.0
    return float(np.mean([metrics.answer_recall(s.sentence, row["golden_answers"]) for s in sentences]))


def recall_items(rows: Sequence[dict], rollouts: Sequence[str], seed: int, format_check: str = "strict"
                 ) -> pd.DataFrame:
    """Per question: whether it is answerable, the policy's evidence and the random sentence, their AR, the expected
    random AR, and whether the rollout passes R^fmt's check `format_check` (`rewards.format_check`, D147)."""
    if len(rows) != len(rollouts):
        raise ValueError(f"{len(rows)} questions but {len(rollouts)} rollouts")
    items = []
    for row, rollout in zip(rows, rollouts):
        drawn = random_sentence(row["passages"], str(row["id"]), seed)
        evidence, sentence = policy_evidence(rollout), drawn.sentence if drawn else ""
        items.append({"id": str(row["id"]), "answerable": answer_in_passages(row), "rollout": rollout,
                      "well_formatted": tags.is_well_formatted(rollout, check=format_check),
                      "evidence_policy": evidence, "evidence_random": sentence,
                      "ar_policy": metrics.answer_recall(evidence, row["golden_answers"]),
                      "ar_random": metrics.answer_recall(sentence, row["golden_answers"]),
                      "ar_random_expected": expected_random_recall(row)})
    return pd.DataFrame(items)


def compare_recall(items: pd.DataFrame) -> pd.DataFrame:
    """The policy's evidence AR against the random sentence's on the same questions, on every question (`subset`
    "all") and on the answerable ones ("answerable", when at least two): both rates, their difference with the 95%
    exact McNemar interval (`stats.mcnemar_exact_interval`), the exact McNemar p-value and its discordant counts, the
    format rate and the evidence lengths in words."""
    subsets = {"all": items, "answerable": items[items["answerable"]]}
    return pd.DataFrame([{"subset": name, **_compare_recall(kept)} for name, kept in subsets.items()
                         if name == "all" or len(kept) >= 2])


def _compare_recall(items: pd.DataFrame) -> dict:
    policy, random_ = items["ar_policy"].to_numpy(), items["ar_random"].to_numpy()
    mcnemar = stats.paired_test(policy, random_, binary=True).test
    policy_only, random_only = stats.discordant_pairs(policy, random_)
    return {"questions": len(items), "format_rate": float(items["well_formatted"].mean()),
            "extract_rate": float((items["rollout"].str.contains("<extract>", regex=False)).mean()),
            "ar_policy": float(policy.mean()), "ar_random": float(random_.mean()),
            "ar_random_expected": float(items["ar_random_expected"].mean()),
            "ar_difference": mcnemar.effect, "ci_low": mcnemar.ci_low, "ci_high": mcnemar.ci_high,
            "mcnemar_p": mcnemar.p_value, "policy_only": policy_only, "random_only": random_only,
            "words_policy": float(items["evidence_policy"].str.split().str.len().mean()),
            "words_random": float(items["evidence_random"].str.split().str.len().mean())}


def warmup_recall_check(rows: Sequence[dict], rollouts: Sequence[str], seed: int, format_check: str = "strict"
                        ) -> RecallCheck:
    """The check on the starting policy's greedy `rollouts` of the held-out `rows` (`repro.studies.heldout`); its format
    rate under `format_check` (`rewards.format_check`, D147)."""
    items = recall_items(rows, rollouts, seed, format_check)
    return RecallCheck(items, compare_recall(items))
