"""The paper's claims judged on its own reported numbers (issue #33), by rules fixed before any verdict was read, and
held to the unit, the logic and the noise the claim has (issue #47; D225-D229).

The unit of analysis (D225): one unit per position (table, model size, dataset) and metric family. EM and F1 of one
run are scored on the same items, so they are one family, accuracy, whose unit is EM (F1 is shown beside it, not
counted as more units); CR, latency, searches and answer recall are families of their own. "Average" rows are left
out of the sign test (they are functions of the cells) and are positions of their own in an ordering.

Each claim of data/paper/claims.yaml (`repro.reporting.paper.load_claims`) names the cells it rests on and the test they
allow:

- `sign`: `better` against each method of `than` over the units of each family, a one-sided exact sign test (ties
  dropped) in the direction `alternative` says. "Beats every X" holds only if each comparison does: an
  intersection-union test, each comparison at ALPHA and the claim's p the largest (`stats.intersection_union_p`, no
  adjustment; D226). *supported* when that p is below ALPHA; *contradicted* when "some X beats it", the opposite sign
  tests with Holm over the comparisons (`stats.family_wise_p`), is below ALPHA; *untestable from the reported cells*
  when even a clean sweep of every unit could not reach ALPHA after the rule (`floor_p`, D227); otherwise
  *inconclusive at n = k* (k the fewest untied units of any comparison).
- `ordering`: within each position (every selector column but `by`), each `top` value of `by` must have fewer than
  `rank` values strictly better than it (`direction`). An ordering of single-run means is not a test: it *holds as
  printed* or *fails as printed* (D228). Where the metric is a share of questions (EM, answer recall) of a known test
  set and the two values are on the same questions, its noise is stated: the binomial standard error of each value,
  and the largest discordance rate at which the decisive margin (the top against the `rank`-th best other) reaches
  p < ALPHA in an exact McNemar test (`stats.mcnemar_discordance_limit`; a normal approximation for an "Average" of
  datasets). Against PLAUSIBLE_DISCORDANCE a margin is *beyond noise* (significant at every plausible discordance),
  *within noise* (at none) or undetermined. Every unit's margin beyond noise makes the ordering a test: *supported*
  (or *contradicted* when a failing margin is beyond noise); a margin inside the noise reads *within noise*.
- a claim whose words call a difference significant is judged by what the significance needs (D229): for every
  comparison its test names (each unit of a `sign` test, each decisive margin of an `ordering`), the range of
  discordance rates under which the printed difference reaches p < ALPHA on the reported test set, exact McNemar.
  *significance plausible* when the closest comparison reaches it at every plausible discordance, *significance
  implausible* when at none, *significance depends on discordance* between; *fails as printed* when a difference it
  calls significant is not positive.
- `none`: *not tested*, with the claim's reason.

The same claims judged on this repository's runs of a profile (`our_verdict`), from the paired per-item tests the
studies computed (`repro.reporting.ledger` gathers them into COMPARISON_COLUMNS, in the paper's names; D198), by
the same rules: a claim becomes a question "does each `top` method beat each `other` on `metrics`": a `sign` claim's
`better` against its `than`; an ordering of methods each `top` against the other methods of its cells, of which fewer
than `rank` may beat it. Every paired test of a top with an other in the claim's stages is oriented top − other (the
claimed direction positive); the units are the tests of each family's primary metric (EM, F1 beside). A test
*favours* the claim when its effect is positive and its p below ALPHA (intersection-union: each at ALPHA), *opposes*
it when its effect is negative and Holm's p over the claim's unit tests is below ALPHA. Per position (stage, dataset,
metric, top): *contradicted* when `rank` or more others oppose it at some position; *supported* when at every position
each other was tested and all but `rank` − 1 favour it; *untestable at n = k* when even every item of every needed
test going the claimed way could not reach ALPHA; otherwise *inconclusive at n = k* (k the fewest items of any test);
*not tested* when no such test ran, with the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from repro.reporting import stats
from repro.reporting.paper import SELECTOR_COLUMNS, select_cells

ALPHA = 0.05
# The discordance rates (share of questions on which two systems' 0/1 outcomes differ) plausible for two separately
# trained systems, from the two measurements at hand: 0.085, the lowest EM discordance between two of this repository's
# methods (cpu-study's Table 2, EviOmni against Zero, 400 questions; the highest there 0.190, against Full:
# docs/cpu-study.md, "Power", from main_comparison's questions_needed table); 0.218, the paper's own §2.2, where the
# answer recall of two separately LoRA-tuned 1.5B extractors differs on 14.49% + 7.30% of HotpotQA's questions (D229).
PLAUSIBLE_DISCORDANCE = (0.085, 0.218)
DISCORDANCE_SOURCES = ("8.5%: this repository's cpu-study, EM of EviOmni against Zero on 400 questions "
                       "(docs/cpu-study.md, Power; 19.0% against Full); 21.8%: the paper's §2.2, the answer recall of "
                       "two separately trained 1.5B extractors differs on 14.49% + 7.30% of HotpotQA")
TEST_SPLIT_TABLES = (2, 3, 9, 10)  # EM on Table 7's test sets (HotpotQA's, 2WikiQA's, MuSiQue's: dev sets, App. A.1)
AGENTIC_TABLES = (5, 6)  # Search-R1's: 500 questions sampled per dataset (§4.7)
AGENTIC_QUESTIONS = 500
PROPORTIONS = ("EM", "AR")  # metrics that are a share of questions: the binomial noise model applies
FAMILIES = {"EM": "accuracy", "F1": "accuracy"}  # one run's EM and F1 score the same items; every other metric its own
PRIMARY = ("EM", "F1")  # a family's unit metric: the first of these it has
UNIT = ["table", "split", "model_size", "dataset"]  # a unit: a position of the table, every metric of a family
OPPOSITE = {"greater": "less", "less": "greater"}
COMPARISON_COLUMNS = ("stage", "dataset", "a", "b", "metric", "test", "n", "effect", "ci_low", "ci_high", "p_value",
                      "source")  # one paired test of a against b; effect = a − b with its 95% interval
SIGNIFICANT = re.compile(r"\bsignificant", re.IGNORECASE)  # the paper's own word

SUPPORTED, CONTRADICTED, NOT_TESTED = "supported", "contradicted", "not tested"
UNTESTABLE = "untestable from the reported cells"
HOLDS, FAILS, WITHIN_NOISE = "holds as printed", "fails as printed", "within noise"
PLAUSIBLE, DEPENDS, IMPLAUSIBLE = ("significance plausible", "significance depends on discordance",
                                   "significance implausible")
# the verdict words, "inconclusive at n = k" and "untestable at n = k" read as "inconclusive" and "untestable"
REPORTED_VERDICTS = (SUPPORTED, CONTRADICTED, "inconclusive", "untestable", HOLDS, FAILS, WITHIN_NOISE, PLAUSIBLE,
                     DEPENDS, IMPLAUSIBLE, NOT_TESTED)
OUR_VERDICTS = (SUPPORTED, CONTRADICTED, "inconclusive", "untestable", NOT_TESTED)
BEYOND, WITHIN, UNDETERMINED, NO_MODEL = "beyond noise", "within noise", "undetermined", "no noise model"


def verdict_word(verdict: str) -> str:
    """The verdict word a verdict starts with (REPORTED_VERDICTS): "inconclusive at n = 6" → "inconclusive", and a
    pre-registered study's "supported at this scale" → "supported"."""
    return next((word for word in REPORTED_VERDICTS if verdict.startswith(word)), verdict)


