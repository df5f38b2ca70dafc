import re
from pathlib import Path

import pytest

from conftest import paper_text
from repro.formulas.prompts import (
    ARENA_JUDGE_TEMPLATE,
    ARENA_TEMPLATE,
    CLOSED_BOOK_QA_TEMPLATE,
    COT_TEMPLATE,
    EVAL_RAR_TEMPLATE,
    EVIDENCE_EXTRACTION_TEMPLATE,
    RAG_QA_TEMPLATE,
    arena_judge_prompt,
    arena_prompt,
    chat_messages,
    closed_book_qa_prompt,
    eval_rar_prompt,
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


# Neighbours' prompts (Eval-RAR App. A.1, ARENA Tables 1 and 8) against data/paper/text/ ------------------------

PAPER_TEXT = Path(__file__).resolve().parents[1] / "data" / "paper" / "text"
SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
NEIGHBOUR_PROMPTS = {  # (excerpt file, section, title lines to skip, seed marks **bold**) -> template
    ("eval_rar.md", "A.1", 1, True): EVAL_RAR_TEMPLATE,
    ("arena.md", "Table 1", 0, False): ARENA_TEMPLATE,
    ("arena.md", "Table 8", 0, False): ARENA_JUDGE_TEMPLATE,  # its rows of * are prompt text
}


def _excerpt_sections(name: str) -> dict[str, list[str]]:
    """The raw lines under each `## section` heading of an excerpt file (provenance header left out)."""
    body = (PAPER_TEXT / name).read_text(encoding="utf-8").split("-->", 1)[1]
    sections = {}
    for block in body.split("\n## ")[1:]:
        heading, _, text = block.partition("\n")
        sections[heading.strip()] = [line for line in text.splitlines() if line.strip()]
    return sections


def _seed_prompt_lines(lines: list[str], bold: bool) -> list[str]:
    """Seed layout removed (D131): ARENA's table borders " |", `code` and **bold** marks; ’ -> ' (D2)."""
    cleaned = [line.rstrip().removesuffix(" |").replace("’", "'") for line in lines]
    cleaned = [line.replace("**", "") for line in cleaned] if bold else cleaned
    return [re.sub(r"`([^`]*)`", r"\1", line) for line in cleaned]


@pytest.mark.parametrize(("source", "template"), NEIGHBOUR_PROMPTS.items(), ids=lambda v: str(v)[:30])
def test_neighbour_templates_match_the_seed_excerpts_line_by_line(source, template):
    name, section, skip, bold = source
    expected = _seed_prompt_lines(_excerpt_sections(name)[section][skip:], bold)
    assert template.splitlines() == expected


@pytest.mark.parametrize("name", ["eval_rar.md", "arena.md"])
def test_seed_excerpts_state_their_provenance_and_are_verbatim_when_the_seed_is_beside(name):
    header = (PAPER_TEXT / name).read_text(encoding="utf-8").split("-->", 1)[0]
    seed_name = re.search(r"seed (\d{3}_[0-9a-f]{16}\.txt)", header).group(1)
    digest = re.search(r"sha256 of the seed file: ([0-9a-f]{64})", header).group(1)
    seed = SEEDS / seed_name
    if not seed.exists():
        pytest.skip("the seeds (shared/seeds) are not beside the repository")
    import hashlib

    assert hashlib.sha256(seed.read_bytes()).hexdigest() == digest
    seed_lines = set(seed.read_text(encoding="utf-8").splitlines())
    for lines in _excerpt_sections(name).values():
        assert set(lines) <= seed_lines


def test_neighbour_prompt_builders_fill_their_slots():
    assert eval_rar_prompt(" who wrote hamlet? ").endswith("</answer>. Question: who wrote hamlet?")
    prompt = arena_prompt("who?", format_passages(["A.", "B."]))
    assert prompt.endswith("<question>who?</question>\n<references>Passage 1: A.\nPassage 2: B.</references>")
    judge = arena_judge_prompt(["Paris", "paris, france"], "Paris")
    assert "is:*************\n['Paris', 'paris, france']\n*************Here is the model's response:" in judge
