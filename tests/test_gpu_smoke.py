"""The gpu-smoke profile: paper-1p5b's code path at a size one GPU runs in about half an hour (D135, D136). What can
be checked without a GPU: it parses for DVC, it runs the paper profile's engines, launcher, data and retrievers, its
fetch plan is a subset of paper-1p5b's and is fetched from the rehearsal's mirror, which holds each repo as the hub does
(the `.bin`-only ones converted), and its wiki-18 slice is cut from a file laid out like the real one."""

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import BIN_ONLY_REPOS, REHEARSAL_MIRROR

from repro.config import is_main_run, load_profile, read_params
from repro.io import InputError
from repro.ops import remote
from repro.ops.preflight import Gpu, gpu_errors

ROOT = Path(__file__).resolve().parents[1]
WIKI18 = [{"id": str(i), "contents": f'"{title}"\n{title} passage {i}'}
          for i, title in enumerate(["Aaron"] * 3 + ["Aaron Burr"] * 2)]  # Search-R1's wiki-18.jsonl lines


def smoke_params(**sections) -> dict:
    """params.yaml with gpu-smoke selected and `sections` of it replaced (`corpus`: keys of data.corpus changed)."""
    params = read_params(ROOT / "params.yaml")
    smoke = params["profiles"]["gpu-smoke"]
    if "corpus" in sections:
        smoke["data"] = {**smoke["data"], "corpus": {**smoke["data"]["corpus"], **sections.pop("corpus")}}
    smoke.update(sections)
    return {**params, "profile": "gpu-smoke"}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory with gpu-smoke's params and the repository's configs (and no lock file yet)."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "configs", "configs")
    Path("params.yaml").write_text(yaml.safe_dump(smoke_params(), sort_keys=False))
    return tmp_path


