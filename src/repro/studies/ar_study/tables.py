"""Per-item AR records → Table 1, Figure 2's overlap categories and the McNemar test (§2.2).

    files = run_recall(cfg)                    # repro.studies.ar_study.recall
    table = table1(files, labels, paper)       # AR (%) of vanilla evidence, rational evidence and rationale
    overlap = overlap_table(files, labels)     # Figure 2: M∧N, M∧¬N, ¬M∧N, ¬M∧¬N, counts and percentages
    tests = mcnemar_table(files, labels)       # exact McNemar of rational vs vanilla evidence and its interval

M (𝕄) is "the rational evidence recalls the answer", N (ℕ) "the vanilla evidence recalls it", per item.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from repro.evaluation.records import read_records
from repro.reporting import stats
from repro.studies.ar_study.recall import AR_FIELDS

CATEGORIES = {  # Figure 2's four cells
    "M∧N": "both recall",
    "M∧¬N": "only rational evidence recalls",
    "¬M∧N": "only vanilla evidence recalls",
    "¬M∧¬N": "neither recalls",
}
COLUMNS = {"vanilla": "Vanilla Evidence", "rational": "Rational Evidence", "rationale": "Rationale"}
PAPER_ROWS = {"in-distribution": "NQ", "out-of-distribution": "HotpotQA"}  # Table 1's rows by role
PAPER_FIGURE2 = {"HotpotQA": {"M∧¬N": 14.49, "¬M∧N": 7.30}}  # the only Figure 2 numbers in the text (§2.2)


def _mean(values, scale: float = 1.0) -> float:
    """The mean of `values` times `scale`; NaN for none (a set whose every question was excluded)."""
    values = [v for v in values if v is not None]
    return scale * float(np.mean(values)) if values else np.nan


def overlap_categories(m: Sequence[bool], n: Sequence[bool]) -> pd.DataFrame:
    """Counts and percentages of the four cells of (M, N) over paired items."""
    m, n = np.asarray(m, dtype=bool), np.asarray(n, dtype=bool)
    if m.shape != n.shape or m.ndim != 1 or m.size == 0:
        raise ValueError(f"need two equally long, non-empty 1-D outcome lists, got shapes {m.shape} and {n.shape}")
    counts = [int(np.sum(m & n)), int(np.sum(m & ~n)), int(np.sum(~m & n)), int(np.sum(~m & ~n))]
    return pd.DataFrame({"category": list(CATEGORIES), "meaning": list(CATEGORIES.values()), "count": counts,
                         "percent": [100 * c / m.size for c in counts]})


def paired_outcomes(rational: Sequence[dict], vanilla: Sequence[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(M, N): each item's evidence recall under both variants, aligned by id (both files hold the same items)."""
    by_id = {r["id"]: r for r in vanilla}
    if set(by_id) != {r["id"] for r in rational} or len(by_id) != len(rational):
        raise ValueError("the rational and vanilla records cover different items")
    m = np.array([r["ar_evidence"] for r in rational], dtype=float)
    n = np.array([by_id[r["id"]]["ar_evidence"] for r in rational], dtype=float)
    return m.astype(bool), n.astype(bool)


def read_study(files: pd.DataFrame) -> dict[str, dict[str, list[dict]]]:
    """{dataset: {variant: records}} of run_recall's files."""
    study: dict[str, dict[str, list[dict]]] = {}
    for row in files.itertuples(index=False):
        study.setdefault(row.dataset, {})[row.variant] = read_records(row.path, AR_FIELDS)
    return study


