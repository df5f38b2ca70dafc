"""Verifiable rewards (§3.2, App. B) and the std-clipped GRPO advantage (§3.3).

    R^final = λ1·R^ans + λ2·R^len + λ3·R^fmt                                  (Eq. 5)
    R^ans   = mean of the selected F1(a, o_*), * ∈ {r, e, f}                   (§3.2; subset: Table 3)
    R^len   = mean(R_r^len, R_e^len)
    R_r^len = σ((L_r/L_e − 1)/τ) if L_r ≥ L_e else σ((1 − L_e/L_r)/τ)         (Eq. 10, τ inside σ: D15)
    R_e^len = 1 if 1 − L_e/L_P ≥ ω else (1 − L_e/L_P)^γ                       (Eq. 11)
    Ã_i     = (R_i − mean(R)) / max(std(R), ε_std), population std per group   (Eq. 7)

A placebo of the answer reward (issue #49, design `eviomni_placebo`) permutes λ1·R^ans within each GRPO group before
Eq. 7 (`placebo_final_rewards`).

The neighbours' designs (EviNote-RAG, Eval-RAR, ARENA; seeds 002-004) follow at the end, as rows of
repro.registry.REWARD_DESIGNS selected by `rewards.design`, each scored by its function here.

Every reward is finite and in [0, 1] for every non-negative length (edge cases: D17). The paper states
(0, 1] for the length rewards; the open lower end cannot hold in floating point (σ underflows to 0 for
very short rationales), nor at the limits L_r = 0 and L_e ≥ L_P that the formulas reach.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np
from scipy.special import expit

from repro.config import RewardsConfig
from repro.formulas import metrics, tags
from repro.registry import MAY_BE_NONE, REWARD_DESIGNS

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


def format_reward(response: str, check: str = "strict") -> float:
    """R^fmt: 1.0 iff the response is exactly <reason>…</reason><extract>…</extract><answer>…</answer>
    (`check="strict"`, D18), or holds those tags once each, in order, around non-blank text, whatever text without
    tags surrounds them (`check="lenient"`, D147; repro.formulas.tags.is_well_formatted), else 0.0."""
    return float(tags.is_well_formatted(response, check=check))


class AnswerRewards(NamedTuple):
    """(R_r^ans, R_e^ans, R_f^ans): F1 (or another answer metric) of the answers generated from the three contexts
    of Eq. 4.
    Indexable by position, by field name, or by the aliases of ANSWER_ALIASES ("r", "o_e", …)."""

    rationale: float
    evidence: float
    full: float

    def __getitem__(self, key):
        return getattr(self, _answer_key(key)) if isinstance(key, str) else tuple.__getitem__(self, key)


def answer_rewards(o_r: str, o_e: str, o_f: str, golden_answers: str | Sequence[str],
                   metric: str = "f1") -> AnswerRewards:
    """R_*^ans = F1(a, o_*) for * ∈ {r, e, f} (§3.2), or the `metric` of repro.formulas.metrics.ANSWER_METRICS
    a design's row names. Each output is read leniently with repro.formulas.tags.extract_answer, so "Paris",
    "<answer>Paris</answer>" and "Paris</answer>" score alike (D9)."""
    if metric not in metrics.ANSWER_METRICS:
        raise ValueError(f"unknown answer metric {metric!r}; known: {sorted(metrics.ANSWER_METRICS)}")
    score = metrics.ANSWER_METRICS[metric]
    return AnswerRewards(*(score(tags.extract_answer(o), golden_answers) for o in (o_r, o_e, o_f)))


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
    if len(length_rewards) != 2:
        raise ValueError(f"expected 2 length rewards (R_r^len, R_e^len), got {len(length_rewards)}")
    if len(weights) != 3 or any(_number(w, "weight") < 0 for w in weights):
        raise ValueError(f"weights must be 3 non-negative numbers (λ1, λ2, λ3), got {list(weights)}")
    r_len = float(np.mean([_unit_interval(v, "length reward") for v in length_rewards]))
    r_fmt = _unit_interval(format_reward, "format reward")
    return answer_term(answer_rewards, weights, answer_subset) + weights[1] * r_len + weights[2] * r_fmt


def answer_term(
    answer_rewards: AnswerRewards | Sequence[float] | Mapping[str, float],
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    answer_subset: Sequence[str] = ANSWER_KEYS,
) -> float:
    """λ1·R^ans, Eq. 5's answer term: λ1 times the mean of the answer rewards in `answer_subset` (the arguments as
    `final_reward` reads them)."""
    subset = [_answer_key(k) for k in ([answer_subset] if isinstance(answer_subset, str) else answer_subset)]
    if not subset or len(set(subset)) != len(subset):
        raise ValueError(f"answer_subset must be distinct names from {list(ANSWER_KEYS)}, got {answer_subset!r}")
    values = _answer_values(answer_rewards)
    missing = [k for k in subset if k not in values]
    if missing:
        raise ValueError(f"answer rewards missing for {missing}")
    return weights[0] * float(np.mean([values[k] for k in subset]))


def permuted_within_groups(values: Sequence[float], group_size: int, rng: np.random.Generator) -> np.ndarray:
    """`values` laid out group by group (G consecutive rollouts per question, as `clipped_group_advantages` reads
    them), each group's values reordered by its own permutation drawn from `rng`: every group keeps its multiset of
    values, and a value no longer says which rollout earned it. The placebo arm's answer terms (issue #49)."""
    flat = np.asarray(values, dtype=np.float64)
    if flat.ndim != 1 or flat.size == 0 or isinstance(group_size, bool) or group_size < 1 \
            or flat.size % group_size:
        raise ValueError(f"need a non-empty 1-D sequence that splits into groups of {group_size}, got shape "
                         f"{flat.shape}")
    groups = flat.reshape(-1, group_size)
    return np.stack([group[rng.permutation(group_size)] for group in groups]).reshape(-1)


