"""Readers for the paper's datasets, all producing FlashRAG rows (see `repro.data.qa`).

- FlashRAG jsonl (`<source>/<dataset>/<split>.jsonl`) for NQ, TriviaQA, HotpotQA, 2WikiMultihopQA and
  MuSiQue, from a local directory or, where the hub is reachable, the `RUC-NLPIR/FlashRAG_datasets` repo.
- The original releases of the distractor-setting datasets: MuSiQue's jsonl (`paragraphs` with
  `is_supporting`) and the HotpotQA / 2WikiMultihopQA JSON list (`context` = [[title, sentences]]).

`distractor_passages` turns the paragraphs shipped with a question into passages in corpus format; it
reads the MuSiQue layout (`metadata.paragraphs`) and the HotpotQA/2Wiki layout (`metadata.context` with
`title` and `content` or `sentences`), whichever the row carries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from repro.data.corpus import make_contents
from repro.data.qa import read_qa, validate_qa_row
from repro.io import InputError, enumerate_jsonl, read_json


def flashrag_path(source: str, dataset: str, split: str) -> Path:
    """`<source>/<dataset>/<split>.jsonl` if `source` is a local directory; otherwise `source` is a hub
    dataset repo (e.g. RUC-NLPIR/FlashRAG_datasets) and the file is downloaded into the hub cache."""
    if Path(source).is_dir():
        path = Path(source) / dataset / f"{split}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such FlashRAG split file")
        return path
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id=source, filename=f"{dataset}/{split}.jsonl", repo_type="dataset"))
    except Exception as err:  # offline mode, no network, unknown repo: all end the same way for the user
        raise FileNotFoundError(
            f"cannot get {dataset}/{split}.jsonl from the hub dataset repo '{source}' ({type(err).__name__}: "
            f"{err}); download it elsewhere and point the profile's `source` at a local directory") from None


def _require(row: dict, field: str, kind: type | tuple, path, line: int):
    if field not in row:
        raise InputError(path, "missing", line=line, field=field)
    if not isinstance(row[field], kind):
        raise InputError(path, f"unexpected type {type(row[field]).__name__}", line=line, field=field)
    return row[field]


def read_musique(path: str | os.PathLike) -> Iterator[dict]:
    """MuSiQue's original jsonl (id, question, answer, answer_aliases, paragraphs, ...) as FlashRAG rows."""
    for line, row in enumerate_jsonl(path):
        answer = _require(row, "answer", str, path, line)
        aliases = row.get("answer_aliases") or []
        paragraphs = _require(row, "paragraphs", list, path, line)
        metadata = {"paragraphs": paragraphs, "answerable": row.get("answerable", True),
                    "question_decomposition": row.get("question_decomposition", [])}
        flash = {"id": _require(row, "id", str, path, line), "question": _require(row, "question", str, path, line),
                 "golden_answers": [answer, *aliases], "metadata": metadata}
        yield _checked_distractor_row(flash, path, line)


def read_wiki_multihop(path: str | os.PathLike) -> Iterator[dict]:
    """HotpotQA / 2WikiMultihopQA original JSON (a list of {_id, question, answer, context, supporting_facts,
    type}) as FlashRAG rows with FlashRAG's metadata layout (`context` = {title, content})."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(path, f"expected a JSON list of questions, got {type(data).__name__}")
    for item_no, row in enumerate(data, start=1):
        where = f"{path}[item {item_no}]"
        if not isinstance(row, dict):
            raise InputError(where, f"expected an object, got {type(row).__name__}")
        context = _require(row, "context", list, where, None)
        for pair in context:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                    and isinstance(pair[1], list)):
                raise InputError(where, f"expected [title, [sentences]], got {pair!r}"[:200], field="context")
        facts = row.get("supporting_facts", [])
        metadata = {"type": row.get("type"), "level": row.get("level"),
                    "context": {"title": [t for t, _ in context], "content": [s for _, s in context]},
                    "supporting_facts": {"title": [t for t, _ in facts], "sent_id": [i for _, i in facts]}}
        flash = {"id": _require(row, "_id", str, where, None), "question": _require(row, "question", str, where, None),
                 "golden_answers": [_require(row, "answer", str, where, None)], "metadata": metadata}
        yield _checked_distractor_row(flash, where, None)


def _checked_distractor_row(row: dict, path, line: int | None) -> dict:
    row = validate_qa_row(row, path, line)
    distractor_passages(row, path, line)
    return row


def distractor_passages(row: dict, path: str | os.PathLike = "<row>", line: int | None = None) -> list[dict]:
    """The paragraphs shipped with a distractor-setting question, in their given order, as
    `{"id", "contents", "is_supporting"}`; ids are the corpus ids when present, else `<row id>#<idx>`."""
    metadata = row.get("metadata", {})
    if "paragraphs" in metadata:
        return [_musique_paragraph(row["id"], p, path, line) for p in _field(metadata, "paragraphs", list, path, line)]
    if "context" in metadata:
        return _context_paragraphs(row["id"], metadata, path, line)
    raise InputError(path, "distractor-setting row without paragraphs (expected metadata.paragraphs or "
                           "metadata.context)", line=line, field="metadata")


def _field(obj: dict, field: str, kind, path, line):
    if not isinstance(obj, dict) or not isinstance(obj.get(field), kind):
        raise InputError(path, f"missing or not a {getattr(kind, '__name__', kind)}", line=line,
                         field=f"metadata.{field}")
    return obj[field]


def _musique_paragraph(row_id: str, p: dict, path, line) -> dict:
    title = _field(p, "title", str, path, line)
    text = _field(p, "paragraph_text", str, path, line)
    pid = p.get("id", f"{row_id}#{p.get('idx', '')}")
    return {"id": str(pid), "contents": make_contents(title, text), "is_supporting": bool(p.get("is_supporting"))}


def _context_paragraphs(row_id: str, metadata: dict, path, line) -> list[dict]:
    context = _field(metadata, "context", dict, path, line)
    titles = _field(context, "title", list, path, line)
    bodies = context.get("content", context.get("sentences"))
    if not isinstance(bodies, list) or len(bodies) != len(titles):
        raise InputError(path, "expected a list of sentence lists as long as context.title", line=line,
                         field="metadata.context.content")
    supporting = set(metadata.get("supporting_facts", {}).get("title", []))
    passages = []
    for idx, (title, sentences) in enumerate(zip(titles, bodies)):
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise InputError(path, f"paragraph {idx}: expected a list of sentences", line=line,
                             field="metadata.context.content")
        text = " ".join(s.strip() for s in sentences)
        passages.append({"id": f"{row_id}#{idx}", "contents": make_contents(title, text),
                         "is_supporting": title in supporting})
    return passages


def read_flashrag(path: str | os.PathLike, setting: str = "open") -> Iterator[dict]:
    """Validated FlashRAG rows; in the distractor setting every row must carry its paragraphs."""
    yield from read_qa(path, check=distractor_passages if setting == "distractor" else None)
