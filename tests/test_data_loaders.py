"""Dataset loaders on small files in the upstream formats (FlashRAG jsonl, MuSiQue jsonl, 2Wiki/HotpotQA JSON)."""

import json

import pytest

from conftest import ROOT
from repro.data.loaders import (distractor_passages, flashrag_path, read_flashrag, read_musique,
                                read_wiki_multihop)
from repro.data.qa import read_contexts, read_qa
from repro.io import InputError

FIXTURES = ROOT / "tests" / "fixtures"
FLASHRAG = FIXTURES / "flashrag"


def test_flashrag_open_domain_split_is_read_from_a_local_directory():
    rows = list(read_flashrag(flashrag_path(str(FLASHRAG), "nq", "test")))
    assert [r["id"] for r in rows] == ["test_0", "test_1", "test_2"]
    assert rows[2]["golden_answers"] == ["Leonardo da Vinci", "Leonardo"]
    assert all(r["metadata"] == {} for r in rows)


def test_missing_local_split_names_the_file():
    with pytest.raises(FileNotFoundError, match=r"nq/dev\.jsonl"):
        flashrag_path(str(FLASHRAG), "nq", "dev")


def test_unreachable_hub_repo_gives_an_actionable_error():
    # HF_HUB_OFFLINE=1 (conftest): the real hub client refuses, and the loader says what to do instead
    with pytest.raises(FileNotFoundError, match="local directory"):
        flashrag_path("RUC-NLPIR/FlashRAG_datasets", "nq", "test")


def test_hotpotqa_keeps_question_types_and_its_paragraphs():
    rows = list(read_flashrag(flashrag_path(str(FLASHRAG), "hotpotqa", "dev"), setting="distractor"))
    assert [r["metadata"]["type"] for r in rows] == ["comparison", "bridge"]
    passages = distractor_passages(rows[1])
    assert passages[1]["contents"].startswith('"Shirley Temple"\nShirley Temple Black')
    assert "Chief of Protocol" in passages[1]["contents"]
    assert [p["is_supporting"] for p in passages] == [True, True]


def test_2wiki_flashrag_paragraphs_in_order_with_supporting_flags():
    rows = list(read_flashrag(flashrag_path(str(FLASHRAG), "2wikimultihopqa", "dev"), setting="distractor"))
    passages = distractor_passages(rows[0])
    assert [p["contents"].split("\n")[0] for p in passages] == [
        '"Kurram Garhi"', '"Hypocrite (film)"', '"Miguel Morayta"', '"Tiger Hill"']
    assert [p["is_supporting"] for p in passages] == [False, True, True, False]
    assert len({p["id"] for p in passages}) == 4


def test_musique_flashrag_and_raw_give_the_same_paragraphs():
    flash = next(read_flashrag(flashrag_path(str(FLASHRAG), "musique", "dev"), setting="distractor"))
    raw = next(read_musique(FIXTURES / "raw" / "musique_ans_v1.0_dev.jsonl"))
    assert raw["golden_answers"] == ["Miquette Giraudy", "Miquette"]
    strip = lambda ps: [(p["contents"], p["is_supporting"]) for p in ps]  # noqa: E731
    assert strip(distractor_passages(flash)) == strip(distractor_passages(raw))


def test_raw_2wiki_json_becomes_flashrag_rows():
    (row,) = read_wiki_multihop(FIXTURES / "raw" / "2wikimultihopqa_dev.json")
    assert row["id"] == "5811079c0bdc11eba7f7acde48001122"
    assert row["golden_answers"] == ["19 June 2013"]
    passages = distractor_passages(row)
    assert passages[0]["contents"] == '"Kurram Garhi"\nKurram Garhi is a small village located near the city of Bannu. It is in Pakistan.'
    assert [p["is_supporting"] for p in passages] == [False, True, True]


def _write(tmp_path, lines):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = '{"id": "a", "question": "q?", "golden_answers": ["x"], "metadata": {}}'


@pytest.mark.parametrize("bad, field", [
    ('{"id": "b", "question": "q?", "metadata": {}}', "golden_answers"),
    ('{"id": "b", "question": "q?", "golden_answers": "x"}', "golden_answers"),
    ('{"id": "b", "question": "q?", "golden_answers": []}', "golden_answers"),
    ('{"id": "b", "question": "  ", "golden_answers": ["x"]}', "question"),
    ('{"question": "q?", "golden_answers": ["x"]}', "id"),
    ('{"id": "b", "question": "q?", "golden_answers": ["x"], "metadata": []}', "metadata"),
    ('{"id": "a", "question": "q?", "golden_answers": ["x"]}', "id"),  # duplicate of line 1
])
def test_malformed_rows_name_file_line_and_field(tmp_path, bad, field):
    path = _write(tmp_path, [GOOD, "", bad])
    with pytest.raises(InputError) as err:
        list(read_qa(path))
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, field)
    assert f"bad.jsonl:3: field '{field}'" in str(err.value)


def test_invalid_json_names_the_line(tmp_path):
    path = _write(tmp_path, [GOOD, '{"id": "b", "question": '])
    with pytest.raises(InputError, match=r"bad\.jsonl:2: invalid JSON"):
        list(read_qa(path))


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + '{"id": "b", "question": "caf\u00e9?"}'.encode("latin-1") + b"\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:2: invalid UTF-8 at byte 28 of the line"):
        list(read_qa(path))
    raw = tmp_path / "dev.json"
    raw.write_bytes(b'[\n{"_id": "x",\n "question": "\xff"}]')
    with pytest.raises(InputError, match=r"dev\.json:3: invalid UTF-8"):
        list(read_wiki_multihop(raw))


def test_distractor_row_without_paragraphs_is_rejected(tmp_path):
    path = _write(tmp_path, [GOOD])
    with pytest.raises(InputError, match=r"bad\.jsonl:1: field 'metadata'"):
        list(read_flashrag(path, setting="distractor"))


def test_raw_2wiki_item_with_bad_context_names_the_item(tmp_path):
    path = tmp_path / "dev.json"
    item = {"_id": "x", "question": "q?", "answer": "a", "context": [["Title only"]]}
    path.write_text(json.dumps([item]), encoding="utf-8")
    with pytest.raises(InputError, match=r"dev\.json\[item 1\]: field 'context'"):
        list(read_wiki_multihop(path))


def test_raw_musique_row_without_answer_names_line_and_field(tmp_path):
    path = tmp_path / "musique.jsonl"
    path.write_text(json.dumps({"id": "m", "question": "q?", "paragraphs": []}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"musique\.jsonl:1: field 'answer'"):
        list(read_musique(path))


def test_contexts_rows_need_passages_with_contents(tmp_path):
    good = '{"id": "a", "question": "q?", "golden_answers": ["x"], "passages": [{"id": "1", "contents": "T"}]}'
    assert read_contexts(_write(tmp_path, [good]))[0]["passages"] == [{"id": "1", "contents": "T"}]
    bad = '{"id": "b", "question": "q?", "golden_answers": ["x"], "passages": [{"id": "1"}]}'
    with pytest.raises(InputError, match=r"bad\.jsonl:2: field 'passages'"):
        read_contexts(_write(tmp_path, [good, bad]))