def placebo_final_rewards(final: Sequence[float], answer_terms: Sequence[float], group_size: int,
                          seed: int | Sequence[int]) -> np.ndarray:
    """The placebo arm's R^final (issue #49): each rollout keeps its own λ2·R^len + λ3·R^fmt (R^final minus its
    answer term λ1·R^ans, `answer_term`) and gets an answer term permuted within its GRPO group
    (`permuted_within_groups`, `numpy.random.default_rng(seed)`): per group the same rewards' marginals, no
    information about which rollout's evidence earned the answer reward."""
    final, answers = np.asarray(final, dtype=np.float64), np.asarray(answer_terms, dtype=np.float64)
    if final.shape != answers.shape:
        raise ValueError(f"{final.size} rewards but {answers.size} answer terms")
    return final - answers + permuted_within_groups(answers, group_size, np.random.default_rng(seed))


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
    centred -= centred.mean(axis=1, keepdims=True)  # the rounding of a large mean, which skews every deviation
    centred[np.ptp(groups, axis=1) == 0] = 0.0  # equal rewards: what is left of that rounding is no signal
    # the std of centred / max|centred| times max|centred|: squaring tiny rewards would underflow to subnormals
    spread = np.abs(centred).max(axis=1, keepdims=True)
    unit = centred / np.where(spread > 0, spread, 1.0)
    scale = np.maximum(spread * np.sqrt(np.mean(unit**2, axis=1, keepdims=True)), eps_std)
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
    answer_metric: str = "f1",
) -> RewardBreakdown:
    """All rewards of one sampled response. `response` is the policy's <reason>…<extract>…<answer>… text,
    `outputs` the answers (o_r, o_e, o_f) generated from the three contexts of repro.formulas.masking, and
    `passages_length` L_P in `cfg.length_unit`. The rationale and evidence are read leniently, so a
    malformed response still gets its answer and length rewards; only R^fmt drops to 0 (D18), under the check
    `cfg.format_check` (D147). R^ans is `answer_metric` (the design row's) of the outputs."""
    if len(outputs) != 3:
        raise ValueError(f"expected the outputs (o_r, o_e, o_f), got {len(outputs)}")
    L_r = metrics.text_length(tags.extract_rationale(response), cfg.length_unit, tokenizer)
    L_e = metrics.text_length(tags.extract_evidence(response), cfg.length_unit, tokenizer)
    answer = answer_rewards(*outputs, golden_answers, answer_metric)
    r_len = rationale_length_reward(L_r, L_e, cfg.tau)
    e_len = evidence_length_reward(L_e, passages_length, cfg.gamma, cfg.omega)
    fmt = format_reward(response, cfg.format_check)
    total = final_reward(answer, (r_len, e_len), fmt, cfg.weights, cfg.answer_subset)
    return RewardBreakdown(answer, r_len, e_len, fmt, total, L_r, L_e, float(passages_length))


