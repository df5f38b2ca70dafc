"""The claims ledger (issue #33): each claim of the paper beside its two verdicts, on the reported numbers and on this
repository's runs of one profile, with the files behind each.

    run = Path("results") / profile                     # the studies' outputs of one profile
    comparisons = our_comparisons(run)                  # every study's paired per-item tests, in the paper's names
    frame = ledger(load_claims(), load_paper_tables(), comparisons, run)
    write_ledger(frame, run / "claims", profile)        # ledger.csv, ledger.md and index.html (no network needed)

The studies' paired tests are read from the tables their notebooks wrote (STUDY_TESTS, from the `claims` of the
stages' rows in repro.registry.STAGES), one row per comparison (`one_test_each`; D198). A study that decides its own
pre-registered question (STUDY_VERDICTS, the `cpu-evidence` experiment) gives its verdict directly, and the ledger
names its report.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from repro.io import write_text
from repro.registry import METHODS, STAGES
from repro.reporting.claims import COMPARISON_COLUMNS, our_verdict, reported_verdicts
from repro.reporting.paper import select_cells

METRICS = {"em": "EM", "f1": "F1", "cr": "CR", "searches": "avg_searches"}  # the studies' names → the paper's
CONDITIONS = {"without": "Search-R1", "with": "Search-R1 w/ EviOmni"}  # the agentic study's → Table 5's rows
PAPER_NAMES = {m.label: m.paper_method for m in METHODS.values() if m.paper_method}  # e.g. "EviOmni (released)"


def paper_name(label: str) -> str:
    """A method's label as the paper names it (repro.registry): "EviOmni (released)" and "LLMLingua-2 (untrained
    stand-in)" are the paper's EviOmni and LLMLingua-2; a label the paper does not name stays as it is."""
    return PAPER_NAMES.get(label, label)


def _methods(table: pd.DataFrame) -> pd.DataFrame:
    """Table 2's layout (repro.evaluation.tables.compare_methods): method labels a, b."""
    return table.assign(a=table["a"].map(paper_name), b=table["b"].map(paper_name))


def _subsets(table: pd.DataFrame) -> pd.DataFrame:
    """Table 3's (repro.studies.ablation.compare_subsets): each answer subset against the reference."""
    return table.rename(columns={"subset": "a", "reference": "b"})


def _conditions(table: pd.DataFrame) -> pd.DataFrame:
    """Table 5's (repro.studies.agentic.compare_conditions): condition − baseline per agent; the agent goes with the
    dataset, Eval-RAR's prompt is left out (not a row of the paper)."""
    table = table[table["condition"].isin(CONDITIONS) & table["baseline"].isin(CONDITIONS)]
    return table.assign(a=table["condition"].map(CONDITIONS), b=table["baseline"].map(CONDITIONS),
                        dataset=table["dataset"] + " (" + table["agent"] + ")")


