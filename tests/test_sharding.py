"""Data parallelism's pure parts (repro.generation.sharding): replicas and their GPUs, contiguous slices, the merge
back into input order; the profile key's validation; and `data_parallel: auto` on a machine without GPUs, which
starts today's one engine in the calling process (the vLLM stand-in of tests/test_generation_vllm.py).

tests/test_generation_vllm_engine.py runs two real engine replicas in two processes against one engine."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_generation_vllm import LLM, fake_vllm  # noqa: F401 (fixture)

from repro.config import ConfigError, check_generator_options
from repro.generation import make_generator
from repro.generation.sharding import merge, replica_count, replica_devices, shard_bounds, split, visible_devices


@given(st.integers(0, 200), st.integers(1, 16))
def test_slices_are_contiguous_in_order_and_differ_by_at_most_one_larger_first(count, shards):
    bounds = shard_bounds(count, shards)
    assert len(bounds) == shards and bounds[0][0] == 0 and bounds[-1][1] == count
    assert all(end == start for (_, end), (start, _) in zip(bounds, bounds[1:]))
    sizes = [end - start for start, end in bounds]
    assert sizes == sorted(sizes, reverse=True) and max(sizes) - min(sizes) <= 1


@given(st.lists(st.integers()), st.integers(1, 9), st.integers(1, 4))
def test_each_replicas_outputs_merge_back_into_input_order(items, shards, n):
    """A replica answers its slice with n outputs per item (prompt-major, as `Generator.generate`); merging the
    replicas' answers gives what one engine answers for all items."""
    def answer(part):
        return [(item, sample) for item in part for sample in range(n)]

    parts = split(items, shards)
    assert merge(parts, [len(p) for p in parts]) == items
    assert [x for part in parts for x in answer(part)] == answer(items)


def test_a_replica_that_loses_an_output_is_an_error():
    with pytest.raises(RuntimeError, match="replica 1 returned 1 outputs for 2 prompts"):
        merge([["a", "b"], ["c"]], [2, 2])


@given(st.integers(0, 16), st.integers(1, 4))
def test_auto_pins_one_replica_to_each_group_of_tensor_parallel_gpus(gpus, tensor_parallel_size):
    visible = [f"GPU-{i}" for i in range(gpus)]  # UUIDs are kept as written
    devices = replica_devices("auto", tensor_parallel_size, visible)
    replicas = gpus // tensor_parallel_size
    if replicas <= 1:
        assert devices == [None]  # one engine in the calling process, on the GPUs it sees: today's behaviour
    else:
        assert len(devices) == replicas
        groups = [group.split(",") for group in devices]
        assert all(len(group) == tensor_parallel_size for group in groups)
        assert [d for group in groups for d in group] == visible[:replicas * tensor_parallel_size]


def test_replica_counts_and_their_errors():
    assert replica_devices(None, 1, ["0", "1"]) == replica_devices(1, 1, ["0", "1"]) == [None]
    assert replica_devices(2, 1, ["4", "6", "7"]) == ["4", "6"]
    assert replica_devices(2, 1, []) == [None, None]  # no GPU: the replicas share the CPU (vLLM's CPU build)
    assert replica_count("auto", 1, 0) == 1
    with pytest.raises(ValueError, match=r"need 4 GPUs; 3 are visible \(0,1,2\)"):
        replica_devices(2, 2, ["0", "1", "2"])
    for bad in (0, True, 1.5, "all"):
        with pytest.raises(ValueError, match="data_parallel must be 'auto', null or a replica count"):
            replica_count(bad, 1, 8)


def test_visible_gpus_come_from_cuda_visible_devices_when_set():
    assert visible_devices("2, 3", 8) == ["2", "3"]
    assert visible_devices(None, 3) == ["0", "1", "2"]
    assert visible_devices("", 8) == []


def test_the_profile_key_is_checked_with_its_key_path():
    check_generator_options({"data_parallel": "auto", "gpu_memory_utilization": 0.3}, "vllm", "evaluation.options")
    check_generator_options({"data_parallel": None}, "vllm", "evaluation.options")
    with pytest.raises(ConfigError, match=r"evaluation.options.data_parallel: 'auto', null or a replica count >= 1, "
                                          r"got 0"):
        check_generator_options({"data_parallel": 0}, "vllm", "evaluation.options")
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['data_parallel'\] for backend transformers"):
        check_generator_options({"data_parallel": "auto"}, "transformers", "evaluation.options")


def test_auto_without_gpus_is_one_engine_in_this_process(fake_vllm, tiny_llama_dir, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    generator = make_generator("vllm", str(tiny_llama_dir), data_parallel="auto", progress=False)
    assert isinstance(generator.llm, LLM) and "data_parallel" not in generator.llm.engine_args
