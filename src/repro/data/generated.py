"""A generated open-domain set, labelled as such: questions written from the Wikidata short descriptions
that ship with the offline Wikipedia extracts ("What is the 1957 novel by Jack Kerouac?" -> "On the Road").

It exists because the natural FanOutQA set is small (a few hundred questions, most of whose answers lie
deeper in the page than the lead extracts go); this one has thousands of questions whose answer is the
title of a corpus page. It is never the default test set. Generation is deterministic:
- only specific descriptions are used (3+ words with a digit or a capitalised word after the first) and
  only descriptions that belong to exactly one page; a question that already contains its answer is dropped;
- "Who is the ..." for the People topic, "What is the ..." otherwise; the description's first word is
  lower-cased when the corpus mostly writes it in lower case ("Capital" -> "capital", "English" stays);
- golden answers: the title without a trailing parenthetical ("Casablanca (film)" -> "Casablanca") and
  the full title.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from repro.data.answers import has_answer
from repro.data.splits import split_of
from repro.io import InputError, read_json

SOURCE = "ovos-describe"
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)$")


def _specific(description: str) -> bool:
    words = description.split()
    return len(words) >= 3 and (any(c.isdigit() for c in description) or any(w[0].isupper() for w in words[1:]))


def _lowercase_words(texts: list[str]) -> set[str]:
    """Words the corpus writes in lower case more often than capitalised (mid-sentence occurrences)."""
    counts = Counter(w for text in texts for w in re.findall(r"(?<=[a-z,;] )[A-Za-z]+", text))
    return {w for w in counts if w.islower() and counts[w] > counts.get(w.capitalize(), 0)}


def describe_rows(path: str | os.PathLike, titles_in_corpus: set[str], fractions: dict[str, float]) -> list[dict]:
    entries = read_json(path)
    if not isinstance(entries, dict):
        raise InputError(path, f"expected an object of pages, got {type(entries).__name__}")
    pages = [e for e in entries.values() if isinstance(e, dict) and e.get("title") in titles_in_corpus]
    owners = Counter((e.get("description") or "").strip() for e in pages)
    lowercase = _lowercase_words([e.get("extract", "") for e in pages])
    rows = []
    for entry in pages:
        description = (entry.get("description") or "").strip()
        if not _specific(description) or owners[description] > 1:
            continue
        first, _, rest = description.partition(" ")
        if first.lower() in lowercase:
            first = first.lower()
        wh = "Who" if entry.get("topic") == "People" else "What"
        question = f"{wh} is the {first} {rest}?"
        title = entry["title"]
        answers = list(dict.fromkeys([_PARENTHETICAL.sub("", title), title]))
        if has_answer(question, answers):
            continue
        rows.append({"id": f"describe-{len(rows)}", "question": question, "golden_answers": answers,
                     "metadata": {"source": SOURCE, "generated": True, "evidence_title": title,
                                  "topic": entry.get("topic"), "split": split_of(title, fractions, salt=SOURCE)}})
    return rows
