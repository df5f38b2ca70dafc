"""The mirror's text and FlashRAG's rows: the embedded offline Wikipedia extracts (CORPUS_PAGES pages cut into
100-word passages, as DPR cut wiki-18), questions whose golden answer occurs in a passage (the generated "What is the
1968 film by Stanley Kubrick?" questions of `repro.data.generated` and the FanOutQA sub-questions answered by a page's
extract, `repro.data.fanoutqa`) drawn into the QUESTIONS splits, and each RUC-NLPIR/FlashRAG_datasets split file's rows
with the fields FlashRAG ships for its data set (NQ/TQA: id, question, golden_answers; HotpotQA: type, level,
supporting_facts, context with sentences; 2Wiki: context with content, evidences; MuSiQue: 20 paragraphs,
question_decomposition)."""

from __future__ import annotations

import dataclasses
import random

from repro.assets import FANOUTQA_DEV, OVOS_SUMMARIES
from repro.data.answers import has_answer
from repro.data.corpus import chunk_words, make_contents, ovos_pages
from repro.data.fanoutqa import open_domain_rows, read_fanoutqa
from repro.data.generated import describe_rows
from repro.data.sentences import punctuation_sentences
from repro.ops.rehearsal.files import sha256

CORPUS_PAGES = 600  # offline Wikipedia pages in the mirror's wiki-18 (about 700 passages)
PASSAGE_WORDS = 100  # wiki-18's passage length
# FlashRAG split files and their number of questions: every split paper-1p5b's data.datasets reads
QUESTIONS = {("nq", "train"): 48, ("nq", "dev"): 24, ("nq", "test"): 24,
             ("triviaqa", "train"): 48, ("triviaqa", "dev"): 24, ("triviaqa", "test"): 24,
             ("hotpotqa", "train"): 48, ("hotpotqa", "dev"): 24,
             ("2wikimultihopqa", "dev"): 24, ("musique", "dev"): 24}
PARAGRAPHS = {"hotpotqa": 10, "2wikimultihopqa": 10, "musique": 20}  # gold + distractors per row, as released


@dataclasses.dataclass(frozen=True)
class Question:
    question: str
    answers: list[str]
    title: str  # the page whose passage holds an answer
    passage: int  # that passage's index among the page's passages


@dataclasses.dataclass(frozen=True)
class Content:
    passages: list[dict]  # wiki-18 rows {"id", "contents"}, ids "0", "1", ... in file order
    page_passages: dict[str, list[str]]  # title -> the texts of its passages
    splits: dict[tuple[str, str], list[Question]]

    def texts(self) -> list[str]:
        """Everything the tokenizers are trained on: the passages, then the questions."""
        return [p["contents"] for p in self.passages] + [q.question for qs in self.splits.values() for q in qs]


def _answer_passage(texts: list[str], answers: list[str]) -> int | None:
    return next((i for i, text in enumerate(texts) if has_answer(text, answers)), None)


def build_content(seed: int) -> Content:
    """A deterministic corpus of CORPUS_PAGES pages and QUESTIONS questions whose answers occur in its passages."""
    pages = ovos_pages(OVOS_SUMMARIES.verified())
    chunks = {title: chunk_words(text, PASSAGE_WORDS) for title, text in pages.items()}
    whole = {"all": 1.0}
    generated = describe_rows(OVOS_SUMMARIES.verified(), set(pages), whole)
    fanout, _ = open_domain_rows(read_fanoutqa(FANOUTQA_DEV.verified()), pages, whole)
    pool, seen = [], set()
    for row in fanout + generated:
        title = row["metadata"]["evidence_title"]
        where = _answer_passage(chunks[title], row["golden_answers"])
        if where is not None and row["question"] not in seen:
            seen.add(row["question"])
            pool.append(Question(row["question"], row["golden_answers"], title, where))
    rng = random.Random(f"{seed}:questions")
    rng.shuffle(pool)
    wanted = sum(QUESTIONS.values())
    if len(pool) < wanted:
        raise ValueError(f"only {len(pool)} questions with an answer in their page, {wanted} wanted")
    splits, start = {}, 0
    for key, n in QUESTIONS.items():
        splits[key], start = pool[start:start + n], start + n
    chosen = {q.title for qs in splits.values() for q in qs}
    rest = sorted(set(pages) - chosen)
    chosen |= set(random.Random(f"{seed}:pages").sample(rest, max(0, CORPUS_PAGES - len(chosen))))
    page_passages, passages = {}, []
    for title in pages:  # the offline extracts' order, as wiki-18 keeps its dump's
        if title in chosen and chunks[title]:
            page_passages[title] = chunks[title]
            for text in chunks[title]:
                passages.append({"id": str(len(passages)), "contents": make_contents(title, text)})
    return Content(passages, page_passages, splits)


# --- FlashRAG_datasets ----------------------------------------------------------------------------------------


def _answer_sentence(sentences: list[str], answers: list[str]) -> int:
    return next((i for i, s in enumerate(sentences) if has_answer(s, answers)), 0)


Paragraph = tuple[str, str, bool]  # title, text, supporting


