import math
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from repro.reporting.stats import (
    approximate_randomization,
    binomial_standard_error,
    compare_across_cells,
    compare_per_item,
    discordant_pairs,
    family_wise_p,
    holm,
    intersection_union_p,
    mcnemar_discordance_limit,
    mean_difference_discordance_limit,
    mcnemar_detectable_difference,
    mcnemar_exact_interval,
    mcnemar_sample_size,
    mcnemar_score_interval,
    mcnemar_test,
    min_sign_test_p,
    paired_bootstrap,
    paired_test,
    sign_test,
    stratified_mcnemar,
    tost_equivalence,
    wilcoxon_cells,
)


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(7)
    base = rng.random(300)
    return base, np.clip(base - 0.15 + 0.05 * rng.standard_normal(300), 0, 1), base + 0.02 * rng.standard_normal(300)


def test_paired_bootstrap_detects_a_clear_difference(scores):
    a, worse, _ = scores
    result = paired_bootstrap(a, worse, n_resamples=2000)
    assert result.effect == pytest.approx(a.mean() - worse.mean())
    assert 0 < result.ci_low < result.effect < result.ci_high
    assert result.p_value < 0.001 and result.n == 300


def test_paired_bootstrap_no_difference(scores):
    a, _, same = scores
    result = paired_bootstrap(a, same, n_resamples=2000)
    assert result.ci_low < 0 < result.ci_high and result.p_value > 0.05


def test_paired_bootstrap_constant_difference():
    result = paired_bootstrap([1.0, 0.5, 0.0], [0.5, 0.0, -0.5])
    assert (result.effect, result.ci_low, result.ci_high, result.p_value) == (0.5, 0.5, 0.5, 0.0)
    assert paired_bootstrap([1, 0], [1, 0]).p_value == 1.0


def test_batched_resampling_draws_what_one_call_draws(scores):
    a, _, same = scores
    with patch("repro.reporting.stats.RESAMPLE_BATCH", None):  # scipy's single vectorised call
        whole = paired_bootstrap(a, same, n_resamples=2500), approximate_randomization(a, same, n_resamples=2499)
    with patch("repro.reporting.stats.RESAMPLE_BATCH", 1000):  # three batches, the last one partial
        assert (paired_bootstrap(a, same, n_resamples=2500), approximate_randomization(a, same, n_resamples=2499)) \
            == whole


def test_approximate_randomization_exact_enumeration():
    # 2^3 sign flips of (1, 1, 1): |mean| ≥ 1 only for all-plus and all-minus -> p = 2/8
    result = approximate_randomization([1, 1, 1], [0, 0, 0])
    assert result.effect == 1.0 and result.p_value == pytest.approx(0.25)
    assert approximate_randomization([1, 1, 1], [0, 0, 0], alternative="greater").p_value == pytest.approx(1 / 8)


def test_approximate_randomization_detects_a_clear_difference(scores):
    a, worse, _ = scores
    # no resample reaches the observed difference: one-sided (0 + 1)/(999 + 1), doubled for two sides
    assert approximate_randomization(a, worse, n_resamples=999).p_value == pytest.approx(2 / 1000)


def test_mcnemar_exact_hand_value():
    # 5 both right, 10 only a, 0 only b, 5 both wrong: exact binomial p = 2 · 0.5^10
    a = [1] * 5 + [1] * 10 + [0] * 5
    b = [1] * 5 + [0] * 10 + [0] * 5
    result = mcnemar_test(a, b)
    assert result.p_value == pytest.approx(2 * 0.5**10)
    assert result.effect == pytest.approx(0.5) and result.statistic == 0
    # Clopper-Pearson of 10/10 is [0.025^(1/10), 1] = [0.69150, 1]; times 10/20 as 2θ − 1: [0.19150, 0.5]
    assert (result.ci_low, result.ci_high) == pytest.approx((0.5 * (2 * 0.025**0.1 - 1), 0.5))
    with pytest.raises(ValueError, match="binary"):
        mcnemar_test([0.5, 1], [1, 0])


