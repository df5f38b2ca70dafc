"""The one generation interface every backend implements.

A prompt is either a plain string (tokenised as is) or a list of chat messages `{"role", "content"}`, which
gets the model's chat template with `add_generation_prompt=True`. `Generator.generate` returns completions
only (never the prompt), flattened prompt-major: with `n` samples per prompt, completion `j` of prompt `i`
is at index `i * n + j`. Each completion is cut at the first stop string, which is excluded unless
`include_stop=True` (EviOmni's extractor stops at `</extract>`; the tag readers in `repro.formulas.tags` accept both).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Union

Message = Mapping[str, str]
Prompt = Union[str, Sequence[Message]]


@dataclasses.dataclass(frozen=True)
class GenerationParams:
    """Decoding settings shared by all backends.

    Greedy decoding unless `do_sample`; when sampling, only `temperature` and `top_p` shape the distribution
    (no top-k, no repetition penalty, whatever the model's own generation config says). `batch_size` is
    the number of prompts per forward batch of the transformers backend (each expands to `n` rows); the
    engine-batched backends (vLLM, HTTP) ignore it.
    """

    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    include_stop: bool = False
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    n: int = 1
    batch_size: int = 8

    def __post_init__(self):
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        for name in ("max_new_tokens", "n", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (use do_sample=False for greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n > 1 and not self.do_sample:
            raise ValueError(f"n={self.n} samples per prompt need do_sample=True (greedy samples are identical)")


def check_prompts(prompts: Sequence[Prompt]) -> list[Prompt]:
    """The prompts as a list, or a TypeError naming the first index that is neither a string nor messages."""
    if isinstance(prompts, (str, Mapping)):
        raise TypeError(f"prompts must be a list of prompts, got a single {type(prompts).__name__}")
    checked = list(prompts)
    for i, prompt in enumerate(checked):
        if isinstance(prompt, str):
            continue
        if not isinstance(prompt, Sequence) or not prompt:
            raise TypeError(f"prompt {i} must be a string or a non-empty list of chat messages, "
                            f"got {type(prompt).__name__}")
        for message in prompt:
            if not (isinstance(message, Mapping) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                raise TypeError(f"prompt {i} has a message that is not {{'role': str, 'content': str}}: "
                                f"{message!r}")
    return checked


def cut_at_stop(text: str, stop: Sequence[str], include_stop: bool = False) -> str:
    """`text` up to its earliest stop string (ties: the longer one), which is kept iff `include_stop`."""
    hits = [(i, -len(s), s) for s in stop if (i := text.find(s)) >= 0]
    if not hits:
        return text
    start, _, found = min(hits)
    return text[: start + len(found)] if include_stop else text[:start]


class Generator(abc.ABC):
    """A text generator: `generate(prompts, params) -> completions` (see the module docstring).

    A generator is a context manager: `close()` (idempotent) releases what it holds. Engines that own
    processes or device memory (vLLM) override it; for the others it does nothing.
    """

    def close(self) -> None:
        """Release the generator's model or engine; it must not be used afterwards."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, prompts: Sequence[Prompt], params: GenerationParams | None = None) -> list[str]:
        prompts = check_prompts(prompts)
        params = params or GenerationParams()
        if not prompts:
            return []
        completions = self._generate(prompts, params)
        if len(completions) != len(prompts) * params.n:
            raise RuntimeError(f"{type(self).__name__} returned {len(completions)} completions for "
                               f"{len(prompts)} prompts x n={params.n}")
        return completions

    @abc.abstractmethod
    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        """Completions for validated, non-empty `prompts`, prompt-major, already cut at the stop strings."""