def _paragraphs(content: Content, q: Question, n: int, rng: random.Random) -> list[Paragraph]:
    """A distractor-setting row's `n` paragraphs, shuffled: the answer's passage, a second supporting passage (the
    bridge) and distractors, first passages of other pages that hold no answer."""
    titles = sorted(t for t in content.page_passages if t != q.title)
    bridge = rng.choice(titles)
    gold = [(q.title, content.page_passages[q.title][q.passage], True),
            (bridge, content.page_passages[bridge][0], True)]
    distractors = []
    for title in rng.sample(titles, len(titles)):
        text = content.page_passages[title][0]
        if title != bridge and not has_answer(text, q.answers):
            distractors.append((title, text, False))
        if len(distractors) == n - len(gold):
            break
    order = gold + distractors
    rng.shuffle(order)
    return order


def _bridge(paragraphs: list[Paragraph], q: Question) -> str:
    return next(title for title, _, gold in paragraphs if gold and title != q.title)


def _hex_id(seed: int, *key: object, digits: int) -> str:
    return sha256(":".join(map(str, (seed, *key))).encode())[:digits]


def _nq_row(q: Question, split: str, i: int) -> dict:
    """NQ: lower-case search queries without a question mark; no metadata."""
    return {"id": f"{split}_{i}", "question": q.question.rstrip("?").lower(), "golden_answers": q.answers}


def _triviaqa_row(q: Question, split: str, i: int) -> dict:
    """TriviaQA: the answer's normalised aliases beside it."""
    aliases = list(dict.fromkeys([*q.answers, *(a.lower() for a in q.answers)]))
    return {"id": f"{split}_{i}", "question": q.question, "golden_answers": aliases}


def _hotpotqa_row(q: Question, split: str, i: int, seed: int, rng: random.Random, content: Content) -> dict:
    """HotpotQA: type (bridge, or comparison, which Table 8 leaves out), level, supporting facts and the distractor
    context as sentence lists (every sentence after the first starts with its space, as HotpotQA splits them)."""
    paragraphs = _paragraphs(content, q, PARAGRAPHS["hotpotqa"], rng)
    sentences = [[s if k == 0 else " " + s for k, s in enumerate(punctuation_sentences(text))]
                 for _, text, _ in paragraphs]
    support = [(title, _answer_sentence(punctuation_sentences(text), q.answers))
               for title, text, gold in paragraphs if gold]
    metadata = {"type": "comparison" if i % 4 == 3 else "bridge", "level": ("easy", "medium", "hard")[i % 3],
                "supporting_facts": {"title": [t for t, _ in support], "sent_id": [s for _, s in support]},
                "context": {"title": [t for t, _, _ in paragraphs], "sentences": sentences}}
    return {"id": _hex_id(seed, "hotpotqa", split, i, digits=24), "question": q.question,
            "golden_answers": q.answers, "metadata": metadata}


def _wiki2_row(q: Question, split: str, i: int, seed: int, rng: random.Random, content: Content) -> dict:
    """2WikiMultihopQA: type, supporting facts, the context as `content` sentence lists, evidence triples."""
    paragraphs = _paragraphs(content, q, PARAGRAPHS["2wikimultihopqa"], rng)
    bridge = _bridge(paragraphs, q)
    answer_sentence = _answer_sentence(punctuation_sentences(content.page_passages[q.title][q.passage]), q.answers)
    metadata = {"type": ("compositional", "comparison", "inference", "bridge_comparison")[i % 4],
                "supporting_facts": {"title": [bridge, q.title], "sent_id": [0, answer_sentence]},
                "context": {"title": [t for t, _, _ in paragraphs],
                            "content": [punctuation_sentences(text) for _, text, _ in paragraphs]},
                "evidences": [[bridge, "related to", q.title], [q.title, "answer", q.answers[0]]]}
    return {"id": _hex_id(seed, "2wikimultihopqa", split, i, digits=32), "question": q.question,
            "golden_answers": q.answers, "metadata": metadata}


def _musique_row(q: Question, split: str, i: int, seed: int, rng: random.Random, content: Content) -> dict:
    """MuSiQue: 20 paragraphs with `is_supporting`, and the two-hop question decomposition."""
    paragraphs = _paragraphs(content, q, PARAGRAPHS["musique"], rng)
    index = {title: k for k, (title, _, _) in enumerate(paragraphs)}
    bridge = _bridge(paragraphs, q)
    hops = [rng.randrange(10**5, 10**6) for _ in range(2)]
    decomposition = [{"id": hops[0], "question": f"{bridge} >> linked page", "answer": q.title,
                      "paragraph_support_idx": index[bridge]},
                     {"id": hops[1], "question": f"#1 >> {q.question}", "answer": q.answers[0],
                      "paragraph_support_idx": index[q.title]}]
    metadata = {"answerable": True,
                "paragraphs": [{"idx": k, "title": title, "paragraph_text": text, "is_supporting": gold}
                               for k, (title, text, gold) in enumerate(paragraphs)],
                "question_decomposition": decomposition}
    return {"id": f"2hop__{hops[0]}_{hops[1]}", "question": q.question, "golden_answers": q.answers,
            "metadata": metadata}


def flashrag_rows(content: Content, name: str, split: str, seed: int) -> list[dict]:
    """One FlashRAG split file's rows, with the fields the real file carries for that dataset."""
    open_sets = {"nq": _nq_row, "triviaqa": _triviaqa_row}
    distractor_sets = {"hotpotqa": _hotpotqa_row, "2wikimultihopqa": _wiki2_row, "musique": _musique_row}
    rows = []
    for i, q in enumerate(content.splits[(name, split)]):
        if name in open_sets:
            rows.append(open_sets[name](q, split, i))
        else:
            rows.append(distractor_sets[name](q, split, i, seed, random.Random(f"{seed}:{name}:{split}:{i}"), content))
    return rows
