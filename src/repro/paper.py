"""The numbers the paper reports (seed 000, Tables 1-10), as tidy rows read from data/paper/*.csv.

Each row is one printed cell: table, dataset, split, model_size, method, group (WR/VAR/RAR), metric, value
(a float; NaN for a printed "-"), display (the cell exactly as printed, e.g. "38.1x") and source. Names are
normalised (HotoptQA -> HotpotQA, Evi0mni -> EviOmni, FILCO -> FilCo); data/paper/README.md lists every
transcription choice.

    >>> main = load_paper_tables(2)
    >>> cells = wide_cells(main)          # one row per (model_size, dataset, metric), one column per method
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from repro.io import InputError

PAPER_DIR = Path("data/paper")
COLUMNS = ("table", "dataset", "split", "model_size", "method", "group", "metric", "value", "display", "source")
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