def test_mcnemar_exact_interval_by_hand():
    # 6 vs 1 discordant of 128: Clopper-Pearson of 6/7 is [0.42128, 0.99639], so 7/128·(2θ − 1) spans 0
    assert mcnemar_exact_interval(6, 1, 128) == pytest.approx((7 / 128 * (2 * 0.4212768 - 1),
                                                                7 / 128 * (2 * 0.9963897 - 1)))
    assert mcnemar_exact_interval(6, 1, 128) == pytest.approx((-0.0086103, 0.0542926), abs=1e-6)
    # 0 vs 4 of 8: θ's interval is [0, 1 − 0.025^(1/4)] = [0, 0.60236]; 4/8·(2θ − 1) = [−0.5, 0.10236]
    assert mcnemar_exact_interval(0, 4, 8) == pytest.approx((-0.5, 0.5 * (2 * (1 - 0.025**0.25) - 1)))
    assert mcnemar_exact_interval(0, 0, 5) == (0.0, 0.0)  # no discordant pair: no difference, no uncertainty
    with pytest.raises(ValueError):
        mcnemar_exact_interval(3, 3, 5)


@settings(max_examples=300, deadline=None)
@given(only_a=st.integers(0, 40), only_b=st.integers(0, 40), concordant=st.integers(0, 40))
def test_the_mcnemar_interval_holds_zero_exactly_when_the_exact_test_does_not_reject(only_a, only_b, concordant):
    a = [1] * only_a + [0] * only_b + [1] * concordant + [0, 1]
    b = [0] * only_a + [1] * only_b + [1] * concordant + [0, 1]
    result = mcnemar_test(a, b)
    assert result.ci_low <= result.effect <= result.ci_high
    assert (result.ci_low <= 0 <= result.ci_high) == (result.p_value >= 0.05)


# Published Tango score intervals: (only_a, only_b, n, confidence level), the bounds as printed, their decimals.
# Transcribed from the test suites of the R packages ratesci (tests/testthat/test3.R, github.com/petelaud/ratesci) and
# contingencytables (tests/testthat/test-ch8.R, github.com/ocbe-uio/contingencytables), which cite these sources.
PUBLISHED_TANGO_INTERVALS = [
    ((9, 3, 32, 0.95), (-0.027, 0.390), 3),  # Tango (1998) Stat Med 17:891-908, Table VII
    ((0, 1, 44, 0.90), (-0.096, 0.037), 3),  # Tango (1998), Table V: 43 concordant pairs, 0 vs 1 discordant
    ((16, 8, 86, 0.95), (-0.020, 0.207), 3),  # Agresti & Min (2005) Stat Med 24:729-740
    ((1, 7, 21, 0.95), (-0.517, -0.026), 3),  # Fagerland, Lydersen & Laake (2014) Stat Med 33:2850, Bentur et al. data
    # Fagerland, Lydersen & Laake (2017) Statistical Analysis of Contingency Tables, ch. 8, Cavo et al. data
    ((6, 16, 161, 0.95), (-0.1240, -0.0054), 4),
]


@pytest.mark.parametrize(("counts", "published", "digits"), PUBLISHED_TANGO_INTERVALS)
def test_mcnemar_score_interval_matches_published_values(counts, published, digits):
    assert tuple(round(bound, digits) for bound in mcnemar_score_interval(*counts)) == published


def test_mcnemar_score_interval_edges_by_hand():
    z2 = sps.norm.ppf(0.975) ** 2
    # no discordant pair: p_b-only = 0 on Δ > 0 and −Δ on Δ < 0, so Z² = n|Δ|/(1 − |Δ|) = z² at Δ = ±z²/(n + z²)
    assert mcnemar_score_interval(0, 0, 10) == pytest.approx((-z2 / (10 + z2), z2 / (10 + z2)))
    # every pair won by a: p_b-only = (1 − Δ)/2, Z² = n(1 − Δ)/(1 + Δ) = z² at (n − z²)/(n + z²); the upper end is 1
    # (n = 3: −0.1230, as contingencytables' tests print); the mirror case for b
    assert mcnemar_score_interval(3, 0, 3) == pytest.approx(((3 - z2) / (3 + z2), 1.0))
    assert mcnemar_score_interval(0, 3, 3) == pytest.approx((-1.0, (z2 - 3) / (3 + z2)))
    assert round(mcnemar_score_interval(3, 0, 3)[0], 4) == -0.1230
    # unconditional: one discordant pair in 100 leaves the exact interval inside ±1/100, Tango's reaches further
    exact_low, exact_high = mcnemar_exact_interval(1, 0, 100)
    score_low, score_high = mcnemar_score_interval(1, 0, 100)
    assert -0.01 <= exact_low and exact_high <= 0.01 and score_low < exact_low and score_high > 0.04
    with pytest.raises(ValueError, match="only_a"):
        mcnemar_score_interval(3, 3, 5)
    with pytest.raises(ValueError, match="confidence_level"):
        mcnemar_score_interval(1, 0, 5, confidence_level=1.0)