def calls_significant(claim: dict) -> bool:
    """Whether the claim's words call a difference significant ("significant", "significantly")."""
    return bool(SIGNIFICANT.search(claim["words"]))


def question_counts(rows: pd.DataFrame) -> dict[tuple[int, str], tuple[int, ...]]:
    """The questions behind each printed EM, by (table, dataset), as one set size, or for an "Average" row the sizes
    of the sets it averages: Table 7's test splits for Tables 2, 3, 9 and 10, as printed (to 0.1k: NQ 3,600, whose split
    has 3,610; the bounds move by the same fraction), and AGENTIC_QUESTIONS per dataset for Tables 5 and 6. Table 1's
    are not reported (§2.2 drops the questions whose passages hold no answer)."""
    splits = rows[(rows["table"] == 7) & (rows["split"] == "test")]
    test = dict(zip(splits["dataset"], splits["value"].astype(int)))
    counts: dict[tuple[int, str], tuple[int, ...]] = {}
    for table in (*TEST_SPLIT_TABLES, *AGENTIC_TABLES):
        datasets = [d for d in dict.fromkeys(rows.loc[rows["table"] == table, "dataset"]) if d != "Average"]
        sizes = {d: AGENTIC_QUESTIONS if table in AGENTIC_TABLES else test.get(d) for d in datasets}
        counts |= {(table, d): (n,) for d, n in sizes.items() if n}
        if datasets and all(sizes.values()):
            counts[(table, "Average")] = tuple(sizes.values())
    return counts


