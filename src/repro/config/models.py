"""The models every stage reads (`models`)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.schema import ConfigError


# The keyword arguments of each generation backend's constructor (repro.generation: TransformersGenerator,
# VLLMGenerator, OpenAIClientGenerator; tests/test_config.py keeps them in sync), against which the `options`
# dicts of a profile are checked at load time (D107). "progress" is always set by the caller.
GENERATOR_OPTIONS = {
    "transformers": ("adapter", "dtype", "attn_implementation", "device", "progress"),
    "vllm": ("adapter", "dtype", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "max_lora_rank",
             "enable_lora", "enforce_eager", "kv_cache_memory_bytes", "cpu_reserved_cores", "data_parallel",
             "progress"),
    "openai": ("base_url", "api_key", "api_key_env", "max_workers", "timeout", "max_retries", "backoff",
               "max_retry_after", "deadline", "cache_path", "progress"),
    "heuristic": (),
}


def check_generator_options(options: dict, backend: str, where: str, set_by_caller: tuple[str, ...] = ("progress",)):
    """ConfigError naming the key path if `options` holds a name the backend's constructor does not take (or one
    the caller sets itself)."""
    allowed = [name for name in GENERATOR_OPTIONS[backend] if name not in set_by_caller]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown} for backend {backend}; allowed: {allowed}")
    replicas = options.get("data_parallel")  # engine replicas (repro.generation.sharding)
    if replicas not in (None, "auto") and (type(replicas) is not int or replicas < 1):
        raise ConfigError(f"{where}.data_parallel: 'auto', null or a replica count >= 1, got {replicas!r}")


@dataclasses.dataclass(frozen=True)
class ModelsConfig:
    """Model references: `embedded:<name>` (materialised under data/assets by repro.assets), a local
    directory, or a Hugging Face hub id (paper profiles, on machines that can reach the weights)."""

    extractor: str = dataclasses.field(
        metadata={"help": "the policy trained by GRPO (EviOmni) and the backbone of FilCo/SEER/CoT"})
    generator: str = dataclasses.field(metadata={"help": "the LoRA QA generator's base model (Appendix A.2)"})
    agents: list[str] = dataclasses.field(metadata={"help": "Search-R1 agents of the agentic study (Table 5)"})
    released_extractor: str | None = dataclasses.field(
        default=None, metadata={"help": "the authors' EviOmni checkpoint, for inference-only runs"})
    dtype: typing.Literal["float32", "bfloat16", "float16", "auto"] = dataclasses.field(
        default="float32", metadata={"help": "weights when training"})
    inference_dtype: typing.Literal["float32", "bfloat16", "float16", "auto"] | None = dataclasses.field(
        default=None,
        metadata={"help": "weights when only generating or scoring (evaluation, latency, SEER's sampling); None: "
                          "`dtype` (D87)"})

    @property
    def inference(self) -> str:
        """The dtype of the models that only run inference."""
        return self.inference_dtype or self.dtype
