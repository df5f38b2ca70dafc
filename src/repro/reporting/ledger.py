"""The claims ledger (issue #33): each claim of the paper beside its two verdicts, on the reported numbers and on this
repository's runs of one profile, with the files behind each.

    run = Path("results") / profile                     # the studies' outputs of one profile
    comparisons = our_comparisons(run)                  # every study's paired per-item tests, in the paper's names
    frame = ledger(load_claims(), load_paper_tables(), comparisons, run)
    write_ledger(frame, run / "claims", profile)        # ledger.csv, ledger.md and index.html (no network needed)

The studies' paired tests are read from the tables their notebooks wrote (STUDY_TESTS, from the `claims` of the
stages' rows in repro.registry.STAGES), one row per comparison (`one_test_each`; D198). A study that decides its own
pre-registered question (STUDY_VERDICTS, the `cpu-evidence` experiment) gives its verdict directly, and the ledger
names its report. The page states its rules (RULES) and shows the counts behind each reported verdict; the paper's
words are shown as a reader reads them, emphasis and math included, with no script (`readable_html`,
`readable_markdown`; D231).
"""

from __future__ import annotations

import html
import json
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from repro.io import read_json_object, write_text
from repro.registry import METHODS, STAGES
from repro.reporting import claims as rules
from repro.reporting.claims import COMPARISON_COLUMNS, our_verdict, reported_verdicts, verdict_word
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
    """One sentence naming the CPU report that measured this profile's runs, or what a `tiny` run shows (markdown)."""
    if profile in REPORTS:
        return f"This profile's runs are measured and discussed in `{REPORTS[profile]}`."
    return "On the embedded default and `ci` the runs show the mechanics, not what the paper's models do."


LOW, HIGH = (f"{100 * d:.1f}%" for d in rules.PLAUSIBLE_DISCORDANCE)
RULES = (  # the page's account of its rules, in markdown (docs/decisions.md D196, D198, D225-D229)
    "**The unit.** One unit per (model size, dataset) position of a table and metric family. EM and F1 of one run "
    "score the same questions, so accuracy is one family whose unit is EM, with F1 shown beside it and not counted; CR, "
    "latency, searches and answer recall are families of their own. *Average* rows are left out of the sign tests.",
    "**\"Beats every X\"** (a sign claim): an intersection-union test. Each comparison is a one-sided exact sign test "
    f"over the units at α = {rules.ALPHA}; the claim's p is the largest, with no adjustment. **\"Some X beats it\"**, "
    "which contradicts it (and the form a claim that A beats *some* X would take), is tested with Holm's correction "
    "over the comparisons. *Untestable from the reported cells*: even a clean sweep of every unit could not reach α "
    "after the rule; the floor shown is that best p.",
    "**Orderings** (\"the best\", \"in all cases\") of single-run means *hold as printed* or *fail as printed*. For "
    "EM on a known test set (Table 7's test splits, 500 questions per dataset for Tables 5 and 6) the noise is stated: "
    "the binomial standard error of each value, and the largest share of questions on which the two systems may "
    "disagree (the discordance) for the margin to reach p < 0.05 in an exact McNemar test (a normal approximation for "
    f"an *Average* row). The discordance plausible for two separately trained systems is {LOW}-{HIGH} "
    f"({rules.DISCORDANCE_SOURCES}). A margin significant at every plausible discordance is beyond noise: when every "
    "unit's is, the ordering is a test (*supported*, or *contradicted* when a failing margin is); a margin significant "
    "at none reads *within noise*.",
    "**The paper's \"significant\"**: for every difference a claim calls significant, the discordance under which it "
    "reaches p < 0.05 on the reported test set of one run (exact McNemar). *Significance plausible* when even the "
    "closest difference reaches it at every plausible discordance, *implausible* when at none, *depends on "
    "discordance* between.",
    "**On this profile's runs**: the studies' paired per-item tests, by the same rules. The units are the tests of EM "
    "(F1 beside); each needed test is taken at α (intersection-union) and Holm's correction decides against the claim. "
    "A claim is *untestable at n = k* when even every item going the claimed way could not reach α.",
)


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
        verdict = read_json_object(path) if path.exists() else {}  # a damaged file: InputError naming it
        if not verdict.get("requested") or "verdict" not in verdict:
            return {"our_verdict": "not tested", "our_n": 0, "our_tests": 0, "our_sources": "",
                    "our_detail": f"not run at this profile: {stage} runs in the {runs_in} profile ({report})"}
        points = {k: 100 * verdict[k] for k in ("ar_difference", "ci_low", "ci_high", "detectable_difference")}
        return {"our_verdict": verdict["verdict"], "our_n": verdict["heldout_questions"], "our_tests": 1,
                "our_sources": f"{stage}/{name}",
                "our_detail": f"{stage}, pre-registered in {report} ({verdict['reading']}): evidence answer recall "
                              f"trained − start {points['ar_difference']:+.1f} points [{points['ci_low']:+.1f}, "
                              f"{points['ci_high']:+.1f}] on {verdict['heldout_questions']} questions × "
                              f"{verdict['seeds']} seeds, Holm p = "
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
                        "kind": claim["kind"], "words": _unbroken(claim["words"]),
                        "reported_verdict": paper["verdict"], "reported_n": int(paper["n"]),
                        "reported_rule": paper["rule"], "reported_p": paper["p"], "reported_floor_p": paper["floor_p"],
                        "reported_detail": paper["detail"],
                        "reported_comparisons": json.dumps(_plain(paper["comparisons"]), ensure_ascii=False),
                        **ours, "stages": " ".join(claim["ours"])})
    return pd.DataFrame(entries)


