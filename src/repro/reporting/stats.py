"""Significance tests for comparing systems (D21), thin wrappers over scipy.stats and statsmodels.

With per-item scores of two systems on the same items (the valid route):
- `paired_test`: the one place that picks a metric's test and interval, for `compare_per_item` and the studies'
  own paired tables: exact McNemar with its exact interval for 0/1 outcomes, approximate randomization with a paired
  bootstrap interval for the others; `discordant_pairs` counts the items where each system scores higher;
- `paired_bootstrap`: CI of the mean difference (scipy.stats.bootstrap, paired, BCa) and a bootstrap p-value;
- `approximate_randomization`: paired permutation test (scipy.stats.permutation_test, permutation_type="samples");
- `mcnemar_test`: exact McNemar on per-item EM correctness (statsmodels), with `mcnemar_exact_interval`, the 95%
  interval of the difference of the two proportions that excludes 0 exactly when the exact test rejects;
- `mcnemar_score_interval`: Tango's unconditional score interval of that difference (does not shrink to [0, 0]
  with few discordant pairs);
- `stratified_mcnemar`: exact McNemar on discordant counts summed over strata (e.g. seeds), with Tango's interval;
- `mcnemar_sample_size`: how many paired items McNemar needs for a given difference and discordant rate, and
  `mcnemar_detectable_difference` the difference a given number of items detects;
- `holm`: Holm's step-down correction across the comparisons of one table (statsmodels);
- `intersection_union_p` and `family_wise_p`: one claim's p from its comparisons' p-values, for "beats every"
  (the largest, no adjustment) and for "beats at least one" (the smallest after Holm);
- `binomial_standard_error`, `mcnemar_discordance_limit` and `mean_difference_discordance_limit`: the noise of a
  share printed as a mean over n questions, and the largest discordance rate at which a paired difference of two such
  shares reaches p < α (exact McNemar for one set of questions, normal for a mean over sets);
- `tost_equivalence`: is a reproduced mean within ±margin of a reported value (statsmodels TOST).

With only the paper's reported means (one value per table cell), no per-item test is possible. What remains
valid treats cells as paired observations: `sign_test` (exact binomial) and `wilcoxon_cells` (Wilcoxon
signed-rank, only across cells on one scale). With n cells the smallest attainable two-sided p of the sign test
is 2·0.5^n (`min_sign_test_p`): 5 cells can never reach 0.05. Cells of one table are not independent (same
models, overlapping test sets), so even these p-values are optimistic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import DescrStatsW

Alternative = Literal["two-sided", "greater", "less"]


@dataclasses.dataclass(frozen=True)
class SignificanceResult:
    """One test: `effect` is the observed difference (a − b, or mean − reported for TOST), `statistic` the
    test's own statistic, `n` the number of paired observations used."""

    test: str
    effect: float
    statistic: float
    p_value: float
    n: int
    ci_low: float = math.nan
    ci_high: float = math.nan

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"paired scores must be 1-D and of equal length, got shapes {x.shape} and {y.shape}")
    if x.size < 2:
        raise ValueError(f"need at least 2 paired observations, got {x.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores contain NaN or infinite values; drop those items first")
    return x, y


# resamples per vectorised call of scipy's bootstrap and permutation test: memory O(batch × items) instead of
# O(n_resamples × items), the same draws and results; on 3,610 items a 10,000-resample test runs about 3x faster
RESAMPLE_BATCH = 1000


def _mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    seed: int = 0,
    method: Literal["BCa", "percentile", "basic"] = "BCa",
) -> SignificanceResult:
    """Paired bootstrap over items of mean(a) − mean(b): scipy's CI, and the two-sided p-value of the
    shifted bootstrap distribution, p = (1 + #{|δ* − δ| ≥ |δ|}) / (B + 1) (D22)."""
    x, y = _paired(a, b)
    effect = float(_mean_difference(x, y))
    if np.all(x - y == x[0] - y[0]):  # every item differs by the same amount: nothing to resample
        p_value = 1.0 if effect == 0 else 0.0
        return SignificanceResult("paired bootstrap", effect, effect, p_value, x.size, effect, effect)
    result = sps.bootstrap(
        (x, y), _mean_difference, paired=True, vectorized=True, n_resamples=n_resamples, batch=RESAMPLE_BATCH,
        confidence_level=confidence_level, method=method, rng=np.random.default_rng(seed),
    )
    deltas = result.bootstrap_distribution
    p_value = (1 + np.sum(np.abs(deltas - effect) >= abs(effect))) / (deltas.size + 1)
    return SignificanceResult(
        "paired bootstrap", effect, effect, float(p_value), x.size,
        float(result.confidence_interval.low), float(result.confidence_interval.high),
    )