def metric_families(metrics: Sequence[str]) -> dict[str, list[str]]:
    """The claim's metrics by family (FAMILIES), in their order, each family's unit metric first (PRIMARY)."""
    grouped: dict[str, list[str]] = {}
    for metric in dict.fromkeys(metrics):
        grouped.setdefault(FAMILIES.get(metric, metric), []).append(metric)
    return {family: sorted(members, key=lambda m: PRIMARY.index(m) if m in PRIMARY else -1)
            for family, members in grouped.items()}


def metric_roles(metrics: Sequence[str]) -> dict[str, str]:
    """Each metric's role: "unit" for its family's unit metric, "beside" for the others (F1 beside EM)."""
    return {m: "unit" if i == 0 else "beside" for members in metric_families(metrics).values()
            for i, m in enumerate(members)}


def noise_class(limit: float, ceiling: float = 1.0) -> str:
    """A margin's noise against PLAUSIBLE_DISCORDANCE, from the largest discordance rate at which it is significant
    (NaN: at none) and the largest the two values allow (`ceiling`): beyond noise when significant at every plausible
    (and possible) discordance, within noise when at none, else undetermined."""
    low, high = PLAUSIBLE_DISCORDANCE
    if math.isnan(limit) or limit < min(low, ceiling):
        return WITHIN
    return BEYOND if limit >= min(high, ceiling) else UNDETERMINED


def margin_noise(margin: float, values: tuple[float, float], metric: str, sizes: tuple[int, ...] | None,
                 paired: bool) -> dict:
    """The noise model of a margin (in the cells' points) between two printed values: for a share of `sizes`
    questions (PROPORTIONS) on the same questions (`paired`), the binomial standard error of each value and the largest
    discordance rate at which the margin reaches p < ALPHA (exact McNemar on one set, the normal approximation for the
    mean over several), classed by `noise_class` (two shares a and b can disagree on at most min(a + b, 2 − a − b)
    of the questions); otherwise no noise model."""
    if metric not in PROPORTIONS or not sizes or not paired:
        return {"n": sizes, "se": None, "discordance_limit": math.nan, "discordance_max": math.nan, "noise": NO_MODEL}
    difference = abs(margin) / 100
    if len(sizes) == 1:
        effective, limit = sizes[0], stats.mcnemar_discordance_limit(difference, sizes[0], ALPHA)
    else:  # the mean over k sets has the variance of one set of 1 / Σ 1/(k² n_i) questions
        effective = 1 / sum(1 / (len(sizes) ** 2 * n) for n in sizes)
        limit = stats.mean_difference_discordance_limit(difference, sizes, ALPHA)
    se = tuple(round(100 * stats.binomial_standard_error(v / 100, round(effective)), 2) for v in values)
    ceiling = min(sum(values), 200 - sum(values)) / 100
    return {"n": sizes, "se": se, "discordance_limit": limit, "discordance_max": ceiling,
            "noise": noise_class(limit, ceiling)}


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _where(key: tuple, columns: Sequence[str]) -> str:
    return " ".join(str(v) for v, c in zip(key, columns) if str(v) not in ("", "nan") and c != "table") or "all"


