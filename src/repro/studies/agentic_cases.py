"""Agentic case viewer in the style of Tables 15-18: one item's trajectory without the extractor beside its
trajectory with it, step by step. Retrieved documents are shown as `<information>` and the evidence the agent
saw instead as `<information w/ extractor>`; a trajectory that answered after fewer searches than the other is
marked, as the paper marks early stopping ("Terminate early because EviOmni believes that sufficient evidence
has been obtained").

    pairs = pair_trajectories(without, with_)                 # by item id
    cases = pick_cases(pairs, n=4)                           # fixed, early stop, broken, ... first
    html = cases_html(cases, extractor_name="EviOmni")        # a standalone page; IPython.display.HTML(html)
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from repro.agentic.actions import passage_title_text
from repro.agentic.trajectory import Trajectory, Turn

# The order in which cases are shown: what changes with the extractor first.
KINDS = ("fixed", "early stop", "broken", "both right", "both wrong")


def pair_trajectories(without: Sequence[Trajectory], with_: Sequence[Trajectory]
                      ) -> list[tuple[Trajectory, Trajectory]]:
    """(without, with) per item, in the order of `without`; both runs must cover the same items."""
    by_id = {t.id: t for t in with_}
    if set(by_id) != {t.id for t in without}:
        raise ValueError("the two runs cover different items")
    return [(t, by_id[t.id]) for t in without]


def case_kind(without: Trajectory, with_: Trajectory) -> str:
    """fixed (wrong → right), broken (right → wrong), early stop (both right, fewer searches with the
    extractor), both right, or both wrong."""
    if without.em != with_.em:
        return "fixed" if with_.em else "broken"
    if with_.em and with_.searches < without.searches:
        return "early stop"
    return "both right" if with_.em else "both wrong"


def pick_cases(pairs: Sequence[tuple[Trajectory, Trajectory]], n: int = 4) -> list[tuple[str, Trajectory, Trajectory]]:
    """Up to `n` cases, one kind at a time in KINDS order (round robin), items in their given order; among the
    "both" kinds, pairs where at least one run searched come first (there is something to compare)."""
    queues = {kind: [] for kind in KINDS}
    for without, with_ in pairs:
        queues[case_kind(without, with_)].append((without, with_))
    for kind in ("both right", "both wrong"):
        queues[kind].sort(key=lambda pair: not (pair[0].searches or pair[1].searches))
    picked = []
    while len(picked) < n and any(queues.values()):
        for kind in KINDS:
            if queues[kind] and len(picked) < n:
                picked.append((kind, *queues[kind].pop(0)))
    return picked


def _text(text: str, css: str = "") -> str:
    return f'<div class="{css}">{html.escape(text.strip())}</div>' if text.strip() else ""


def _documents(documents: list[dict], max_words: int) -> str:
    lines = []
    for i, document in enumerate(documents, start=1):
        title, text = passage_title_text(document)
        words = text.split()
        shown = " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")
        lines.append(f"Doc {i}(Title: {title}) {shown}")
    return "\n".join(lines)


def _turn_html(turn: Turn, extractor_name: str, max_words: int) -> str:
    parts = [_text(turn.response, "response")]
    if turn.searched:
        parts.append(_text(f"<information> {_documents(turn.documents, max_words)} </information>", "information"))
        if turn.evidence is not None:
            parts.append(_text(f"<information w/ {extractor_name}> {turn.evidence} </information w/ {extractor_name}>",
                               "evidence"))
    elif turn.action is None and not turn.final:
        parts.append(_text(turn.observation, "invalid"))
    elif turn.final and turn.action == "search":
        parts.append(_text("(final step: the search is not run)", "note"))
    return "".join(parts)


def _column_summary(trajectory: Trajectory) -> str:
    verdict = "correct" if trajectory.em else "wrong"
    answer = "no answer" if trajectory.prediction is None else f"answer: {trajectory.prediction}"
    return _text(f"{answer} ({verdict}); searches: {trajectory.searches}", "summary")


def case_html(kind: str, without: Trajectory, with_: Trajectory, extractor_name: str = "extractor",
              max_words: int = 60) -> str:
    """One case as an HTML table: a row per step, the run without the extractor left, with it right."""
    head = (f"<h3>{html.escape(kind)}: {html.escape(without.question)}</h3>"
            f"<p>Ground truth: {html.escape(', '.join(without.golden_answers))}</p>")
    rows = []
    for step in range(max(len(without.turns), len(with_.turns))):
        cells = []
        for trajectory in (without, with_):
            turn = trajectory.turns[step] if step < len(trajectory.turns) else None
            cells.append(_turn_html(turn, extractor_name, max_words) if turn is not None else "")
        label = "Final step" if any(step < len(t.turns) and t.turns[step].final for t in (without, with_)) \
            else f"Step {step + 1}"
        rows.append(f"<tr><th>{label}</th><td>{cells[0]}</td><td>{cells[1]}</td></tr>")
    if case_kind(without, with_) == "early stop":
        note = (f"Terminated early with the {html.escape(extractor_name)}: {with_.searches} search(es) instead of "
                f"{without.searches}")
        rows.append(f'<tr><th></th><td></td><td><div class="note">{note}</div></td></tr>')
    rows.append(f"<tr><th>Outcome</th><td>{_column_summary(without)}</td><td>{_column_summary(with_)}</td></tr>")
    header = (f"<tr><th></th><th>without the extractor</th><th>with the extractor "
              f"({html.escape(extractor_name)})</th></tr>")
    return f'{head}<table class="case">{header}{"".join(rows)}</table>'


STYLE = """<style>
table.case { border-collapse: collapse; width: 100%; table-layout: fixed; margin-bottom: 2em; }
table.case th, table.case td { border: 1px solid #ccc; padding: 6px; vertical-align: top; text-align: left; }
table.case th:first-child { width: 7em; }
table.case div { white-space: pre-wrap; font-family: monospace; font-size: 12px; margin-bottom: 6px; }
table.case .information { color: #555; }
table.case .evidence { background: #eef6ee; }
table.case .invalid, table.case .note { color: #a33; }
table.case .summary { font-weight: bold; }
</style>"""


def cases_html(cases: Sequence[tuple[str, Trajectory, Trajectory]], extractor_name: str = "extractor",
               title: str = "Agentic cases", max_words: int = 60) -> str:
    """A standalone HTML page of cases (kind, without, with), for a notebook or a file."""
    body = "".join(case_html(kind, wo, w, extractor_name, max_words) for kind, wo, w in cases)
    return f"<html><head><meta charset='utf-8'>{STYLE}</head><body><h2>{html.escape(title)}</h2>{body}</body></html>"