def test_dvc_stage_list_parses_with_the_smoke_profile(tmp_path):
    (tmp_path / "params.yaml").write_text(
        (ROOT / "params.yaml").read_text().replace("\nprofile: tiny\n", "\nprofile: gpu-smoke\n", 1))
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    listed = subprocess.run([*dvc, "stage", "list"], cwd=tmp_path, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    stages = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert {"data", "train_eviomni", "main_comparison", "ablation_answer_rewards", "agentic_search_r1",
            "ar_study"} <= stages
    assert "data/gpu-smoke/corpus" in listed.stdout  # ${profile} resolved


def test_the_smoke_runs_paper_1p5bs_code_path_on_one_gpu():
    smoke, paper = load_profile("gpu-smoke"), load_profile("paper-1p5b")
    assert smoke.models.extractor == smoke.models.generator == paper.models.extractor
    assert smoke.models.released_extractor == paper.models.released_extractor
    assert smoke.retrieval == paper.retrieval and smoke.rewards == paper.rewards and smoke.baselines == paper.baselines
    assert [(d.name, d.format, d.source, d.splits) for d in smoke.data.datasets] == \
        [(d.name, d.format, d.source, d.splits) for d in paper.data.datasets]
    assert smoke.data.corpus.source == paper.data.corpus.source and smoke.data.corpus.max_passages == 100_000
    for section in ("evaluation", "latency", "agentic"):
        assert getattr(smoke, section).backend == getattr(paper, section).backend == "vllm"
    assert smoke.ar_study.evaluation.backend == "vllm" and smoke.ar_study.teacher.backend == "vllm"
    assert smoke.evaluation.methods == paper.evaluation.methods  # every Table 2 column
    assert smoke.ablation.max_steps is paper.ablation.max_steps is None  # the main run's budget: its row reused (D165)
    assert [s for s in smoke.ablation.subsets if not is_main_run(smoke, s)] == [("evidence",)]  # the one trained
    assert [s for s in paper.ablation.subsets if is_main_run(paper, s)] == [s for s in smoke.ablation.subsets
                                                                             if is_main_run(smoke, s)]
    train = {k: v for k, v in vars(smoke.train).items() if k not in ("max_steps", "save_steps", "dev_max_questions",
                                                                      "accelerate_config")}
    assert train == {k: getattr(paper.train, k) for k in train}  # per-GPU batch, lengths, vLLM: paper-1p5b's
    launcher = yaml.safe_load(Path(ROOT, smoke.train.accelerate_config).read_text())
    paper_launcher = yaml.safe_load(Path(ROOT, paper.train.accelerate_config).read_text())
    assert launcher == {**paper_launcher, "num_processes": 1}  # the same DeepSpeed ZeRO-2 file, one process
    a100 = Gpu("A100-SXM4-80GB", 80 * 10**9)
    assert gpu_errors(smoke, [a100]) == []
    assert gpu_errors(smoke, [])[0].startswith("params.yaml: profiles.gpu-smoke.train.accelerate_config: this "
                                               "profile runs on GPUs")


@pytest.mark.slow
@pytest.mark.xdist_group(REHEARSAL_MIRROR)
def test_the_fetch_dry_run_lists_what_the_smoke_needs(project, rehearsal_mirror, capsys):
    root, manifest = rehearsal_mirror
    cfg = load_profile("gpu-smoke")
    remote.main(["fetch", "--profile", "gpu-smoke", "--from", str(root), "--dry-run"])
    out = capsys.readouterr().out
    listed = {line.split("@")[0] for line in out.splitlines() if "@" in line}
    assert listed == {row.repo for row, _ in remote.needs(cfg)}
    assert {"Qwen/Qwen2.5-1.5B-Instruct", "HIT-TMG/EviOmni-nq_train-1.5B", "facebook/dpr-ctx_encoder-single-nq-base",
            "intfloat/e5-base-v2", "RUC-NLPIR/FlashRAG_datasets", "PeterJinGo/wiki-18-corpus",
            "fangyuan/nq_extractive_compressor"} <= listed
    assert not listed & {"PeterJinGo/wiki-18-e5-index", "HIT-TMG/EviOmni-nq_train-7B",
                         "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3",
                         "microsoft/deberta-v2-xlarge-mnli"}  # no Table 5 32B agent, no R_EQR: reward_designs null
    dpr = "facebook/dpr-ctx_encoder-single-nq-base"
    assert f"{dpr}@{manifest['repos'][dpr]['commit']} (new)" in out and "    pytorch_model.bin  " in out
    assert "total " in out and not Path("data/external").exists() and not Path("fetch.lock.yaml").exists()
    paper = {row.repo: set(files) for row, files in remote.needs(load_profile("paper-1p5b", ROOT / "params.yaml"))}
    assert all(set(files) <= paper[row.repo] for row, files in remote.needs(cfg))  # fetched once for both runs


@pytest.mark.slow
@pytest.mark.xdist_group(REHEARSAL_MIRROR)
def test_the_smoke_fetches_the_bin_only_repos_from_the_rehearsal_mirror_and_converts_them(project, rehearsal_mirror):
    import torch
    from safetensors.torch import load_file

    root, manifest = rehearsal_mirror
    study = {"designs": [{"design": "eviomni"}, {"design": "evinote"}], "datasets": ["nq"], "split": "test",
             "max_steps": None, "max_questions": None}  # the study switched on: R_EQR's NLI model enters the plan
    Path("params.yaml").write_text(yaml.safe_dump(smoke_params(reward_designs=study), sort_keys=False))
    remote.main(["fetch", "--profile", "gpu-smoke", "--from", str(root)])
    lock, cfg = remote.read_lock(Path("fetch.lock.yaml")), load_profile("gpu-smoke")
    assert set(lock) == {row.repo for row, _ in remote.needs(cfg)} >= BIN_ONLY_REPOS
    assert all(entry["commit"] == manifest["repos"][repo]["commit"] for repo, entry in lock.items())
    for repo in BIN_ONLY_REPOS:
        local, source = remote.fetched_dir(repo), root / repo / "resolve" / manifest["repos"][repo]["commit"]
        assert "pytorch_model.bin" in lock[repo]["files"] and not (local / "README.md").exists()
        converted = load_file(local / "model.safetensors")
        state = torch.load(source / "pytorch_model.bin", weights_only=True)
        assert converted.keys() == state.keys() and all(torch.equal(converted[k], state[k]) for k in state)
        assert remote.read_manifest()[repo]["built"] == {str(local / "model.safetensors"):
                                                         remote.sha256_file(local / "model.safetensors")}
    assert (remote.fetched_dir("fangyuan/nq_extractive_compressor") / "1_Pooling" / "config.json").is_file()
    assert (remote.fetched_dir("microsoft/deberta-v2-xlarge-mnli") / "spm.model").is_file()
    qwen = "Qwen/Qwen2.5-1.5B-Instruct"
    assert sorted(p.name for p in remote.fetched_dir(qwen).iterdir()) == sorted(lock[qwen]["files"])


def test_the_data_stage_cuts_the_first_passages_of_the_fetched_corpus(project):
    from repro.retrieval.prepare import build_corpus, open_corpus

    source = project / "hub" / "wiki-18.jsonl.gz"
    source.parent.mkdir()
    source.write_bytes(gzip.compress("".join(json.dumps(p) + "\n" for p in WIKI18).encode()))
    remote.gunzip_corpus(source.parent, [source.name])  # the fetch builder: data/external/wiki-18.jsonl
    Path("params.yaml").write_text(yaml.safe_dump(smoke_params(corpus={"max_passages": 3}), sort_keys=False))
    cfg = load_profile("gpu-smoke")
    manifest = build_corpus(cfg)
    assert manifest["passages"] == 3 and manifest["max_passages"] == 3
    assert manifest["path"] == "data/gpu-smoke/corpus/passages.jsonl" and manifest["source"] == str(remote.WIKI18)
    store, fingerprint = open_corpus(cfg)
    assert list(store) == WIKI18[:3] and store.path == Path(manifest["path"])
    assert fingerprint == manifest["fingerprint"] != remote.sha256_file(remote.WIKI18)  # indexes key on the slice
    store.close()
    assert [json.loads(line) for line in remote.WIKI18.read_text().splitlines()] == WIKI18  # the source is kept
    Path("params.yaml").write_text(yaml.safe_dump(smoke_params(corpus={"max_passages": 6}), sort_keys=False))
    with pytest.raises(InputError, match=r"holds 5 passages, fewer than the 6 asked for"):
        build_corpus(load_profile("gpu-smoke"))


# Engine and launcher settings: where each smoke differs from its paper profile, and why (issue #45)
ENGINE_SETTINGS = ("*options.*", "*accelerate_config", "train.use_vllm", "train.vllm_*", "fetch.prebuilt_index")
LOCAL_TEACHER = "the AR study's teacher is a local vLLM engine, not DeepSeek's API (no key on a smoke node, D136)"
SMOKE_DIFFERENCES = {
    ("paper-1p5b", "gpu-smoke"): {
        "*accelerate_config": "one process of the same launch (zero2-1gpu / ddp-1gpu)",
        "agentic.agent_options.tensor_parallel_size": "one GPU: the 7B agent unsharded; gpu-smoke-2gpu shards it",
        "*options.enforce_eager": "no CUDA-graph capture or compilation: minutes of every engine start on a half-hour "
                                  "budget (D136); gpu-smoke-2gpu runs the paper's graph mode",
        "*options.gpu_memory_utilization": "the engines of a stage share one GPU (agent 0.5 + extractor 0.2; study "
                                           "engines 0.25 each); gpu-smoke-2gpu runs the paper's shares",
        "ar_study.teacher.options.*": LOCAL_TEACHER,
        "fetch.prebuilt_index": "the slice is encoded, not imported: no 65 GB fetch on the first smoke (D135); "
                                "gpu-smoke-2gpu imports it",
    },
    ("paper-1p5b", "gpu-smoke-2gpu"): {
        "*accelerate_config": "two processes of the same launch (zero2-2gpu / ddp-2gpu)",
        "agentic.agent_options.tensor_parallel_size": "two GPUs: the agent sharded 2-way, the smallest tensor parallel",
        "ar_study.teacher.options.*": LOCAL_TEACHER,
    },
    ("paper-7b", "gpu-smoke-7b-2gpu"): {
        "*accelerate_config": "two processes of the same launch (zero3-2gpu / ddp-2gpu)",
        "agentic.agent_options.tensor_parallel_size": "two GPUs: the agent sharded 2-way, the smallest tensor parallel",
        "ar_study.teacher.options.*": LOCAL_TEACHER,
    },
}


@pytest.mark.parametrize("paper, smoke", sorted(SMOKE_DIFFERENCES))
def test_every_engine_and_launcher_setting_where_a_smoke_differs_from_its_paper_profile_has_a_reason(paper, smoke):
    from fnmatch import fnmatchcase

    from test_rehearsal import MISSING, flatten

    profiles = yaml.safe_load((ROOT / "params.yaml").read_text())["profiles"]
    a, b = flatten(profiles[paper]), flatten(profiles[smoke])
    differing = sorted(k for k in a.keys() | b.keys() if any(fnmatchcase(k, p) for p in ENGINE_SETTINGS)
                       and a.get(k, MISSING) != b.get(k, MISSING))
    allowed = SMOKE_DIFFERENCES[(paper, smoke)]
    unexplained = [f"{k}: {a.get(k, '(absent)')!r} -> {b.get(k, '(absent)')!r}" for k in differing
                   if not any(fnmatchcase(k, pattern) for pattern in allowed)]
    assert not unexplained, f"{smoke} differs from {paper} without a reason:\n" + "\n".join(unexplained)
    unused = [p for p in allowed if not any(fnmatchcase(k, p) for k in differing)]
    assert not unused, f"reasons no difference needs any more: {unused}"
