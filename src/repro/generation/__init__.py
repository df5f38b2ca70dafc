"""Text generation behind one interface: `make_generator(backend, model, **kwargs).generate(prompts, params)`.

Backends: `transformers` (CPU/GPU, batched), `vllm` (GPU) and `openai` (any OpenAI-compatible server).
See `repro.generation.base` for the prompt and output contract; `repro.generation.pool` shares loaded generators.
"""

from repro.generation.base import GenerationParams, Generator, Message, Prompt, cut_at_stop
from repro.generation.factory import BACKENDS, make_generator

__all__ = ["BACKENDS", "GenerationParams", "Generator", "Message", "Prompt", "cut_at_stop", "make_generator"]