def reported_verdict(claim: dict, rows: pd.DataFrame, sizes: Mapping | None = None) -> dict:
    """One claim's verdict on the reported `rows` (`repro.reporting.paper.load_paper_tables`), by the rules of the
    module docstring; `sizes` are `question_counts(rows)` (computed when not given)."""
    test = claim["reported_test"]
    base = {"id": claim["id"], "section": claim["section"], "kind": claim["kind"], "test": test["test"]}
    if test["test"] == "none":
        return base | {"rule": "none", "n": 0, "detail": test["why"], "p": math.nan, "floor_p": math.nan,
                       "verdict": NOT_TESTED, "comparisons": []}
    cells = select_cells(rows, claim["cells"])
    sizes = question_counts(rows) if sizes is None else sizes
    if calls_significant(claim):
        return base | significance_verdict(test, cells, sizes)
    if test["test"] == "sign":
        return base | sign_verdict(cells, test["better"], test["than"], test["metric"], test["alternative"])
    return base | ordering_verdict(cells, test["by"], test["top"], test["rank"], test["direction"], sizes)


def reported_verdicts(claims: Sequence[dict], rows: pd.DataFrame) -> pd.DataFrame:
    """`reported_verdict` of every claim, one row each, in the claims' order; `comparisons` holds the counts behind each
    verdict, one dict per comparison."""
    sizes = question_counts(rows)
    return pd.DataFrame([reported_verdict(claim, rows, sizes) for claim in claims])


def _unit_table(cells: pd.DataFrame, metric: str) -> pd.DataFrame:
    kept = cells[(cells["metric"] == metric) & (cells["dataset"] != "Average")]
    return kept.pivot_table(index=UNIT, columns="method", values="value", aggfunc="first")


def sign_verdict(cells: pd.DataFrame, better: str, than: Sequence[str], metric: str | Sequence[str],
                 alternative: str) -> dict:
    """The `sign` rule over the tidy `cells`: for each family's unit metric and each method of `than`, the units'
    wins-ties-losses and one-sided sign p (the beside metrics' counts with them), the intersection-union p and its
    floor, Holm's p against the claim, and the verdict."""
    metrics = [m for m in _as_list(metric) if m in set(cells["metric"])]
    roles = metric_roles(metrics)
    comparisons = []
    for m in metrics:
        wide = _unit_table(cells, m)
        for against in (t for t in than if t in wide.columns and better in wide.columns):
            finite = wide[better].notna() & wide[against].notna()
            x, y = wide.loc[finite, better].to_numpy(float), wide.loc[finite, against].to_numpy(float)
            units = int(finite.sum())
            comparisons.append({
                "metric": m, "role": roles[m], "against": against, "units": units, "wins": int(np.sum(x > y)),
                "ties": int(np.sum(x == y)), "losses": int(np.sum(x < y)),
                "p": stats.sign_test(x, y, alternative).p_value,
                "floor_p": stats.min_sign_test_p(units, alternative) if units else 1.0,
                "p_against": stats.sign_test(x, y, OPPOSITE[alternative]).p_value})
    units = [c for c in comparisons if c["role"] == "unit"]
    if not units:
        raise ValueError(f"no unit of {metrics} has both {better} and any of {list(than)}")
    p = stats.intersection_union_p([c["p"] for c in units])
    floor = stats.intersection_union_p([c["floor_p"] for c in units])
    for c, holm_p in zip(units, stats.holm([c["p_against"] for c in units])[0]):
        c["p_against_holm"] = float(holm_p)
    against = stats.family_wise_p([c["p_against"] for c in units])  # "some X beats it": the smallest Holm p
    n = min(c["wins"] + c["losses"] for c in units)
    if p < ALPHA:
        verdict = SUPPORTED
    elif against < ALPHA:
        verdict = CONTRADICTED
    elif floor >= ALPHA:
        verdict = UNTESTABLE
    else:
        verdict = f"inconclusive at n = {n}"
    counted = "; ".join(f"vs {c['against']} ({c['metric']}): {c['wins']}-{c['ties']}-{c['losses']}, p = {c['p']:.3g}"
                        for c in units)
    beside = "; ".join(f"vs {c['against']} ({c['metric']}): {c['wins']}-{c['ties']}-{c['losses']}"
                       for c in comparisons if c["role"] == "beside")
    unit_metrics = ", ".join(m for m in metrics if roles[m] == "unit")
    detail = (f"one unit per (model size, dataset) position and family, {unit_metrics}; wins-ties-losses {counted}"
              + (f"; beside, not counted: {beside}" if beside else "")
              + f". Every comparison at {ALPHA} (intersection-union): p = {p:.3g}, at best {floor:.3g}; "
                f"against the claim (Holm): p = {against:.3g}")
    return {"rule": "intersection-union", "n": n, "detail": detail, "p": p, "floor_p": floor, "verdict": verdict,
            "comparisons": comparisons}


