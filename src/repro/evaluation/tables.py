"""Per-item prediction files → Table 2 rows, breakdowns and paired significance.

    summary = summarize_files(files)          # one row per (dataset, method): n, EM, F1, CR (both aggregates)
    table = table2(summary, paper=...)        # Table 2's layout: (dataset, metric) rows, one column per method
    tests = compare_methods(files, pairs)     # paired tests per dataset on the same items (repro.reporting.stats)

EM and F1 are reported ×100 like the paper. CR is reported two ways (D14): the mean of per-item ratios
("CR", the paper's column) and the ratio of summed lengths ("CR (ratio of sums)"); Zero has none. For the methods
that read their evidence from `<extract>` (the rational extractors), "untagged evidence" counts the items whose output
held no `<extract>` and whose untagged text went to the generator as the evidence (D9's fallback), with its share in
percent; the other methods have none.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from repro.evaluation.records import read_records
from repro.formulas.metrics import corpus_compression_ratio
from repro.registry import METHODS
from repro.reporting import stats

METRICS = ("EM", "F1", "CR", "CR (ratio of sums)")
SUMMARY_COLUMNS = ("dataset", "method", "group", "n", *METRICS, "empty evidence", "untagged evidence",
                   "untagged evidence (%)", "evidence tokens", "passage tokens")
TEST_COLUMNS = ("dataset", "a", "b", "metric", "test", "n", "effect", "ci_low", "ci_high", "p_value", "p_holm")


def untagged_evidence(records: Sequence[dict]) -> int:
    """Items whose extractor output (`raw_output`, or the evidence itself when the two are equal) holds no `<extract>`
    while the generator got a non-empty evidence: the text after `</reason>` or the whole output, which D9's lenient
    reader passes on. An output cut off inside `<reason>` gives an empty evidence and is counted as such instead."""
    return sum(1 for r in records if r["evidence"] and "<extract>" not in (r.get("raw_output") or r["evidence"]))


def summarize(records: Sequence[dict], tagged: bool = False) -> dict:
    """Corpus scores of one prediction file; with `tagged` (a rational extractor's file), also the untagged
    evidence count and percentage."""
    if not records:
        raise ValueError("no records")
    with_evidence = [r for r in records if r["evidence_tokens"] is not None]
    if with_evidence and len(with_evidence) != len(records):
        raise ValueError("either every record has evidence or none (Zero)")
    row = {"n": len(records), "EM": 100 * np.mean([r["em"] for r in records]),
           "F1": 100 * np.mean([r["f1"] for r in records]), "CR": math.nan, "CR (ratio of sums)": math.nan,
           "empty evidence": 0, "untagged evidence": math.nan, "untagged evidence (%)": math.nan,
           "evidence tokens": math.nan, "passage tokens": np.mean([r["passage_tokens"] for r in records])}
    if tagged:
        untagged = untagged_evidence(records)
        row.update({"untagged evidence": untagged, "untagged evidence (%)": 100 * untagged / len(records)})
    if with_evidence:
        cr = corpus_compression_ratio([[r["passage_tokens"]] for r in records], [r["evidence_tokens"] for r in records])
        row.update({"CR": cr.mean_per_item, "CR (ratio of sums)": cr.ratio_of_sums,
                    "empty evidence": cr.n_empty_evidence,
                    "evidence tokens": np.mean([r["evidence_tokens"] for r in records])})
    return row


def summarize_files(files: pd.DataFrame, where: str | None = None) -> pd.DataFrame:
    """`summarize` of each file listed in `files` (columns dataset, method, path, and any others, e.g. the noise
    level, which are kept); with `where`, only the items whose record field `where` is true (e.g.
    "answer_in_passages")."""
    extra = [c for c in files.columns if c not in ("dataset", "method", "path")]
    rows = []
    for entry in files.to_dict("records"):
        records = read_records(entry["path"])
        if where is not None:
            records = [r for r in records if r[where]]
        if records:
            method = METHODS[entry["method"]]
            rows.append({"dataset": entry["dataset"], **{c: entry[c] for c in extra}, "method": method.label,
                         "group": method.group, **summarize(records, method.tagged)})
    return pd.DataFrame(rows, columns=[SUMMARY_COLUMNS[0], *extra, *SUMMARY_COLUMNS[1:]])


def table2(summary: pd.DataFrame, labels: dict[str, str] | None = None, paper: pd.DataFrame | None = None,
           source: str = "this run") -> pd.DataFrame:
    """Table 2's layout: rows (source, dataset, metric), one column per method in run order. `labels` renames
    datasets (name → table label); `paper` (rows of repro.reporting.paper.load_paper_tables(2) for one model size)
    adds the paper's rows below, for the methods that are columns here."""
    methods = list(dict.fromkeys(summary["method"]))
    long = summary.melt(id_vars=["dataset", "method"], value_vars=list(METRICS), var_name="metric")
    long = long.assign(dataset=long["dataset"].map(lambda d: (labels or {}).get(d, d)), source=source)
    long = long.sort_values("dataset", kind="stable", key=lambda d: d.map(list(dict.fromkeys(d)).index))
    if paper is not None:
        to_label = {m.paper_method: m.label for m in METHODS.values() if m.label in methods and m.paper_method}
        rows = paper[paper["method"].isin(to_label)]
        long = pd.concat([long, rows.assign(method=rows["method"].map(to_label),
                                            source=[f"paper ({size})" for size in rows["model_size"]])
                          [["source", "dataset", "metric", "method", "value"]]], ignore_index=True)
    keys = ["source", "dataset", "metric"]
    wide = long.pivot_table(index=keys, columns="method", values="value", dropna=False, sort=False)
    order = long[keys].drop_duplicates()
    wide = wide.reindex(index=pd.MultiIndex.from_frame(order), columns=methods)
    wide = wide.dropna(how="all").reset_index()
    wide.columns.name = None
    return wide


def _item_scores(records: dict[str, dict], ids: Sequence[str]) -> dict[str, list[float]]:
    """EM and F1 of each item, and its CR (Eq. 9) when the method gives evidence (Zero does not)."""
    metrics = ("em", "f1", "cr") if all(records[i]["cr"] is not None for i in ids) else ("em", "f1")
    return {m: [records[i][m] for i in ids] for m in metrics}


def _paired_scores(path_a: str, path_b: str, where: str | None) -> tuple[dict, dict, int]:
    a = {r["id"]: r for r in read_records(path_a)}
    b = {r["id"]: r for r in read_records(path_b)}
    if set(a) != set(b):
        raise ValueError(f"{path_a} and {path_b} hold different questions")
    ids = [i for i in a if where is None or a[i][where]]
    return _item_scores(a, ids), _item_scores(b, ids), len(ids)


def _reference(methods: Sequence[str], reference: str) -> str:
    return next((m for m in (reference, "eviomni_released") if m in methods), methods[-1] if methods else reference)


def reference_pairs(methods: Sequence[str], reference: str = "eviomni") -> list[tuple[str, str]]:
    """(reference, other) for every other method: the comparisons the paper's significance marks make. Without
    `reference` among `methods`, the released EviOmni checkpoint is the reference, and without it the last method."""
    ref = _reference(methods, reference)
    return [(ref, m) for m in methods if m != ref]


def reference_label(methods: Sequence[str] | None, reference: str = "eviomni") -> str:
    """The table label of the method `reference_pairs` compares the others with (a headline line's `of`); `reference`'s
    for a study that lists no method (not requested)."""
    return METHODS[_reference(methods or [], reference)].label


def compare_methods(files: pd.DataFrame, pairs: Sequence[tuple[str, str]] | None = None, where: str | None = None,
                    n_resamples: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Paired tests of method a against method b on the same questions of each dataset
    (`repro.reporting.stats.compare_per_item`): approximate randomization on EM, F1 and (when both give evidence) the
    per-item CR, exact McNemar on EM with its exact 95% interval of the difference, a paired bootstrap with its 95%
    interval (BCa) on F1 and CR; `pairs` defaults to every later method against every earlier one. EM and F1 effects are
    in points, CR's in its own unit (×). `p_holm` is Holm-corrected across all rows of the returned table."""
    results = []
    for dataset, group in files.groupby("dataset", sort=False):
        paths = dict(zip(group["method"], group["path"]))
        for a, b in pairs or [(later, earlier) for earlier, later in itertools.combinations(paths, 2)]:
            scores_a, scores_b, n = _paired_scores(paths[a], paths[b], where)
            if n < 2:
                continue
            tests = stats.compare_per_item(scores_a, scores_b, n_resamples=n_resamples, seed=seed)
            results.append(tests.drop(columns="p_holm").assign(dataset=dataset, a=METHODS[a].label,
                                                               b=METHODS[b].label))
    if not results:
        return pd.DataFrame(columns=list(TEST_COLUMNS))
    table = pd.concat(results, ignore_index=True)
    table["p_holm"] = stats.holm(table["p_value"])[0]
    points = table["metric"].isin(["em", "f1"])
    table.loc[points, ["effect", "ci_low", "ci_high"]] *= 100  # points, like the scores
    return table[list(TEST_COLUMNS)]


def questions_needed(files: pd.DataFrame, pairs: Sequence[tuple[str, str]], difference: float = 0.05,
                     alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """For each dataset and pair (a, b): the questions scored, the share whose EM differs between a and b (the
    discordant rate ψ), and the questions an exact-McNemar comparison needs to detect an EM difference of `difference`
    (a fraction) at `alpha` with `power` at that ψ (`repro.reporting.stats.mcnemar_sample_size`). A ψ below `difference`
    cannot hold such a difference; it is raised to `difference`, the least discordance that can, and flagged."""
    rows = []
    for dataset, group in files.groupby("dataset", sort=False):
        paths = dict(zip(group["method"], group["path"]))
        for a, b in pairs:
            scores_a, scores_b, n = _paired_scores(paths[a], paths[b], None)
            discordant = float(np.mean(np.asarray(scores_a["em"]) != np.asarray(scores_b["em"]))) if n else math.nan
            psi = max(discordant, difference) if n else math.nan
            rows.append({"dataset": dataset, "a": METHODS[a].label, "b": METHODS[b].label, "questions": n,
                         "discordant_rate": discordant, "raised_to_difference": bool(n) and discordant < difference,
                         "questions_needed": stats.mcnemar_sample_size(psi, difference, alpha, power) if n else None})
    return pd.DataFrame(rows, columns=["dataset", "a", "b", "questions", "discordant_rate", "raised_to_difference",
                                       "questions_needed"])
