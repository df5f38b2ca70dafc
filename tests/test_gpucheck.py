"""The one-GPU check (issue #46): its shapes are the real configs', its batches the paper profiles', the tiny check runs
end to end on the CPU (the mechanics; the CUDA path runs only on a GPU), the bundle stays under 60 MiB and installs
offline beside the GPU image's package set, and the cost model takes a check's measured training figures."""

import dataclasses
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT
from repro.config import load_profile
from repro.gpucheck import bundle, models, workloads
from repro.gpucheck.run import STEPS
from repro.io import InputError
from repro.ops.costs import measured, model, report, stages

FIXTURE = ROOT / "tests" / "fixtures" / "gpucheck"
# the GPU image's packages (issue #46): their dependencies come with them
IMAGE = ("torch", "transformers", "peft", "accelerate", "safetensors", "tokenizers", "numpy", "pandas", "scipy",
         "pyyaml", "pip")


def meta_parameters(config: dict) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(AutoConfig.for_model(**config)).parameters())


def test_the_models_have_the_real_configs_shapes():
    small, large = models.CONFIGS["qwen2.5-1.5b"], models.CONFIGS["qwen2.5-7b"]
    assert (small["hidden_size"], small["num_hidden_layers"], small["num_attention_heads"],
            small["num_key_value_heads"], small["intermediate_size"], small["vocab_size"],
            small["tie_word_embeddings"]) == (1536, 28, 12, 2, 8960, 151_936, True)
    assert (large["hidden_size"], large["num_hidden_layers"], large["num_attention_heads"],
            large["num_key_value_heads"], large["intermediate_size"], large["vocab_size"],
            large["tie_word_embeddings"]) == (3584, 28, 28, 4, 18_944, 152_064, False)
    assert meta_parameters(small) == pytest.approx(model.QWEN_1P5B.params, rel=0.01)  # the cost model's shapes
    assert meta_parameters(large) == pytest.approx(model.QWEN_7B.params, rel=0.01)
    assert models.DPR_CONFIG["hidden_size"] == 768 and models.DPR_CONFIG["num_hidden_layers"] == 12


def test_the_workloads_are_the_paper_profiles_batches_and_lengths():
    grpo = workloads.grpo(tiny=False, cuda=True)
    assert (grpo["per_device_batch_size"], grpo["gradient_accumulation_steps"], grpo["steps_per_generation"],
            grpo["max_completion_length"], grpo["max_answer_length"]) == (8, 4, 8, 768, 32)
    assert grpo["memory_fraction"] == 0.7  # beside the colocated engine's 0.3
    assert grpo["profile_launcher"] == "configs/accelerate/zero2.yaml"
    one, eight = (yaml.safe_load((ROOT / f).read_text()) for f in (grpo["launcher"], grpo["profile_launcher"]))
    assert one["num_processes"] == 1 and one["deepspeed_config"] == eight["deepspeed_config"]  # the profile's ZeRO-2
    assert {k: v for k, v in one.items() if k != "num_processes"} == {k: v for k, v in eight.items()
                                                                      if k != "num_processes"}
    assert grpo["prompt_tokens"] == model.INSTRUCTION_TOKENS + 5 * model.PASSAGE_TOKENS == 920
    assert workloads.grpo(tiny=False, cuda=False)["launcher"] == "configs/accelerate/cpu-1proc.yaml"
    sft, dpo = workloads.lora("qwen2.5-7b", "sft", False, True), workloads.lora("qwen2.5-7b", "dpo", False, True)
    assert (sft["profile"], sft["per_device_batch_size"], sft["completion_tokens"]) == ("paper-7b", 8, 16)
    assert (dpo["section"], dpo["per_device_batch_size"], dpo["completion_tokens"]) == ("seer", 4, 576)  # 0.75 x 768
    assert workloads.encoder(False) == {"profile": "paper-1p5b", "retriever": "dpr", "batch_size": 512,
                                        "max_length": 256, "dtype": "float16", "pooling": "pooler", "batches": 4}


@pytest.fixture(scope="module")
def tokenizer_sources(tmp_path_factory) -> Path:
    return models.write_tokenizer_sources(tmp_path_factory.mktemp("tokenizers"))


