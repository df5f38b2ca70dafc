"""The paper's claims judged on its own reported numbers (issue #33), by rules fixed before any verdict was read.

Each claim of data/paper/claims.yaml (`repro.reporting.paper.load_claims`) names the cells it rests on and the test they
allow:

- `sign`: `better` against each method of `than` over the selected cells of `metric` (the "Average" rows left out,
  ties dropped), a one-sided exact sign test in the direction `alternative` says, Holm over the methods.
  *supported* when every method's Holm p is below ALPHA; *contradicted* when the sign test in the opposite direction
  gives some method a Holm p below ALPHA; otherwise *inconclusive at n = k* (k the fewest untied cells of any method;
  `floor_p` is the smallest p that many cells could give before Holm, often above ALPHA: too few cells to tell).
- `ordering`: within each cell position (every selector column but `by`), each `top` value of `by` must have fewer
  than `rank` values strictly better than it (`direction`: higher or lower is better). Descriptive, not a test:
  *supported* when it holds at every position, *contradicted* when it fails at one.
- `none`: *not tested*, with the claim's reason.

The same claims judged on this repository's runs of a profile (`our_verdict`), from the paired per-item tests the
studies computed (`repro.reporting.ledger` gathers them into COMPARISON_COLUMNS, in the paper's names; D198). A claim
becomes a question "does each `top` method beat each `other` on `metrics`": a `sign` claim's `better` against its
`than`; an `ordering` of methods each `top` against the other methods of its cells, of which fewer than `rank` may beat
it. Every paired test of a top with an other in the claim's stages is oriented top − other (the claimed direction
positive) and Holm-corrected over the claim's tests; a test *favours* or *opposes* the claim when its Holm p is below
ALPHA. Per position (stage, dataset, metric, top): *contradicted* when `rank` or more others oppose it at some
position; *supported* when at every position each other was tested and all but `rank` − 1 favour it; otherwise
*inconclusive at n = k* (k the fewest items of any test); *not tested* when no such test ran, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from repro.reporting import stats
from repro.reporting.paper import SELECTOR_COLUMNS, select_cells

ALPHA = 0.05
COMPARISON_COLUMNS = ("stage", "dataset", "a", "b", "metric", "test", "n", "effect", "ci_low", "ci_high", "p_value",
                      "source")  # one paired test of a against b; effect = a − b with its 95% interval
POSITION = ["table", "dataset", "split", "model_size", "metric"]  # a cell position: all but the method (and its group)
OPPOSITE = {"greater": "less", "less": "greater"}


def reported_verdict(claim: dict, rows: pd.DataFrame) -> dict:
    """One claim's verdict on the reported `rows` (`repro.reporting.paper.load_paper_tables`), as the module says."""
    test = claim["reported_test"]
    base = {"id": claim["id"], "section": claim["section"], "kind": claim["kind"], "test": test["test"]}
    if test["test"] == "none":
        return base | {"n": 0, "detail": test["why"], "p": math.nan, "floor_p": math.nan, "verdict": "not tested"}
    cells = select_cells(rows, claim["cells"])
    if test["test"] == "sign":
        return base | sign_verdict(cells, test["better"], test["than"], test["metric"], test["alternative"])
    return base | ordering_verdict(cells, test["by"], test["top"], test["rank"], test["direction"])


def reported_verdicts(claims: Sequence[dict], rows: pd.DataFrame) -> pd.DataFrame:
    """`reported_verdict` of every claim, one row each, in the claims' order."""
    return pd.DataFrame([reported_verdict(claim, rows) for claim in claims])


def sign_verdict(cells: pd.DataFrame, better: str, than: Sequence[str], metric: str | Sequence[str],
                 alternative: str) -> dict:
    """The `sign` rule over the tidy `cells`: n, the wins-ties-losses per method, the largest Holm p, its floor and
    the verdict."""
    metrics = [metric] if isinstance(metric, str) else list(metric)
    kept = cells[cells["metric"].isin(metrics) & (cells["dataset"] != "Average")]
    wide = kept.pivot_table(index=POSITION, columns="method", values="value", aggfunc="first")
    claimed = stats.compare_across_cells(wide, better, list(than), alternative=alternative)
    opposite = stats.compare_across_cells(wide, better, list(than), alternative=OPPOSITE[alternative])
    n = int((claimed["wins"] + claimed["losses"]).min())
    detail = "; ".join(f"vs {r.baseline}: {r.wins}-{r.ties}-{r.losses}" for r in claimed.itertuples())
    if (claimed["sign_p_holm"] < ALPHA).all():
        verdict = "supported"
    elif (opposite["sign_p_holm"] < ALPHA).any():
        verdict = "contradicted"
    else:
        verdict = f"inconclusive at n = {n}"
    return {"n": n, "detail": f"wins-ties-losses {detail}", "p": float(claimed["sign_p_holm"].max()),
            "floor_p": stats.min_sign_test_p(n, alternative) if n else 1.0, "verdict": verdict}


