"""Profiles resolve as DVC parameter paths; preflight names the key to change for assets, GPUs and context lengths."""

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from repro import preflight
from repro.config import load_profile, profile_names
from repro.preflight import Gpu

ROOT = Path(__file__).resolve().parents[1]
A100 = Gpu("A100-SXM4-80GB", 80 * 10**9)


def dvc_params_errors(tmp_path: Path, monkeypatch, profile: str, params: dict) -> list[str]:
    """What `dvc repro` checks first for every stage: each `params:` path of dvc.yaml, with `profile` selected,
    read from params.yaml (DVC's ParamsDependency.get_hash, as when a stage runs)."""
    import dvc.dependency.param
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    repo_dir = tmp_path / profile.replace(".", "_")
    repo_dir.mkdir()
    (repo_dir / "params.yaml").write_text(yaml.safe_dump({**params, "profile": profile}, sort_keys=False))
    shutil.copy(ROOT / "dvc.yaml", repo_dir / "dvc.yaml")
    Repo.init(str(repo_dir), no_scm=True)
    errors, parsed = [], {}
    load_path = dvc.dependency.param.load_path  # DVC re-parses params.yaml for every dependency: parse it once

    def load_once(path, fs, **kwargs):
        if path not in parsed:
            parsed[path] = load_path(path, fs, **kwargs)
        return parsed[path]

    monkeypatch.setattr(dvc.dependency.param, "load_path", load_once)
    with Repo(str(repo_dir)) as repo:
        for stage in repo.index.stages:
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    try:
                        dep.get_hash()
                    except Exception as err:  # MissingParamsError and friends: collected, then asserted empty
                        errors.append(f"{stage.name}: {err}")
    return errors


@pytest.mark.parametrize("profile", profile_names(ROOT / "params.yaml"))
def test_every_profile_resolves_as_dvc_parameter_paths(tmp_path, monkeypatch, profile):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert dvc_params_errors(tmp_path, monkeypatch, profile, params) == []


def test_a_dotted_profile_name_is_what_dvc_cannot_resolve(tmp_path, monkeypatch):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["profiles"]["paper-1.5b"] = params["profiles"]["paper-1p5b"]
    errors = dvc_params_errors(tmp_path, monkeypatch, "paper-1.5b", params)
    assert errors and "profiles.paper-1.5b.models" in errors[0] and "missing from 'params.yaml'" in errors[0]


# --- context lengths ---


def test_an_o_r_context_longer_than_vllm_max_model_length_names_the_key():
    cfg = load_profile("paper-1p5b")  # vllm_max_model_length 2048, 768 rollout tokens, 32 answer tokens
    assert preflight.o_r_context_tokens(1248, cfg) == 2048
    assert preflight.context_errors(cfg, 1248) == []
    (error,) = preflight.context_errors(cfg, 1300)
    assert error == ("params.yaml: profiles.paper-1p5b.train.vllm_max_model_length: 2048 < 2100 tokens of the longest "
                     "o_r context (prompt 1300 + rationale 768 + answer 32); set it to at least 2100")


def test_the_context_check_skips_profiles_without_a_vllm_engine():
    assert preflight.context_errors(load_profile("tiny"), 10**6) == []


