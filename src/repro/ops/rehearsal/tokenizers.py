"""The mirror's tokenizers, trained on its text (`content.Content.texts`): a byte-level BPE for the Qwen2 models
(Qwen2's normalizer and split regex) and one for GPT-2, BERT's uncased WordPiece for the encoders, and sentencepiece
unigram models for XLM-R and DeBERTa-v2; with Qwen2.5's and DeepSeek-R1-Distill's added tokens and the tokenizer files
the repos carry beside tokenizer.json (vocab.json and merges.txt, tokenizer_config.json's added_tokens_decoder)."""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
from pathlib import Path

from repro.ops.rehearsal.files import Files

BPE_VOCAB = 8192  # byte-level BPE of the Qwen2 models (about 1.5 tokens a word on the mirror's text)
GPT2_VOCAB = 4096
WORDPIECE_VOCAB = 4096  # the BERT-family encoders' uncased WordPiece (DPR, e5, MiniLM, Contriever)
SPM_VOCAB = 2000  # sentencepiece models of XLM-R and DeBERTa-v2
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


def with_added(bpe, added: list[tuple[str, bool]]):
    """A copy of `bpe` with `added` appended in order (ids right after the BPE vocabulary)."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_str(bpe.to_str())
    for content, special in added:
        token = AddedToken(content, special=special, normalized=False)
        (tok.add_special_tokens if special else tok.add_tokens)([token])
    return tok


def vocab_and_merges(tok) -> Files:
    """vocab.json and merges.txt as `tokenizers` saves a BPE model."""
    with tempfile.TemporaryDirectory() as d:
        tok.model.save(d)
        return {name: (Path(d) / name).read_bytes() for name in ("vocab.json", "merges.txt")}


def added_decoder(added: list[tuple[str, bool]], first: int) -> dict:
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