def _plain(value):
    """`value` as JSON can hold it: NaN as null, tuples as lists, numpy scalars as Python's."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def verdict_counts(frame: pd.DataFrame) -> dict:
    """{"reported": {verdict word: count}, "ours": {...}}, each verdict counted by its word
    (repro.reporting.claims.verdict_word: "inconclusive at n = k" as "inconclusive"): the headline of
    `dvc metrics show`."""
    def count(column: str, words: Sequence[str]) -> dict:
        found = frame[column].map(verdict_word)
        return {w: int((found == w).sum()) for w in words}
    return {"reported": count("reported_verdict", rules.REPORTED_VERDICTS),
            "ours": count("our_verdict", rules.OUR_VERDICTS)}


# The paper's words as a reader reads them: its markdown emphasis, and its LaTeX as Unicode (no script, no network)
MATH = re.compile(r"\$([^$]+)\$")
SPANS = re.compile(r"\$(?P<math>[^$]+)\$|`(?P<code>[^`]+)`")  # what markdown emphasis does not reach into
LATEX_SYMBOLS = {"wedge": "∧", "neg": "¬"}  # the commands claims.yaml's words use (tests/test_ledger.py keeps it so)
PREFIX_OPERATORS = ("¬",)  # written against their operand


def double_struck(letter: str) -> str:
    """The double-struck capital of `letter` (\\mathbb{M} → 𝕄; ℕ, ℝ and the other letterlike ones too)."""
    for name in (f"MATHEMATICAL DOUBLE-STRUCK CAPITAL {letter}", f"DOUBLE-STRUCK CAPITAL {letter}"):
        try:
            return unicodedata.lookup(name)
        except KeyError:
            continue
    raise ValueError(f"no double-struck capital {letter!r}")


def math_text(latex: str) -> str:
    """Inline LaTeX as Unicode text: \\mathbb{X} as its double-struck letter, the commands of LATEX_SYMBOLS as their
    symbols (another command stays as written), spaces collapsed, a prefix operator against its operand."""
    text = re.sub(r"\\mathbb\{([A-Z])\}", lambda m: double_struck(m[1]), latex)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: LATEX_SYMBOLS.get(m[1], m[0]), text)
    text = " ".join(text.split())
    for operator in PREFIX_OPERATORS:
        text = text.replace(f"{operator} ", operator)
    return text


def _unbroken(text: str) -> str:
    """The words on one line: a word hyphenated across lines joined ("tra-\n\nditional"), whitespace collapsed."""
    return " ".join(re.sub(r"(\w)-\n\s*(\w)", r"\1\2", text).split())


def readable_markdown(text: str) -> str:
    """`text` (the paper's words or the page's own, markdown) for a markdown table cell: its inline LaTeX as Unicode
    (`math_text`), on one line, "|" escaped; emphasis and code stay markdown."""
    return MATH.sub(lambda m: math_text(m[1]), _unbroken(text)).replace("|", "\\|")


def readable_html(text: str) -> str:
    """`text` (markdown: the paper's words, the page's own) as HTML: escaped, on one line, `code` as <code>, inline
    LaTeX as Unicode (`math_text`), and elsewhere **strong** and *emphasis* as their elements and a subscript or
    superscript (o_f, R_e^{ans}) as <sub> or <sup>."""
    text, out, start = _unbroken(text), [], 0
    for span in SPANS.finditer(text):
        out += [_inline_html(text[start:span.start()]),
                html.escape(math_text(span["math"])) if span["math"] else f"<code>{html.escape(span['code'])}</code>"]
        start = span.end()
    return "".join(out + [_inline_html(text[start:])])


def _inline_html(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])", r"<em>\1</em>", text)
    text = re.sub(r"(?<=\w)_(\{[^}]*\}|\w)", lambda m: f"<sub>{m[1].strip('{}')}</sub>", text)
    return re.sub(r"(?<=[\w>])\^(\{[^}]*\}|\w)", lambda m: f"<sup>{m[1].strip('{}')}</sup>", text)


def write_ledger(frame: pd.DataFrame, out_dir: str | Path, profile: str) -> list[Path]:
    """ledger.csv (every column), ledger.md (the verdicts) and index.html (one self-contained page: no script, no
    network) into `out_dir`, results/<profile>/claims/."""
    out_dir = Path(out_dir)
    paths = [out_dir / "ledger.csv", out_dir / "ledger.md", out_dir / "index.html"]
    write_text(paths[0], frame.to_csv(index=False))
    short = frame[["id", "section", "words", "reported_verdict", "our_verdict", "stages"]].assign(
        words=frame["words"].map(readable_markdown))
    write_text(paths[1], f"# The paper's claims on profile `{profile}`\n\n{report_line(profile)}\n\n"
                         + "".join(f"- {readable_markdown(rule)}\n" for rule in RULES) + "\n"
                         + short.rename(columns={"words": "the paper's words"}).to_markdown(index=False) + "\n")
    write_text(paths[2], ledger_html(frame, profile))
    return paths


VERDICT_COLOURS = {"supported": "#d9f2d9", "holds as printed": "#eef7e4", "significance plausible": "#d9f2d9",
                   "contradicted": "#f8d4d4", "fails as printed": "#fbe6e0", "significance implausible": "#f8d4d4",
                   "inconclusive": "#fff3c4", "within noise": "#fff3c4",
                   "significance depends on discordance": "#fff3c4", "untestable": "#e6e6f2", "not tested": "#eeeeee"}
STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:80em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.4em;vertical-align:top;text-align:left}
.v{white-space:nowrap;font-weight:600}details{font-size:12px;color:#333}blockquote{margin:0;font-style:italic}
table.counts td,table.counts th{padding:.15em .35em;font-size:12px}"""
# the counts behind a reported verdict, by its rule: (key of a comparison, column heading)
COUNT_COLUMNS = {
    "intersection-union": (("against", "vs"), ("metric", "metric"), ("role", "counted as"), ("units", "units"),
                           ("wins", "wins"), ("ties", "ties"), ("losses", "losses"), ("p", "p"),
                           ("p_against_holm", "p against, Holm")),
    "ordering": (("position", "position"), ("top", "top"), ("value", "value"), ("against", "decisive other"),
                 ("against_value", "value"), ("margin", "margin"), ("n", "questions"), ("se", "SE"),
                 ("discordance", "p < 0.05"), ("noise", "noise")),
}
COUNT_COLUMNS["significance"] = COUNT_COLUMNS["ordering"]


