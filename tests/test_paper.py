import hashlib
import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import PAPER_SEED, PAPER_TEXT, ROOT, paper_excerpts, paper_text
from repro.io import InputError
from repro.reporting.paper import COLUMNS, TABLE_FILES, load_paper_tables, wide_cells

SEED = ROOT.parent / "shared" / "seeds" / PAPER_SEED  # the source itself, beside the repository in the lab only
# rows per table: printed cells, "-" included
ROW_COUNTS = {1: 2 * 3, 2: 2 * 3 * 3 * 9, 3: 4 * 6, 4: 3 * 4, 5: 4 * 6 * 2, 6: 4 * 5, 7: 5 * 3, 8: 5 * 6, 9: 6 * 3, 10: 6 * 3}


@pytest.fixture(scope="module")
def rows():
    return load_paper_tables()


def _cell(rows, **where):
    match = rows
    for column, value in where.items():
        match = match[match[column] == value]
    assert len(match) == 1, where
    return match.iloc[0]


def test_row_counts_per_table(rows):
    assert rows.groupby("table").size().to_dict() == ROW_COUNTS


@pytest.mark.parametrize(
    ("where", "value", "display"),
    [
        (dict(table=1, dataset="HotpotQA", method="Rational Evidence"), 67.74, "67.74%"),
        (dict(table=2, model_size="1.5B", dataset="NQ", metric="EM", method="Zero"), 13.74, "13.74"),
        (dict(table=2, model_size="1.5B", dataset="NQ", metric="F1", method="Zero"), 53.16, "53.16"),
        (dict(table=2, model_size="1.5B", dataset="NQ", metric="CR", method="EviOmni"), 38.1, "38.1x"),
        (dict(table=2, model_size="7B", dataset="HotpotQA", metric="EM", method="EviOmni"), 28.02, "28.02"),
        (dict(table=2, model_size="7B", dataset="TQA", metric="CR", method="SEER"), 9.70, "9.70x"),
        (dict(table=3, dataset="Average", method="Rationale"), 39.05, "39.05"),
        (dict(table=4, dataset="Average", method="FilCo"), 0.68, "0.68"),
        (dict(table=5, model_size="32B", dataset="2WikiQA", method="Search-R1 w/ EviOmni", metric="CR"), 11.76, "11.76x"),
        (dict(table=6, model_size="7B", dataset="MuSiQue", method="Search-R1 w/ EviOmni"), 1.98, "1.98"),
        (dict(table=7, dataset="2WikiQA", split="train"), 167400, "167.4k"),
        (dict(table=8, dataset="NQ", split="test", metric="NDCG@5"), 63.08, "63.08"),
        (dict(table=9, method="EviOmni", metric="CR"), 41.89, "41.89x"),
        (dict(table=10, method="Zero", metric="F1"), 41.92, "41.92"),
    ],
)
def test_cells_against_the_paper(rows, where, value, display):
    cell = _cell(rows, **where)
    assert cell["value"] == pytest.approx(value) and cell["display"] == display


def test_dashes_are_missing_values(rows):
    zero_cr = rows[(rows["table"] == 2) & (rows["method"] == "Zero") & (rows["metric"] == "CR")]
    assert len(zero_cr) == 6 and zero_cr["value"].isna().all() and (zero_cr["display"] == "-").all()
    # Table 2 (Zero CR), Table 8 (HotpotQA test, every 2WikiQA and MuSiQue cell), Tables 9 and 10 (Zero CR)
    assert rows["value"].isna().sum() == 6 + (2 + 6 + 6) + 1 + 1


def test_every_table2_row_is_a_line_of_the_paper(rows):
    lines = {"\t".join(line.replace("<u>", "").replace("</u>", "").split("\t")[-9:])
             for line in paper_text().splitlines()}
    main = rows[rows["table"] == 2]
    for _, group in main.groupby(["model_size", "dataset", "metric"], sort=False):
        assert "\t".join(group["display"]) in lines


def test_reported_averages_are_consistent(rows):
    ablation = wide_cells(rows[rows["table"] == 3], index=["dataset"])
    assert (ablation.loc[["NQ", "TQA", "HotpotQA"]].mean() - ablation.loc["Average"]).abs().max() < 0.006
    agentic = rows[(rows["table"] == 5) & (rows["metric"] == "EM")]
    em = wide_cells(agentic, index=["model_size", "method"], column="dataset")
    assert (em.drop(columns="Average").mean(axis=1) - em["Average"]).abs().max() < 0.006


def test_wide_cells_of_table2(rows):
    cells = wide_cells(rows[rows["table"] == 2])
    assert cells.shape == (18, 9)
    assert list(cells.columns)[-1] == "EviOmni" and cells.index[0] == ("1.5B", "NQ", "EM")
    assert cells.loc[("7B", "NQ", "F1"), "Full"] == 74.40


def test_loader_rejects_bad_files(tmp_path):
    frame = pd.read_csv(Path("data/paper") / TABLE_FILES[4], dtype=str, keep_default_na=False)
    for file in TABLE_FILES.values():
        (tmp_path / file).write_text(",".join(COLUMNS) + "\n")
    frame.assign(value=frame["value"].where(frame.index != 2, "fast")).to_csv(tmp_path / TABLE_FILES[4], index=False)
    with pytest.raises(InputError, match=r"table04_latency.csv:4: field 'value': not a number: 'fast'"):
        load_paper_tables(4, tmp_path)
    frame.drop(columns="source").to_csv(tmp_path / TABLE_FILES[4], index=False)
    with pytest.raises(InputError, match="columns"):
        load_paper_tables(4, tmp_path)
    with pytest.raises(ValueError, match="unknown table"):
        load_paper_tables(11)


def _header(source: str) -> dict[str, str]:
    lines = (PAPER_TEXT / source).read_text(encoding="utf-8").splitlines()
    return dict(re.fullmatch(r"# (\w+): (.*)", line).groups() for line in lines[:3])


def test_paper_text_excerpts_name_their_source_hash_and_sections():
    for path in sorted(PAPER_TEXT.glob("*.txt")):
        header = _header(path.name)
        assert header["source"].split()[0] == path.name and re.fullmatch(r"[0-9a-f]{64}", header["sha256"])
        ranges = [tuple(map(int, r)) for r in re.findall(r"lines (\d+)-(\d+)", header["sections"])]
        assert ranges == sorted(paper_excerpts(path.name)) and ranges


@pytest.mark.skipif(not SEED.exists(), reason="the paper's source text (shared/seeds) is not beside the repository")
def test_paper_text_excerpts_are_verbatim_lines_of_the_source():
    assert hashlib.sha256(SEED.read_bytes()).hexdigest() == _header(PAPER_SEED)["sha256"]
    source = SEED.read_text(encoding="utf-8").splitlines()
    for (first, last), lines in paper_excerpts().items():
        assert lines == source[first - 1 : last]
