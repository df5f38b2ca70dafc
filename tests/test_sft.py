"""LoRA SFT of the QA generator on the tiny random Llama: examples, crash and resume, the saved adapter; the launch of
every LoRA run in worker processes (the command, the launchers of every profile, reuse without a launch, two gloo
processes training one run)."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import AutoTokenizer, TrainerCallback

from conftest import ROOT
from repro.config import load_profile
from repro.formulas.prompts import format_passages, qa_messages
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import fingerprint
from repro.stages.qa_generator import sft_examples
from repro.train.launch import accelerate_command, launch_dir
from repro.train.lora import runner as sft_module
from repro.train.lora.runner import (
    WORKER,
    LoRARun,
    _prepare,
    example_length,
    fit_lora_sft,
    fitting_examples,
    section_config,
    sft_args,
    train_lora,
    worker_args,
)
from repro.train.lora.worker import parse_args

LORA_SECTIONS = ("qa_generator", "filco", "seer", "ar_study.sft")

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


def test_the_launch_command_runs_the_worker_on_the_callers_profile(tmp_path):
    cfg = load_profile("ci")
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(
        cfg.ar_study, sft=dataclasses.replace(cfg.ar_study.sft, max_steps=7)))  # a caller's change reaches the workers
    with launch_dir(cfg) as tmp:
        command = accelerate_command(cfg.ar_study.sft.accelerate_config, WORKER, worker_args(cfg, tmp, progress=False))
        assert command[:7] == [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                               "configs/accelerate/cpu-1proc.yaml", "-m", "repro.train.lora.worker"]
        args = parse_args(command[7:])
        assert (args.profile, Path(args.runs), args.no_progress) == ("ci", tmp / "runs.json", True)
        assert load_profile(args.profile, args.params) == cfg
    assert not tmp.exists()


def test_every_lora_section_names_a_launcher_for_its_profiles_devices():
    launchers = {}
    for name in ("tiny", "cpu-study", "cpu-rewards", "ci", "paper-1p5b", "paper-7b", "gpu-smoke", "rehearsal"):
        cfg = load_profile(name, ROOT / "params.yaml")
        for section in LORA_SECTIONS:
            path = section_config(cfg, section).accelerate_config
            launchers[name, section] = yaml.safe_load((ROOT / path).read_text())
    grpo = yaml.safe_load((ROOT / load_profile("paper-1p5b").train.accelerate_config).read_text())
    for section in LORA_SECTIONS:
        ddp = launchers["paper-1p5b", section]
        assert ddp["distributed_type"] == "MULTI_GPU" and ddp["mixed_precision"] == "no"  # the section's bf16 decides
        assert ddp["num_processes"] == grpo["num_processes"] == 8  # every GPU of the node
        assert launchers["paper-7b", section] == ddp
        assert launchers["gpu-smoke", section] == {**ddp, "num_processes": 1}  # the same launch path on one GPU
        for cpu in ("tiny", "cpu-study", "cpu-rewards", "ci"):
            assert launchers[cpu, section]["num_processes"] == 1 and launchers[cpu, section]["use_cpu"] is True
        rehearsal = launchers["rehearsal", section]  # the paper profiles' multi-process launches, on this machine
        assert rehearsal["num_processes"] == 2 and rehearsal["distributed_type"] == "MULTI_GPU"  # gloo without GPUs


def test_a_finished_adapter_is_reused_without_a_launch_and_a_changed_launcher_retrains(tmp_path, monkeypatch):
    cfg, root, config = load_profile("ci"), tmp_path / "run", {"model": "m"}
    cfg = dataclasses.replace(cfg, qa_generator=dataclasses.replace(
        cfg.qa_generator, accelerate_config="configs/accelerate/cpu-2proc.yaml"))
    full = {**config, "processes": 2}
    _prepare(root, {**full, "fingerprint": fingerprint(full)})
    (root / "adapter").mkdir()
    (root / "adapter" / "adapter_model.safetensors").write_bytes(b"")
    launches = []
    monkeypatch.setattr(sft_module, "launch", lambda *args, **kwargs: launches.append(args))
    run = LoRARun("qa_generator", "sft", "m", [], root, config)
    assert train_lora(cfg, [run]) == [root / "adapter"] and launches == []

    one_process = "configs/accelerate/cpu-1proc.yaml"
    one = dataclasses.replace(cfg, qa_generator=dataclasses.replace(cfg.qa_generator, accelerate_config=one_process))
    with pytest.warns(UserWarning, match="another configuration"), pytest.raises(RuntimeError, match="without writing"):
        train_lora(one, [run])  # the stand-in launch trains nothing
    assert [args[0] for args in launches] == [one_process]
    assert json.loads((root / "run_config.json").read_text())["processes"] == 1

    missing = dataclasses.replace(cfg, filco=dataclasses.replace(cfg.filco, accelerate_config="configs/nope.yaml"))
    with pytest.raises(FileNotFoundError, match=r"params.yaml: profiles.ci.filco.accelerate_config: configs/nope.yaml "
                                                r"does not exist"):
        train_lora(missing, [dataclasses.replace(run, section="filco")])
    with pytest.raises(ValueError, match="one accelerate_config"):  # ci's QA generator: two processes, FilCo: one
        train_lora(cfg, [run, dataclasses.replace(run, section="filco")])


def test_a_process_outside_the_launched_world_writes_nothing(tmp_path, tiny_llama_dir):
    """A worker that did not join the launcher's processes (on a CPU machine: use_cpu off under a MULTI_GPU launch
    leaves each process alone, each its own main process) stops before touching the run directory."""
    cfg = load_profile("ci")
    args = sft_args(cfg, cfg.qa_generator, tmp_path / "run" / "checkpoints", progress=False)
    with pytest.raises(ValueError, match="launched for 2 processes, 1 run it"):
        fit_lora_sft(str(tiny_llama_dir), [], args, cfg.qa_generator, tmp_path / "run", {"processes": 2})
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_two_gloo_processes_train_one_run_and_the_main_one_writes_it(tmp_path, tiny_llama_dir, monkeypatch):
    cfg = load_profile("ci")
    sft = dataclasses.replace(cfg.qa_generator, max_steps=2, save_steps=2, per_device_batch_size=1,
                              accelerate_config="configs/accelerate/cpu-2proc.yaml")  # the rehearsal's launcher
    cfg = dataclasses.replace(cfg, qa_generator=sft)
    examples = sft_examples(ROWS[:2], ["passages", "question"])  # 4 examples: one per process and step
    root = tmp_path / "run"
    run = LoRARun("qa_generator", "sft", str(tiny_llama_dir), examples, root, {"test": 1})
    (adapter,) = train_lora(cfg, [run], progress=False)
    assert sorted(p.name for p in root.iterdir()) == ["adapter", "checkpoints", "run_config.json", "train_log.jsonl"]
    assert json.loads((root / "run_config.json").read_text())["processes"] == 2
    checkpoint = root / "checkpoints" / "checkpoint-2"
    assert sorted(p.name for p in checkpoint.glob("rng_state*")) == ["rng_state_0.pth", "rng_state_1.pth"]
    log = [json.loads(line) for line in (root / "train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2] and steps[-1]["epoch"] == 1.0
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    assert steps[-1]["num_tokens"] == sum(example_length(e, tokenizer) for e in examples)  # each example once
    weights = load_file(adapter / "adapter_model.safetensors")
    assert all(w.abs().sum() > 0 for name, w in weights.items() if "lora_B" in name)

    monkeypatch.setattr(sft_module, "launch", lambda *a, **k: pytest.fail("a finished adapter launched workers"))
    assert train_lora(cfg, [run]) == [adapter]