def _decisive_margins(cells: pd.DataFrame, by: str, tops: Sequence[str], rank: int, sign: float,
                      sizes: Mapping) -> list[dict]:
    """Per position (every selector column but `by`) and top: the top against the `rank`-th best other value of `by`
    (the one that decides whether fewer than `rank` are better), the margin in the claimed direction and its noise."""
    position = [c for c in SELECTOR_COLUMNS if c not in (by, "group", "method")]
    position += ["method"] if by != "method" else []
    roles = metric_roles(list(dict.fromkeys(cells["metric"])))
    margins = []
    for key, group in cells.dropna(subset=["value"]).groupby(position, sort=False):
        where = dict(zip(position, key))
        values = dict(zip(group[by].astype(str), group["value"].to_numpy(dtype=float)))
        for top in (t for t in tops if t in values):
            others = sorted(((v, o) for o, v in values.items() if o != top), key=lambda item: -sign * item[0])
            if len(others) < rank:  # fewer others than the rank allows above it: holds, nothing to weigh
                continue
            against_value, against = others[rank - 1]
            margin = round(sign * (values[top] - against_value), 6)
            metric = where["metric"]
            margins.append({"position": _where(key, position), "metric": metric, "role": roles[metric], "top": top,
                            "value": values[top], "against": against, "against_value": against_value,
                            "margin": margin, "holds": bool(margin >= 0),
                            **margin_noise(margin, (values[top], against_value), metric,
                                           sizes.get((int(where["table"]), where.get("dataset"))),
                                           paired=by != "dataset")})
    return margins


def discordance_words(limit: float, ceiling: float) -> str:
    """Where a margin reaches p < ALPHA: "at no discordance", "at any discordance" (up to the most the two values
    allow) or "at discordance ≤ x%"."""
    if math.isnan(limit):
        return "at no discordance"
    return "at any discordance" if limit >= ceiling else f"at discordance ≤ {100 * limit:.1f}%"


def questions_words(sizes: Sequence[int]) -> str:
    """A margin's questions: "3,600", or "3,600 + 11,300 + 5,600" for an "Average" row."""
    return " + ".join(f"{n:,}" for n in sizes)


def _margin_words(m: dict) -> str:
    noise = m["noise"]
    if noise != NO_MODEL:
        reach = discordance_words(m["discordance_limit"], m["discordance_max"])
        noise = f"n = {questions_words(m['n'])}, SE {m['se'][0]:.2f} and {m['se'][1]:.2f}, p < {ALPHA} {reach}: {noise}"
    return (f"{m['position']}: {m['top']} {m['value']:g} vs {m['against']} {m['against_value']:g}, "
            f"margin {m['margin']:+.3g} ({noise})")