def word_tokenizer(path: Path) -> Path:
    """A word-level tokenizer with a chat template (every word one token): built in milliseconds."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.chat_template = ("{% for m in messages %}<{{ m.role }}> {{ m.content }}\n{% endfor %}"
                          "{% if add_generation_prompt %}<assistant>{% endif %}")
    fast.save_pretrained(path)
    return path


def test_the_longest_prompt_is_measured_with_the_chat_template(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.io import write_jsonl
    from repro.prompts import format_passages
    from repro.prompts import extraction_messages

    tokenizer_dir = word_tokenizer(tmp_path / "tokenizer")
    cfg = load_profile("ci")
    cfg = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=str(tokenizer_dir)))
    monkeypatch.chdir(tmp_path)
    assert preflight.longest_prompt_tokens(cfg) is None  # before the data stage
    passage = {"id": "1", "contents": '"Paris"\nParis is the capital of France.', "score": 1.0}
    rows = [{"id": "a", "question": "Capital of France?", "golden_answers": ["Paris"], "passages": [passage]},
            {"id": "b", "question": "Capital?", "golden_answers": ["Paris"], "passages": [passage] * 3}]
    write_jsonl(layout.contexts_path(cfg, cfg.train.dataset, "train"), rows)
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    longest = tok.apply_chat_template(extraction_messages("Capital?", format_passages([passage] * 3)),
                                      tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert preflight.longest_prompt_tokens(cfg) == len(longest) > 100  # Table 14's instructions + 3 passages


# --- GPUs ---


def test_cpu_profiles_ask_nothing_of_the_gpus_and_do_not_look(monkeypatch):
    def look():  # imports torch: seconds of every stage's preflight on a CPU
        raise AssertionError("a CPU profile's preflight counted the GPUs")

    monkeypatch.setattr(preflight, "visible_gpus", look)
    assert preflight.gpu_errors(load_profile("tiny")) == preflight.gpu_errors(load_profile("ci")) == []


def test_a_vllm_backend_asks_for_gpus_only_from_vllms_cuda_build(monkeypatch):
    tiny = load_profile("tiny")
    options = {"enforce_eager": True, "max_model_len": 2048, "kv_cache_memory_bytes": 2**31}
    tiny = dataclasses.replace(tiny, evaluation=dataclasses.replace(tiny.evaluation, backend="vllm", options=options))
    monkeypatch.setattr(preflight, "vllm_is_cpu_build", lambda: False)
    (error,) = preflight.gpu_errors(tiny, [])
    assert error.startswith("params.yaml: profiles.tiny.evaluation.backend: this profile runs on GPUs")
    monkeypatch.setattr(preflight, "vllm_is_cpu_build", lambda: True)
    assert preflight.gpu_errors(tiny, []) == []


def test_a_paper_profile_without_gpus_fails_in_one_line():
    (error,) = preflight.gpu_errors(load_profile("paper-1p5b"), [])
    assert error.startswith("params.yaml: profiles.paper-1p5b.train.accelerate_config: this profile runs on GPUs")


def test_too_few_gpus_name_the_process_count_and_the_tensor_parallel_size():
    errors = preflight.gpu_errors(load_profile("paper-1p5b"), [A100] * 2)
    assert errors == [
        "params.yaml: profiles.paper-1p5b.train.accelerate_config: configs/accelerate/zero2.yaml launches 8 processes, "
        "2 GPU(s) visible; set num_processes there",
        "params.yaml: profiles.paper-1p5b.agentic.agent_options.tensor_parallel_size: 4 > 2 visible GPU(s)"]
    assert preflight.gpu_errors(load_profile("paper-1p5b"), [A100] * 8) == []  # weights not local: no memory check


def test_a_memory_share_too_small_for_the_weights_names_the_key(tmp_path, monkeypatch):
    cfg = load_profile("paper-7b")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "configs", "configs")
    weights = Path("data/external/hub/Qwen/Qwen2.5-7B-Instruct/model-00001-of-00001.safetensors")
    weights.parent.mkdir(parents=True)
    with open(weights, "wb") as f:  # sparse: 15.2 GB of bf16 weights, no disk used
        f.truncate(15_230_000_000)
    errors = preflight.gpu_errors(cfg, [Gpu("A100-SXM4-40GB", 40 * 10**9)] * 8)
    assert errors == [f"params.yaml: profiles.paper-7b.{key}.gpu_memory_utilization: 0.3 of 40 GB holds 12.0 GB "
                      "< 15.2 GB of weights per GPU of Qwen/Qwen2.5-7B-Instruct"
                      for key in ("train.vllm", "evaluation.options", "latency.options")]
    assert preflight.gpu_errors(cfg, [A100] * 8) == []


# --- assets ---


def test_unfetched_assets_are_listed_with_their_key_and_the_fetch_command(tmp_path, monkeypatch):
    cfg = load_profile("paper-1p5b")
    cfg = dataclasses.replace(cfg, fetch=dataclasses.replace(cfg.fetch, revisions={
        repo: "a" * 40 for repo in cfg.fetch.revisions}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    errors = preflight.asset_errors(cfg)
    fetch = "run `HF_HUB_OFFLINE=0 python -m repro.remote fetch --profile paper-1p5b`"
    assert f"params.yaml: profiles.paper-1p5b.models.extractor: 'Qwen/Qwen2.5-1.5B-Instruct' is not fetched at " \
           f"aaaaaaaaaaaa; {fetch}" in errors
    assert "params.yaml: profiles.paper-1p5b.data.corpus.source: data/external/wiki-18.jsonl does not exist; run " \
           "`python -m repro.remote fetch --profile paper-1p5b`" in errors
    assert any(e.startswith("params.yaml: profiles.paper-1p5b.data.datasets[nq].source: ['nq/dev.jsonl'") for e in errors)
    assert all("\n" not in e for e in errors) and len(errors) == len(set(errors))


def test_placeholders_fail_preflight_and_light_stages_are_not_checked():
    cfg = load_profile("paper-1p5b")
    with pytest.raises(preflight.PreflightError, match=r"fetch\.revisions\.[\w/.-]+: 'PIN-ME' is a placeholder"):
        preflight.require(cfg, "main_comparison")
    assert preflight.require(cfg, "length_rewards") is None  # reads only the rewards section: runs anywhere


def test_a_notebook_stage_stops_before_its_notebook_runs_when_preflight_fails(monkeypatch):
    from repro import notebooks

    ran = []
    monkeypatch.setattr(notebooks, "run_notebook", lambda *args, **kwargs: ran.append(args))
    with pytest.raises(SystemExit, match=r"^error: profile paper-1p5b cannot run main_comparison here:\n"):
        notebooks.main(["main_comparison", "--profile", "paper-1p5b"])
    notebooks.main(["main_comparison", "--profile", "ci"])  # CPU profile, embedded assets: nothing to stop
    assert ran == [("main_comparison", "ci", {})]