def _recall(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1's (repro.studies.ar_study.tables.mcnemar_table): rational − vanilla evidence answer recall."""
    return table.rename(columns={"effect (points)": "effect", "ci_low (points)": "ci_low",
                                 "ci_high (points)": "ci_high"}).assign(
        a="Rational Evidence", b="Vanilla Evidence", metric="AR", test="McNemar")


# the readers a stage's `claims` row names (repro.registry.STAGES)
READERS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {"methods": _methods, "subsets": _subsets,
                                                              "conditions": _conditions, "recall": _recall}
# stage: (its table of paired tests under results/<profile>/<stage>/, the reader that puts it in the paper's names,
# where its per-item records are, from the repository root)
STUDY_TESTS: dict[str, tuple[str, Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    s.name: (s.claims.table, READERS[s.claims.reader], s.claims.records) for s in STAGES.values() if s.claims}
# stage: (its verdict file under results/<profile>/<stage>/, the profile that runs it, the report that describes it)
STUDY_VERDICTS = {s.name: (s.verdict.file, s.verdict.profile, s.verdict.report) for s in STAGES.values() if s.verdict}
# profile: the report that measured what its runs say (the ledger of that profile names it)
REPORTS = {name: f"docs/{name}.md" for name in ("cpu-study", "cpu-rewards", "cpu-evidence")}


def report_line(profile: str) -> str:
    """One sentence naming the CPU report that measured this profile's runs, or what a `tiny` run shows."""
    if profile in REPORTS:
        return f"This profile's runs are measured and discussed in {REPORTS[profile]}."
    return "On the embedded default and `ci` the runs show the mechanics, not what the paper's models do."


def our_comparisons(run: str | Path) -> pd.DataFrame:
    """Every paired test the studies wrote under `run` (results/<profile>), one row each
    (repro.reporting.claims.COMPARISON_COLUMNS); `source` is the table's path relative to `run`. A study that did not
    run adds nothing."""
    frames = []
    for stage, (name, read, _) in STUDY_TESTS.items():
        path = Path(run) / stage / name
        if path.exists():
            table = read(pd.read_csv(path, dtype={"dataset": str}))
            frames.append(table.assign(stage=stage, source=f"{stage}/{name}", metric=table["metric"].replace(METRICS)))
    if not frames:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    return one_test_each(pd.concat(frames, ignore_index=True))[list(COMPARISON_COLUMNS)]


def one_test_each(tests: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison (stage, dataset, a, b, metric): exact McNemar with its exact interval for 0/1 outcomes;
    for the others the approximate-randomization p, valid at any n (a bootstrap p is not: with two items it can be
    1e-4), with the paired bootstrap's 95% interval beside it for the size of the effect (D198)."""
    key = ["stage", "dataset", "a", "b", "metric"]
    mcnemar = tests[tests["test"].str.startswith("McNemar")]
    exact = pd.MultiIndex.from_frame(mcnemar[key])
    permutation = tests[tests["test"].str.startswith("approximate randomization")]
    permutation = permutation[~pd.MultiIndex.from_frame(permutation[key]).isin(exact)]
    bootstrap = tests.loc[tests["test"] == "paired bootstrap", [*key, "ci_low", "ci_high"]]
    permutation = permutation.drop(columns=["ci_low", "ci_high"]).merge(bootstrap, on=key, how="left")
    return pd.concat([mcnemar, permutation], ignore_index=True)


def study_verdict(claim: dict, run: str | Path) -> dict | None:
    """The verdict, under `run` (results/<profile>), of a study of the claim's stages that decides its own question
    (STUDY_VERDICTS), or None when the claim has no such stage."""
    for stage in claim["ours"]:
        if stage not in STUDY_VERDICTS:
            continue
        name, runs_in, report = STUDY_VERDICTS[stage]
        path = Path(run) / stage / name
        verdict = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if not verdict.get("requested") or "verdict" not in verdict:
            return {"our_verdict": "not tested", "our_n": 0, "our_tests": 0, "our_sources": "",
                    "our_detail": f"not run at this profile: {stage} runs in the {runs_in} profile ({report})"}
        points = {k: 100 * verdict[k] for k in ("ar_difference", "ci_low", "ci_high", "detectable_difference")}
        return {"our_verdict": verdict["verdict"], "our_n": verdict["pairs"], "our_tests": 1,
                "our_sources": f"{stage}/{name}",
                "our_detail": f"{stage}, pre-registered in {report} ({verdict['reading']}): evidence answer recall "
                              f"trained − start {points['ar_difference']:+.1f} points [{points['ci_low']:+.1f}, "
                              f"{points['ci_high']:+.1f}] over {verdict['seeds']} seeds, Holm p = "
                              f"{verdict['p_holm']:.3g}; minimum detectable {points['detectable_difference']:.1f}"}
    return None


def ledger(claims: Sequence[dict], rows: pd.DataFrame, comparisons: pd.DataFrame, run: str | Path) -> pd.DataFrame:
    """One row per claim: its words and place in the paper, the verdict on the reported cells
    (repro.reporting.claims.reported_verdict) and the verdict on this profile's runs (`study_verdict` or
    repro.reporting.claims.our_verdict), each with its n and detail, and the files behind ours."""
    reported = reported_verdicts(claims, rows).set_index("id")
    entries = []
    for claim in claims:
        ours = study_verdict(claim, run) or our_verdict(claim, comparisons, select_cells(rows, claim["cells"]))
        untested = [s for s in claim["ours"] if s not in STUDY_TESTS and s not in STUDY_VERDICTS]
        if ours["our_verdict"] == "not tested" and untested:
            ours["our_detail"] += f" ({', '.join(untested)}: no paired per-item test)"
        paper = reported.loc[claim["id"]]
        entries.append({"id": claim["id"], "section": claim["section"], "lines": "{}-{}".format(*claim["lines"]),
                        "kind": claim["kind"], "words": " ".join(claim["words"].split()),
                        "reported_verdict": paper["verdict"], "reported_n": int(paper["n"]),
                        "reported_detail": paper["detail"], **ours, "stages": " ".join(claim["ours"])})
    return pd.DataFrame(entries)


def verdict_counts(frame: pd.DataFrame) -> dict:
    """{"reported": {verdict: count}, "ours": {...}}, "inconclusive at n = k" counted as "inconclusive": the
    headline of `dvc metrics show`."""
    def count(column: str) -> dict:
        words = frame[column].str.replace(r" at n = \d+", "", regex=True)
        return {w: int((words == w).sum()) for w in ("supported", "contradicted", "inconclusive", "not tested")}
    return {"reported": count("reported_verdict"), "ours": count("our_verdict")}


def write_ledger(frame: pd.DataFrame, out_dir: str | Path, profile: str) -> list[Path]:
    """ledger.csv (every column), ledger.md (the verdicts) and index.html (one self-contained page: no script, no
    network) into `out_dir`, results/<profile>/claims/."""
    out_dir = Path(out_dir)
    paths = [out_dir / "ledger.csv", out_dir / "ledger.md", out_dir / "index.html"]
    write_text(paths[0], frame.to_csv(index=False))
    short = frame[["id", "section", "kind", "reported_verdict", "our_verdict", "stages"]]
    write_text(paths[1], f"# The paper's claims on profile `{profile}`\n\n{report_line(profile)}\n\n"
                         + short.to_markdown(index=False) + "\n")
    write_text(paths[2], ledger_html(frame, profile))
    return paths


VERDICT_COLOURS = {"supported": "#d9f2d9", "contradicted": "#f8d4d4", "inconclusive": "#fff3c4",
                   "not tested": "#eeeeee"}
STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:80em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.4em;vertical-align:top;text-align:left}
.v{white-space:nowrap;font-weight:600}details{font-size:12px;color:#333}blockquote{margin:0;font-style:italic}"""


def _verdict_cell(verdict: str, n: int, detail: str, links: str = "") -> str:
    colour = VERDICT_COLOURS["inconclusive" if verdict.startswith("inconclusive") else verdict]
    more = f"<details><summary>how</summary>{html.escape(detail)}{links}</details>" if detail else ""
    return f'<td style="background:{colour}"><span class="v">{html.escape(verdict)}</span>' \
           f'{f" (n = {n})" if n and not verdict.startswith("inconclusive") else ""}{more}</td>'


def _links(row, profile: str) -> str:
    """Links from results/<profile>/claims/ to the tables, executed notebooks and per-item records behind our
    verdict."""
    files = row.our_sources.split()
    stages = dict.fromkeys(f.split("/")[0] for f in files)
    anchors = [f'<a href="../{html.escape(f)}">{html.escape(f)}</a>' for f in files]
    anchors += [f'<a href="../{s}/{s}.ipynb">{s}.ipynb</a>' for s in stages]
    records = [STUDY_TESTS[s][2].format(profile=profile) for s in stages if s in STUDY_TESTS]
    anchors += [f'<a href="../../../{html.escape(r)}/">{html.escape(r)}/</a>' for r in records]
    return f"<br>files: {', '.join(anchors)}" if anchors else ""


def ledger_html(frame: pd.DataFrame, profile: str) -> str:
    """The ledger as one HTML page that renders offline: claim, the paper's evidence, ours, both verdicts."""
    counts = verdict_counts(frame)
    summary = " · ".join(f"{side}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for side, c in counts.items())
    body = []
    for row in frame.itertuples():
        body.append(f"<tr><td><b>{html.escape(row.id)}</b><br>{html.escape(row.section)}, lines {row.lines}"
                    f"<blockquote>{html.escape(row.words)}</blockquote></td>"
                    + _verdict_cell(row.reported_verdict, row.reported_n, row.reported_detail)
                    + _verdict_cell(row.our_verdict, int(row.our_n), row.our_detail, _links(row, profile)) + "</tr>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Claims ledger: {html.escape(profile)}</title>"
            f"<style>{STYLE}</style></head><body><h1>The paper's claims, profile <code>{html.escape(profile)}</code>"
            f"</h1><p>{html.escape(report_line(profile))}</p><p>{html.escape(summary)}. Rules: "
            f"<code>repro.reporting.claims</code> (docs/decisions.md, D196, D198); "
            f"the table as data: <a href='ledger.csv'>ledger.csv</a>.</p><table><thead><tr><th>claim (the paper's "
            f"words)</th><th>on the reported numbers</th><th>on this profile's runs</th></tr></thead><tbody>"
            + "\n".join(body) + "</tbody></table></body></html>\n")
