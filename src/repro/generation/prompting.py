"""Prompt to token ids with a Hugging Face tokenizer, shared by the transformers and vLLM backends, and the
tokenizer itself, loaded once per process."""

from __future__ import annotations

import functools
from pathlib import Path

from repro.generation.base import Prompt


def load_tokenizer(path: str | Path):
    """The Hugging Face tokenizer saved at `path`, loaded once per process while the directory's files are unchanged
    (a load parses tokenizer.json, then deep-copies the parsed tokenizer: 0.2-0.4 s of a CPU core) and shared by every
    caller: read it, never change it. A trainer, which sets its padding side and pad token, loads its own with
    `AutoTokenizer`."""
    directory = Path(path)
    if not directory.is_dir():  # a hub id: loaded as is
        return _load_tokenizer(str(path), ())
    stats = ((f.name, f.stat()) for f in sorted(directory.iterdir()) if f.is_file())
    return _load_tokenizer(str(directory.resolve()), tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats))


@functools.lru_cache(maxsize=8)
def _load_tokenizer(path: str, stamps: tuple):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, trust_remote_code=False)


def render(tokenizer, prompt: Prompt) -> str:
    """A plain string as is; chat messages through the tokenizer's chat template, ready for the reply."""
    if isinstance(prompt, str):
        return prompt
    if not tokenizer.chat_template:
        raise ValueError(f"{tokenizer.name_or_path} has no chat template; pass plain-string prompts instead")
    return tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)


def encode(tokenizer, prompt: Prompt) -> list[int]:
    """Token ids of one prompt. A plain string gets the tokenizer's usual special tokens (e.g. BOS); a
    rendered chat template already contains them, so they are not added twice."""
    return tokenizer(render(tokenizer, prompt), add_special_tokens=isinstance(prompt, str))["input_ids"]
