"""`ModelPool`: one generator per model and adapter, options per model, release; against the vLLM stand-in of
tests/test_generation_vllm.py (engine arguments, shutdowns) and the OpenAI-compatible client (no request sent)."""

import shutil

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
        assert not args["enable_lora"] and engine_id == generator_id(model, None, "bfloat16")  # no adapters_on
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


def test_only_the_engines_that_serve_adapters_reserve_lora_slots(fake_vllm, tiny_llama_dir, tmp_path):
    """vLLM runs every linear layer of a LoRA engine through its LoRA wrapper: a model served as it is gets none."""
    model, plain = str(tiny_llama_dir), str(tmp_path / "plain")
    shutil.copytree(tiny_llama_dir, plain)
    with ModelPool("vllm", "float32", progress=False, adapters_on=[model]) as pool:
        served, _ = pool.get(model, "some/adapter")
        assert served.llm.engine_args["enable_lora"]
        assert not pool.get(plain)[0].llm.engine_args["enable_lora"]
        with pytest.raises(ValueError, match="reserves LoRA slots only on adapters_on"):
            pool.get(plain, "some/adapter")  # an adapter on an engine the pool was not told would serve one


def test_merged_adapters_are_served_by_plain_engines_and_removed_with_the_pool(fake_vllm, tiny_llama_dir, tmp_path):
    """Table 4's way (D213): the adapter merged into a copy of its base, one engine of its own without LoRA slots,
    the same generator id as the adapter's; the copies go when the pool closes."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    peft = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False))
    peft.save_pretrained(tmp_path / "adapter")
    model, adapter = str(tiny_llama_dir), str(tmp_path / "adapter")
    pool = ModelPool("vllm", "float32", progress=False, merge_root=tmp_path / "scratch")
    merged, merged_id = pool.get(model, adapter)
    args = merged.llm.engine_args
    assert not args["enable_lora"] and args["model"] != model and merged_id == generator_id(model, adapter, "float32")
    weights = AutoModelForCausalLM.from_pretrained(args["model"], dtype=torch.float32).state_dict()
    expected = peft.merge_and_unload().state_dict()
    assert all(torch.equal(weights[k], expected[k]) for k in expected)  # W + BA, saved as a plain model
    assert pool.get(model)[0] is not merged and pool.engines_alive == 2
    pool.close()
    assert list((tmp_path / "scratch").iterdir()) == []
