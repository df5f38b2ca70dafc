"""The paper's claims judged on its own reported numbers (issue #33), by rules fixed before any verdict was read.

Each claim of data/paper/claims.yaml (`repro.paper.load_claims`) names the cells it rests on and the test they allow:

- `sign`: `better` against each method of `than` over the selected cells of `metric` (the "Average" rows left out,
  ties dropped), a one-sided exact sign test in the direction `alternative` says, Holm over the methods.
  *supported* when every method's Holm p is below ALPHA; *contradicted* when the sign test in the opposite direction
  gives some method a Holm p below ALPHA; otherwise *inconclusive at n = k* (k the fewest untied cells of any method;
  `floor_p` is the smallest p that many cells could give before Holm, often above ALPHA: too few cells to tell).
- `ordering`: within each cell position (every selector column but `by`), each `top` value of `by` must have fewer
  than `rank` values strictly better than it (`direction`: higher or lower is better). Descriptive, not a test:
  *supported* when it holds at every position, *contradicted* when it fails at one.
- `none`: *not tested*, with the claim's reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from repro import stats
from repro.paper import SELECTOR_COLUMNS, select_cells

ALPHA = 0.05
POSITION = ["table", "dataset", "split", "model_size", "metric"]  # a cell position: all but the method (and its group)
OPPOSITE = {"greater": "less", "less": "greater"}


def reported_verdict(claim: dict, rows: pd.DataFrame) -> dict:
    """One claim's verdict on the reported `rows` (`repro.paper.load_paper_tables`), as the module says."""
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