# Neighbours' reward designs (seeds 002-004; issue #18; docs/decisions.md D125-D130) ---------------------------
#
# Each design scores one rollout of the extractor `<reason>r</reason><extract>e</extract><answer>o_f</answer>`
# in EviOmni's harness: the neighbours' "note" / "evaluation" / "answer" become our evidence e and answer o_f.

NLIScorer = Callable[[Sequence[str], Sequence[str]], Sequence[float]]
"""(premises, hypotheses) → P(entailment) of each pair; `repro.nli.NLIScorer` is one. Always passed in."""

EQR_MAX_CHARS = 512  # EviNote's released code blanks a note or claim longer than this before scoring it
NOTE_REWARD = 0.1  # EviNote-RAG Eq. 5: a wrong answer that kept the note-taking convention
EVAL_REWARD = 0.1  # r_eval of Eval-RAR Eq. 4
ARENA_BONUS = 10.0  # R_bonus of ARENA §3.2
_NOTE_MARKER = re.compile(r"^\s*[*\-–]\s*\S", re.MULTILINE)  # a line opening with * (key) or -/– (uncertain)
_RELEVANCE = re.compile(r"\s*<relevance>(?P<ids>[^<]*)</relevance>")


def eqr_hypothesis(gold: str, question: str) -> str:
    """EviNote-RAG's claim (its released code's template): `{gold} is the answer to the question:"{question}?"`,
    the question stripped of its own trailing '?'.

    >>> eqr_hypothesis("Jupiter", "What is the largest planet in the solar system?")
    'Jupiter is the answer to the question:"What is the largest planet in the solar system?"'
    """
    return f'{gold.strip()} is the answer to the question:"{question.strip().rstrip("?").strip()}?"'


def evidence_quality_reward(evidence: str, question: str, golden_answers: str | Sequence[str], nli: NLIScorer,
                            aliases: Literal["max", "first"] = "max", max_chars: int | None = None) -> float:
    """R_EQR (EviNote-RAG Eq. 4): the entailment probability of `nli` with premise = the evidence and hypothesis =
    `eqr_hypothesis(gold, question)`; the max over the golden aliases, or the first alias only (released code).
    `max_chars` blanks a premise or claim longer than that many characters (released code: 512, D126)."""
    if aliases not in ("max", "first"):
        raise ValueError(f"aliases must be 'max' or 'first', got {aliases!r}")
    golds = metrics.golden_list(golden_answers)
    golds = golds[:1] if aliases == "first" else golds
    premise = evidence.strip()
    claims = [eqr_hypothesis(g, question) for g in golds]
    if max_chars is not None:
        premise = "" if len(premise) > max_chars else premise
        claims = ["" if len(c) > max_chars else c for c in claims]
    scores = [float(s) for s in nli([premise] * len(claims), claims)]
    if len(scores) != len(claims) or not all(0.0 <= s <= 1.0 for s in scores):
        raise ValueError(f"the NLI scorer must return one probability in [0, 1] per pair, got {scores}")
    return max(scores)