def ordering_verdict(cells: pd.DataFrame, by: str, top: str | Sequence[str], rank: int, direction: str) -> dict:
    """The `ordering` rule over the tidy `cells`: at how many positions it holds, the first where it fails, and the
    verdict."""
    tops = [top] if isinstance(top, str) else list(top)
    sign = 1.0 if direction == "higher" else -1.0
    position = [c for c in SELECTOR_COLUMNS if c not in (by, "group", "method")] + (["method"] if by != "method" else [])
    held, failed = 0, []
    for key, group in cells.dropna(subset=["value"]).groupby(position, sort=False):
        values = dict(zip(group[by].astype(str), sign * group["value"].to_numpy(dtype=float)))
        for name in (t for t in tops if t in values):
            if sum(v > values[name] for v in values.values()) >= rank:
                failed.append(f"{name} at {dict(zip(position, key))}")
                break
        else:
            held += 1
    n = held + len(failed)
    detail = f"holds at {held} of {n} positions" + (f"; fails: {failed[0]}" if failed else "")
    return {"n": n, "detail": detail, "p": math.nan, "floor_p": math.nan,
            "verdict": "contradicted" if failed else "supported"}


def our_question(claim: dict, cells: pd.DataFrame) -> tuple[list[str], list[str], list[str], float, int] | str:
    """(tops, others, metrics, sign, rank) of the claim's paired question, sign +1 when higher is better; or the
    reason it has none."""
    test = claim["reported_test"]
    if test["test"] == "none":
        return f"no paired comparison: {test['why']}"
    if test["test"] == "sign":
        metrics = [test["metric"]] if isinstance(test["metric"], str) else list(test["metric"])
        return [test["better"]], list(test["than"]), metrics, 1.0 if test["alternative"] == "greater" else -1.0, 1
    if test["by"] != "method":
        return f"an ordering of {test['by']} values, which a profile's run does not compare in a paired test"
    tops = [test["top"]] if isinstance(test["top"], str) else list(test["top"])
    others = [m for m in dict.fromkeys(cells["method"]) if m not in tops]
    return tops, others, list(dict.fromkeys(cells["metric"])), 1.0 if test["direction"] == "higher" else -1.0, \
        test["rank"]


def oriented_tests(comparisons: pd.DataFrame, stages: Sequence[str], tops: Sequence[str], others: Sequence[str],
                   metrics: Sequence[str], sign: float) -> pd.DataFrame:
    """The paired tests of each top with each other in `stages` on `metrics`, as top − other, times `sign` (so a
    positive effect is the claimed direction), with `top`, `other` and Holm's p over them (`p_holm`)."""
    rows = comparisons[comparisons["stage"].isin(stages) & comparisons["metric"].isin(metrics)]
    oriented = []
    for top in tops:
        for other in others:
            forward = rows[(rows["a"] == top) & (rows["b"] == other)]
            backward = _negated(rows[(rows["a"] == other) & (rows["b"] == top)])
            oriented.append(pd.concat([forward, backward]).assign(top=top, other=other))
    tests = pd.concat(oriented, ignore_index=True)
    if sign < 0:
        tests = _negated(tests)
    tests["p_holm"] = stats.holm(tests["p_value"].to_numpy(dtype=float))[0] if len(tests) else []
    return tests


def _negated(tests: pd.DataFrame) -> pd.DataFrame:
    """The tests read the other way round: b − a, with the interval mirrored."""
    return tests.assign(effect=-tests["effect"], ci_low=-tests["ci_high"], ci_high=-tests["ci_low"])


def our_verdict(claim: dict, comparisons: pd.DataFrame, cells: pd.DataFrame) -> dict:
    """The claim's verdict on this repository's paired tests (`comparisons`, COMPARISON_COLUMNS) by the rule of the
    module docstring; `cells` are the claim's reported cells (`select_cells`), which name an ordering's methods."""
    question = our_question(claim, cells)
    if isinstance(question, str):
        return {"our_verdict": "not tested", "our_n": 0, "our_tests": 0, "our_detail": question, "our_sources": ""}
    tops, others, metrics, sign, rank = question
    tests = oriented_tests(comparisons, claim["ours"], tops, others, metrics, sign)
    if not len(tests):
        return {"our_verdict": "not tested", "our_n": 0, "our_tests": 0, "our_sources": "",
                "our_detail": f"no paired test of {' / '.join(tops)} with {', '.join(others)} on "
                              f"{', '.join(metrics)} in {', '.join(claim['ours'])} at this profile"}
    tests = tests.assign(favours=(tests["effect"] > 0) & (tests["p_holm"] < ALPHA),
                         opposes=(tests["effect"] < 0) & (tests["p_holm"] < ALPHA))
    held, failed = True, []
    for key, position in tests.groupby(["stage", "dataset", "metric", "top"], sort=False):
        if position["opposes"].sum() >= rank:
            beaten_by = ", ".join(position.loc[position["opposes"], "other"])
            failed.append(f"{key[3]} on {key[2]} of {key[1]}: beaten by {beaten_by}")
        held &= set(position["other"]) == set(others) and position["favours"].sum() >= len(others) - (rank - 1)
    n = int(tests["n"].min())
    verdict = "contradicted" if failed else "supported" if held else f"inconclusive at n = {n}"
    untested = [o for o in others if o not in set(tests["other"])]
    detail = "; ".join(f"{r.top} − {r.other}, {r.metric}, {r.dataset}: {r.effect:+.3g} [{r.ci_low:+.3g}, "
                       f"{r.ci_high:+.3g}], n = {r.n}, Holm p = {r.p_holm:.3g}" for r in tests.itertuples())
    if failed:
        detail = f"contradicted: {failed[0]}. {detail}"
    if untested:
        detail += f"; not run at this profile: {', '.join(untested)}"
    return {"our_verdict": verdict, "our_n": n, "our_tests": len(tests), "our_detail": detail,
            "our_sources": " ".join(dict.fromkeys(tests["source"]))}