def test_mcnemar_score_interval_narrows_with_n():
    # same proportions (10% only a, 4% only b) on more items
    intervals = [mcnemar_score_interval(n // 10, n // 25, n) for n in (50, 100, 200, 400, 800)]
    widths = [high - low for low, high in intervals]
    assert np.all(np.diff(widths) < 0)


@settings(max_examples=300, deadline=None)
@given(only_a=st.integers(0, 40), only_b=st.integers(0, 40), concordant=st.integers(0, 40))
def test_mcnemar_score_interval_properties(only_a, only_b, concordant):
    n = only_a + only_b + concordant + 1
    low, high = mcnemar_score_interval(only_a, only_b, n)
    assert -1 <= low <= (only_a - only_b) / n <= high <= 1 and low < high
    assert mcnemar_score_interval(only_b, only_a, n) == pytest.approx((-high, -low), abs=1e-9)  # swap a and b
    if only_a + only_b:  # Z(0) is the uncorrected McNemar statistic
        rejects = mcnemar([[0, only_a], [only_b, 0]], exact=False, correction=False).pvalue < 0.05
        assert (low > 0 or high < 0) == rejects
    else:
        assert low < 0 < high


def test_stratified_mcnemar_with_one_stratum_is_mcnemar():
    a = [1] * 5 + [1] * 10 + [0] * 2 + [0] * 5
    b = [1] * 5 + [0] * 10 + [1] * 2 + [0] * 5
    single, pooled = mcnemar_test(a, b), stratified_mcnemar([(a, b)])
    assert (pooled.effect, pooled.statistic, pooled.n) == (single.effect, single.statistic, single.n)
    assert pooled.p_value == pytest.approx(single.p_value)
    assert (pooled.ci_low, pooled.ci_high) == mcnemar_score_interval(10, 2, 22)
    assert pooled.test == "stratified McNemar (exact)"


def test_stratified_mcnemar_sums_the_strata():
    # stratum 1: 3 only a, 1 only b of 6; stratum 2: 4 only a, 0 only b of 5 -> 7 vs 1 of 11
    # exact two-sided p = 2·(C(8,0) + C(8,1))/2^8 = 18/256
    strata = [([1, 1, 1, 0, 1, 0], [0, 0, 0, 1, 1, 0]), ([1, 1, 1, 1, 0], [0, 0, 0, 0, 0])]
    result = stratified_mcnemar(strata)
    assert result.p_value == pytest.approx(18 / 256)
    assert (result.effect, result.statistic, result.n) == (6 / 11, 1.0, 11)
    assert (result.ci_low, result.ci_high) == mcnemar_score_interval(7, 1, 11)
    no_discordant = stratified_mcnemar([([1, 0], [1, 0]), ([0, 0, 1], [0, 0, 1])])
    assert (no_discordant.effect, no_discordant.p_value) == (0.0, 1.0)
    assert no_discordant.ci_low < 0 < no_discordant.ci_high


def test_stratified_mcnemar_validates_each_stratum():
    with pytest.raises(ValueError, match="at least one stratum"):
        stratified_mcnemar([])
    with pytest.raises(ValueError, match="stratum 1: McNemar needs binary"):
        stratified_mcnemar([([1, 0], [0, 1]), ([1, 0.5], [0, 1])])
    with pytest.raises(ValueError, match="stratum 0: paired scores"):
        stratified_mcnemar([([1, 0, 1], [0, 1])])


def test_holm_hand_values():
    adjusted, reject = holm([0.01, 0.04, 0.03])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06])  # 3·0.01, max(2·0.03, 1·0.04) kept monotone
    assert reject.tolist() == [True, False, False]
    with pytest.raises(ValueError):
        holm([1.2])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_equals_statsmodels(p_values, alpha):
    with patch("gc.collect"):  # its arithmetic, without the full collection it runs on every call
        reject, adjusted, _, _ = multipletests(p_values, alpha=alpha, method="holm")
    ours, our_reject = holm(p_values, alpha)
    np.testing.assert_allclose(ours, adjusted, rtol=1e-12)
    assert our_reject.tolist() == reject.tolist()


