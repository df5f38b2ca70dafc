"""Rewards, masking and advantage (`rewards`; Eqs. 4-7, 10-11)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.schema import ConfigError
from repro.registry import KL_ESTIMATORS, REWARD_DESIGNS


RewardDesignName = typing.Literal[tuple(REWARD_DESIGNS)]  # the rows of repro.registry.REWARD_DESIGNS


KLEstimator = typing.Literal[KL_ESTIMATORS]


@dataclasses.dataclass(frozen=True)
class RewardsConfig:
    """Rewards, masking and advantage of §3.1-3.3 (Eqs. 4-7, 10-11); choices in docs/decisions.md."""

    weights: tuple[float, ...] = dataclasses.field(
        default=(0.8, 0.1, 0.1), metadata={"help": "λ1 answer, λ2 length, λ3 format (Eq. 5)"})
    answer_subset: tuple[str, ...] = dataclasses.field(
        default=("rationale", "evidence", "full"), metadata={"help": "averaged into R^ans (Table 3)"})
    tau: float = dataclasses.field(
        default=0.5, metadata={"help": "τ of Eq. 10, grid {0.1, 0.2, 0.5, 1.0}; chosen value unreported (D16)"})
    gamma: float = dataclasses.field(
        default=0.5, metadata={"help": "γ of Eq. 11, grid {0.1, 0.3, 0.5, 0.8, 1.0}; chosen value unreported (D16)"})
    omega: float = dataclasses.field(default=0.9, metadata={"help": "ω of Eq. 11"})
    eps_std: float = dataclasses.field(default=0.1, metadata={"help": "ε_std of Eq. 7"})
    length_unit: typing.Literal["tokens", "words"] = dataclasses.field(
        default="tokens", metadata={"help": "L_r, L_e, L_P and CR (D13)"})
    mask_mode: typing.Literal["empty_tags", "drop", "placeholder"] = dataclasses.field(
        default="empty_tags", metadata={"help": "a masked span (D6)"})
    prefill_answer_tag: bool = dataclasses.field(
        default=True, metadata={"help": "open the answer turn with \"<answer>\" for o_r, o_e, o_f (D7)"})
    format_check: typing.Literal["strict", "lenient"] = dataclasses.field(
        default="strict", metadata={"help": "R^fmt: D18's exact form, or tagged parts in order amid free text (D147)"})
    masked_answer_prompt: typing.Literal["table14", "table11"] = dataclasses.field(
        default="table14", metadata={"help": "o_r/o_e continue Table 14 (D7), or answer Table 11's QA prompt (D148)"})
    design: RewardDesignName = dataclasses.field(
        default="eviomni", metadata={"help": "reward design, a row of repro.registry.REWARD_DESIGNS (D125)"})
    evinote_reading: typing.Literal["paper", "code"] = dataclasses.field(
        default="paper", metadata={"help": "EviNote-RAG's Eq. 5 as printed, or its released code (D126)"})
    arena_accuracy: typing.Literal["em", "f1"] = dataclasses.field(
        default="em", metadata={"help": "ARENA's accuracy reward on o_f: EM (ARENA's choice) or F1 (D129)"})
    nli_model: str | None = dataclasses.field(
        default=None, metadata={"help": "MNLI classifier of R_EQR (designs evinote, eviomni_eqr; D126)"})

    def __post_init__(self):
        if len(self.weights) != 3 or any(w < 0 for w in self.weights):
            raise ConfigError(f"rewards.weights: expected 3 non-negative numbers, got {list(self.weights)}")
        allowed = ("rationale", "evidence", "full")
        if not self.answer_subset or len(set(self.answer_subset)) != len(self.answer_subset) or not set(
            self.answer_subset
        ) <= set(allowed):
            raise ConfigError(f"rewards.answer_subset: expected distinct names from {list(allowed)}")
        if self.tau <= 0 or self.gamma < 0 or not 0 <= self.omega <= 1 or self.eps_std < 0:
            raise ConfigError("rewards: need tau > 0, gamma >= 0, 0 <= omega <= 1, eps_std >= 0")