def _count_value(comparison: dict, key: str) -> str:
    if key == "discordance":
        limit = comparison.get("discordance_limit")
        return "" if comparison.get("noise") == rules.NO_MODEL else rules.discordance_words(
            math.nan if limit is None else limit, comparison["discordance_max"])
    value = comparison.get(key)
    if value is None:
        return ""
    if key == "n":
        return rules.questions_words(value)
    if key == "se":
        return " / ".join(f"{v:.2f}" for v in value)
    if key == "role":
        return "unit" if value == "unit" else "beside, not counted"
    if isinstance(value, float):
        return f"{value:.3g}" if key.startswith("p") else f"{value:+g}" if key == "margin" else f"{value:g}"
    return str(value)


def counts_table(rule: str, comparisons: Sequence[dict]) -> str:
    """The counts behind a reported verdict as an HTML table, one row per comparison (COUNT_COLUMNS of its rule)."""
    if rule not in COUNT_COLUMNS or not comparisons:
        return ""
    columns = COUNT_COLUMNS[rule]
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_count_value(c, key))}</td>" for key, _ in columns) + "</tr>"
                   for c in comparisons)
    return f'<table class="counts"><tr>{head}</tr>{body}</table>'


def _rule_line(row) -> str:
    """The reported verdict's p before and after its rule, in words."""
    if row.reported_rule == "intersection-union":
        return f"rule: every comparison at α (intersection-union); p = {row.reported_p:.3g} (the largest), " \
               f"at best {row.reported_floor_p:.3g}"
    return {"ordering": f"rule: ordering of printed means, noise stated ({row.reported_n} unit positions)",
            "significance": f"rule: the discordance p < 0.05 needs ({row.reported_n} differences)"}.get(
        row.reported_rule, "")


