"""Prompt templates of the paper (Appendix E, Tables 11-14) and of Search-R1, plus passage formatting and
chat-template application.

The template wording is verbatim; line breaks follow the paper's tables. Two readings are ours and are
documented in docs/decisions.md: the "[Instruction]" header is kept as literal prompt text (D2), and the
paper's typeset apostrophes (’) are written as ASCII ' as they would be in the authors' source (D2).
Passages are numbered and titled (D1); the filled template is sent as the single user turn after a fixed
system message (D3).

    >>> text = evidence_extraction_prompt("who wrote hamlet?", format_passages([{"title": "Hamlet", "text": "..."}]))
    >>> render_chat(tokenizer, chat_messages(text))   # the string the extractor is prefilled with
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Table 11: retrieval-augmented QA (the LoRA generator's prompt; also Algorithm 1's o = M_G(q, e)).
RAG_QA_TEMPLATE = (
    "[Instruction]\n"
    "You are a helpful assistant. Your task is:\n"
    "1. Read the given question and use the documents provided to answer the question.\n"
    "2. If the documents don't work, please answer the question based on your own knowledge.\n"
    "Question: {question}\n"
    "Document: {document}\n"
    "Answer:"
)

# Table 12: closed-book QA (the "Zero" baseline).
CLOSED_BOOK_QA_TEMPLATE = (
    "[Instruction]\n"
    "You are a helpful assistant. Your task is:\n"
    "1. Read the given question and then answer the question directly.\n"
    "2. Give a short answer to the question based on your own knowledge.\n"
    "Question: {question}\n"
    "Answer:"
)

# Table 13: chain-of-thought generation (the CoT baseline's evidence).
COT_TEMPLATE = (
    "[Instruction]\n"
    "You are a helpful assistant. Your task is:\n"
    "Read the given documents, and answer the question below.\n"
    "Question: {question}\n"
    "Document: {document}\n"
    "Let's think step by step."
)

# Table 14: rational evidence extraction; at inference generation stops at EVIDENCE_STOP.
EVIDENCE_EXTRACTION_TEMPLATE = (
    "[Instruction]\n"
    "You are a highly skilled knowledge reasoner and extractor.\n"
    "Your task is to carefully read the given question and passages to reason how the passages lead to the "
    "answer and extract relevant information that may be used to answer the question.\n"
    "Follow these steps:\n"
    "1. In the <reason></reason> tag, perform the following steps. Question Analysis: Analyze the question to "
    "understand the specific information they are seeking. Identify the key concepts, entities, and "
    "relationships involved. Passage Analysis: For each passage, carefully read and identify sentences or "
    "phrases that are useful for answering the given question.\n"
    "2. In the <extract></extract> tag, synthesize useful information from the passages into a coherent "
    "narrative. Organize the information logically and concisely.\n"
    "3. In <answer></answer> tags, give a short answer to the given question, based on the passages, reasoning "
    "information, and extracted knowledge. If none of them work, please answer the question based on your "
    "knowledge.\n"
    "Question: {question}\n"
    "Passages: {passages}"
)
EVIDENCE_STOP = "</extract>"

# Search-R1's base template (PeterGriffinJin/Search-R1, scripts/data_process/nq_search.py), typos included.
SEARCH_R1_TEMPLATE = (
    "Answer the given question. "
    "You must conduct reasoning inside <think> and </think> first every time you get new information. "
    "After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query "
    "</search> and it will return the top searched results between <information> and </information>. "
    "You can search as many times as your want. "
    "If you find no further external knowledge needed, you can directly provide the answer inside <answer> and "
    "</answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."  # D3: as in the public usage of the released checkpoints

Passage = str | Mapping[str, str]


def passage_title_and_text(passage: Passage) -> tuple[str, str]:
    """(title, text) of a passage given as plain text, {"title", "text"}, or FlashRAG's {"contents"} whose
    first line is the (quoted) title."""
    if isinstance(passage, str):
        return "", passage.strip()
    if "text" in passage:
        return str(passage.get("title", "")).strip(), str(passage["text"]).strip()
    if "contents" in passage:
        title, _, text = str(passage["contents"]).partition("\n")
        return title.strip().strip('"'), text.strip()
    raise ValueError(f"a passage needs a 'text' or 'contents' field; got keys {sorted(passage)}")


def format_passages(passages: Sequence[Passage], numbered: bool = True, with_titles: bool = True) -> str:
    """The `{passages}`/`{document}` slot (D1): one line per passage in retrieval order,
    `Passage i (Title: t): text`, with the number and/or title left out when switched off."""
    if isinstance(passages, (str, Mapping)):
        raise TypeError("format_passages expects a sequence of passages, not a single passage")
    lines = []
    for i, passage in enumerate(passages, start=1):
        title, text = passage_title_and_text(passage)
        label = f"Passage {i}" if numbered else ""
        if with_titles and title:
            label = f"{label} (Title: {title})".strip()
        lines.append(f"{label}: {text}" if label else text)
    return "\n".join(lines)


def passages_document(row: dict) -> str:
    """The formatted top-k passages of a contexts row: Full's document and the refiners' `{passages}`."""
    return format_passages(row["passages"])


def _question(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    return question.strip()


def rag_qa_prompt(question: str, document: str) -> str:
    """Table 11; `document` is the formatted passages (Full) or an evidence text (Algorithm 1)."""
    return RAG_QA_TEMPLATE.format(question=_question(question), document=document)


def closed_book_qa_prompt(question: str) -> str:
    """Table 12."""
    return CLOSED_BOOK_QA_TEMPLATE.format(question=_question(question))


def cot_prompt(question: str, document: str) -> str:
    """Table 13."""
    return COT_TEMPLATE.format(question=_question(question), document=document)


def evidence_extraction_prompt(question: str, passages: str) -> str:
    """Table 14; `passages` is the formatted passages (empty when masked, see repro.formulas.masking)."""
    return EVIDENCE_EXTRACTION_TEMPLATE.format(question=_question(question), passages=passages)


def extraction_messages(question: str, passages: str) -> list[dict[str, str]]:
    """The chat prompt the policy extracts from: Table 14 over the formatted passages as the user turn (D3)."""
    return chat_messages(evidence_extraction_prompt(question, passages))


def search_r1_prompt(question: str) -> str:
    """Search-R1's template; like Search-R1 the question is stripped and gets a final '?' if it has none."""
    question = _question(question)
    return SEARCH_R1_TEMPLATE.format(question=question if question.endswith("?") else question + "?")


