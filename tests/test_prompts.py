import re

import pytest

from conftest import paper_text
from repro.prompts import (
    CLOSED_BOOK_QA_TEMPLATE,
    COT_TEMPLATE,
    EVIDENCE_EXTRACTION_TEMPLATE,
    RAG_QA_TEMPLATE,
    chat_messages,
    closed_book_qa_prompt,
    evidence_extraction_prompt,
    format_passages,
    rag_qa_prompt,
    render_chat,
    search_r1_prompt,
)

PAPER_TABLES = {  # paper table -> (template, title line above it)
    11: (RAG_QA_TEMPLATE, "Prompt for Retrieval-Augmented QA"),
    12: (CLOSED_BOOK_QA_TEMPLATE, "Prompt for Closed-book QA"),
    13: (COT_TEMPLATE, "Prompt for CoT Generation"),
    14: (EVIDENCE_EXTRACTION_TEMPLATE, "Prompt for Rational Evidence Extraction"),
}


def _paper_prompt_lines(text: str, title: str, table: int) -> list[str]:
    block = text.split(title + "\n", 1)[1].split(f"Table {table}:", 1)[0]
    lines = [line.strip() for line in block.replace("’", "'").splitlines() if line.strip()]
    return [re.sub(r"`(<[^`]*>)`", r"\1", line) for line in lines]  # the seed marks tags as `code`


@pytest.mark.parametrize("table", sorted(PAPER_TABLES))
def test_templates_are_verbatim_from_appendix_e(table):
    template, title = PAPER_TABLES[table]
    assert template.splitlines() == _paper_prompt_lines(paper_text(), title, table)


def test_templates_key_lines():
    assert RAG_QA_TEMPLATE.startswith("[Instruction]\nYou are a helpful assistant. Your task is:\n")
    assert "2. If the documents don't work, please answer the question based on your own knowledge." in RAG_QA_TEMPLATE
    assert COT_TEMPLATE.endswith("Document: {document}\nLet's think step by step.")
    assert EVIDENCE_EXTRACTION_TEMPLATE.endswith("Question: {question}\nPassages: {passages}")
    assert "1. In the <reason></reason> tag, perform the following steps." in EVIDENCE_EXTRACTION_TEMPLATE


def test_search_r1_template():
    prompt = search_r1_prompt("  who wrote hamlet ")
    assert prompt.startswith("Answer the given question. You must conduct reasoning inside <think> and </think> first")
    assert "You can search as many times as your want. " in prompt  # Search-R1's own typo
    assert prompt.endswith("For example, <answer> Beijing </answer>. Question: who wrote hamlet?\n")
    assert search_r1_prompt("is it?").endswith("Question: is it?\n")


def test_format_passages_numbers_and_titles():
    passages = [{"title": "Hamlet", "text": "Hamlet is a tragedy."}, {"contents": '"Shakespeare"\nAn English poet.'},
                "Untitled text."]
    assert format_passages(passages) == (
        "Passage 1 (Title: Hamlet): Hamlet is a tragedy.\n"
        "Passage 2 (Title: Shakespeare): An English poet.\n"
        "Passage 3: Untitled text."
    )
    assert format_passages(passages[:1], numbered=False) == "(Title: Hamlet): Hamlet is a tragedy."
    assert format_passages(passages[:1], with_titles=False) == "Passage 1: Hamlet is a tragedy."
    assert format_passages(passages[:1], numbered=False, with_titles=False) == "Hamlet is a tragedy."
    with pytest.raises(TypeError):
        format_passages("one passage")
    with pytest.raises(ValueError, match="'text' or 'contents'"):
        format_passages([{"body": "x"}])


def test_filled_prompts():
    prompt = evidence_extraction_prompt(" who? ", "Passage 1: x")
    assert prompt.endswith("Question: who?\nPassages: Passage 1: x")
    assert rag_qa_prompt("q", "e").endswith("Question: q\nDocument: e\nAnswer:")
    assert closed_book_qa_prompt("q").endswith("Question: q\nAnswer:")
    with pytest.raises(ValueError):
        closed_book_qa_prompt("  ")


def test_chat_messages_and_missing_template():
    assert chat_messages("hi") == [{"role": "system", "content": "You are a helpful assistant."},
                                   {"role": "user", "content": "hi"}]
    assert chat_messages("hi", system=None) == [{"role": "user", "content": "hi"}]

    class NoTemplate:
        chat_template = None

    with pytest.raises(ValueError, match="no chat template"):
        render_chat(NoTemplate(), chat_messages("hi"))
