"""LoRA SFT of the QA generator on the tiny random Llama: examples, crash and resume, the saved adapter."""

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, TrainerCallback

from repro.config import load_profile
from repro.generation.transformers_backend import TransformersGenerator
from repro.prompts import format_passages, qa_messages
from repro.train.sft import _prepare, example_length, fit_lora_sft, fitting_examples, sft_args, sft_examples

ROWS = [{"id": str(i), "question": f"What is the capital of Country{i}?", "golden_answers": [f"Capital{i}", "alias"],
         "passages": [{"id": str(i), "contents": f'"Country{i}"\nThe capital of Country{i} is Capital{i}.',
                       "score": 1.0}]}
        for i in range(6)]


def test_examples_use_the_evaluation_prompts_and_the_first_golden_answer():
    examples = sft_examples(ROWS[:2], ["passages", "question"])
    assert len(examples) == 4
    assert examples[0]["prompt"] == qa_messages(ROWS[0]["question"], format_passages(ROWS[0]["passages"]))
    assert examples[1]["prompt"] == qa_messages(ROWS[0]["question"], None)
    assert examples[0]["completion"] == [{"role": "assistant", "content": "Capital0"}]
    assert [e["prompt"][-1]["content"] for e in sft_examples(ROWS[:1], ["question"])] == [
        qa_messages(ROWS[0]["question"], None)[-1]["content"]]


def test_examples_longer_than_max_length_are_dropped_not_truncated(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    examples = sft_examples(ROWS[:1], ["passages", "question"])
    short = example_length(examples[1], tokenizer)
    assert short < example_length(examples[0], tokenizer)
    kept, dropped = fitting_examples(examples, tokenizer, max_length=short)  # Table 12 fits, Table 11 does not
    assert kept == examples[1:] and dropped == 1


class CrashAt(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise RuntimeError("killed")


class FirstStep(TrainerCallback):
    def on_train_begin(self, args, state, control, **kwargs):
        self.step = state.global_step


@pytest.mark.slow
def test_sft_resumes_after_a_crash_and_saves_an_adapter_the_backend_loads(tmp_path, tiny_llama_dir):
    cfg = load_profile("ci")
    sft = dataclasses.replace(cfg.qa_generator, max_steps=4, save_steps=2, per_device_batch_size=2)
    model, root = str(tiny_llama_dir), tmp_path / "qa_generator"
    examples = sft_examples(ROWS, sft.inputs)
    config = {"model": model, "qa_generator": dataclasses.asdict(sft)}

    def fit(*callbacks):
        args = sft_args(cfg, sft, root / "checkpoints", progress=False)
        return fit_lora_sft(model, examples, args, sft, root, config, callbacks)

    with pytest.raises(RuntimeError, match="killed"):
        fit(CrashAt(3))
    assert (root / "checkpoints" / "checkpoint-2").is_dir() and not (root / "adapter").exists()

    first = FirstStep()
    adapter = fit(first)
    assert first.step == 2  # resumed from checkpoint-2, not from scratch
    log = [json.loads(line) for line in (root / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4]

    weights = load_file(adapter / "adapter_model.safetensors")
    lora_b = [w for name, w in weights.items() if "lora_B" in name]
    assert len(lora_b) == 2 * len(sft.target_modules) and all(w.abs().sum() > 0 for w in lora_b)  # B starts at 0

    base = TransformersGenerator(model, dtype="float32", progress=False)
    tuned = TransformersGenerator(model, adapter=str(adapter), dtype="float32", progress=False)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(base.model.state_dict()[name], tuned.model.state_dict()[name])  # merged LoRA
    assert len(tuned.generate(["Hello"])) == 1

    mtime = (adapter / "adapter_model.safetensors").stat().st_mtime_ns
    assert fit() == adapter and (adapter / "adapter_model.safetensors").stat().st_mtime_ns == mtime  # reused


def test_a_run_directory_without_a_readable_configuration_is_cleared_before_an_sft_run(tmp_path):
    root = tmp_path / "run"
    (root / "checkpoints" / "checkpoint-1").mkdir(parents=True)  # left by a deletion cut by a kill
    with pytest.warns(UserWarning, match="no run_config.json"):
        assert not _prepare(root, {"fingerprint": "a"})
    assert not (root / "checkpoints").exists()
    assert json.loads((root / "run_config.json").read_text())["fingerprint"] == "a"
    (root / "adapter").mkdir()
    (root / "adapter" / "adapter_model.safetensors").write_bytes(b"")
    assert _prepare(root, {"fingerprint": "a"})  # the same configuration: its finished adapter is reused
    (root / "run_config.json").write_text('{"fingerprint": ')  # damaged
    with pytest.warns(UserWarning, match="no run_config.json"):
        assert not _prepare(root, {"fingerprint": "a"})