def notes_marked(evidence: str) -> bool:
    """EviNote-RAG's note-taking convention inside `<extract>` (D127): at least one line of the evidence opens
    with a `*` (key information) or `-`/`–` (uncertain information) marker followed by text."""
    return _NOTE_MARKER.search(evidence) is not None


def evinote_reward(response: str, golden_answers: str | Sequence[str], question: str, nli: NLIScorer,
                   reading: Literal["paper", "code"] = "paper") -> float:
    """EviNote-RAG's gated reward (Eq. 5) on an extractor rollout: answer ✓ = EM of o_f, format ✓ = R^fmt,
    note-taking ✓ = `notes_marked(e)`, R_EQR on e.

    - "paper": 1 + R_EQR if format and answer ✓; 0.1 + R_EQR if format ✓, answer ✗, notes ✓; else 0.
      R_EQR is the max over aliases.
    - "code" (Da1yuqin/EviNoteRAG): (1 if answer ✓ else 0.1 if notes ✓ else 0) + R_EQR, always added, from the
      first alias, with notes/claims over 512 characters blanked.

    >>> evinote_reward("<reason>r</reason><extract>* Paris is the capital.</extract><answer>Paris</answer>",
    ...                ["Paris"], "capital of France", lambda p, h: [0.5] * len(p))
    1.5
    """
    if reading not in ("paper", "code"):
        raise ValueError(f"reading must be 'paper' or 'code', got {reading!r}")
    parsed = tags.parse_response(response)
    answer_ok = parsed.answer is not None and metrics.exact_match(parsed.answer, golden_answers) == 1.0
    notes_ok = notes_marked(parsed.evidence)
    if reading == "code":
        eqr = evidence_quality_reward(parsed.evidence, question, golden_answers, nli, "first", EQR_MAX_CHARS)
        return (1.0 if answer_ok else NOTE_REWARD if notes_ok else 0.0) + eqr
    if not parsed.well_formatted or not (answer_ok or notes_ok):
        return 0.0
    eqr = evidence_quality_reward(parsed.evidence, question, golden_answers, nli, "max")
    return (1.0 if answer_ok else NOTE_REWARD) + eqr


def evaluation_reward(evidence: str, golden_answers: str | Sequence[str], r_eval: float = EVAL_REWARD) -> float:
    """R_eval (Eval-RAR Eq. 4): r_eval if a golden answer is contained in the evidence (`a ⊆ y_eval`), else 0.
    Containment is AR (`repro.formulas.metrics.answer_recall`): SQuAD-normalised substring match, any alias (D128)."""
    return float(r_eval) * metrics.answer_recall(evidence, golden_answers)


def eval_rar_reward(response: str, golden_answers: str | Sequence[str], r_eval: float = EVAL_REWARD) -> float:
    """Eval-RAR's gated reward (Eq. 5): R_ans = EM of o_f if it is > 0, else R_eval of the evidence e.
    A rollout without an answer can still earn R_eval, as Eq. 5 allows (#47).

    >>> eval_rar_reward("<reason>r</reason><extract>Paris is the capital.</extract><answer>Lyon</answer>", ["Paris"])
    0.1
    """
    parsed = tags.parse_response(response)
    em = metrics.exact_match(parsed.answer, golden_answers) if parsed.answer is not None else 0.0
    return em if em > 0 else evaluation_reward(parsed.evidence, golden_answers, r_eval)