def ordering_verdict(cells: pd.DataFrame, by: str, top: str | Sequence[str], rank: int, direction: str,
                     sizes: Mapping | None = None) -> dict:
    """The `ordering` rule over the tidy `cells`: at how many unit positions it holds, each decisive margin with its
    noise (`sizes`: `question_counts`, none: no noise model), the beside metric's positions, and the verdict."""
    margins = _decisive_margins(cells, by, _as_list(top), rank, 1.0 if direction == "higher" else -1.0, sizes or {})
    units = [m for m in margins if m["role"] == "unit"]
    failed = [m for m in units if not m["holds"]]
    noises = {m["noise"] for m in (failed or units)}
    if failed:
        verdict = CONTRADICTED if BEYOND in noises else WITHIN_NOISE if noises == {WITHIN} else FAILS
    else:
        verdict = SUPPORTED if units and noises == {BEYOND} else WITHIN_NOISE if WITHIN in noises else HOLDS
    positions = list(dict.fromkeys(m["position"] for m in units))
    held = len(positions) - len({m["position"] for m in failed})
    beside = [m for m in margins if m["role"] == "beside"]
    detail = f"holds at {held} of {len(positions)} unit positions"
    if beside:
        beside_positions = list(dict.fromkeys(m["position"] for m in beside))
        beside_failed = {m["position"] for m in beside if not m["holds"]}
        detail += f" ({beside[0]['metric']} beside: holds at {len(beside_positions) - len(beside_failed)} of " \
                  f"{len(beside_positions)})"
    detail += "; " + "; ".join(_margin_words(m) for m in (failed or units))
    return {"rule": "ordering", "n": len(positions), "detail": detail, "p": math.nan, "floor_p": math.nan,
            "verdict": verdict, "comparisons": margins}


def significance_verdict(test: dict, cells: pd.DataFrame, sizes: Mapping) -> dict:
    """What a difference the paper calls significant needs: for each comparison its test names (a `sign` test's
    `better` against each of `than` at each unit of the family's unit metric; an `ordering`'s decisive margins), the
    largest discordance rate at which the printed difference reaches p < ALPHA on the reported test set, and the
    verdict from the closest comparison against PLAUSIBLE_DISCORDANCE."""
    if test["test"] == "sign":
        metric = next(iter(metric_families(_as_list(test["metric"])).values()))[0]
        sign = 1.0 if test["alternative"] == "greater" else -1.0
        margins = []
        wide = _unit_table(cells, metric)
        for key, row in wide.iterrows():
            for against in (t for t in test["than"] if t in wide.columns and not math.isnan(row[t])):
                margin = round(sign * (row[test["better"]] - row[against]), 6)
                where = dict(zip(UNIT, key))
                margins.append({"position": _where(key, UNIT) + f" {metric}", "metric": metric, "role": "unit",
                                "top": test["better"], "value": row[test["better"]], "against": against,
                                "against_value": row[against], "margin": margin, "holds": bool(margin > 0),
                                **margin_noise(margin, (row[test["better"]], row[against]), metric,
                                               sizes.get((int(where["table"]), where["dataset"])), paired=True)})
    else:
        sign = 1.0 if test["direction"] == "higher" else -1.0
        margins = [m | {"holds": bool(m["margin"] > 0)} for m in
                   _decisive_margins(cells, test["by"], _as_list(test["top"]), test["rank"], sign, sizes)
                   if m["role"] == "unit"]
    low, high = PLAUSIBLE_DISCORDANCE
    reference = f"plausible discordance for two separately trained systems {100 * low:.1f}%-{100 * high:.1f}% " \
                f"({DISCORDANCE_SOURCES})"
    failed = [m for m in margins if not m["holds"]]
    if failed:
        return {"rule": "significance", "n": len(margins), "p": math.nan, "floor_p": math.nan, "verdict": FAILS,
                "comparisons": margins,
                "detail": "not an improvement as printed: " + "; ".join(_margin_words(m) for m in failed)}
    if any(m["noise"] == NO_MODEL for m in margins):
        return {"rule": "significance", "n": len(margins), "p": math.nan, "floor_p": math.nan, "verdict": UNTESTABLE,
                "comparisons": margins, "detail": "no test set size or no share of questions to weigh the difference"}
    closest = min(margins, key=lambda m: -1.0 if math.isnan(m["discordance_limit"]) else m["discordance_limit"])
    verdict = {BEYOND: PLAUSIBLE, WITHIN: IMPLAUSIBLE, UNDETERMINED: DEPENDS}[closest["noise"]]
    counts = {noise: sum(m["noise"] == noise for m in margins) for noise in (BEYOND, UNDETERMINED, WITHIN)}
    detail = (f"exact McNemar, two-sided, on the reported test set of one run (the paper's numbers are means of five "
              f"runs, App. A.2; its test is not named): of {len(margins)} difference(s), {counts[BEYOND]} reach "
              f"p < {ALPHA} at every plausible discordance, {counts[UNDETERMINED]} at part of it, {counts[WITHIN]} "
              f"at none; closest: {_margin_words(closest)}; {reference}")
    return {"rule": "significance", "n": len(margins), "p": math.nan, "floor_p": math.nan, "verdict": verdict,
            "comparisons": margins, "detail": detail}


