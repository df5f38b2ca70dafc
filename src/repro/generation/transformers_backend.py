"""Batched generation with transformers' `generate`, on CPU or GPU.

Prompts are sorted by length and left-padded into batches (outputs come back in input order); stop strings
end each row independently (`StopStringCriteria` marks a row done while the others continue, and its text
is cut at the stop afterwards). The model's own sampling defaults (e.g. Qwen's top-k 20 and repetition
penalty 1.05) are dropped at load, so only `GenerationParams` decides how tokens are picked. On a CPU, decode steps
attend with `sdpa_grouped_decode` (D146, D168), not SDPA's flash kernel.
"""

from __future__ import annotations

import functools

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, GenerationConfig, StoppingCriteriaList
from transformers.generation.stopping_criteria import StopStringCriteria

from repro.generation.attention import SDPA_GROUPED_DECODE
from repro.generation.base import GenerationParams, Generator, Prompt, cut_at_stop
from repro.generation.prompting import encode, load_tokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def has_native_bf16(device: torch.device) -> bool:
    """Whether bf16 matmuls run natively (Ampere+ GPUs; CPUs with AVX512-BF16 or AMX), i.e. faster than fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return False


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """One of float32 / bfloat16 / float16, or "auto": bfloat16 where the hardware has it natively, else fp32."""
    if dtype == "auto":
        return torch.bfloat16 if has_native_bf16(device) else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {[*DTYPES, 'auto']}, got {dtype!r}")
    return DTYPES[dtype]


def resolve_attention(attn_implementation: str | None, device: torch.device) -> str | None:
    """"auto": `sdpa_grouped_decode` on a CPU (decode steps without SDPA's CPU flash kernel, D168), transformers'
    default elsewhere; any other value (None: transformers' default) is passed on as given."""
    if attn_implementation == "auto":
        return SDPA_GROUPED_DECODE if device.type == "cpu" else None
    return attn_implementation


@functools.lru_cache(maxsize=16)
def stop_string_criteria(tokenizer, stop: tuple[str, ...]) -> StopStringCriteria:
    """transformers' criteria for `stop` under a (shared, `load_tokenizer`) tokenizer, built once per process:
    building one scans the vocabulary (0.3-0.5 s of a CPU core), and it keeps no state between calls."""
    return StopStringCriteria(tokenizer, list(stop))


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids and attention mask of `rows`, padded on the left to the longest row."""
    width = max(map(len, rows))
    input_ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
    attention_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return input_ids, attention_mask


class TransformersGenerator(Generator):
    """A causal LM from a local directory or hub id (safetensors only, no remote code), optionally with a
    LoRA adapter merged in. `device` defaults to CUDA when available.

    Sampling is seeded once per `generate` call, so the same prompts with the same params (batch_size
    included) give the same samples on the same hardware; unlike vLLM's per-request seeds, a prompt's
    samples depend on the batch it shares.
    """

    def __init__(self, model: str, *, adapter: str | None = None, dtype: str = "auto",
                 attn_implementation: str | None = "auto", device: str | None = None, progress: bool = True):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.tokenizer = load_tokenizer(model)
        attention = resolve_attention(attn_implementation, self.device)
        self.model = AutoModelForCausalLM.from_pretrained(
            model, dtype=resolve_dtype(dtype, self.device), device_map=self.device, use_safetensors=True,
            trust_remote_code=False, **({"attn_implementation": attention} if attention else {}))
        if adapter is not None:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, adapter).merge_and_unload()
        self.model.eval()
        self.eos_ids = self._eos_ids()
        pad_id = self.tokenizer.pad_token_id
        self.pad_id = self.eos_ids[0] if pad_id is None else pad_id
        self.model.generation_config = GenerationConfig(
            bos_token_id=self.model.generation_config.bos_token_id, eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id)
        self.progress = progress

    def _eos_ids(self) -> list[int]:
        configured = self.model.generation_config.eos_token_id
        ids = [configured] if isinstance(configured, int) else list(configured or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        if not ids:
            raise ValueError(f"{self.tokenizer.name_or_path} defines no end-of-sequence token")
        return ids

    def _stopping(self, stop: tuple[str, ...]) -> StoppingCriteriaList:
        return StoppingCriteriaList([stop_string_criteria(self.tokenizer, stop)] if stop else [])

    @staticmethod
    def _generation_config(params: GenerationParams) -> GenerationConfig:
        sampling = (dict(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=0)
                    if params.do_sample else dict(do_sample=False))
        return GenerationConfig(max_new_tokens=params.max_new_tokens, num_return_sequences=params.n, **sampling)

    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        ids = [encode(self.tokenizer, p) for p in prompts]
        if empty := [i for i, row in enumerate(ids) if not row]:
            raise ValueError(f"prompt {empty[0]} encodes to no tokens")
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        batches = [order[k : k + params.batch_size] for k in range(0, len(order), params.batch_size)]
        config, stopping = self._generation_config(params), self._stopping(params.stop)
        grouped: list[list[str]] = [[] for _ in prompts]
        # A private RNG state: the same seed gives the same samples, and the caller's RNG is left untouched.
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(params.seed)
            for batch in tqdm(batches, desc="generate", unit="batch", disable=not self.progress):
                texts = self._generate_batch([ids[i] for i in batch], config, stopping)
                for k, i in enumerate(batch):
                    grouped[i] = texts[k * params.n : (k + 1) * params.n]
        return [cut_at_stop(text, params.stop, params.include_stop) for group in grouped for text in group]

    @torch.inference_mode()
    def _generate_batch(self, rows: list[list[int]], config: GenerationConfig,
                        stopping: StoppingCriteriaList) -> list[str]:
        input_ids, attention_mask = left_pad(rows, self.pad_id)
        output = self.model.generate(input_ids=input_ids.to(self.device),
                                     attention_mask=attention_mask.to(self.device),
                                     generation_config=config, stopping_criteria=stopping)
        return [self._decode(row) for row in output[:, input_ids.shape[1]:].cpu()]

    def _decode(self, tokens: torch.Tensor) -> str:
        """Text of one generated row up to its first end-of-sequence token (finished rows are padded)."""
        ends = torch.isin(tokens, torch.tensor(self.eos_ids)).nonzero()
        if len(ends):
            tokens = tokens[: ends[0, 0]]
        return self.tokenizer.decode(tokens, skip_special_tokens=True)
