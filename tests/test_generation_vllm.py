"""The vLLM adapter against a stand-in engine (vLLM cannot be installed on a CPU-only machine).

The stand-in replaces only `vllm.LLM`, `vllm.SamplingParams` and `vllm.lora.request.LoRARequest`, with the
real keyword names (an unknown or misspelt argument is a TypeError, as in vLLM), and it checks the engine
contract: one batched `generate` call, prompts as token ids rendered by the engine's own (real) tokenizer,
the sampling settings, the LoRA request. Its outputs name the prompt and sample they answer, with the n
samples of a request out of order, so the test can see that the adapter maps them back correctly.
"""

import dataclasses
import sys
import types

import pytest
from transformers import AutoTokenizer

from repro.generation import GenerationParams, make_generator


@dataclasses.dataclass(kw_only=True)
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = 16
    stop: list[str] | None = None
    include_stop_str_in_output: bool = False


@dataclasses.dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


@dataclasses.dataclass
class CompletionOutput:
    index: int
    text: str


@dataclasses.dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]


class LLM:
    def __init__(self, model: str, *, dtype: str = "auto", tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, max_model_len: int | None = None,
                 trust_remote_code: bool = False, enable_lora: bool = False, max_lora_rank: int = 16):
        self.engine_args = dict(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                                gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                                trust_remote_code=trust_remote_code, enable_lora=enable_lora,
                                max_lora_rank=max_lora_rank)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.calls = []

    def get_tokenizer(self):
        return self.tokenizer

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None):
        assert isinstance(sampling_params, SamplingParams)
        assert lora_request is None or isinstance(lora_request, LoRARequest)
        for prompt in prompts:
            assert set(prompt) == {"prompt_token_ids"}
            assert all(isinstance(t, int) for t in prompt["prompt_token_ids"])
        self.calls.append(dict(prompts=prompts, sampling_params=sampling_params, lora_request=lora_request))
        n = sampling_params.n
        return [RequestOutput(p["prompt_token_ids"],
                              [CompletionOutput(j, reply(self.tokenizer.decode(p["prompt_token_ids"]), j))
                               for j in reversed(range(n))])
                for p in prompts]


def reply(prompt_text: str, sample: int) -> str:
    return f"sample {sample} for {prompt_text!r}"


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    lora, lora_request = types.ModuleType("vllm.lora"), types.ModuleType("vllm.lora.request")
    lora_request.LoRARequest = LoRARequest
    for name, module in (("vllm", vllm), ("vllm.lora", lora), ("vllm.lora.request", lora_request)):
        monkeypatch.setitem(sys.modules, name, module)


PROMPTS = [
    [{"role": "system", "content": "You extract evidence."}, {"role": "user", "content": "Who built it?"}],
    "Question: When was it completed?\nAnswer:",
    [{"role": "user", "content": "Name a colour."}],
]


def expected_ids(tokenizer, prompt):
    if isinstance(prompt, str):
        return tokenizer(prompt)["input_ids"]
    return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]


def test_sampled_batch_is_one_call_in_order_with_the_sampling_params(fake_vllm, tiny_llama_dir):
    generator = make_generator("vllm", str(tiny_llama_dir), dtype="bfloat16", tensor_parallel_size=2,
                               gpu_memory_utilization=0.5, max_model_len=4096, progress=False)
    assert generator.llm.engine_args == dict(model=str(tiny_llama_dir), dtype="bfloat16", tensor_parallel_size=2,
                                             gpu_memory_utilization=0.5, max_model_len=4096,
                                             trust_remote_code=False, enable_lora=False, max_lora_rank=16)
    params = GenerationParams(max_new_tokens=64, stop=["</extract>"], do_sample=True, temperature=0.7, top_p=0.9,
                              seed=11, n=2)
    completions = generator.generate(PROMPTS, params)

    (call,) = generator.llm.calls
    tokenizer = generator.tokenizer
    sent = [p["prompt_token_ids"] for p in call["prompts"]]
    assert sent == [expected_ids(tokenizer, p) for p in PROMPTS]
    assert tokenizer.decode(sent[0]).endswith("<|im_start|>assistant\n")  # chat template, generation prompt
    assert call["sampling_params"] == SamplingParams(n=2, temperature=0.7, top_p=0.9, seed=11, max_tokens=64,
                                                     stop=["</extract>"], include_stop_str_in_output=False)
    assert call["lora_request"] is None
    assert completions == [reply(tokenizer.decode(ids), j) for ids in sent for j in range(2)]


def test_greedy_with_included_stop_and_a_lora_adapter(fake_vllm, tiny_llama_dir, tmp_path):
    generator = make_generator("vllm", str(tiny_llama_dir), adapter=str(tmp_path), max_lora_rank=8,
                               progress=False)
    assert generator.llm.engine_args["enable_lora"] and generator.llm.engine_args["max_lora_rank"] == 8
    completions = generator.generate(PROMPTS[:2], GenerationParams(max_new_tokens=32, stop="</extract>",
                                                                   include_stop=True))
    (call,) = generator.llm.calls
    assert call["sampling_params"] == SamplingParams(n=1, temperature=0.0, top_p=1.0, seed=0, max_tokens=32,
                                                     stop=["</extract>"], include_stop_str_in_output=True)
    assert call["lora_request"].lora_path == str(tmp_path) and call["lora_request"].lora_int_id >= 1
    assert len(completions) == 2 and completions[1].startswith("sample 0 for 'Question: When was it")


def test_empty_and_bad_prompts_never_reach_the_engine(fake_vllm, tiny_llama_dir):
    generator = make_generator("vllm", str(tiny_llama_dir), progress=False)
    assert generator.generate([]) == []
    with pytest.raises(TypeError, match="prompt 0 must be a string or a non-empty list of chat messages"):
        generator.generate([None])
    assert generator.llm.calls == []


def test_missing_outputs_are_an_error(fake_vllm, tiny_llama_dir, monkeypatch):
    generator = make_generator("vllm", str(tiny_llama_dir), progress=False)
    engine_generate = generator.llm.generate
    monkeypatch.setattr(generator.llm, "generate", lambda *a, **kw: engine_generate(*a, **kw)[:-1])
    with pytest.raises(RuntimeError, match="vLLM returned 2 outputs for 3 prompts"):
        generator.generate(PROMPTS)