def test_tost_hand_value():
    # mean 2, sd 1, n 3: t = (2 − 1)/(1/√3) = √3 on 2 df -> one-sided p = 0.5 − √3/(2√5)
    result = tost_equivalence([1, 2, 3], reported=2, margin=1)
    assert result.p_value == pytest.approx(0.5 - np.sqrt(3) / (2 * np.sqrt(5)))
    assert result.effect == 0 and result.n == 3


def test_tost_equivalence_and_non_equivalence():
    rng = np.random.default_rng(0)
    close = 41.14 + 0.3 * rng.standard_normal(5)
    assert tost_equivalence(close, reported=41.14, margin=1.0).p_value < 0.05
    assert tost_equivalence(close + 3, reported=41.14, margin=1.0).p_value > 0.5
    with pytest.raises(ValueError):
        tost_equivalence([1.0, 2.0], reported=1.0, margin=0)


def test_sign_test_and_its_floor():
    assert sign_test([2] * 18, [1] * 18).p_value == pytest.approx(2 * 0.5**18)
    assert sign_test([2] * 5, [1] * 5).p_value == pytest.approx(0.0625)  # 5 cells never reach 0.05
    assert min_sign_test_p(5) == pytest.approx(0.0625)
    assert min_sign_test_p(6, "greater") == pytest.approx(1 / 64)
    result = sign_test([2, 2, 1, 0, np.nan], [1, 1, 1, 1, 3])
    assert (result.statistic, result.n) == (2, 3)  # one tie and one missing cell dropped
    assert result.p_value == pytest.approx(1.0)


def test_wilcoxon_cells_exact():
    # six positive, distinct differences: exact two-sided p = 2/2^6
    assert wilcoxon_cells([1.1, 2.2, 3.3, 4.4, 5.5, 6.6], [1, 2, 3, 4, 5, 6]).p_value == pytest.approx(2 / 64)


def test_compare_across_cells():
    index = pd.MultiIndex.from_product([["1.5B", "7B"], ["NQ", "TQA", "HotpotQA"], ["EM"]],
                                       names=["model_size", "dataset", "metric"])
    cells = pd.DataFrame({"Ours": [5.0, 6, 7, 8, 9, 10], "A": [4.0, 5, 6, 7, 8, 9], "B": [6.0, 5, np.nan, 9, 8, 11]},
                         index=index)
    table = compare_across_cells(cells, "Ours").set_index("baseline")
    assert table.loc["A", ["n_cells", "wins", "ties", "losses"]].tolist() == [6, 6, 0, 0]
    assert table.loc["A", "sign_p"] == pytest.approx(2 / 64)
    assert table.loc["B", ["n_cells", "wins", "losses"]].tolist() == [5, 2, 3]
    assert table.loc["A", "sign_p_holm"] == pytest.approx(2 * 2 / 64)
    assert not np.isnan(table.loc["A", "wilcoxon_p"])  # one metric: one scale
    mixed = cells.rename(index={"EM": "F1"}, level="metric", errors="raise").iloc[:3]
    assert np.isnan(compare_across_cells(pd.concat([cells.iloc[:3], mixed]), "Ours")["wilcoxon_p"]).all()
    assert "C" not in compare_across_cells(cells.assign(C=np.nan), "Ours")["baseline"].tolist()  # no cells
    with pytest.raises(ValueError, match="target"):
        compare_across_cells(cells, "C")


def test_paired_inputs_are_validated():
    with pytest.raises(ValueError):
        paired_bootstrap([1, 2, 3], [1, 2])
    with pytest.raises(ValueError):
        approximate_randomization([1, np.nan], [1, 2])


