"""Prompt to token ids with a Hugging Face tokenizer, shared by the transformers and vLLM backends."""

from __future__ import annotations

from repro.generation.base import Prompt


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
