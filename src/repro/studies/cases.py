"""Case inspection for traditional RAG (Figure 8, the "3I" of vanilla evidence: incompleteness, irrelevance,
inaccuracy): one question with its passages, the evidence each method gave the generator side by side, the
extractor's rationale, and each method's answer. Golden answers are highlighted wherever they occur, so an
evidence that lost the answer (incompleteness) shows at a glance.

    cases = load_cases(rows, files)                              # id → Case (contexts row + each method's record)
    evidence_recall(cases, ["full", "eviomni"])                  # how often each evidence keeps the answer
    ids = find_cases(cases, right="eviomni", wrong="full", n=3)  # EviOmni right where Full is wrong, ...
    page = cases_html([cases[i] for i in ids], ["full", "eviomni"])   # IPython.display.HTML(page)
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from repro.data.answers import has_answer
from repro.data.corpus import split_contents
from repro.evaluation.records import read_records
from repro.formulas.tags import extract_rationale
from repro.registry import METHODS


@dataclasses.dataclass(frozen=True)
class Case:
    row: dict  # the contexts row: question, golden_answers, passages
    records: dict[str, dict]  # method key → prediction record

    @property
    def id(self) -> str:
        return self.row["id"]


def load_cases(rows: Sequence[dict], files: pd.DataFrame) -> dict[str, Case]:
    """The cases of one dataset: `rows` are its contexts rows, `files` its prediction files (columns method, path);
    only questions every file holds are kept."""
    if missing := [f.path for f in files.itertuples(index=False) if not Path(f.path).exists()]:
        raise FileNotFoundError(f"no prediction file {missing}: run the study that writes them first")
    by_method = {f.method: {r["id"]: r for r in read_records(f.path)} for f in files.itertuples(index=False)}
    return {row["id"]: Case(row, {m: records[row["id"]] for m, records in by_method.items()})
            for row in rows if all(row["id"] in records for records in by_method.values())}


def find_cases(cases: dict[str, Case], right: str | None = None, wrong: str | None = None, n: int = 3,
               ids: Sequence[str] | None = None) -> list[str]:
    """Up to `n` case ids, in order: the given `ids`, or those where method `right` has EM 1 and method `wrong`
    EM 0 (either filter may be omitted)."""
    if ids is not None:
        if missing := [i for i in ids if i not in cases]:
            raise KeyError(f"no case with id(s) {missing}")
        return list(ids)[:n]
    chosen = [i for i, case in cases.items()
              if (right is None or case.records[right]["em"]) and (wrong is None or not case.records[wrong]["em"])]
    return chosen[:n]


def evidence_recall(cases: dict[str, Case], methods: Sequence[str]) -> pd.DataFrame:
    """Per method, on the questions whose passages contain a golden answer: how often its evidence still does
    (the opposite of the paper's "incompleteness"), and its EM on those questions and on the rest."""
    rows = []
    for method in methods:
        answerable = [c for c in cases.values() if c.records[method]["answer_in_passages"]]
        kept = [c for c in answerable if c.records[method]["evidence"] is not None
                and has_answer(c.records[method]["evidence"], c.row["golden_answers"])]
        rest = [c for c in cases.values() if not c.records[method]["answer_in_passages"]]
        rows.append({"method": METHODS[method].label, "answer in passages": len(answerable),
                     "answer kept in evidence (%)": 100 * len(kept) / len(answerable) if answerable else float("nan"),
                     "EM, answer in passages": _em(answerable, method), "EM, otherwise": _em(rest, method)})
    return pd.DataFrame(rows)


def _em(cases: Sequence[Case], method: str) -> float:
    return 100 * sum(c.records[method]["em"] for c in cases) / len(cases) if cases else float("nan")


def highlight(text: str, answers: Sequence[str]) -> str:
    """`text` as HTML with every case-insensitive occurrence of a golden answer in <mark>."""
    patterns = sorted({a for a in answers if a.strip()}, key=len, reverse=True)
    if not patterns:
        return html.escape(text)
    pieces, last = [], 0
    for match in re.finditer("|".join(re.escape(a) for a in patterns), text, flags=re.IGNORECASE):
        pieces += [html.escape(text[last:match.start()]), f"<mark>{html.escape(match.group())}</mark>"]
        last = match.end()
    return "".join(pieces) + html.escape(text[last:])


def _block(title: str, body: str, css: str = "") -> str:
    return f'<div class="{css}"><b>{html.escape(title)}</b><div class="text">{body}</div></div>'


def _method_cell(record: dict, answers: Sequence[str]) -> str:
    evidence = record["evidence"]
    if evidence is None:
        parts = [_block("evidence", "(none: closed-book)", "note")]
    else:
        recalled = "contains an answer" if has_answer(evidence, answers) else "no answer in it"
        parts = [_block(f"evidence ({record['evidence_tokens']} tokens, CR {record['cr']:.1f}x, {recalled})",
                        highlight(evidence, answers), "evidence")]
    rationale = extract_rationale(record["raw_output"] or "")
    if rationale:
        parts.append(_block("rationale", highlight(rationale, answers), "rationale"))
    verdict = "correct" if record["em"] else "wrong"
    parts.append(_block(f"answer ({verdict}, F1 {record['f1']:.2f})", html.escape(record["prediction"]), verdict))
    return "".join(parts)


def case_html(case: Case, methods: Sequence[str]) -> str:
    """One case: the question, the passages, then one column per method."""
    answers = case.row["golden_answers"]
    passages = []
    for i, passage in enumerate(case.row["passages"], start=1):
        title, text = split_contents(passage["contents"])
        passages.append(f"Passage {i} (Title: {html.escape(title)}): {highlight(text, answers)}")
    head = (f"<h3>{html.escape(case.row['question'])} <small>({html.escape(case.id)})</small></h3>"
            f"<p>Golden answers: {', '.join(f'<mark>{html.escape(a)}</mark>' for a in answers)}</p>"
            + _block("passages", "<br>".join(passages), "passages"))
    header = "".join(f"<th>{html.escape(METHODS[m].label)}</th>" for m in methods)
    cells = "".join(f"<td>{_method_cell(case.records[m], answers)}</td>" for m in methods)
    return f'{head}<table class="rag-case"><tr>{header}</tr><tr>{cells}</tr></table>'


STYLE = """<style>
table.rag-case { border-collapse: collapse; width: 100%; table-layout: fixed; margin-bottom: 2em; }
table.rag-case th, table.rag-case td { border: 1px solid #ccc; padding: 6px; vertical-align: top; text-align: left; }
.text { white-space: pre-wrap; font-family: monospace; font-size: 12px; margin: 2px 0 8px 0; }
.passages .text { max-height: 16em; overflow-y: auto; color: #444; }
.evidence .text { background: #eef3fb; }
.rationale .text { background: #f5f5f5; }
.correct b { color: #286b28; } .wrong b { color: #a33; } .note { color: #777; }
mark { background: #ffe38a; }
</style>"""


def cases_html(cases: Sequence[Case], methods: Sequence[str], title: str = "Cases") -> str:
    """A standalone HTML page of cases, for a notebook or a file."""
    body = "".join(case_html(case, methods) for case in cases) or "<p>No case matches the filter.</p>"
    return f"<html><head><meta charset='utf-8'>{STYLE}</head><body><h2>{html.escape(title)}</h2>{body}</body></html>"
