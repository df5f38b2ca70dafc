"""Verifiable rewards (§3.2, App. B) and the std-clipped GRPO advantage (§3.3).

    R^final = λ1·R^ans + λ2·R^len + λ3·R^fmt                                  (Eq. 5)
    R^ans   = mean of the selected F1(a, o_*), * ∈ {r, e, f}                   (§3.2; subset: Table 3)
    R^len   = mean(R_r^len, R_e^len)
    R_r^len = σ((L_r/L_e − 1)/τ) if L_r ≥ L_e else σ((1 − L_e/L_r)/τ)         (Eq. 10, τ inside σ: D15)
    R_e^len = 1 if 1 − L_e/L_P ≥ ω else (1 − L_e/L_P)^γ                       (Eq. 11)
    Ã_i     = (R_i − mean(R)) / max(std(R), ε_std), population std per group   (Eq. 7)

Every reward is finite and in [0, 1] for every non-negative length (edge cases: D17). The paper states
(0, 1] for the length rewards; the open lower end cannot hold in floating point (σ underflows to 0 for
very short rationales), nor at the limits L_r = 0 and L_e ≥ L_P that the formulas reach.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from repro import metrics, tags
from repro.config import RewardsConfig

ANSWER_KEYS = ("rationale", "evidence", "full")  # o_r, o_e, o_f of Eq. 4
ANSWER_ALIASES = {"r": "rationale", "o_r": "rationale", "e": "evidence", "o_e": "evidence", "f": "full", "o_f": "full"}
DEFAULT_WEIGHTS = (0.8, 0.1, 0.1)  # λ1, λ2, λ3 (App. A.2)
OMEGA = 0.9  # ω (App. A.2)
EPS_STD = 0.1  # ε_std (App. A.2)
TAU_GRID = (0.1, 0.2, 0.5, 1.0)  # τ tuning range (App. A.2)
GAMMA_GRID = (0.1, 0.3, 0.5, 0.8, 1.0)  # γ tuning range (App. A.2)


def _number(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def _length(value: float, name: str) -> float:
    if _number(value, name) < 0:
        raise ValueError(f"{name} must be a non-negative length, got {value}")
    return float(value)


def _unit_interval(value: float, name: str) -> float:
    if not 0.0 <= _number(value, name) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return float(value)


def rationale_length_reward(L_r: float, L_e: float, tau: float) -> float:
    """R_r^len (Eq. 10), τ inside the sigmoid; 0.5 at L_r = L_e, → 1 for rationales much longer than the
    evidence. Edges (D17): L_r = 0 gives 0.0 (an empty rationale identifies no clue; the limit L_r → 0);
    L_e = 0 < L_r gives 1.0 (the limit L_e → 0)."""
    L_r, L_e = _length(L_r, "L_r"), _length(L_e, "L_e")
    if _number(tau, "tau") <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    if L_r == 0:
        return 0.0
    if L_e == 0:
        return 1.0
    x = L_r / L_e - 1 if L_r >= L_e else 1 - L_e / L_r
    return float(expit(x / tau))


def evidence_length_reward(L_e: float, L_P: float, gamma: float, omega: float = OMEGA) -> float:
    """R_e^len (Eq. 11): 1.0 once the evidence is at most (1 − ω)·L_P long, else (1 − L_e/L_P)^γ. Evidence
    longer than the passages clamps the base to 0 (D17), so a fractional γ never meets a negative base."""
    L_e, L_P = _length(L_e, "L_e"), _length(L_P, "L_P")
    if L_P == 0:
        raise ValueError("L_P is 0: the evidence length reward needs non-empty passages")
    if _number(gamma, "gamma") < 0:
        raise ValueError(f"gamma must be non-negative, got {gamma}")
    omega = _unit_interval(omega, "omega")
    base = 1 - L_e / L_P
    if base >= omega:
        return 1.0
    return float(max(base, 0.0) ** gamma)


def format_reward(response: str) -> float:
    """R^fmt: 1.0 iff the response is exactly <reason>…</reason><extract>…</extract><answer>…</answer>
    (the strict check of repro.tags, D18), else 0.0."""
    return float(tags.is_well_formatted(response))


class AnswerRewards(NamedTuple):
    """(R_r^ans, R_e^ans, R_f^ans): F1 of the answers generated from the three contexts of Eq. 4.
    Indexable by position, by field name, or by the aliases of ANSWER_ALIASES ("r", "o_e", …)."""

    rationale: float
    evidence: float
    full: float

    def __getitem__(self, key):
        return getattr(self, _answer_key(key)) if isinstance(key, str) else tuple.__getitem__(self, key)


def answer_rewards(o_r: str, o_e: str, o_f: str, golden_answers: str | Sequence[str]) -> AnswerRewards:
    """R_*^ans = F1(a, o_*) for * ∈ {r, e, f} (§3.2). Each output is read leniently with
    repro.tags.extract_answer, so "Paris", "<answer>Paris</answer>" and "Paris</answer>" score alike (D9)."""
    return AnswerRewards(*(metrics.f1(tags.extract_answer(o), golden_answers) for o in (o_r, o_e, o_f)))


def _answer_key(key: str) -> str:
    name = ANSWER_ALIASES.get(key, key)
    if name not in ANSWER_KEYS:
        allowed = list(ANSWER_KEYS) + list(ANSWER_ALIASES)
        raise ValueError(f"unknown answer-reward name {key!r}; allowed: {allowed}")
    return name


def _answer_values(answer: AnswerRewards | Sequence[float] | Mapping[str, float]) -> dict[str, float]:
    if isinstance(answer, Mapping):
        values = {_answer_key(k): v for k, v in answer.items()}
    else:
        if len(answer) != 3:
            raise ValueError(f"expected 3 answer rewards (o_r, o_e, o_f), got {len(answer)}")
        values = dict(zip(ANSWER_KEYS, answer))
    return {k: _unit_interval(v, f"answer reward '{k}'") for k, v in values.items()}


def final_reward(
    answer_rewards: AnswerRewards | Sequence[float] | Mapping[str, float],
    length_rewards: Sequence[float],
    format_reward: float,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    answer_subset: Sequence[str] = ANSWER_KEYS,
) -> float:
    """R^final (Eq. 5) = λ1·mean(answer rewards in `answer_subset`) + λ2·mean(R_r^len, R_e^len) + λ3·R^fmt.

    `answer_rewards` is (R_r, R_e, R_f) or a mapping from "rationale"/"evidence"/"full" (or the aliases
    "r"/"e"/"f", "o_r"/"o_e"/"o_f"), holding at least the names in `answer_subset`; `length_rewards` is
    (R_r^len, R_e^len). The Table 3 ablation selects subsets (D19)."""
    subset = [_answer_key(k) for k in ([answer_subset] if isinstance(answer_subset, str) else answer_subset)]
    if not subset or len(set(subset)) != len(subset):
        raise ValueError(f"answer_subset must be distinct names from {list(ANSWER_KEYS)}, got {answer_subset!r}")
    values = _answer_values(answer_rewards)
    missing = [k for k in subset if k not in values]
    if missing:
        raise ValueError(f"answer rewards missing for {missing}")
    if len(length_rewards) != 2:
        raise ValueError(f"expected 2 length rewards (R_r^len, R_e^len), got {len(length_rewards)}")
    if len(weights) != 3 or any(_number(w, "weight") < 0 for w in weights):
        raise ValueError(f"weights must be 3 non-negative numbers (λ1, λ2, λ3), got {list(weights)}")
    r_ans = float(np.mean([values[k] for k in subset]))
    r_len = float(np.mean([_unit_interval(v, "length reward") for v in length_rewards]))
    r_fmt = _unit_interval(format_reward, "format reward")
    return weights[0] * r_ans + weights[1] * r_len + weights[2] * r_fmt


def clipped_group_advantages(rewards: Sequence[float], group_size: int, eps_std: float = EPS_STD) -> np.ndarray:
    """Ã (Eq. 7) for rewards laid out group by group (G consecutive responses per question, as TRL orders
    them; or a 2-D array with one group per row): (R_i − mean) / max(std, ε_std) with the population std of
    each group (the paper's example {0.49, 0.51} has std 0.01). A group whose rewards are all equal gets zero
    advantages, also for ε_std = 0. The result has the shape of `rewards`."""
    values = np.asarray(rewards, dtype=np.float64)
    shape = values.shape
    if values.ndim == 2 and shape[1] == group_size:
        values = values.reshape(-1)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"rewards must be a non-empty 1-D sequence (or groups × {group_size}), got shape {shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("rewards contain NaN or infinite values")
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if values.size % group_size:
        raise ValueError(f"{values.size} rewards do not split into groups of {group_size}")
    if _number(eps_std, "eps_std") < 0:
        raise ValueError(f"eps_std must be non-negative, got {eps_std}")
    groups = values.reshape(-1, group_size)
    centred = groups - groups.mean(axis=1, keepdims=True)
    scale = np.maximum(groups.std(axis=1, ddof=0, keepdims=True), eps_std)
    safe_scale = np.where(scale > 0, scale, 1.0)  # scale is 0 only when every centred value is 0
    return (centred / safe_scale).reshape(shape)


@dataclasses.dataclass(frozen=True)
class RewardBreakdown:
    """Every term of Eq. 5 for one response, as logged during training."""

    answer: AnswerRewards
    rationale_length: float
    evidence_length: float
    format: float
    final: float
    L_r: int
    L_e: int
    L_P: float


def score_response(
    response: str,
    outputs: Sequence[str],
    golden_answers: str | Sequence[str],
    passages_length: float,
    cfg: RewardsConfig,
    tokenizer=None,
) -> RewardBreakdown:
    """All rewards of one sampled response. `response` is the policy's <reason>…<extract>…<answer>… text,
    `outputs` the answers (o_r, o_e, o_f) generated from the three contexts of repro.masking, and
    `passages_length` L_P in `cfg.length_unit`. The rationale and evidence are read leniently, so a
    malformed response still gets its answer and length rewards; only R^fmt drops to 0 (D18)."""
    if len(outputs) != 3:
        raise ValueError(f"expected the outputs (o_r, o_e, o_f), got {len(outputs)}")
    L_r = metrics.text_length(tags.extract_rationale(response), cfg.length_unit, tokenizer)
    L_e = metrics.text_length(tags.extract_evidence(response), cfg.length_unit, tokenizer)
    answer = answer_rewards(*outputs, golden_answers)
    r_len = rationale_length_reward(L_r, L_e, cfg.tau)
    e_len = evidence_length_reward(L_e, passages_length, cfg.gamma, cfg.omega)
    fmt = format_reward(response)
    total = final_reward(answer, (r_len, e_len), fmt, cfg.weights, cfg.answer_subset)
    return RewardBreakdown(answer, r_len, e_len, fmt, total, L_r, L_e, float(passages_length))
