"""R^final of Eq. 5 (or the design `rewards.design` of repro.registry.REWARD_DESIGNS, D125) as a TRL reward
function, and the per-rollout scores the training log and the dev evaluation report.

The reward is a pure function of the rollout and the answers o_r, o_e that `EviOmniTrainer` generated
for it (dataset columns `o_r`, `o_e`; None when the answer subset does not use them). Every term comes from
`repro.formulas.rewards`; this module only maps TRL's call convention onto it and summarises the terms.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from repro.config import RewardsConfig
from repro.formulas import metrics, rewards, tags
from repro.registry import REWARD_DESIGNS
from repro.train.grpo.rollout import completion_text, parse_rollout


@dataclasses.dataclass(frozen=True)
class RolloutScore:
    """Every reward term of one rollout plus EM and lengths. Answer scores of an answer that was not
    generated (outside the answer subset) are NaN."""

    f1: dict[str, float]
    em: dict[str, float]
    length_rationale: float
    length_evidence: float
    format: float
    final: float
    len_reason: int
    len_extract: int
    len_answer: int
    passages_length: float
    answer_term: float  # λ1·R^ans, the answer term of `final` (what the placebo design permutes)

    def summary(self) -> dict[str, float]:
        """Flat metric names, as logged per step (`train_log.jsonl`) and per dev evaluation."""
        row = {f"f1_{k}": v for k, v in self.f1.items()} | {f"em_{k}": v for k, v in self.em.items()}
        return row | {"reward_length_rationale": self.length_rationale, "reward_length_evidence": self.length_evidence,
                      "reward_format": self.format, "reward_final": self.final, "len_reason": self.len_reason,
                      "len_extract": self.len_extract, "len_answer": self.len_answer,
                      "passages_length": self.passages_length}


def score_rollout(text: str, o_r: str | None, o_e: str | None, golden_answers: Sequence[str],
                  passages_length: float, cfg: RewardsConfig, tokenizer) -> RolloutScore:
    """All terms of Eq. 5 for one rollout, R^ans by the answer metric of the row of `cfg.design`; o_f is the rollout's
    own answer (see repro.train.grpo.rollout). F1 and EM of each answer are reported whatever that metric."""
    rollout = parse_rollout(text)
    outputs = {"rationale": o_r, "evidence": o_e, "full": rollout.answer}
    missing = [k for k in cfg.answer_subset if outputs[k] is None]
    if missing:
        raise ValueError(f"the answer subset {list(cfg.answer_subset)} needs the answers {missing}")
    breakdown = rewards.score_response(text, [o or "" for o in outputs.values()], golden_answers,
                                       passages_length, cfg, tokenizer, REWARD_DESIGNS[cfg.design].answer_metric)
    answer_term = rewards.answer_term(breakdown.answer, cfg.weights, cfg.answer_subset)
    f1, em = ({k: (score(tags.extract_answer(o), golden_answers) if o is not None else math.nan)
               for k, o in outputs.items()} for score in (metrics.f1, metrics.exact_match))
    return RolloutScore(f1, em, breakdown.rationale_length, breakdown.evidence_length, breakdown.format,
                        breakdown.final, breakdown.L_r, breakdown.L_e,
                        metrics.text_length(rollout.answer, cfg.length_unit, tokenizer), breakdown.L_P, answer_term)


def mean_summary(scores: Sequence[RolloutScore]) -> dict[str, float]:
    """Mean of every summary metric over `scores` (NaN for an answer no score has)."""
    rows = [s.summary() for s in scores]
    with np.errstate(invalid="ignore"):
        return {k: float(np.nanmean([r[k] for r in rows])) if any(not math.isnan(r[k]) for r in rows)
                else math.nan for k in rows[0]}


class DesignReward:
    """TRL reward function, named after the row of `cfg.design`: that design's reward per completion. Also reports
    terms through TRL's `log_metric`, under `eviomni/<name>`, which is how they reach the per-step log: for a design
    with `eq5_terms`, every term of Eq. 5 (`RolloutScore.summary`), else EM and R^fmt of o_f; and the design's reward
    (`reward_<design>`) unless it is Eq. 5's R^final itself. `nli` is the entailment scorer of the designs that need one
    (repro.nli, loaded by the caller). After each call, `answer_terms` holds each completion's λ1·R^ans for a design
    whose row has `answer_permuted` (the trainer permutes them within each group, on every process's rollouts), else
    None."""

    def __init__(self, cfg: RewardsConfig, tokenizer, nli: rewards.NLIScorer | None = None):
        design = REWARD_DESIGNS[cfg.design]
        if design.answer_permuted and not design.eq5_terms:
            raise ValueError(f"rewards.design={cfg.design!r}: permuting the answer term needs Eq. 5's terms")
        if "nli" in design.requires and nli is None:
            raise ValueError(f"rewards.design={cfg.design!r} needs an NLI scorer (rewards.nli_model)")
        self.cfg, self.tokenizer, self.nli, self.design = cfg, tokenizer, nli, design
        self.__name__ = design.name
        self.answer_terms: list[float] | None = None

    def __call__(self, completions: list, golden_answers: list, passages_length: list, o_r: list, o_e: list,
                 log_metric: Callable[[str, float], None] | None = None, **columns) -> list[float]:
        columns = {**columns, "passages_length": passages_length}  # TRL passes it by name, the others in **columns
        missing = [k for k in self.design.columns if k not in columns]
        if missing:
            raise ValueError(f"rewards.design={self.cfg.design!r} needs the dataset columns {missing}")
        texts = [completion_text(c) for c in completions]
        # Eq. 5's terms, scored first: score_rollout refuses a rollout without the answers of the answer subset
        scores = ([score_rollout(t, r, e, gold, lp, self.cfg, self.tokenizer)
                   for t, r, e, gold, lp in zip(texts, o_r, o_e, golden_answers, passages_length, strict=True)]
                  if self.design.eq5_terms else None)
        self.answer_terms = [s.answer_term for s in scores] if self.design.answer_permuted else None
        values = [s.final for s in scores] if self.design.is_eq5 else [
            rewards.design_reward(self.cfg.design, text, golden_answers[i], self.cfg, o_r=o_r[i], o_e=o_e[i],
                                  tokenizer=self.tokenizer, nli=self.nli,
                                  **{k: columns[k][i] for k in self.design.columns})
            for i, text in enumerate(texts)]
        if log_metric is not None:
            terms = mean_summary(scores) if scores is not None else {
                "em_full": float(np.mean([metrics.exact_match(parse_rollout(t).answer, g)
                                          for t, g in zip(texts, golden_answers, strict=True)])),
                "reward_format": float(np.mean([rewards.format_reward(t, self.cfg.format_check) for t in texts]))}
            if not self.design.is_eq5:
                terms[f"reward_{self.design.name}"] = float(np.mean(values))
            for name, value in terms.items():
                log_metric(f"eviomni/{name}", value)
        return values