def ar_summary(files: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (dataset, variant): AR of the evidence and rationale (%), evidence length, format share."""
    labels = labels or {}
    rows = []
    for row in files.itertuples(index=False):
        records = read_records(row.path, AR_FIELDS)
        rows.append({"dataset": labels.get(row.dataset, row.dataset), "variant": row.variant, "n": len(records),
                     "AR evidence": _mean([r["ar_evidence"] for r in records], 100),
                     "AR rationale": _mean([r["ar_rationale"] for r in records], 100),
                     "evidence length": _mean([r["evidence_length"] for r in records]),
                     "evidence capped (%)": _mean([r["evidence_capped"] for r in records], 100),
                     "empty evidence (%)": _mean([not r["evidence"].strip() for r in records], 100),
                     "rationale length": _mean([r["rationale_length"] for r in records]),
                     "well formatted (%)": _mean([r["well_formatted"] for r in records], 100)})
    return pd.DataFrame(rows)


def table1(files: pd.DataFrame, labels: dict[str, str] | None = None,
           paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """Table 1: AR (%) of vanilla evidence, rational evidence and the rationale per dataset, with the exclusion
    counts, the discordant cells, the exact McNemar p-value and (when given) the paper's row of the same role."""
    labels = labels or {}
    study = read_study(files)
    rows = []
    for dataset, spec in files.drop_duplicates("dataset").set_index("dataset").iterrows():
        rational, vanilla = study[dataset]["rational"], study[dataset]["vanilla"]
        m, n = paired_outcomes(rational, vanilla)
        test = stats.paired_test(m, n, binary=True).test if m.size >= 2 else None
        row = {"dataset": labels.get(dataset, dataset), "role": spec["role"], "questions": spec["questions"],
               "excluded": spec["excluded"], "n": int(m.size), COLUMNS["vanilla"]: _mean(n, 100),
               COLUMNS["rational"]: _mean(m, 100),
               COLUMNS["rationale"]: _mean([r["ar_rationale"] for r in rational], 100),
               "M∧¬N": int(np.sum(m & ~n)), "¬M∧N": int(np.sum(~m & n)),  # also for fewer than two items
               "McNemar p (exact)": test.p_value if test else np.nan}
        if paper is not None:
            paper_name = PAPER_ROWS[spec["role"]]
            cells = paper[paper["dataset"] == paper_name].set_index("method")["value"]
            row["paper dataset"] = paper_name
            row.update({f"paper {name}": cells.get(name, np.nan) for name in COLUMNS.values()})
        rows.append(row)
    return pd.DataFrame(rows)


def overlap_table(files: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Figure 2's data: the four categories per dataset (long form), with the paper's reported percentages."""
    labels = labels or {}
    study, frames = read_study(files), []
    roles = files.drop_duplicates("dataset").set_index("dataset")["role"]
    for dataset, variants in study.items():
        m, n = paired_outcomes(variants["rational"], variants["vanilla"])
        if m.size == 0:
            continue
        paper_cells = PAPER_FIGURE2.get(PAPER_ROWS[roles[dataset]], {})
        frame = overlap_categories(m, n).assign(dataset=labels.get(dataset, dataset), role=roles[dataset])
        frames.append(frame.assign(paper_percent=frame["category"].map(paper_cells)))
    columns = ["dataset", "role", "category", "meaning", "count", "percent", "paper_percent"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def mcnemar_table(files: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """Exact McNemar (repro.reporting.stats, statsmodels) of rational vs vanilla evidence recall on the same items; the
    effect is AR(rational) − AR(vanilla) in points, with the exact 95% interval that agrees with the test
    (`repro.reporting.stats.mcnemar_exact_interval`). Sets of fewer than two items are left out."""
    labels, rows = labels or {}, []
    for dataset, variants in read_study(files).items():
        m, n = paired_outcomes(variants["rational"], variants["vanilla"])
        if m.size < 2:
            continue
        test = stats.paired_test(m, n, binary=True).test
        rows.append({"dataset": labels.get(dataset, dataset), "n": test.n, "effect (points)": 100 * test.effect,
                     "ci_low (points)": 100 * test.ci_low, "ci_high (points)": 100 * test.ci_high,
                     **dict(zip(("M∧¬N", "¬M∧N"), stats.discordant_pairs(m, n))),
                     "statistic": test.statistic, "p_value": test.p_value})
    return pd.DataFrame(rows, columns=["dataset", "n", "effect (points)", "ci_low (points)", "ci_high (points)", "M∧¬N",
                                       "¬M∧N", "statistic", "p_value"])


def discordant_cases(files: pd.DataFrame, dataset: str, category: str = "M∧¬N", limit: int = 5) -> pd.DataFrame:
    """Items of one overlap category with both variants' evidence side by side (the paper's "3I" cases)."""
    if category not in CATEGORIES:
        raise ValueError(f"category must be one of {list(CATEGORIES)}, got {category!r}")
    variants = read_study(files)[dataset]
    vanilla = {r["id"]: r for r in variants["vanilla"]}
    want_m, want_n = not category.startswith("¬M"), not category.endswith("¬N")
    rows = []
    for record in variants["rational"]:
        other = vanilla[record["id"]]
        if bool(record["ar_evidence"]) == want_m and bool(other["ar_evidence"]) == want_n:
            rows.append({"question": record["question"], "golden answers": record["golden_answers"],
                         "rationale": record["rationale"], "rational evidence": record["evidence"],
                         "vanilla evidence": other["evidence"]})
    return pd.DataFrame(rows[:limit], columns=["question", "golden answers", "rationale", "rational evidence",
                                               "vanilla evidence"])