@pytest.mark.slow
def test_the_widened_tokenizer_has_qwens_ids_and_decodes_every_one(tokenizer_sources, tmp_path):
    models.write_qwen_tokenizer(tokenizer_sources, tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert len(tok) == 151_665  # Qwen2.5's 151,643 BPE tokens and 22 added ones, as the real tokenizer
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [151_643, 151_644, 151_645]
    assert all(tok.decode([i]) for i in (0, 9000, 100_000, 151_642))  # a random model's every sample is text
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_tiny_check_runs_every_step_end_to_end_on_the_cpu(tmp_path):
    """About 3 minutes on two cores: nine step processes, five of them `accelerate launch`es."""
    result = subprocess.run([sys.executable, "-m", "repro.gpucheck", "--shapes", "tiny", "--work", str(tmp_path / "w"),
                             "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=1150)
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert [re.match(r"\[ok\] (\S+)", line).group(1) for line in lines] == list(STEPS)
    report_ = json.loads((tmp_path / "out" / "cpu-tiny.json").read_text())
    env, steps = report_["environment"], report_["steps"]
    assert env["device"] == "cpu" and env["deepspeed"] is None  # DeepSpeed is not in the CPU stack: cpu-1proc.yaml
    assert report_["plan"]["workloads"]["grpo"]["launcher"] == "configs/accelerate/cpu-1proc.yaml"
    grpo = steps["grpo_qwen2.5-1.5b"]
    assert grpo["checks"] == {"losses_finite": True, "every_trained_parameter_changed": True, "reference_model": True,
                              "gradient_checkpointing": True, "fused_head_triton": None}  # no Triton on a CPU
    assert grpo["fused_head"]["triton"] == 0 and grpo["fused_head"]["torch"] > 0
    assert len(grpo["step_seconds"]) == 2 and grpo["generation_seconds"][0] > 0 == grpo["generation_seconds"][1]
    assert [calls[0] for calls in grpo["generate_calls"]] == [4, 8]  # 2 prompts x G = 2 rollouts, then o_r and o_e
    assert steps["generation"]["checks"] == dict.fromkeys(
        ("greedy_repeatable", "seeded_sampling_repeatable", "another_seed_differs", "stop_string_cuts"), True)
    assert all(steps[f"{k}_qwen2.5-{m}"]["checks"]["losses_finite"] for k in ("sft", "dpo") for m in ("7b", "1.5b"))
    assert "| grpo_qwen2.5-1.5b |" in (tmp_path / "out" / "cpu-tiny.md").read_text()


def pins() -> dict[str, str]:
    text = (ROOT / "requirements.txt").read_text() + (ROOT / "environment.yml").read_text()
    return {m.group(1).lower().replace("_", "-"): m.group(2)
            for m in re.finditer(r"^\s*-?\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s#]+)", text, re.M)}


def test_the_bundled_versions_are_the_projects_pins_where_it_has_one():
    pinned = pins()
    for name, version in bundle.WHEELS + bundle.SDISTS:
        if name in pinned and name != "pyarrow":
            assert version == pinned[name], name
    assert ("deepspeed", pinned["deepspeed"]) in bundle.SDISTS


def pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def cached_bundle(python_version: str) -> Path:
    """The bundle for `python_version`, built once per version and bundle list in ~/.cache/repro (about 57 MB of
    downloads and a DeepSpeed build, 1-2 minutes)."""
    key = hashlib.sha256(repr((bundle.WHEELS, bundle.SDISTS, python_version)).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "repro" / f"gpucheck-bundle-{key}"
    if not (cache / "manifest.json").exists():
        bundle.write_bundle(cache, python_version)
    return cache


def closure(names) -> set[str]:
    """The installed distributions `names` need, themselves included."""
    from packaging.requirements import Requirement

    todo, seen = [n.lower() for n in names], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name.lower().replace("_", "-"))
    return seen


def image_environment(root: Path) -> Path:
    """A venv whose only packages are IMAGE and their dependencies, linked from this one: the GPU image's set."""
    site = root / "image-site"
    site.mkdir(parents=True)
    for name in closure(IMAGE):
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "image.pth").write_text(f"{site}\n")
    return python


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.skipif(not pypi_reachable(), reason="the bundle is downloaded from PyPI, which is not reachable")
def test_the_bundle_fits_60_mib_and_installs_offline_beside_only_the_images_packages(tmp_path):
    device = cached_bundle("3.12")  # what travels to the GPU
    manifest = json.loads((device / "manifest.json").read_text())
    assert manifest["bytes"] <= 60 * 2**20
    assert {f"{n}=={v}" for n, v in bundle.WHEELS + bundle.SDISTS} == set(manifest["wheels"])
    assert sum(1 for f in manifest["files"] if f.startswith("wheels/")) == len(bundle.WHEELS) + len(bundle.SDISTS)
    # the same bundle for this interpreter, installed with its own command into an empty directory
    here = cached_bundle(f"{sys.version_info.major}.{sys.version_info.minor}")
    python = image_environment(tmp_path)
    check = ("import json, trl, datasets, deepspeed, pyarrow\n"
             "import repro.gpucheck.steps, repro.train.grpo.run, repro.train.lora.runner\n"
             "import repro.generation.transformers_backend, repro.retrieval.encoders\n"
             "from repro.gpucheck.bundle import WHEELS, SDISTS, unmet_requirements\n"
             "print(json.dumps(unmet_requirements([n for n, _ in WHEELS + SDISTS])))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHON=str(python), SCRATCH=str(tmp_path / "site"), PIP_NO_INDEX="1")
    assert not (tmp_path / "site").exists()
    out = subprocess.run(["sh", str(here / "install.sh"), "--shapes", "tiny", "--work", str(tmp_path / "w"),
                          "--out", str(tmp_path / "out"), "--steps", "peaks"],  # the command runs the check
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[ok] peaks" in out.stdout  # the steps themselves: the tiny check above, and the probe below
    probe = subprocess.run([str(python), "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**env, "PYTHONPATH": f"{tmp_path / 'site'}:{ROOT / 'src'}"})
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == []


# --- the cost model with a check's figures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200():
    return measured.read_check(FIXTURE / "nvidia-h200.json")


def test_a_check_gives_one_gpus_training_tokens_per_second_and_peak_memory(h200):
    assert h200.gpu == "NVIDIA H200"
    grpo = h200.run("grpo", model.QWEN_1P5B.params)
    assert grpo.tokens_per_second == 108_000 / 9 and grpo.peak_bytes == 60e9 and grpo.processes == 1
    assert h200.run("sft", model.QWEN_7B.params).tokens_per_second == 8000 / 2
    assert h200.run("dpo", model.QWEN_7B.params) is None  # its step failed: left out
    assert h200.run("dpo", model.QWEN_1P5B.params).tokens_per_second == 12_000


def test_measured_training_replaces_the_assumed_throughput_and_memory(h200):
    cfg, a = load_profile("paper-1p5b"), model.OPTIMISTIC
    assumed, steps = stages.grpo_wall(cfg, a)
    with_check, _ = stages.grpo_wall(cfg, dataclasses.replace(a, measured=h200))
    tokens = 8 * 8 * 4 * (920 + 0.4 * 768)  # completions per step x (prompt + mean completion)
    formula = 12 * 1.54e9 * tokens / (8 * 312e12 * 0.40)  # 6P + 2P recomputed + 2P reference, over 8 GPUs at 40%
    assert with_check - assumed == pytest.approx(steps * (tokens / 8 / 12_000 - formula))
    p = 1.54e9  # one process holds 16P of ZeRO-2 states; eight hold 2P + 14P/8 each; the engine takes 0.3 of 80 GB
    assert stages.grpo_memory(cfg, 80e9, h200) == pytest.approx(60e9 - 16 * p + 2 * p + 14 * p / 8 + 0.3 * 80e9)
    assert stages.lora_memory(cfg.qa_generator, cfg.models.generator, 936, measured=h200) == 12e9
    assert stages.lora_memory(cfg.seer, cfg.models.extractor, 900, sequences=2, measured=h200) == 20e9


def test_the_page_says_which_rows_are_measured_and_which_estimates(tmp_path):
    estimates_only = report.markdown(check_dir=tmp_path)
    assert "no GPU check is committed" in estimates_only and "training MEASURED" not in estimates_only
    page = report.markdown(check_dir=FIXTURE)
    assert page.startswith(estimates_only.split("\n")[0].replace(str(tmp_path), str(FIXTURE)))
    assert "measured on NVIDIA H200" in page
    measured_rows, profile = set(), None
    for line in page.splitlines():
        if line.startswith("`"):
            profile = line.split("`")[1]  # a table's heading names its profile
        elif line.startswith("| ") and "training MEASURED" in line:
            measured_rows.add((profile, line.split(" | ")[0].strip("| ")))
    assert {s for p, s in measured_rows if p == "paper-1p5b"} == {"train_eviomni", "qa_generator", "filco_train",
                                                                  "seer_train", "ar_study_train",
                                                                  "ablation_answer_rewards"}
    assert {s for p, s in measured_rows if p == "paper-7b"} == {"qa_generator", "filco_train", "ar_study_train"}
    assert not list((ROOT / "docs" / "gpu-check").glob("*.json"))  # none committed: the page says all are estimates
    assert "no GPU check is committed" in (ROOT / "docs" / "gpu-costs.md").read_text()


def test_a_check_without_a_figure_is_an_error_naming_file_and_key(tmp_path):
    check = json.loads((FIXTURE / "nvidia-h200.json").read_text())
    del check["steps"]["sft_qwen2.5-7b"]["params"]
    (tmp_path / "bad.json").write_text(json.dumps(check))
    with pytest.raises(InputError, match=r"bad.json: field 'steps.sft_qwen2.5-7b.params': no 'params'"):
        measured.read_check(tmp_path / "bad.json")
    check["environment"]["device"] = "cpu"
    (tmp_path / "cpu.json").write_text(json.dumps(check))
    assert measured.read_check(tmp_path / "cpu.json") is None  # a CPU run is never a measurement