def our_question(claim: dict, cells: pd.DataFrame) -> tuple[list[str], list[str], list[str], float, int] | str:
    """(tops, others, metrics, sign, rank) of the claim's paired question, sign +1 when higher is better; or the
    reason it has none."""
    test = claim["reported_test"]
    if test["test"] == "none":
        return f"no paired comparison: {test['why']}"
    if test["test"] == "sign":
        metrics = _as_list(test["metric"])
        return [test["better"]], list(test["than"]), metrics, 1.0 if test["alternative"] == "greater" else -1.0, 1
    if test["by"] != "method":
        return f"an ordering of {test['by']} values, which a profile's run does not compare in a paired test"
    tops = _as_list(test["top"])
    others = [m for m in dict.fromkeys(cells["method"]) if m not in tops]
    return tops, others, list(dict.fromkeys(cells["metric"])), 1.0 if test["direction"] == "higher" else -1.0, \
        test["rank"]


def oriented_tests(comparisons: pd.DataFrame, stages: Sequence[str], tops: Sequence[str], others: Sequence[str],
                   metrics: Sequence[str], sign: float) -> pd.DataFrame:
    """The paired tests of each top with each other in `stages` on `metrics`, as top − other, times `sign` (so a
    positive effect is the claimed direction), with `top` and `other`."""
    rows = comparisons[comparisons["stage"].isin(stages) & comparisons["metric"].isin(metrics)]
    oriented = []
    for top in tops:
        for other in others:
            forward = rows[(rows["a"] == top) & (rows["b"] == other)]
            backward = _negated(rows[(rows["a"] == other) & (rows["b"] == top)])
            oriented.append(pd.concat([forward, backward]).assign(top=top, other=other))
    tests = pd.concat(oriented, ignore_index=True)
    return _negated(tests) if sign < 0 else tests


def _negated(tests: pd.DataFrame) -> pd.DataFrame:
    """The tests read the other way round: b − a, with the interval mirrored."""
    return tests.assign(effect=-tests["effect"], ci_low=-tests["ci_high"], ci_high=-tests["ci_low"])


def _needed(values: Sequence[float], needed: int) -> float:
    """The `needed`-th smallest of `values` (1 when there are fewer): what a position needs to reach."""
    ordered = sorted(values)
    return float(ordered[needed - 1]) if len(ordered) >= needed else 1.0


