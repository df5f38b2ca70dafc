"""The vLLM adapter against a stand-in engine, for what vLLM's CPU build cannot run here.

tests/test_generation_vllm_engine.py runs the real engine (greedy parity, stop strings, seeded sampling, LoRA,
`vllm serve`). What stays here is what only a GPU can do: tensor parallelism and `gpu_memory_utilization`. The
stand-in replaces `vllm.LLM`, `vllm.SamplingParams` and `vllm.lora.request.LoRARequest` with the real keyword
names (an unknown or misspelt argument is a TypeError, as in vLLM) and checks that the engine arguments the paper
profiles set reach `LLM` unchanged, and that the engine is shut down exactly once.
"""

import dataclasses
import os
import sys
import types

import pytest
from transformers import AutoTokenizer

from repro.config import load_profile
from repro.generation import GenerationParams, make_generator
from repro.generation import vllm_backend
from repro.generation.vllm_backend import MULTIPROCESSING_VARIABLE


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


class EngineCore:
    def __init__(self):
        self.shutdowns = 0

    def shutdown(self):
        self.shutdowns += 1
        sys.modules["vllm.v1.engine.core"].cleanup_dist_env_and_memory()  # as vLLM's, in its module `core`


class LLM:
    def __init__(self, model: str, *, dtype: str = "auto", tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, max_model_len: int | None = None,
                 enforce_eager: bool = False, trust_remote_code: bool = False, enable_lora: bool = False,
                 max_lora_rank: int = 16, kv_cache_memory_bytes: int | None = None,
                 distributed_executor_backend: str | None = None):
        self.engine_args = dict(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                                gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                                enforce_eager=enforce_eager, trust_remote_code=trust_remote_code,
                                enable_lora=enable_lora, max_lora_rank=max_lora_rank,
                                kv_cache_memory_bytes=kv_cache_memory_bytes)
        self.executor, self.multiprocessing = distributed_executor_backend, os.environ.get(MULTIPROCESSING_VARIABLE)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.llm_engine = types.SimpleNamespace(engine_core=EngineCore())
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
    """The stand-in as `vllm`; its engines count as this test's only open engines. `vllm.v1.engine.core.teardowns`
    counts the engine shutdowns that tore down the process groups (vLLM's `cleanup_dist_env_and_memory`)."""
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    lora, lora_request = types.ModuleType("vllm.lora"), types.ModuleType("vllm.lora.request")
    lora_request.LoRARequest = LoRARequest
    core = types.ModuleType("vllm.v1.engine.core")
    core.teardowns = 0

    def cleanup_dist_env_and_memory(shutdown_ray=False):
        core.teardowns += 1

    core.cleanup_dist_env_and_memory = cleanup_dist_env_and_memory
    packages = {name: types.ModuleType(name) for name in ("vllm.v1", "vllm.v1.engine")}
    for name, module in (("vllm", vllm), ("vllm.lora", lora), ("vllm.lora.request", lora_request), *packages.items(),
                         ("vllm.v1.engine.core", core)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(vllm_backend, "IN_PROCESS_ENGINES", set())


PROMPTS = [
    [{"role": "system", "content": "You extract evidence."}, {"role": "user", "content": "Who built it?"}],
    "Question: When was it completed?\nAnswer:",
    [{"role": "user", "content": "Name a colour."}],
]


def paper_engine_options():
    """Every vLLM options dict the paper profiles pass to make_generator, by key path."""
    for name in ("paper-1p5b", "paper-7b"):
        cfg = load_profile(name)
        yield f"{name}.agentic.agent_options", cfg.agentic.agent_options
        yield f"{name}.agentic.extractor_options", cfg.agentic.extractor_options


@pytest.mark.parametrize("key, options", list(paper_engine_options()))
def test_the_paper_profiles_engine_arguments_reach_vllm_unchanged(fake_vllm, tiny_llama_dir, key, options):
    generator = make_generator("vllm", str(tiny_llama_dir), dtype="bfloat16", progress=False, **options)
    args = generator.llm.engine_args
    engine_options = {k: v for k, v in options.items() if k != "data_parallel"}  # replicas: no GPU here, one engine
    assert {k: args[k] for k in engine_options} == engine_options, key
    assert args["trust_remote_code"] is False and args["dtype"] == "bfloat16"


def test_tensor_parallel_engine_with_lora_slots(fake_vllm, tiny_llama_dir, tmp_path):
    generator = make_generator("vllm", str(tiny_llama_dir), adapter=str(tmp_path), tensor_parallel_size=2,
                               gpu_memory_utilization=0.5, max_model_len=4096, max_lora_rank=8, progress=False)
    assert generator.llm.engine_args == dict(model=str(tiny_llama_dir), dtype="auto", tensor_parallel_size=2,
                                             gpu_memory_utilization=0.5, max_model_len=4096, enforce_eager=False,
                                             trust_remote_code=False, enable_lora=True, max_lora_rank=8,
                                             kv_cache_memory_bytes=None)
    generator.generate(PROMPTS[:1], GenerationParams(max_new_tokens=8, do_sample=True, n=2, seed=3))
    (call,) = generator.llm.calls
    assert call["sampling_params"] == SamplingParams(n=2, temperature=1.0, top_p=1.0, seed=3, max_tokens=8,
                                                     stop=[], include_stop_str_in_output=False)
    assert call["lora_request"].lora_path == str(tmp_path)


def test_the_engine_is_shut_down_once_by_its_owner_not_by_views(fake_vllm, tiny_llama_dir, tmp_path):
    engine = make_generator("vllm", str(tiny_llama_dir), enable_lora=True, progress=False)
    core = engine.llm.llm_engine.engine_core
    with engine.with_adapter(str(tmp_path)) as view:
        assert view.lora_request.lora_int_id == 1 and engine.lora_request is None
    assert core.shutdowns == 0
    with engine:
        pass
    engine.close()
    assert core.shutdowns == 1
    with pytest.raises(RuntimeError, match="closed"):
        engine.with_adapter(None)


def test_without_gpus_every_engine_with_one_worker_runs_in_this_process(fake_vllm, tiny_llama_dir, monkeypatch):
    monkeypatch.delenv(MULTIPROCESSING_VARIABLE, raising=False)
    first, second = (make_generator("vllm", str(tiny_llama_dir), progress=False) for _ in range(2))
    for engine in (first, second):
        assert (engine.llm.executor, engine.llm.multiprocessing) == ("uni", "0")  # set while it starts
    assert MULTIPROCESSING_VARIABLE not in os.environ  # and restored after
    parallel = make_generator("vllm", str(tiny_llama_dir), tensor_parallel_size=2, progress=False)
    assert (parallel.llm.executor, parallel.llm.multiprocessing) == (None, None)  # workers of its own
    core = sys.modules["vllm.v1.engine.core"]
    for engine, teardowns in ((parallel, 0), (first, 0), (second, 1)):  # by the last in-process engine only
        engine.close()
        assert core.teardowns == teardowns


def test_adapters_need_an_engine_started_with_lora_slots(fake_vllm, tiny_llama_dir, tmp_path):
    engine = make_generator("vllm", str(tiny_llama_dir), progress=False)
    with pytest.raises(ValueError, match="started without enable_lora"):
        engine.with_adapter(str(tmp_path))


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


def test_reserved_cpu_cores_are_set_while_the_engine_starts_and_restored_after(monkeypatch):
    from repro.generation.vllm_backend import RESERVED_CPU_VARIABLE, reserved_cpu_cores

    monkeypatch.setenv(RESERVED_CPU_VARIABLE, "1")
    with reserved_cpu_cores(0):
        assert os.environ[RESERVED_CPU_VARIABLE] == "0"
    assert os.environ[RESERVED_CPU_VARIABLE] == "1"
    monkeypatch.delenv(RESERVED_CPU_VARIABLE)
    with reserved_cpu_cores(None):
        assert RESERVED_CPU_VARIABLE not in os.environ
    with pytest.raises(RuntimeError), reserved_cpu_cores(2):
        raise RuntimeError("the engine failed to start")
    assert RESERVED_CPU_VARIABLE not in os.environ
    with pytest.raises(ValueError, match="cpu_reserved_cores"), reserved_cpu_cores(-1):
        pass
