"""Generation with vLLM's offline engine (GPU). vLLM is imported lazily: it is an optional extra
(`pip install repro[gpu]`) and cannot be installed on a CPU-only machine."""

from __future__ import annotations

from repro.generation.base import GenerationParams, Generator, Prompt
from repro.generation.prompting import encode


class VLLMGenerator(Generator):
    """`vllm.LLM` on a local directory or hub id, optionally serving one LoRA adapter for every request.

    Prompts are tokenised here (chat template through the engine's tokenizer) and sent as token ids in one
    `LLM.generate` call; vLLM schedules the batches itself, so `GenerationParams.batch_size` is unused.
    """

    def __init__(self, model: str, *, adapter: str | None = None, dtype: str = "auto",
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 max_model_len: int | None = None, max_lora_rank: int = 16, progress: bool = True):
        from vllm import LLM

        lora = dict(enable_lora=True, max_lora_rank=max_lora_rank) if adapter is not None else {}
        self.llm = LLM(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                       gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                       trust_remote_code=False, **lora)
        self.tokenizer = self.llm.get_tokenizer()
        self.lora_request = None
        if adapter is not None:
            from vllm.lora.request import LoRARequest

            self.lora_request = LoRARequest("adapter", 1, adapter)
        self.progress = progress

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
        requests = [{"prompt_token_ids": encode(self.tokenizer, p)} for p in prompts]
        outputs = self.llm.generate(requests, self._sampling_params(params), use_tqdm=self.progress,
                                    lora_request=self.lora_request)
        # vLLM returns one RequestOutput per prompt, in input order, each with n completions.
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        return [c.text for output in outputs for c in sorted(output.outputs, key=lambda c: c.index)]