def relevance_ids(response: str) -> list[int] | None:
    """The passage numbers of a leading `<relevance>[i, j]</relevance>` (ARENA): parsed as a JSON list of
    integers, de-duplicated and sorted; None when the tag is missing or its content is not such a list."""
    match = _RELEVANCE.match(response)
    if match is None:
        return None
    try:
        ids = json.loads(match.group("ids").strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        return None
    return sorted(set(ids))


def relevance_reward(predicted: Sequence[int] | None, gold: Sequence[int]) -> float:
    """R_rel (ARENA §3.2): 1 for the same set of passage numbers as the gold passages, 0.5 for a partial
    overlap, 0 for none or an unparsable list (None). With no gold passage only the empty list scores 1."""
    if predicted is None:
        return 0.0
    predicted, gold = set(predicted), set(gold)
    return 1.0 if predicted == gold else 0.5 if predicted & gold else 0.0


def arena_format_reward(response: str) -> float:
    """R_format of ARENA on the extractor: `<relevance>…</relevance>` first, then a well-formatted
    `<reason>…</reason><extract>…</extract><answer>…</answer>` (R^fmt); no `<` inside the relevance tag."""
    match = _RELEVANCE.match(response)
    return float(match is not None and tags.is_well_formatted(response[match.end():]))


def arena_reward(response: str, golden_answers: str | Sequence[str], gold_passages: Sequence[int],
                 accuracy: Literal["em", "f1"] = "em") -> float:
    """ARENA's total reward R_format + R_acc + R_rel + R_bonus (weights 1; bonus 10 when the three are 1).
    R_acc is the EM (ARENA's choice, its Table 6) or the F1 of o_f.

    >>> arena_reward("<relevance>[2]</relevance><reason>r</reason><extract>e</extract><answer>Paris</answer>",
    ...              ["Paris"], [2])
    13.0
    """
    if accuracy not in ("em", "f1"):
        raise ValueError(f"accuracy must be 'em' or 'f1', got {accuracy!r}")
    fmt = arena_format_reward(response)
    answer = tags.parse_response(response).answer or ""
    acc = (metrics.exact_match if accuracy == "em" else metrics.f1)(answer, golden_answers)
    rel = relevance_reward(relevance_ids(response), gold_passages)
    bonus = ARENA_BONUS if fmt == acc == rel == 1.0 else 0.0
    return fmt + acc + rel + bonus


def eviomni_design(response, golden_answers, cfg, *, o_r, o_e, passages_length, tokenizer, answer_metric):
    outputs = [o or "" for o in (o_r, o_e, tags.parse_response(response).answer or "")]
    return score_response(response, outputs, golden_answers, passages_length, cfg, tokenizer, answer_metric).final


def eviomni_eqr_design(response, golden_answers, cfg, *, o_r, o_e, passages_length, tokenizer, question, nli,
                       answer_metric):
    eqr = evidence_quality_reward(tags.extract_evidence(response), question, golden_answers, nli, "max")
    return eviomni_design(response, golden_answers, cfg, o_r=o_r, o_e=o_e, passages_length=passages_length,
                          tokenizer=tokenizer, answer_metric=answer_metric) + eqr


def evinote_design(response, golden_answers, cfg, *, question, nli):
    return evinote_reward(response, golden_answers, question, nli, cfg.evinote_reading)


def eval_rar_design(response, golden_answers, cfg):
    return eval_rar_reward(response, golden_answers)


def arena_design(response, golden_answers, cfg, *, gold_passages):
    return arena_reward(response, golden_answers, gold_passages, cfg.arena_accuracy)


def design_reward(design: str, response: str, golden_answers: str | Sequence[str], cfg: RewardsConfig,
                  **inputs) -> float:
    """The reward of `design` (a row of repro.registry.REWARD_DESIGNS) for one response; `inputs` may hold more than
    it needs. A design with Eq. 5's terms also gets its row's `answer_metric`."""
    if design not in REWARD_DESIGNS:
        raise ValueError(f"unknown reward design {design!r}; known: {sorted(REWARD_DESIGNS)}")
    row = REWARD_DESIGNS[design]
    missing = [k for k in row.requires if k not in inputs or inputs[k] is None and k not in MAY_BE_NONE]
    if missing:
        raise ValueError(f"reward design {design!r} needs the inputs {missing}")
    given = {k: inputs[k] for k in row.requires} | ({"answer_metric": row.answer_metric} if row.eq5_terms else {})
    return globals()[row.score](response, golden_answers, cfg, **given)
