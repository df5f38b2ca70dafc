"""The case viewer of traditional RAG: loading cases from per-item files, filters, answer highlighting and the
evidence-recall table, on hand-written records."""

import pandas as pd
import pytest

from repro.io import write_jsonl
from repro.studies.cases import case_html, evidence_recall, find_cases, highlight, load_cases

ROWS = [{"id": f"q{i}", "question": f"Where was singer {i} born?", "golden_answers": ["McComb"],
         "passages": [{"id": "p1", "contents": '"Britney Spears"\nSpears was born in McComb, Mississippi.'}]}
        for i in range(3)]


def record(i: int, evidence: str | None, em: int, raw: str | None = None) -> dict:
    return {"id": f"q{i}", "question": "q", "golden_answers": ["McComb"], "evidence": evidence, "raw_output": raw,
            "prediction": "McComb" if em else "Kentwood", "em": em, "f1": float(em), "answer_in_passages": i < 2,
            "passage_tokens": 12, "evidence_tokens": None if evidence is None else 4, "cr": None if evidence is None
            else 3.0}


@pytest.fixture
def cases(tmp_path):
    full = [record(i, "Spears was born in McComb.", em) for i, em in enumerate([1, 0, 0])]
    eviomni = [record(0, "born in mccomb", 1, "<reason>Passage 1 says where.</reason><extract>born in mccomb"
                                              "</extract>"),
               record(1, "Spears was born.", 1), record(2, "", 0)]
    files = []
    for method, records in (("full", full), ("eviomni", eviomni)):
        write_jsonl(tmp_path / f"{method}.jsonl", records)
        files.append({"method": method, "path": str(tmp_path / f"{method}.jsonl")})
    return load_cases(ROWS, pd.DataFrame(files))


def test_filters_pick_questions_one_method_answered_and_the_other_did_not(cases):
    assert find_cases(cases, right="eviomni", wrong="full") == ["q1"]
    assert find_cases(cases, wrong="eviomni") == ["q2"]
    assert find_cases(cases, n=2) == ["q0", "q1"]
    assert find_cases(cases, ids=["q2", "q0"]) == ["q2", "q0"]
    with pytest.raises(KeyError, match="q9"):
        find_cases(cases, ids=["q9"])


def test_answers_are_highlighted_case_insensitively_and_html_is_escaped():
    assert highlight("born in MCCOMB <b>", ["McComb"]) == "born in <mark>MCCOMB</mark> &lt;b&gt;"
    assert highlight("McComb, Mississippi", ["McComb", "McComb, Mississippi"]) == "<mark>McComb, Mississippi</mark>"


def test_case_page_shows_passages_evidence_rationale_and_answers(cases):
    page = case_html(cases["q0"], ["full", "eviomni"])
    assert "<th>Full</th><th>EviOmni</th>" in page
    assert "Passage 1 (Title: Britney Spears)" in page and "born in <mark>mccomb</mark>" in page
    assert "Passage 1 says where." in page and "answer (correct, F1 1.00)" in page


def test_evidence_recall_on_the_questions_whose_passages_hold_the_answer(cases):
    table = evidence_recall(cases, ["full", "eviomni"]).set_index("method")
    assert table.loc["Full", "answer in passages"] == 2
    kept = table["answer kept in evidence (%)"]
    assert kept["Full"] == 100.0 and kept["EviOmni"] == 50.0
    assert table.loc["Full", "EM, answer in passages"] == 50.0 and table.loc["EviOmni", "EM, otherwise"] == 0.0


def test_a_missing_prediction_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="eviomni.jsonl"):
        load_cases(ROWS, pd.DataFrame([{"method": "eviomni", "path": str(tmp_path / "eviomni.jsonl")}]))