def approximate_randomization(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = 9_999,
    alternative: Alternative = "two-sided",
    seed: int = 0,
) -> SignificanceResult:
    """Approximate randomization: swap each item's two scores at random (a paired permutation test)."""
    x, y = _paired(a, b)
    result = sps.permutation_test(
        (x, y), _mean_difference, permutation_type="samples", vectorized=True, n_resamples=n_resamples,
        batch=RESAMPLE_BATCH, alternative=alternative, rng=np.random.default_rng(seed),
    )
    effect = float(_mean_difference(x, y))
    name = f"approximate randomization ({alternative})"
    return SignificanceResult(name, effect, float(result.statistic), float(result.pvalue), x.size)


def mcnemar_exact_interval(only_a: int, only_b: int, n: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Interval of the paired difference p_a − p_b = (only_a − only_b)/n that agrees with the exact McNemar test: the
    Clopper-Pearson interval [θ_lo, θ_hi] of θ = only_a/(only_a + only_b) (statsmodels, method="beta"), conditional on
    the discordant count d = only_a + only_b, mapped to the difference as d/n·(2θ − 1). It holds 0 exactly when the
    exact test's p ≥ 1 − `confidence_level`; with no discordant pair it is [0, 0]. Being conditional on d, no end lies
    farther from 0 than d/n, and it covers the unconditional difference less often than stated when d is small and the
    difference is not 0 (76% for p_10 = 0.05, p_01 = 0.01, n = 128)."""
    discordant = only_a + only_b
    if min(only_a, only_b) < 0 or discordant > n or n < 1:
        raise ValueError(f"need 0 <= only_a, only_b and only_a + only_b <= n, got {only_a}, {only_b}, {n}")
    if discordant == 0:
        return 0.0, 0.0
    low, high = proportion_confint(only_a, discordant, alpha=1 - confidence_level, method="beta")
    return discordant / n * (2 * low - 1), discordant / n * (2 * high - 1)


def _tango_score(difference: float, only_a: int, only_b: int, n: int) -> float:
    """Tango's score statistic Z(Δ) for H0: p_a − p_b = Δ, with the only-b cell probability at its MLE under H0 (the
    root of the quadratic from maximizing only_a·log(p + Δ) + only_b·log p + (n − only_a − only_b)·log(1 − 2p − Δ))."""
    w = -(only_a + only_b) + difference * (2 * n - only_a + only_b)
    discriminant = max(w * w + 8 * n * only_b * difference * (1 - difference), 0.0)  # ≥ 0 up to rounding
    p_only_b = (-w + math.sqrt(discriminant)) / (4 * n)
    numerator = only_a - only_b - n * difference
    variance = n * (2 * p_only_b + difference * (1 - difference))
    if numerator == 0:  # also the 0/0 at Δ = 0 with no discordant pair, and at Δ = ±1 when all pairs are discordant
        return 0.0
    return numerator / math.sqrt(variance) if variance > 0 else math.copysign(math.inf, numerator)


def mcnemar_score_interval(only_a: int, only_b: int, n: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Tango's (1998) score interval of the paired difference p_a − p_b = (only_a − only_b)/n: every Δ ∈ [−1, 1] that
    the score test |Z(Δ)| ≤ z_{1−α/2} does not reject (`_tango_score`; Z decreases in Δ, so one root on each side of
    the estimate). At Δ = 0, Z is the uncorrected McNemar statistic (only_a − only_b)/√(only_a + only_b), so the
    interval excludes 0 exactly when that asymptotic test rejects. Unlike `mcnemar_exact_interval` it is unconditional
    (not conditional on the discordant count d): its width does not collapse to d/n when d is small, and with no
    discordant pair it is ±z²/(n + z²), not [0, 0]. Being asymptotic it may disagree with the exact test near the
    boundary: only_a = n = 4 (or 5) gives ((n − z²)/(n + z²), 1), which excludes 0, while the exact p is 0.125 (or
    0.0625)."""
    discordant = only_a + only_b
    if min(only_a, only_b) < 0 or discordant > n or n < 1:
        raise ValueError(f"need 0 <= only_a, only_b and only_a + only_b <= n, got {only_a}, {only_b}, {n}")
    if not 0 < confidence_level < 1:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    estimate = (only_a - only_b) / n

    def excess(difference: float, target: float) -> float:  # Φ(Z) is finite where Z is ±inf (Δ = ±1)
        return float(sps.norm.cdf(_tango_score(difference, only_a, only_b, n))) - target

    low = -1.0 if estimate == -1 else optimize.brentq(excess, -1.0, estimate, args=((1 + confidence_level) / 2,))
    high = 1.0 if estimate == 1 else optimize.brentq(excess, estimate, 1.0, args=((1 - confidence_level) / 2,))
    return float(low), float(high)


