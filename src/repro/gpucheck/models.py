"""The check's models: random weights in the real configs' shapes (the rehearsal's copies of Qwen2.5-1.5B's and -7B's
config.json and BERT-base's, `repro.ops.rehearsal.repos`), with tokenizers the rehearsal trains.

The Qwen tokenizer is the rehearsal's byte-level BPE (8,192 tokens trained on its text) widened to Qwen2.5's layout:
151,643 BPE tokens (the extra ones concatenations of its tokens and single bytes, each with its merge), then Qwen's 22
added tokens at their real ids (151,643 = <|endoftext|>, 151,645 = <|im_end|>) and Qwen2.5's chat template. A random
model's logits spread over the whole vocabulary, so every id it samples must decode to text: with the 8,192-token
BPE, 19 tokens in 20 would decode to nothing (D221).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from repro.io import atomic_dir, write_text
from repro.ops.rehearsal import repos, weights
from repro.ops.rehearsal.templates import QWEN2_5_CHAT_TEMPLATE
from repro.ops.rehearsal.tokenizers import QWEN_ADDED, QWEN_SPECIAL, added_decoder, with_added

QWEN_BPE_SIZE = repos.QWEN_FIRST_ADDED  # 151,643 BPE tokens before the added ones
BPE_FILE = "qwen2.5-bpe.json"  # the rehearsal's BPE, as `tokenizers` writes it
WORDPIECE_FILE = "bert-wordpiece.json"
CONFIGS = {"qwen2.5-1.5b": repos.QWEN2_5_1P5B, "qwen2.5-7b": repos.QWEN2_5_7B}
DPR_CONFIG = {**repos.BERT_CONFIG, "architectures": ["DPRContextEncoder"], "model_type": "dpr", "projection_dim": 0}
TINY = {"qwen": repos.QWEN2_TINY, "bert": repos.ENCODER_TINY}  # the rehearsal's tiny sizes; vocabularies kept


def write_tokenizer_sources(out: Path, seed: int = 0) -> Path:
    """The rehearsal's Qwen BPE and BERT WordPiece (trained on its text, about 10 s) as two tokenizer.json files."""
    from repro.ops.rehearsal.content import build_content
    from repro.ops.rehearsal.tokenizers import train_tokenizers

    toks = train_tokenizers(build_content(seed).texts())
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / BPE_FILE, toks.qwen_bpe.to_str())
    write_text(out / WORDPIECE_FILE, toks.wordpiece.to_str())
    return out


def widened_bpe(bpe_json: str, size: int = QWEN_BPE_SIZE):
    """The BPE of `bpe_json` grown to `size` tokens: token + byte-character concatenations in a fixed order, each new
    token with its merge, so that the widened model encodes and decodes like a trained one."""
    from tokenizers import Tokenizer

    spec = json.loads(bpe_json)
    vocab, merges = spec["model"]["vocab"], spec["model"]["merges"]
    base = sorted(vocab, key=vocab.get)
    alphabet = [t for t in base if len(t) == 1]
    for token in base:
        for char in alphabet:
            if len(vocab) >= size:
                break
            if token + char not in vocab:
                vocab[token + char] = len(vocab)
                merges.append([token, char])
    if len(vocab) < size:
        raise ValueError(f"{len(base)} BPE tokens cannot be widened to {size}")
    return Tokenizer.from_str(json.dumps(spec))


def write_qwen_tokenizer(sources: Path, out: Path) -> None:
    """tokenizer.json and tokenizer_config.json of Qwen2.5-Instruct's layout (ids, added tokens, chat template)."""
    tok = with_added(widened_bpe((sources / BPE_FILE).read_text(encoding="utf-8")), QWEN_ADDED)
    config = {"add_bos_token": False, "add_prefix_space": False,
              "added_tokens_decoder": added_decoder(QWEN_ADDED, QWEN_BPE_SIZE),
              "additional_special_tokens": list(QWEN_SPECIAL[1:]), "bos_token": None,
              "chat_template": QWEN2_5_CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
              "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 131072,
              "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
              "unk_token": None}
    write_text(out / "tokenizer.json", tok.to_str())
    write_text(out / "tokenizer_config.json", json.dumps(config, indent=2))


def write_bert_tokenizer(sources: Path, out: Path) -> None:
    shutil.copyfile(sources / WORDPIECE_FILE, out / "tokenizer.json")
    write_text(out / "tokenizer_config.json", json.dumps(repos.BERT_TOKENIZER_CONFIG, indent=2))


def random_causal_lm(config: dict, seed: int, device: str):
    """A bf16 causal LM with `config`'s shape, initialised from `seed` on `device` (a 7B model in seconds on a GPU)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), dtype=torch.bfloat16).eval()


def build_causal_lm(name: str, tiny: bool, sources: Path, out: Path, device: str, seed: int = 0) -> Path:
    """A random Qwen2 model directory: the real config (tiny: the rehearsal's sizes, the real vocabulary), bf16
    safetensors and the widened tokenizer."""
    config = {**CONFIGS[name], **(TINY["qwen"] if tiny else {})}
    if out.exists():
        return out
    with atomic_dir(out) as tmp:
        from transformers import GenerationConfig

        model = random_causal_lm(config, seed, device)
        model.generation_config = GenerationConfig(
            **{k: v for k, v in repos.INSTRUCT_GENERATION.items() if k != "transformers_version"})
        model.save_pretrained(tmp, safe_serialization=True, max_shard_size="5GB")
        del model
        write_qwen_tokenizer(sources, tmp)
    return out


def build_encoder(tiny: bool, sources: Path, out: Path, device: str, seed: int = 0) -> Path:
    """A random DPR context encoder of BERT-base's shape (tiny: the rehearsal's sizes) with the WordPiece."""
    config = {**DPR_CONFIG, **(TINY["bert"] if tiny else {})}
    if out.exists():
        return out
    with atomic_dir(out) as tmp:
        weights.model(config, "DPRContextEncoder", seed).save_pretrained(tmp, safe_serialization=True)
        write_bert_tokenizer(sources, tmp)
    return out