def our_verdict(claim: dict, comparisons: pd.DataFrame, cells: pd.DataFrame) -> dict:
    """The claim's verdict on this repository's paired tests (`comparisons`, COMPARISON_COLUMNS) by the rule of the
    module docstring; `cells` are the claim's reported cells (`select_cells`), which name an ordering's methods."""
    question = our_question(claim, cells)
    if isinstance(question, str):
        return {"our_verdict": NOT_TESTED, "our_n": 0, "our_tests": 0, "our_detail": question, "our_sources": ""}
    tops, others, metrics, sign, rank = question
    tests = oriented_tests(comparisons, claim["ours"], tops, others, metrics, sign)
    roles = metric_roles(metrics)
    units = tests[tests["metric"].map(roles) == "unit"].copy()
    if not len(units):
        return {"our_verdict": NOT_TESTED, "our_n": 0, "our_tests": 0, "our_sources": "",
                "our_detail": f"no paired test of {' / '.join(tops)} with {', '.join(others)} on "
                              f"{', '.join(m for m in metrics if roles[m] == 'unit')} in {', '.join(claim['ours'])} "
                              f"at this profile"}
    units["p_holm"] = stats.holm(units["p_value"].to_numpy(dtype=float))[0]
    units["favours"] = (units["effect"] > 0) & (units["p_value"] < ALPHA)
    units["opposes"] = (units["effect"] < 0) & (units["p_holm"] < ALPHA)
    held, failed, p_rule, floor = True, [], 0.0, 0.0
    needed = len(others) - (rank - 1)  # the others each position must beat
    for key, position in units.groupby(["stage", "dataset", "metric", "top"], sort=False):
        if position["opposes"].sum() >= rank:
            beaten_by = ", ".join(position.loc[position["opposes"], "other"])
            failed.append(f"{key[3]} on {key[2]} of {key[1]}: beaten by {beaten_by}")
        held &= set(position["other"]) == set(others) and position["favours"].sum() >= needed
        claimed = np.where(position["effect"] > 0, position["p_value"], 1.0)
        p_rule = max(p_rule, _needed(claimed, needed))
        floors = [stats.min_sign_test_p(int(n)) for n in position["n"]]  # every item of a test going one way
        floor = max(floor, _needed(floors, min(needed, len(floors))))  # of the tests that ran
    n = int(units["n"].min())
    if failed:
        verdict = CONTRADICTED
    elif held:
        verdict = SUPPORTED
    else:
        verdict = f"{'untestable' if floor >= ALPHA else 'inconclusive'} at n = {n}"
    untested = [o for o in others if o not in set(units["other"])]
    detail = "; ".join(f"{r.top} − {r.other}, {r.metric}, {r.dataset}: {r.effect:+.3g} [{r.ci_low:+.3g}, "
                       f"{r.ci_high:+.3g}], n = {r.n}, p = {r.p_value:.3g}, Holm p = {r.p_holm:.3g}"
                       for r in units.itertuples())
    against = float(units.loc[units["effect"] < 0, "p_holm"].min()) if (units["effect"] < 0).any() else 1.0
    detail += f". Every needed comparison at {ALPHA} (intersection-union): p = {p_rule:.3g}, at best {floor:.3g}; " \
              f"against the claim (Holm): p = {against:.3g}"
    beside = tests[tests["metric"].map(roles) == "beside"]
    if len(beside):
        detail += "; beside, not counted: " + "; ".join(
            f"{r.top} − {r.other}, {r.metric}, {r.dataset}: {r.effect:+.3g}, p = {r.p_value:.3g}"
            for r in beside.itertuples())
    if failed:
        detail = f"contradicted: {failed[0]}. {detail}"
    if untested:
        detail += f"; not run at this profile: {', '.join(untested)}"
    return {"our_verdict": verdict, "our_n": n, "our_tests": len(units), "our_detail": detail,
            "our_sources": " ".join(dict.fromkeys(tests["source"]))}