def _binary_pairs(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    x, y = _paired(correct_a, correct_b)
    if not (np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all()):
        raise ValueError("McNemar needs binary per-item outcomes (EM of 0 or 1)")
    return x.astype(bool), y.astype(bool)


def discordant_pairs(a: Sequence[float], b: Sequence[float]) -> tuple[int, int]:
    """(items where a scores above b, items where b scores above a); for 0/1 outcomes McNemar's discordant pairs."""
    x, y = _paired(a, b)
    return int(np.sum(x > y)), int(np.sum(x < y))


def mcnemar_test(correct_a: Sequence[bool], correct_b: Sequence[bool], exact: bool = True) -> SignificanceResult:
    """McNemar's test on per-item correctness (EM ∈ {0, 1}); exact binomial on the discordant pairs by default.
    `effect` is the EM difference, `statistic` statsmodels' statistic (min of the discordant counts if exact), `ci_*`
    the 95% exact interval of the difference (`mcnemar_exact_interval`)."""
    x, y = _binary_pairs(correct_a, correct_b)
    only_a, only_b = discordant_pairs(x, y)
    result = mcnemar([[np.sum(x & y), only_a], [only_b, np.sum(~x & ~y)]], exact=exact)
    return SignificanceResult("McNemar" + (" (exact)" if exact else ""), (only_a - only_b) / x.size,
                              float(result.statistic), float(result.pvalue), x.size,
                              *mcnemar_exact_interval(only_a, only_b, x.size))


def stratified_mcnemar(strata: Sequence[tuple[Sequence[bool], Sequence[bool]]]) -> SignificanceResult:
    """McNemar pooled over strata, each a pair (correct_a, correct_b) of per-item 0/1 outcomes (e.g. one per seed):
    the discordant counts summed over strata (the Mantel-Haenszel test with matched pairs as strata reduces to this),
    an exact two-sided binomial test of the sums at 0.5, `effect` Σ(only_a − only_b)/Σn with Tango's interval
    (`mcnemar_score_interval`) on the sums, `statistic` the smaller summed count, `n` = Σn. The binomial treats every
    discordant pair as independent: strata that repeat the same items (seeds on one question set) share the item
    effects, so then p and interval are optimistic about generalizing to new items."""
    if len(strata) == 0:
        raise ValueError("stratified McNemar needs at least one stratum")
    only_a = only_b = n = 0
    for index, (correct_a, correct_b) in enumerate(strata):
        try:
            x, y = _binary_pairs(correct_a, correct_b)
        except ValueError as error:
            raise ValueError(f"stratum {index}: {error}") from None
        stratum_a, stratum_b = discordant_pairs(x, y)
        only_a, only_b, n = only_a + stratum_a, only_b + stratum_b, n + x.size
    discordant = only_a + only_b
    p_value = float(sps.binomtest(only_a, discordant, 0.5).pvalue) if discordant else 1.0
    return SignificanceResult("stratified McNemar (exact)", (only_a - only_b) / n, float(min(only_a, only_b)), p_value,
                              n, *mcnemar_score_interval(only_a, only_b, n))


def mcnemar_sample_size(discordant_rate: float, difference: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired items a McNemar test needs to detect an accuracy difference `difference` (= p10 − p01) when a share
    `discordant_rate` (= p10 + p01) of the items is discordant, two-sided at `alpha` with `power` (Connor 1987):
    n = (z_{1−α/2}·√ψ + z_{power}·√(ψ − δ²))² / δ², rounded up. The difference cannot exceed the discordant rate."""
    psi, delta = discordant_rate, abs(difference)
    if not 0 < delta <= psi <= 1:
        raise ValueError(f"need 0 < |difference| <= discordant_rate <= 1, got {difference} and {discordant_rate}")
    z_alpha, z_power = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)
    return math.ceil((z_alpha * math.sqrt(psi) + z_power * math.sqrt(psi - delta**2)) ** 2 / delta**2)



def mcnemar_detectable_difference(discordant_rate: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference `mcnemar_sample_size` says `n` paired items detect at `discordant_rate` (Connor's
    formula solved for δ, unrounded); NaN when even δ = `discordant_rate` needs more items."""
    psi = discordant_rate
    if not 0 < psi <= 1 or n < 1:
        raise ValueError(f"need 0 < discordant_rate <= 1 and n >= 1, got {discordant_rate} and {n}")
    z_alpha, z_power = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)

    def excess(delta: float) -> float:  # the items δ needs, minus n; decreasing in δ
        return (z_alpha * math.sqrt(psi) + z_power * math.sqrt(psi - delta**2)) ** 2 / delta**2 - n

    if excess(psi) > 0:
        return math.nan
    return float(optimize.brentq(excess, 1e-12, psi)) if excess(psi) < 0 else psi

def holm(p_values: Sequence[float], alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm's correction across one table's comparisons: (adjusted p-values, reject at `alpha`). The step-down of
    statsmodels' `multipletests(method="holm")`, which a test checks it equals; statsmodels' own also runs a full
    `gc.collect()` on every call, up to a second in a process that holds models (D199)."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p_values must be a non-empty 1-D sequence in [0, 1], got {p_values!r}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted, adjusted <= alpha


def intersection_union_p(p_values: Sequence[float]) -> float:
    """The intersection-union test's p of a claim that holds only if every one of its comparisons holds ("A beats every
    B"): the largest of the comparisons' p-values, each tested at α, with no multiplicity adjustment (Berger 1982; the
    claim's null is the union of the comparisons' nulls, so rejecting it needs every one rejected)."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or p.size == 0 or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"p_values must be a non-empty 1-D sequence in [0, 1], got {p_values!r}")
    return float(p.max())


def family_wise_p(p_values: Sequence[float]) -> float:
    """The p of a claim that holds if at least one of its comparisons holds ("A beats some B", or "some B beats A",
    which contradicts "A beats every B"): the smallest Holm-adjusted p (`holm`), i.e. the number of comparisons times
    the smallest p, capped at 1; the family-wise error stays at α."""
    return float(holm(p_values)[0].min())


def binomial_standard_error(rate: float, n: int) -> float:
    """The standard error √(p(1 − p)/n) of a share `rate` (a fraction) of `n` independent questions: the sampling
    noise of an EM or answer recall printed as a mean over one test set."""
    if not 0 <= rate <= 1 or n < 1:
        raise ValueError(f"need 0 <= rate <= 1 and n >= 1, got {rate} and {n}")
    return math.sqrt(rate * (1 - rate) / n)


def _mcnemar_p(difference_count: int, discordant: int) -> float:
    return float(sps.binomtest((discordant + difference_count) // 2, discordant, 0.5).pvalue)


def mcnemar_discordance_limit(difference: float, n: int, alpha: float = 0.05) -> float:
    """The largest discordance rate d = (only_a + only_b)/n at which the exact two-sided McNemar test of `n` paired 0/1
    outcomes whose difference is `difference` (p_a − p_b, a fraction; only_a − only_b = round(|difference|·n)) gives
    p < `alpha`; NaN when no discordance does. The least discordance that can hold the difference is |difference| (every
    disagreement one way), so the difference is significant exactly for discordance rates in [|difference|, limit]. At
    a fixed only_a − only_b the exact p grows with the discordant count (two more fair coin flips spread the walk), so
    the limit is found by bisection over the counts of the right parity."""
    if n < 1 or not 0 <= abs(difference) <= 1:
        raise ValueError(f"need n >= 1 and |difference| <= 1, got {n} and {difference}")
    k = round(abs(difference) * n)
    if k == 0 or _mcnemar_p(k, k) >= alpha:
        return math.nan
    low, high = 0, (n - k) // 2  # discordant counts k + 2j: p < alpha at j = low, and at j = high or not
    if _mcnemar_p(k, k + 2 * high) < alpha:
        return (k + 2 * high) / n
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _mcnemar_p(k, k + 2 * middle) < alpha else (low, middle)
    return (k + 2 * low) / n


def mean_difference_discordance_limit(difference: float, sizes: Sequence[int], alpha: float = 0.05) -> float:
    """For the unweighted mean over question sets of sizes n_1..n_k of a paired 0/1 difference (a table's "Average"
    row of EM over k datasets), the largest common discordance rate d at which the mean difference Δ = `difference`
    (a fraction) is significant two-sided at `alpha`, by the normal approximation of McNemar in each set: Var(Δ) ≈
    d·Σ 1/(k²·n_i), so d ≤ Δ² / (z²·Σ 1/(k²·n_i)). NaN when that is below |Δ|, the least discordance that holds Δ."""
    counts = np.asarray(sizes, dtype=float)
    if counts.ndim != 1 or counts.size == 0 or np.any(counts < 1) or not 0 <= abs(difference) <= 1:
        raise ValueError(f"need sizes >= 1 and |difference| <= 1, got {sizes!r} and {difference}")
    z = sps.norm.ppf(1 - alpha / 2)
    limit = difference**2 / (z**2 * float(np.sum(1 / (counts.size**2 * counts))))
    return float(min(limit, 1.0)) if difference != 0 and limit >= abs(difference) else math.nan


def tost_equivalence(scores: Sequence[float], reported: float, margin: float) -> SignificanceResult:
    """Two one-sided t-tests: is the mean of `scores` (per run or per item, on the reported scale) within
    ±`margin` of the `reported` value? A small p supports equivalence; `ci_*` is the 1 − 2α = 90% CI."""
    x = np.asarray(scores, dtype=float)
    if x.ndim != 1 or x.size < 2 or not np.isfinite(x).all():
        raise ValueError("scores must be at least 2 finite values")
    if not (math.isfinite(margin) and margin > 0 and math.isfinite(reported)):
        raise ValueError(f"need a finite reported value and a positive margin, got {reported}, {margin}")
    described = DescrStatsW(x)
    p_value, (t_low, _, _), (t_high, _, _) = described.ttost_mean(reported - margin, reported + margin)
    low, high = described.tconfint_mean(alpha=0.10)
    statistic = min(t_low, -t_high)  # the weaker of the two one-sided t statistics
    effect = float(x.mean() - reported)
    return SignificanceResult(f"TOST ±{margin:g}", effect, float(statistic), float(p_value), x.size,
                      float(low), float(high))


def _cells(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"cell values must be 1-D and of equal length, got shapes {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)  # cells printed as "-" for either method
    return x[keep], y[keep]


def sign_test(a: Sequence[float], b: Sequence[float], alternative: Alternative = "two-sided") -> SignificanceResult:
    """Exact sign test over paired cells (ties dropped): are the cells where a > b more than chance?
    `statistic` is the number of wins of a, `n` the untied cells."""
    x, y = _cells(a, b)
    wins, losses = int(np.sum(x > y)), int(np.sum(x < y))
    if wins + losses == 0:
        return SignificanceResult(f"sign test ({alternative})", 0.0, 0.0, 1.0, 0)
    result = sps.binomtest(wins, wins + losses, 0.5, alternative=alternative)
    effect = float(np.median(x - y))
    return SignificanceResult(f"sign test ({alternative})", effect, float(wins), float(result.pvalue), wins + losses)


def wilcoxon_cells(
    a: Sequence[float], b: Sequence[float], alternative: Alternative = "two-sided"
) -> SignificanceResult:
    """Wilcoxon signed-rank test over paired cells measured on one scale (zero differences dropped)."""
    x, y = _cells(a, b)
    n = int(np.sum(x != y))
    if n == 0:
        return SignificanceResult(f"Wilcoxon ({alternative})", 0.0, 0.0, 1.0, 0)
    result = sps.wilcoxon(x, y, zero_method="wilcox", alternative=alternative)
    effect = float(np.median(x - y))
    return SignificanceResult(f"Wilcoxon ({alternative})", effect, float(result.statistic), float(result.pvalue), n)


def min_sign_test_p(n: int, alternative: Alternative = "two-sided") -> float:
    """The smallest p-value a sign test over `n` untied cells can give (all n in one direction)."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    k = 0 if alternative == "less" else n
    return float(sps.binomtest(k, n, 0.5, alternative=alternative).pvalue)


class PairedTest(NamedTuple):
    """One metric's paired comparison: `test` decides (its `p_value`), `interval` carries the 95% interval of the
    difference (`ci_low`, `ci_high`)."""

    test: SignificanceResult
    interval: SignificanceResult


def paired_test(a: Sequence[float], b: Sequence[float], binary: bool = False, n_resamples: int = 10_000,
                seed: int = 0) -> PairedTest:
    """System a against system b on one metric's per-item scores, the test chosen by the metric: exact McNemar with
    its exact interval (`mcnemar_test`) for 0/1 outcomes (`binary`), both roles in one result; otherwise approximate
    randomization (`n_resamples` − 1 permutations) and a paired bootstrap interval (BCa, `n_resamples`), both seeded
    by `seed`."""
    if binary:
        test = mcnemar_test(a, b)
        return PairedTest(test, test)
    return PairedTest(approximate_randomization(a, b, n_resamples - 1, seed=seed),
                      paired_bootstrap(a, b, n_resamples, seed=seed))


def compare_per_item(
    scores_a: dict[str, Sequence[float]], scores_b: dict[str, Sequence[float]], n_resamples: int = 10_000, seed: int = 0,
    binary: Sequence[str] = ("em",),
) -> pd.DataFrame:
    """System a against system b on the same items, for every metric both score dicts hold (e.g. the
    {"em": …, "f1": …} of repro.formulas.metrics.per_item_qa_scores): approximate randomization, and the row that
    carries the 95% interval of the difference (`paired_test`): exact McNemar with its exact interval for the 0/1
    metrics named in `binary`, a paired bootstrap (BCa) for the others; Holm-corrected across all rows."""
    metrics = [m for m in scores_a if m in scores_b]
    if not metrics:
        raise ValueError(f"no metric in common: {sorted(scores_a)} vs {sorted(scores_b)}")
    results = []
    for metric in metrics:
        a, b = scores_a[metric], scores_b[metric]
        test, interval = paired_test(a, b, metric in binary, n_resamples, seed)
        if metric in binary:  # approximate randomization beside the McNemar row
            tests = [approximate_randomization(a, b, n_resamples - 1, seed=seed), interval]
        else:
            tests = [interval, test]
        results += [{"metric": metric, **t.as_dict()} for t in tests]
    table = pd.DataFrame(results)
    table["p_holm"] = holm(table["p_value"])[0]
    return table


def compare_across_cells(
    cells: pd.DataFrame, target: str, baselines: Sequence[str] | None = None, alternative: Alternative = "two-sided",
    alpha: float = 0.05,
) -> pd.DataFrame:
    """`target` against each baseline over the cells of a wide table (rows = cells, columns = methods; every
    cell must be "higher is better"): wins/ties/losses, sign test, Wilcoxon (only when all cells share one
    metric, i.e. one scale), both Holm-corrected across the baselines, and the smallest attainable p.
    Baselines with no value in any cell are left out."""
    if target not in cells.columns:
        raise ValueError(f"target {target!r} is not a column; columns: {list(cells.columns)}")
    baselines = [c for c in cells.columns if c != target] if baselines is None else list(baselines)
    one_scale = "metric" in (cells.index.names or []) and cells.index.get_level_values("metric").nunique() == 1
    rows = []
    for baseline in baselines:
        x, y = _cells(cells[target], cells[baseline])
        if x.size == 0:  # the baseline has no value in any of these cells (e.g. Zero has no CR)
            continue
        sign = sign_test(x, y, alternative)
        wilcoxon = wilcoxon_cells(x, y, alternative) if one_scale else None
        rows.append({
            "baseline": baseline, "n_cells": x.size, "wins": int(np.sum(x > y)), "ties": int(np.sum(x == y)),
            "losses": int(np.sum(x < y)), "sign_p": sign.p_value,
            "min_attainable_p": min_sign_test_p(x.size, alternative),
            "wilcoxon_p": wilcoxon.p_value if wilcoxon else math.nan,
        })
    table = pd.DataFrame(rows)
    table["sign_p_holm"] = holm(table["sign_p"], alpha)[0]
    if one_scale:
        table["wilcoxon_p_holm"] = holm(table["wilcoxon_p"], alpha)[0]
    return table
