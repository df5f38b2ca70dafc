"""The numbers the paper reports (seed 000, Tables 1-10), as tidy rows read from data/paper/*.csv, and the paper's
claims (data/paper/claims.yaml), each tied to its words in the paper text and to the cells it rests on.

Each row is one printed cell: table, dataset, split, model_size, method, group (WR/VAR/RAR), metric, value
(a float; NaN for a printed "-"), display (the cell exactly as printed, e.g. "38.1x") and source. Names are
normalised (HotoptQA -> HotpotQA, Evi0mni -> EviOmni, FILCO -> FilCo); data/paper/README.md lists every
transcription choice.

    >>> main = load_paper_tables(2)
    >>> cells = wide_cells(main)          # one row per (model_size, dataset, metric), one column per method
    >>> claims = load_claims()            # validated; select_cells(rows, claim["cells"]) gives a claim's cells
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from repro.io import InputError, read_yaml

PAPER_DIR = Path("data/paper")
TEXT_DIR = PAPER_DIR / "text"  # verbatim excerpts of the paper text, one file per source (data/paper/README.md)
PAPER_SEED = "000_531d1c5eb96b639f.txt"
CLAIMS_FILE = PAPER_DIR / "claims.yaml"
COLUMNS = ("table", "dataset", "split", "model_size", "method", "group", "metric", "value", "display", "source")
SELECTOR_COLUMNS = COLUMNS[:7]  # the columns that identify a cell
CLAIM_FIELDS = ("id", "section", "lines", "words", "kind", "cells", "reported_test", "ours")  # and why_not if ours: []
KINDS = ("recall", "comparison", "compactness", "ablation", "dynamics", "efficiency", "robustness", "agentic",
         "generalisation")
REPORTED_TESTS = {"sign": ("better", "than", "metric", "alternative"), "ordering": ("by", "top", "rank", "direction"),
                  "none": ("why",)}
TABLE_FILES = {
    1: "table01_answer_recall.csv",
    2: "table02_main.csv",
    3: "table03_answer_reward_ablation.csv",
    4: "table04_latency.csv",
    5: "table05_search_r1.csv",
    6: "table06_searches.csv",
    7: "table07_datasets.csv",
    8: "table08_retrieval.csv",
    9: "table09_2wikiqa.csv",
    10: "table10_musique.csv",
}


def _read_table(table: int, paper_dir: Path) -> pd.DataFrame:
    path = paper_dir / TABLE_FILES[table]
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if tuple(frame.columns) != COLUMNS:
        raise InputError(path, f"columns {list(frame.columns)} differ from {list(COLUMNS)}")
    wrong_table = frame.index[frame["table"] != str(table)]
    if len(wrong_table):
        raise InputError(path, f"row claims table {frame.at[wrong_table[0], 'table']}", line=int(wrong_table[0]) + 2)
    values = pd.to_numeric(frame["value"].where(frame["value"] != ""), errors="coerce")
    bad = frame.index[values.isna() & (frame["value"] != "")]
    if len(bad):
        raise InputError(path, f"not a number: {frame.at[bad[0], 'value']!r}", line=int(bad[0]) + 2, field="value")
    missing = frame.index[values.isna() & (frame["display"] != "-")]
    if len(missing):
        raise InputError(path, "empty value for a printed number", line=int(missing[0]) + 2, field="value")
    return frame.assign(table=table, value=values.astype(float))


def load_paper_tables(tables: int | Iterable[int] | None = None, paper_dir: str | Path = PAPER_DIR) -> pd.DataFrame:
    """Rows of the given tables (default: all ten), validated; `value` is float, NaN where "-" is printed."""
    wanted = list(TABLE_FILES) if tables is None else [tables] if isinstance(tables, int) else list(tables)
    unknown = [t for t in wanted if t not in TABLE_FILES]
    if unknown:
        raise ValueError(f"unknown table(s) {unknown}; the paper's tables are {list(TABLE_FILES)}")
    return pd.concat([_read_table(t, Path(paper_dir)) for t in wanted], ignore_index=True)


def wide_cells(
    rows: pd.DataFrame, index: Iterable[str] = ("model_size", "dataset", "metric"), column: str = "method"
) -> pd.DataFrame:
    """Pivot tidy rows to one row per cell position (`index`) and one column per `column` value, keeping
    the paper's row and column order."""
    index = list(index)
    duplicated = rows.duplicated(index + [column])
    if duplicated.any():
        raise ValueError(f"rows are not unique by {index + [column]}: {rows[duplicated].head(3).to_dict('records')}")
    wide = rows.pivot(index=index, columns=column, values="value")
    order = {name: list(dict.fromkeys(rows[name])) for name in index + [column]}
    wide = wide.reindex(columns=order[column])
    keys = list(dict.fromkeys(map(tuple, rows[index].itertuples(index=False))))
    return wide.reindex(pd.MultiIndex.from_tuples(keys, names=index) if len(index) > 1 else [k[0] for k in keys])


