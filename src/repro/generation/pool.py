"""Generators loaded once and shared by the methods of a study, with the id that enters a run's configuration.

    with ModelPool("transformers", dtype="bfloat16") as pool:
        generator, model_id = pool.get("data/tiny/assets/smollm2-135m-instruct", adapter=None)

On the transformers backend there is one generator per (model, adapter), the adapter merged into its own copy.
On vLLM there is one engine per base model: its adapters are LoRA requests on that engine (`VLLMGenerator.
with_adapter`), and `options` (memory share, `max_model_len`, tensor parallel size, `enforce_eager`, ...) come from
the profile, for every model or (`get(..., options=)`) for one. With `data_parallel` ("auto": one replica per
`tensor_parallel_size` visible GPUs) that engine is a set of replicas in worker processes, each answering a
contiguous slice of every call's prompts; its adapters are still LoRA requests, sent to every replica. The `openai`
backend's generators are clients of a served model. `release(model)` ends one model's engine (all its replicas)
before another is started; `close()` ends them all.
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
    """Generators shared by the methods of a study (see the module docstring); a context manager."""

    def __init__(self, backend: str = "transformers", dtype: str = "auto", progress: bool = True,
                 options: dict | None = None):
        self.backend, self.dtype, self.progress = backend, dtype, progress
        self.options = dict(options or {})
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
            if self.backend == "vllm":
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

    def _engine(self, model: str, dtype: str, kwargs: dict) -> Generator:
        if model not in self._engines:
            options = {"enable_lora": True, **kwargs}
            self._engines[model] = make_generator("vllm", model, dtype=dtype, progress=self.progress, **options)
        return self._engines[model]

    @property
    def engines_alive(self) -> int:
        """Engines (vLLM) or models (transformers) this pool holds."""
        return len(self._engines) if self.backend == "vllm" else len(self._loaded)

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

    def __enter__(self) -> ModelPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
