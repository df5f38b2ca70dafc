"""`ModelPool`: one generator per model and adapter, options per model, release; against the vLLM stand-in of
tests/test_generation_vllm.py (engine arguments, shutdowns) and the OpenAI-compatible client (no request sent)."""

import pytest
from test_generation_vllm import fake_vllm  # noqa: F401 (fixture)

from repro.generation.openai_client import OpenAIClientGenerator
from repro.generation.pool import ModelPool, generator_id


def test_options_per_model_override_the_pools_and_a_model_is_loaded_with_one_set(fake_vllm, tiny_llama_dir):
    model = str(tiny_llama_dir)
    with ModelPool("vllm", "float32", progress=False, options={"max_model_len": 512}) as pool:
        engine, engine_id = pool.get(model, options={"dtype": "bfloat16", "gpu_memory_utilization": 0.25})
        args = engine.llm.engine_args
        assert (args["dtype"], args["gpu_memory_utilization"], args["max_model_len"]) == ("bfloat16", 0.25, 512)
        assert args["enable_lora"] and engine_id == generator_id(model, None, "bfloat16")
        assert pool.get(model, options={"gpu_memory_utilization": 0.25, "dtype": "bfloat16"})[0] is engine
        with pytest.raises(ValueError, match="loads a model once"):
            pool.get(model)  # the pool's options alone: another engine of the same model
        core = engine.llm.llm_engine.engine_core
        pool.release(model)
        assert core.shutdowns == 1 and pool.engines_alive == 0
        assert pool.get(model)[0].llm.engine_args["dtype"] == "float32"  # released: loadable with other options


def test_the_openai_backend_gives_a_client_without_dtype_or_adapter():
    with ModelPool("openai", progress=False, options={"base_url": "http://127.0.0.1:9/v1"}) as pool:
        client, _ = pool.get("served-model", options={"max_retries": 0})
        assert isinstance(client, OpenAIClientGenerator) and client.model == "served-model"
        assert (client.base_url, client.max_retries) == ("http://127.0.0.1:9/v1", 0)
        with pytest.raises(ValueError, match="takes no adapter"):
            pool.get("served-model", "some/adapter", options={"max_retries": 0})
