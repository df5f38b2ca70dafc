"""Pick a backend by name (e.g. from a profile or a command-line flag)."""

from __future__ import annotations

from repro.generation.base import Generator

BACKENDS = ("transformers", "vllm", "openai")


def make_generator(backend: str, model: str, **kwargs) -> Generator:
    """A generator for `model` (a local directory or hub id; for "openai", the served model name).

    kwargs go to the backend's constructor: `TransformersGenerator` (adapter, dtype, attn_implementation, device,
    progress), `VLLMGenerator` (adapter, dtype, tensor_parallel_size, gpu_memory_utilization, max_model_len,
    max_lora_rank, enable_lora, enforce_eager, kv_cache_memory_bytes, cpu_reserved_cores, data_parallel, progress) or
    `OpenAIClientGenerator` (base_url, api_key, api_key_env, max_workers, timeout, max_retries, backoff, progress).
    Backends are imported only when chosen.
    """
    if backend == "transformers":
        from repro.generation.transformers_backend import TransformersGenerator

        return TransformersGenerator(model, **kwargs)
    if backend == "vllm":
        from repro.generation.vllm_backend import VLLMGenerator

        return VLLMGenerator(model, **kwargs)
    if backend == "openai":
        from repro.generation.openai_client import OpenAIClientGenerator

        return OpenAIClientGenerator(model, **kwargs)
    raise ValueError(f"unknown generation backend {backend!r}; choose one of {list(BACKENDS)}")