def test_compare_per_item_runs_every_test_and_corrects(scores):
    a, worse, _ = scores
    em_a, em_b = (a > 0.5).astype(float), (worse > 0.5).astype(float)
    table = compare_per_item({"em": em_a, "f1": a}, {"em": em_b, "f1": worse, "acc": worse}, n_resamples=500)
    assert table[["metric", "test"]].values.tolist() == [  # the 0/1 metric's interval is McNemar's, F1's bootstrap's
        ["em", "approximate randomization (two-sided)"], ["em", "McNemar (exact)"],
        ["f1", "paired bootstrap"], ["f1", "approximate randomization (two-sided)"],
    ]
    assert table.loc[0, "effect"] == pytest.approx(em_a.mean() - em_b.mean())
    assert table["ci_low"].notna().tolist() == [False, True, True, False]  # one interval per metric
    assert table.loc[1, ["ci_low", "ci_high"]].tolist() == list(mcnemar_test(em_a, em_b).as_dict().values())[-2:]
    assert (table["p_holm"] >= table["p_value"]).all() and (table["p_holm"] < 0.05).all()
    with pytest.raises(ValueError, match="no metric in common"):
        compare_per_item({"em": em_a}, {"f1": a})
    recall = compare_per_item({"em": em_a, "ar": em_a}, {"em": em_b, "ar": em_b}, n_resamples=500, binary=("ar",))
    assert recall[recall["test"] == "McNemar (exact)"]["metric"].tolist() == ["ar"]  # any named 0/1 metric


def test_paired_test_gives_each_studys_test_by_hand():
    # 10 paired 0/1 outcomes, 3 discordant for a and 1 for b: exact McNemar p = 2·P(Bin(4, ½) ≤ 1) = 2·(1 + 4)/16
    # = 0.625; the exact interval is 4/10·(2θ − 1) over Clopper-Pearson's θ of 3/4: θ_lo solves P(Beta(3, 2) ≤ θ) =
    # 4θ³ − 3θ⁴ = 0.025 (θ = 0.194120), θ_hi = 0.975^(1/4) (the 0.975 quantile of Beta(4, 1))
    a, b = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    test, interval = paired_test(a, b, binary=True)
    assert test is interval and test.test == "McNemar (exact)" and (test.effect, test.statistic) == (0.2, 1.0)
    assert test.p_value == pytest.approx(0.625)
    assert (test.ci_low, test.ci_high) == pytest.approx((0.4 * (2 * 0.1941204 - 1), 0.4 * (2 * 0.975**0.25 - 1)))
    assert discordant_pairs(a, b) == (3, 1)
    # per-item F1 with differences (1, 0.5, 0, 0): the permutation test enumerates the 2⁴ sign flips, and |mean| ≥
    # 0.375 only when the two non-zero differences keep one sign (±1.5/4): 8 of 16, p = 0.5
    f1_a, f1_b = [1, 0.5, 0.5, 0], [0, 0, 0.5, 0]
    test, interval = paired_test(f1_a, f1_b, seed=3)
    assert test.test == "approximate randomization (two-sided)" and test.effect == 0.375
    assert test.p_value == pytest.approx(0.5) and math.isnan(test.ci_low)
    assert interval == paired_bootstrap(f1_a, f1_b, 10_000, seed=3)  # the BCa interval, seeded as the test
    assert test == approximate_randomization(f1_a, f1_b, 9_999, seed=3)
    assert discordant_pairs(f1_a, f1_b) == (2, 0)  # items where either scores higher
    table = compare_per_item({"em": a[:4], "f1": f1_a}, {"em": b[:4], "f1": f1_b}, seed=3)  # the same helper's rows
    assert table.loc[1].drop(["metric", "p_holm"]).to_dict() == paired_test(a[:4], b[:4], binary=True).test.as_dict()
    assert table.loc[[2, 3], "test"].tolist() == [interval.test, test.test]
    assert table.loc[2].drop(["metric", "p_holm"]).to_dict() == interval.as_dict()


def test_mcnemar_sample_size_follows_connors_formula_by_hand():
    # (1.95996·√0.1 + 0.84162·√(0.1 − 0.05²))² / 0.05² = (0.61979 + 0.26279)² / 0.0025 = 311.6
    assert mcnemar_sample_size(0.10, 0.05) == 312
    # every discordant pair on one side: (0.61979 + 0.84162·√0.09)² / 0.01 = 76.1
    assert mcnemar_sample_size(0.10, -0.10) == 77
    with pytest.raises(ValueError, match="discordant_rate"):
        mcnemar_sample_size(0.04, 0.05)  # a difference larger than the discordant share is impossible


def test_the_detectable_difference_inverts_connors_formula():
    # docs/cpu-evidence.md's table (points, rounded up): 200 and 600 pairs at discordance 0.05-0.20
    table = [[math.ceil(1000 * mcnemar_detectable_difference(psi, n)) / 10 for psi in (0.05, 0.10, 0.15, 0.20)]
             for n in (200, 600)]
    assert table == [[4.5, 6.3, 7.7, 8.9], [2.6, 3.7, 4.5, 5.2]]
    assert mcnemar_detectable_difference(0.10, 312) < 0.05 < mcnemar_detectable_difference(0.10, 311)  # n = 311.6
    assert mcnemar_detectable_difference(0.10, 77) == pytest.approx(0.10, abs=2e-3)
    assert math.isnan(mcnemar_detectable_difference(0.05, 5))  # even all 5% one way would need more pairs


