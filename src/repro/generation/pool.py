"""Generators loaded once and shared by the methods of a study, with the id that enters a run's configuration.

    with ModelPool("transformers", dtype="bfloat16") as pool:
        generator, model_id = pool.get("data/tiny/assets/smollm2-135m-instruct", adapter=None)

On the transformers backend there is one generator per (model, adapter), the adapter merged into its own copy.
On vLLM there is one engine per base model: its adapters are LoRA requests on that engine (`VLLMGenerator.
with_adapter`). Only the engines of the base models named in `adapters_on` reserve LoRA slots, since every linear
layer of such an engine runs through vLLM's LoRA wrapper and extra CUDA graphs are captured for it; the others serve
their weights as they are. With `merge_root`, an adapter is instead merged into a plain copy of its base model (in a
scratch directory under `merge_root`, removed when the pool closes) and served by an engine of its own, without LoRA
kernels: Table 4 times models, not adapters (D213). `options` (memory share, `max_model_len`, tensor parallel size,
`enforce_eager`, ...) come from
the profile, for every model or (`get(..., options=)`) for one. With `data_parallel` ("auto": one replica per
`tensor_parallel_size` visible GPUs) that engine is a set of replicas in worker processes, each answering a
contiguous slice of every call's prompts; its adapters are still LoRA requests, sent to every replica. The `openai`
backend's generators are clients of a served model. `release(model)` ends one model's engine (all its replicas)
before another is started; `close()` ends them all.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from repro.generation.adapters import merge_adapter
from repro.generation.base import Generator
from repro.generation.factory import make_generator
from repro.io import model_fingerprint


def generator_id(model: str, adapter: str | None, dtype: str) -> str:
    """What identifies a generator in a run's configuration: the weights' fingerprint (a hub id stands for itself),
    the adapter's, and the dtype (D87)."""
    return model_fingerprint(model) + (f"+lora:{model_fingerprint(adapter)}" if adapter else "") + f"@{dtype}"


class ModelPool:
    """Generators shared by the methods of a study (see the module docstring); a context manager."""

    def __init__(self, backend: str = "transformers", dtype: str = "auto", progress: bool = True,
                 options: dict | None = None, adapters_on: Collection[str] = (), merge_root: str | Path | None = None):
        self.backend, self.dtype, self.progress = backend, dtype, progress
        self.options = dict(options or {})
        self.adapters_on = frozenset(adapters_on)  # vLLM: the base models whose engines serve adapters
        self.merge_root = merge_root
        self._merged: Path | None = None  # the scratch directory of the merged copies
        self._engines: dict[str, Generator] = {}  # vLLM: one engine per base model
        self._loaded: dict[tuple[str, str | None], tuple[Generator, str]] = {}
        self._settings: dict[str, dict] = {}  # the options each loaded model was started with

    def get(self, model: str, adapter: str | None = None, options: dict | None = None) -> tuple[Generator, str]:
        """(generator, `generator_id`). `options` add to or override the pool's for `model` (its `dtype`
        included); a model is loaded once, so a later `get` must not ask for other options."""
        settings = {**self.options, **(options or {})}
        if self._settings.setdefault(model, settings) != settings:
            raise ValueError(f"{model} is loaded with options {self._settings[model]}; a pool loads a model once, "
                             f"so it cannot also load it with {settings}")
        key = (model, adapter)
        if key not in self._loaded:
            kwargs = dict(settings)
            dtype = kwargs.pop("dtype", self.dtype)
            if self.backend == "vllm" and adapter is not None and self.merge_root is not None:  # an engine of its own
                generator = make_generator("vllm", self._merged_copy(model, adapter, dtype), dtype=dtype,
                                           progress=self.progress, **{"enable_lora": False, **kwargs})
            elif self.backend == "vllm":
                if adapter is not None and model not in self.adapters_on:
                    raise ValueError(f"{model}: its engine serves no adapter ({adapter}); the pool reserves LoRA slots "
                                     f"only on adapters_on={sorted(self.adapters_on)}")
                generator = self._engine(model, dtype, kwargs).with_adapter(adapter)
            elif self.backend == "openai":  # a served model: no weights here, so no adapter or dtype
                if adapter is not None:
                    raise ValueError(f"the openai backend serves {model} as it is; it takes no adapter ({adapter})")
                generator = make_generator(self.backend, model, progress=self.progress, **kwargs)
            else:
                generator = make_generator(self.backend, model, adapter=adapter, dtype=dtype, progress=self.progress,
                                           **kwargs)
            self._loaded[key] = (generator, generator_id(model, adapter, dtype))
        return self._loaded[key]

    def _merged_copy(self, model: str, adapter: str, dtype: str) -> str:
        if self._merged is None:
            Path(self.merge_root).mkdir(parents=True, exist_ok=True)
            self._merged = Path(tempfile.mkdtemp(prefix="merged-adapters-", dir=self.merge_root))
        out = self._merged / hashlib.sha256(generator_id(model, adapter, dtype).encode()).hexdigest()[:16]
        return str(out if out.exists() else merge_adapter(model, adapter, out, dtype))

    def _engine(self, model: str, dtype: str, kwargs: dict) -> Generator:
        if model not in self._engines:
            options = {"enable_lora": model in self.adapters_on, **kwargs}
            self._engines[model] = make_generator("vllm", model, dtype=dtype, progress=self.progress, **options)
        return self._engines[model]

    @property
    def engines_alive(self) -> int:
        """Engines (vLLM) or models (transformers) this pool holds."""
        if self.backend != "vllm":
            return len(self._loaded)
        return len(self._engines) + (sum(adapter is not None for _, adapter in self._loaded) if self.merge_root else 0)

    def release(self, model: str) -> None:
        """Close every generator of `model` (and its engine) so that its memory is free for the next one."""
        for key in [k for k in self._loaded if k[0] == model]:
            self._loaded.pop(key)[0].close()
        if (engine := self._engines.pop(model, None)) is not None:
            engine.close()
        self._settings.pop(model, None)

    def close(self) -> None:
        for model in {*self._engines, *(m for m, _ in self._loaded)}:
            self.release(model)
        if self._merged is not None:
            shutil.rmtree(self._merged, ignore_errors=True)
            self._merged = None

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
