"""The generated description-question set over the offline Wikipedia extracts."""

import collections

from repro.assets import OVOS_SUMMARIES
from repro.data.answers import has_answer
from repro.data.corpus import ovos_pages
from repro.data.generated import describe_rows

FRACTIONS = {"train": 0.5, "dev": 0.1, "test": 0.4}


def test_questions_are_deterministic_unambiguous_and_do_not_leak_the_answer():
    path = OVOS_SUMMARIES.locate()
    titles = set(ovos_pages(path))
    rows = describe_rows(path, titles, FRACTIONS)
    assert rows == describe_rows(path, titles, FRACTIONS)
    assert len(rows) > 1000 and len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)  # a description names one page
    assert not any(has_answer(r["question"], r["golden_answers"]) for r in rows)
    assert all(r["metadata"]["generated"] and r["metadata"]["evidence_title"] in titles for r in rows)
    by_title = {r["metadata"]["evidence_title"]: r for r in rows}
    casablanca = by_title["Casablanca (film)"]
    assert casablanca["question"] == "What is the 1942 film by Michael Curtiz?"
    assert casablanca["golden_answers"] == ["Casablanca", "Casablanca (film)"]
    assert all(r["question"].startswith("Who is the ") for r in rows if r["metadata"]["topic"] == "People")
    assert set(collections.Counter(r["metadata"]["split"] for r in rows)) == set(FRACTIONS)


def test_only_pages_in_the_corpus_are_asked_about():
    path = OVOS_SUMMARIES.locate()
    some = set(list(ovos_pages(path))[:300])
    rows = describe_rows(path, some, FRACTIONS)
    assert rows and {r["metadata"]["evidence_title"] for r in rows} <= some