def test_a_claims_p_under_intersection_union_and_under_holm_by_hand():
    p_values = [0.01, 0.04, 0.03]
    assert intersection_union_p(p_values) == 0.04  # "beats every": the largest, each at α, no adjustment
    assert family_wise_p(p_values) == pytest.approx(0.03)  # "beats some": Holm's smallest, 3 · 0.01
    assert family_wise_p([0.5, 0.4]) == 0.8 and family_wise_p([0.9, 0.8]) == 1.0  # 2 · 0.4; capped at 1
    with pytest.raises(ValueError, match="non-empty"):
        intersection_union_p([])


def test_binomial_standard_error_by_hand():
    assert binomial_standard_error(0.4, 100) == pytest.approx(math.sqrt(0.24 / 100))
    assert binomial_standard_error(0.0, 50) == 0.0
    with pytest.raises(ValueError, match="rate"):
        binomial_standard_error(1.2, 10)


def test_the_discordance_a_mcnemar_difference_needs_by_hand():
    # 20 pairs, difference 0.3: only_a − only_b = 6; 6 discordant (all one way) give 2 · 0.5^6 = 0.031, 8 (7 vs 1) give
    # 2 · 9/256 = 0.070: significant at a discordance of 6/20 only
    assert mcnemar_discordance_limit(0.3, 20) == 0.3
    # 100 pairs, difference 0.08: 8 discordant 2/256, 10 give 2 · 11/1024 = 0.021, 12 give 158/4096 = 0.039, 14 give
    # 940/16384 = 0.057
    assert mcnemar_discordance_limit(0.08, 100) == 0.12
    # 20 pairs, difference 0.5: even 15 vs 5, every pair discordant, gives 2 · 21700/2^20 = 0.041
    assert mcnemar_discordance_limit(0.5, 20) == 1.0
    assert math.isnan(mcnemar_discordance_limit(0.01, 100))  # one pair: p = 1
    assert math.isnan(mcnemar_discordance_limit(0.0, 100))
    # NQ's 40.44 vs 40.02 on 3,600: 15 more one way; 51 discordant give 0.0489, 53 give 0.0534
    assert mcnemar_discordance_limit(0.0042, 3600) == 51 / 3600
    assert sps.binomtest(33, 51, 0.5).pvalue < 0.05 <= sps.binomtest(34, 53, 0.5).pvalue


@given(st.integers(20, 400).flatmap(lambda n: st.tuples(st.integers(1, min(60, n)), st.just(n))))
@settings(max_examples=60, deadline=None)
def test_the_discordance_limit_is_where_the_exact_test_stops_rejecting(difference_and_n):
    difference, n = difference_and_n  # only_a − only_b, at most 60 of at least 20 pairs
    limit = mcnemar_discordance_limit(difference / n, n)
    if math.isnan(limit):
        assert mcnemar(np.array([[0, difference], [0, n - difference]]), exact=True).pvalue >= 0.05
        return
    discordant = round(limit * n)
    assert sps.binomtest((discordant + difference) // 2, discordant, 0.5).pvalue < 0.05
    if discordant + 2 <= n:
        assert sps.binomtest((discordant + 2 + difference) // 2, discordant + 2, 0.5).pvalue >= 0.05


def test_the_discordance_a_mean_difference_needs_by_hand():
    # two sets of 100, difference 0.1: Var = d · (1/400 + 1/400), so d ≤ 0.01 / (1.96² · 0.005) = 0.5206
    z = sps.norm.ppf(0.975)
    assert mean_difference_discordance_limit(0.1, [100, 100]) == pytest.approx(0.01 / (z**2 * 0.005))
    assert math.isnan(mean_difference_discordance_limit(0.01, [100, 100]))  # 0.0052, below the 0.01 it must hold
    assert mean_difference_discordance_limit(0.5, [10_000]) == 1.0  # at any discordance
    with pytest.raises(ValueError, match="sizes"):
        mean_difference_discordance_limit(0.1, [])
