"""Generators loaded once per (model, adapter) and shared, with the id that enters a run's configuration.

    pool = ModelPool("transformers", dtype="bfloat16")
    generator, model_id = pool.get("data/tiny/assets/smollm2-135m-instruct", adapter=None)
"""

from __future__ import annotations

from repro.generation.base import Generator
from repro.generation.factory import make_generator
from repro.io import model_fingerprint


def generator_id(model: str, adapter: str | None, dtype: str) -> str:
    """What identifies a generator in a run's configuration: the weights' fingerprint (a hub id stands for itself),
    the adapter's, and the dtype (D87)."""
    return model_fingerprint(model) + (f"+lora:{model_fingerprint(adapter)}" if adapter else "") + f"@{dtype}"


class ModelPool:
    """Generators loaded once per (model, adapter) and shared by the methods of a study."""

    def __init__(self, backend: str = "transformers", dtype: str = "auto", progress: bool = True):
        self.backend, self.dtype, self.progress = backend, dtype, progress
        self._loaded: dict[tuple[str, str | None], tuple[Generator, str]] = {}

    def get(self, model: str, adapter: str | None = None) -> tuple[Generator, str]:
        """(generator, `generator_id`)."""
        key = (model, adapter)
        if key not in self._loaded:
            generator = make_generator(self.backend, model, adapter=adapter, dtype=self.dtype, progress=self.progress)
            self._loaded[key] = (generator, generator_id(model, adapter, self.dtype))
        return self._loaded[key]