def chat_messages(user_prompt: str, system: str | None = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat turns for one filled template: an optional system message, then the user turn."""
    messages = [{"role": "system", "content": system}] if system is not None else []
    return messages + [{"role": "user", "content": user_prompt}]


def qa_messages(question: str, evidence: str | None) -> list[dict[str, str]]:
    """The QA generator's chat turns: Table 11 over the evidence, Table 12 without (None: closed-book)."""
    prompt = closed_book_qa_prompt(question) if evidence is None else rag_qa_prompt(question, evidence)
    return chat_messages(prompt)


def render_chat(tokenizer, messages: Sequence[Mapping[str, str]], assistant_prefix: str = "") -> str:
    """The exact text the model is prefilled with: the tokenizer's chat template with the generation prompt,
    followed by `assistant_prefix` (the start of the assistant turn that the model continues)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the tokenizer has no chat template")
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return text + assistant_prefix


# Neighbours' prompts (issue #18), verbatim from the seeds; data/paper/text/ holds the excerpts the tests compare
# them with. As in D2, typeset apostrophes (’) are written as ASCII '; the seeds' `code` and **bold** marks and
# ARENA's table borders (" |") are layout, not prompt text (D131).

# Eval-RAR (seed 003) App. A.1, "Prompt Template for Trajectory Generation" ("excel at" is sic); one paragraph.
EVAL_RAR_TEMPLATE = (
    "You are a helpful assistant excel at answering questions with multi-turn search engine calling. "
    "To answer questions, you must first reason through the available information using <think> and </think>. "
    "If you identify missing knowledge, you may issue a search request using <search> query </search> at any time. "
    "The retrieval system will provide you with the three most relevant documents enclosed in <information> and "
    "</information>. "
    "After each search, you must conduct an evaluation, reviewing the question and the retrieved documents "
    "comprehensively to determine if the question can be answered. "
    "If the question can be answered, clearly cite the source content from the search documents that supports "
    "your answer. "
    "If the question cannot be answered, specify what information is missing: entity information, relational "
    "information, or specific time/location details. "
    "Provide your evaluation using <evaluate> and </evaluate>. "
    "You may send multiple search requests if needed. "
    "Once you have sufficient information, provide a concise final answer using <answer> and </answer>. "
    "For example, <answer> Donald Trump </answer>. Question: {question}"
)

# ARENA (seed 004) Table 1: the structured prompt of the trained reader; {references} = numbered paragraphs.
ARENA_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question and gives some references. "
    "The assistant should answer the question based on the references.\n"
    "User's input will always contain:\n"
    "<question>[ the question to answer ]</question>\n"
    "<references>[ references starting with numbers ]</references>\n"
    "Assistant's response must contain EXACTLY three sections:\n"
    "<relevance> [list ONLY reference numbers that provide useful information in square brackets, e.g. [1,5]]"
    "</relevance>\n"
    "<analysis>[ combine information from relevant references to build the answer. Explicitly mention which "
    "references support each claim ]</analysis>\n"
    "<answer>[ answer with ONLY a short phrase or single word. no explanations ]</answer>\n"
    "User:\n"
    "<question>{question}</question>\n"
    "<references>{references}</references>"
)

# ARENA (seed 004) Table 8: the LLM-as-a-Judge prompt (GPT-4o, temperature 0.0).
ARENA_JUDGE_TEMPLATE = (
    "*************Consider a knowledge Q&A RAG task to test the capability of a testing model, the correct answer "
    "list is:*************\n"
    "{correct_answer}\n"
    "*************Here is the model's response:*************\n"
    "{model_response}\n"
    "*************Please check if the model's answer is correct. As long as the model's answer hits any item (or "
    "synonym) in the correct answer list, it can be considered correct. You only need to answer \"yes\" or "
    "\"no\".*************"
)


def eval_rar_prompt(question: str) -> str:
    """Eval-RAR App. A.1 for one question (stripped, otherwise as given)."""
    return EVAL_RAR_TEMPLATE.format(question=_question(question))


def arena_prompt(question: str, references: str) -> str:
    """ARENA Table 1; `references` is the numbered paragraphs (e.g. `format_passages`)."""
    return ARENA_TEMPLATE.format(question=_question(question), references=references)


def arena_judge_prompt(correct_answers: Sequence[str], model_response: str) -> str:
    """ARENA Table 8; the answer list is printed as a Python-style list (the seed does not show its format)."""
    return ARENA_JUDGE_TEMPLATE.format(correct_answer=list(correct_answers), model_response=model_response)