def _verdict_cell(verdict: str, note: str, detail: str, extra: str = "") -> str:
    colour = VERDICT_COLOURS.get(verdict_word(verdict), VERDICT_COLOURS["not tested"])
    more = f"<details><summary>how</summary>{extra}{html.escape(detail)}</details>" if detail or extra else ""
    return f'<td style="background:{colour}"><span class="v">{html.escape(verdict)}</span>' \
           f'{f"<br>{html.escape(note)}" if note else ""}{more}</td>'


def _links(row, profile: str) -> str:
    """Links from results/<profile>/claims/ to the tables, executed notebooks and per-item records behind our
    verdict."""
    files = row.our_sources.split()
    stages = dict.fromkeys(f.split("/")[0] for f in files)
    anchors = [f'<a href="../{html.escape(f)}">{html.escape(f)}</a>' for f in files]
    anchors += [f'<a href="../{s}/{s}.ipynb">{s}.ipynb</a>' for s in stages]
    records = [STUDY_TESTS[s][2].format(profile=profile) for s in stages if s in STUDY_TESTS]
    anchors += [f'<a href="../../../{html.escape(r)}/">{html.escape(r)}/</a>' for r in records]
    return f"files: {', '.join(anchors)}<br>" if anchors else ""


def ledger_html(frame: pd.DataFrame, profile: str) -> str:
    """The ledger as one HTML page that renders offline: its rules, then per claim the paper's words, the verdict on
    the reported numbers with the counts behind it, and ours with the files behind it."""
    counts = verdict_counts(frame)
    summary = " · ".join(f"{side}: " + ", ".join(f"{k} {v}" for k, v in c.items() if v) for side, c in counts.items())
    body = []
    for row in frame.itertuples():
        reported = counts_table(row.reported_rule, json.loads(row.reported_comparisons))
        decided = verdict_word(row.our_verdict) in (rules.SUPPORTED, rules.CONTRADICTED)
        ours_note = f"n = {int(row.our_n)}" if row.our_n and decided else ""
        body.append(f"<tr><td><b>{html.escape(row.id)}</b><br>{html.escape(row.section)}, lines {row.lines}"
                    f"<blockquote>{readable_html(row.words)}</blockquote></td>"
                    + _verdict_cell(row.reported_verdict, _rule_line(row), row.reported_detail, reported)
                    + _verdict_cell(row.our_verdict, ours_note, row.our_detail, _links(row, profile)) + "</tr>")
    rules_html = "".join(f"<li>{readable_html(rule)}</li>" for rule in RULES)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Claims ledger: {html.escape(profile)}</title>"
            f"<style>{STYLE}</style></head><body><h1>The paper's claims, profile <code>{html.escape(profile)}</code>"
            f"</h1><p>{readable_html(report_line(profile))}</p><p>{html.escape(summary)}.</p><ul>{rules_html}</ul>"
            f"<p>Rules: <code>repro.reporting.claims</code> (docs/decisions.md, D196, D198, D225-D229); "
            f"the table as data: <a href='ledger.csv'>ledger.csv</a>.</p><table><thead><tr><th>claim (the paper's "
            f"words)</th><th>on the reported numbers</th><th>on this profile's runs</th></tr></thead><tbody>"
            + "\n".join(body) + "</tbody></table></body></html>\n")
