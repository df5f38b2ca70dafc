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
    """Table 14; `passages` is the formatted passages (empty when masked, see repro.masking)."""
    return EVIDENCE_EXTRACTION_TEMPLATE.format(question=_question(question), passages=passages)


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