def paper_excerpts(source: str = PAPER_SEED, text_dir: str | Path = TEXT_DIR) -> dict[tuple[int, int], list[str]]:
    """The verbatim excerpts in text_dir/<source>, keyed by their (first, last) line in the source."""
    path = Path(text_dir) / source
    excerpts: dict[tuple[int, int], list[str]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if match := re.fullmatch(r"## lines (\d+)-(\d+): .+", line):
            current = excerpts.setdefault((int(match[1]), int(match[2])), [])
        elif current is not None:
            current.append(line)
    for (first, last), lines in excerpts.items():
        if len(lines) < last - first + 1 or any(lines[last - first + 1:]):
            raise ValueError(f"{path}: the excerpt of lines {first}-{last} has {len(lines)} lines")
        del lines[last - first + 1:]
    return excerpts


def select_cells(rows: pd.DataFrame, selectors: Iterable[dict]) -> pd.DataFrame:
    """The rows that any selector matches; a selector maps columns to a value or a list of values."""
    keep = pd.Series(False, index=rows.index)
    for selector in selectors:
        keep |= _matches(rows, selector)
    return rows[keep]


def _matches(rows: pd.DataFrame, selector: dict) -> pd.Series:
    match = pd.Series(True, index=rows.index)
    for column, values in selector.items():
        match &= rows[column].astype(str).isin([str(v) for v in _as_list(values)])
    return match


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def load_claims(
    path: str | Path = CLAIMS_FILE, paper_dir: str | Path = PAPER_DIR, source: str = PAPER_SEED
) -> list[dict]:
    """The claims of data/paper/claims.yaml (schema in data/paper/README.md), validated against the reported
    tables of `paper_dir` and the excerpts of `source` in its text/: their fields, ids, kinds, cells, reported
    tests and words. An InputError (a ValueError) names the file, the claim and the field."""
    path = Path(path)
    claims = read_yaml(path)
    if not isinstance(claims, list) or not claims:
        raise InputError(path, "expected a non-empty YAML list of claims")
    rows = load_paper_tables(paper_dir=paper_dir)
    text = {first + i: line for (first, _), lines in paper_excerpts(source, Path(paper_dir) / "text").items()
            for i, line in enumerate(lines)}
    seen = set()
    for number, claim in enumerate(claims, 1):
        name = claim.get("id") if isinstance(claim, dict) else None
        error = functools.partial(_claim_error, path, name if isinstance(name, str) else f"#{number}")
        _check_claim(claim, rows, text, error)
        if name in seen:
            raise error("id", "another claim has this id")
        seen.add(name)
    return claims


def _claim_error(path: Path, claim: str, field: str, message: str) -> InputError:
    return InputError(path, f"claim {claim!r}: {message}", field=field)


def _check_claim(claim, rows: pd.DataFrame, text: dict[int, str], error) -> None:
    if not isinstance(claim, dict):
        raise error("id", "a claim is a mapping of fields")
    fields = CLAIM_FIELDS + (("why_not",) if claim.get("ours") == [] else ())
    for field in fields:
        if field not in claim:
            raise error(field, "missing")
    for field in claim:
        if field not in fields:
            raise error(field, f"not a field of a claim {fields}")
    if not isinstance(claim["id"], str) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", claim["id"]):
        raise error("id", "not a kebab-case slug")
    if not isinstance(claim["section"], str) or not claim["section"]:
        raise error("section", "not a section name")
    if claim["kind"] not in KINDS:
        raise error("kind", f"{claim['kind']!r} is not one of {KINDS}")
    _check_words(claim, text, error)
    cells = claim["cells"]
    if not isinstance(cells, list) or not all(isinstance(s, dict) and s for s in cells):
        raise error("cells", "not a list of selectors (mappings of columns to values)")
    for selector in cells:
        unknown = [column for column in selector if column not in SELECTOR_COLUMNS]
        if unknown:
            raise error("cells", f"{unknown} are not columns of the reported tables {SELECTOR_COLUMNS}")
        if not _matches(rows, selector).any():
            raise error("cells", f"{selector} matches no reported cell")
    _check_reported_test(claim["reported_test"], select_cells(rows, cells), error)
    ours = claim["ours"]
    if not isinstance(ours, list) or not all(isinstance(stage, str) and stage for stage in ours):
        raise error("ours", "not a list of stage names")
    if not ours and (not isinstance(claim["why_not"], str) or not claim["why_not"]):
        raise error("why_not", "empty: say why no stage bears on the claim")


def _check_words(claim: dict, text: dict[int, str], error) -> None:
    lines = claim["lines"]
    if not (isinstance(lines, list) and len(lines) == 2 and all(type(n) is int for n in lines)
            and 1 <= lines[0] <= lines[1]):
        raise error("lines", f"{lines!r} is not [first, last] with 1 <= first <= last")
    first, last = lines
    missing = [n for n in range(first, last + 1) if n not in text]
    if missing:
        raise error("lines", f"line {missing[0]} is in no excerpt of the paper text")
    words = claim["words"]
    if not isinstance(words, str) or not words or words not in "\n".join(text[n] for n in range(first, last + 1)):
        raise error("words", f"not verbatim in lines {first}-{last}")
    if any(words in "\n".join(text[n] for n in span) for span in (range(first + 1, last + 1), range(first, last))):
        raise error("lines", f"{first}-{last} is wider than the words")


def _check_reported_test(test, cells: pd.DataFrame, error) -> None:
    if not isinstance(test, dict) or test.get("test") not in REPORTED_TESTS:
        raise error("reported_test", f"needs a field 'test', one of {list(REPORTED_TESTS)}")
    fields = ("test",) + REPORTED_TESTS[test["test"]]
    if sorted(test) != sorted(fields):
        raise error("reported_test", f"a {test['test']} test has exactly the fields {fields}")
    if test["test"] == "none":
        if not isinstance(test["why"], str) or not test["why"]:
            raise error("reported_test", "empty 'why'")
        return
    if test["test"] == "sign":
        if not isinstance(test["than"], list) or not test["than"] or test["better"] in test["than"]:
            raise error("reported_test", "'than' is not a non-empty list of methods other than 'better'")
        if test["alternative"] not in ("greater", "less"):
            raise error("reported_test", f"alternative {test['alternative']!r} is neither 'greater' nor 'less'")
        wanted = {"method": [test["better"], *test["than"]], "metric": _as_list(test["metric"])}
    else:
        if test["by"] not in SELECTOR_COLUMNS:
            raise error("reported_test", f"by {test['by']!r} is not one of {SELECTOR_COLUMNS}")
        if test["direction"] not in ("higher", "lower"):
            raise error("reported_test", f"direction {test['direction']!r} is neither 'higher' nor 'lower'")
        wanted = {test["by"]: _as_list(test["top"])}
        ranked = cells[test["by"]].nunique()
        if type(test["rank"]) is not int or not len(wanted[test["by"]]) <= test["rank"] < ranked:
            # a rank below the number of top values cannot hold, one as large as the values ranked always holds
            raise error("reported_test", f"rank {test['rank']!r} is not from len(top) to {ranked - 1}, one less "
                                         f"than the selected cells' number of {test['by']} values")
    for column, values in wanted.items():
        absent = [v for v in values if str(v) not in set(cells[column].astype(str))]
        if absent:
            raise error("reported_test", f"{absent} not among the selected cells' {column} values")
