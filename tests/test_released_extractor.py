"""`eviomni: released_extractor` (D132): the studies evaluate models.released_extractor as `eviomni_released`, the
released_extractor stage checks and fingerprints it, and dvc.yaml's evaluation stages then depend on no GRPO run.
The pipeline test runs the switch end to end on the ci profile (tests/test_pipeline.py)."""

import json
import shutil
from pathlib import Path

import networkx as nx
import pytest
import yaml

from conftest import ROOT
from repro.assets import AssetError
from repro.config import ConfigError, load_profile
from repro.evaluation.methods import extractor_model
from repro.evaluation.released import RECORD, checkpoint_record, main, released_dir
from repro.io import model_fingerprint

EVALUATION_STAGES = ["main_comparison", "latency", "distractor_setting", "noise_robustness", "case_inspection"]


def _params(tmp_path: Path, eviomni: str | None, **models) -> Path:
    """The repository's params.yaml with the top-level `eviomni` switch set (None: removed) and ci's `models`
    updated."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    if eviomni is None:
        params.pop("eviomni")
    else:
        params["eviomni"] = eviomni
    params["profiles"]["ci"]["models"].update(models)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.fixture
def stand_in(tmp_path) -> Path:
    """A directory laid out like a released checkpoint (its bytes are only fingerprinted here)."""
    path = tmp_path / "EviOmni-stand-in"
    path.mkdir()
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "model.safetensors").write_bytes(b"weights")
    return path


# --- the switch in the profile ---


def test_the_default_is_the_trained_extractor_and_lists_are_unchanged(tmp_path):
    cfg = load_profile("paper-1p5b", _params(tmp_path, None))
    assert cfg.eviomni == "train/eviomni" == load_profile("paper-1p5b").eviomni
    assert cfg.evaluation.methods[-2:] == ["eviomni", "eviomni_released"]


def test_released_replaces_eviomni_once_in_every_study(tmp_path):
    cfg = load_profile("paper-1p5b", _params(tmp_path, "released_extractor"))
    assert cfg.eviomni == "released_extractor"
    assert cfg.evaluation.methods == ["zero", "full", "selective_context", "llmlingua2", "recomp", "filco", "seer",
                                      "cot", "eviomni_released"]
    assert cfg.latency.methods == ["filco", "cot", "eviomni_released"]
    assert cfg.distractor.methods == ["zero", "full", "llmlingua2", "filco", "cot", "eviomni_released"]
    assert cfg.noise_robustness.methods == ["full", "filco", "eviomni_released"]
    ci = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor="some/dir"))
    assert ci.evaluation.methods[-2:] == ["prompted_extractor", "eviomni_released"]  # in eviomni's place
    assert ci.distractor.methods == ["zero", "full", "eviomni_released"]
    assert ci.agentic == load_profile("ci").agentic and ci.ablation == load_profile("ci").ablation  # not rewritten


def test_the_switch_needs_a_released_checkpoint_and_a_known_value(tmp_path):
    with pytest.raises(ConfigError, match=r"profiles\.ci\.models\.released_extractor: null.*top-level `eviomni`"):
        load_profile("ci", _params(tmp_path, "released_extractor"))
    with pytest.raises(ConfigError, match=r"eviomni: 'released' is not one of"):
        load_profile("ci", _params(tmp_path, "released"))
    params = yaml.safe_load(_params(tmp_path, None).read_text())
    params["profiles"]["ci"]["eviomni"] = "released_extractor"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"profiles\.ci\.eviomni: .* top-level `eviomni` key"):
        load_profile("ci", tmp_path / "params.yaml")


def test_eviomni_released_runs_the_named_checkpoint(tmp_path, stand_in):
    cfg = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor=str(stand_in)))
    assert extractor_model("eviomni_released", cfg) == str(stand_in)


def test_a_missing_trained_extractor_points_to_the_switch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="eviomni: released_extractor"):
        extractor_model("eviomni", load_profile("ci", ROOT / "params.yaml"))


# --- the released_extractor stage ---


def test_the_record_names_reference_and_fingerprint_of_a_local_checkpoint(tmp_path, stand_in, monkeypatch):
    cfg = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor=str(stand_in)))
    assert checkpoint_record(cfg) == {"reference": str(stand_in), "fingerprint": model_fingerprint(str(stand_in))}
    monkeypatch.chdir(tmp_path)  # the stage's command reads ./params.yaml and writes under ./data
    main(["--profile", "ci"])
    record = json.loads((released_dir("ci") / RECORD).read_text())
    assert record == checkpoint_record(cfg)
    (stand_in / "model.safetensors").write_bytes(b"other weights")  # another checkpoint: another record
    assert checkpoint_record(cfg)["fingerprint"] != record["fingerprint"]


def test_a_profile_without_released_checkpoint_records_none(tmp_path):
    assert checkpoint_record(load_profile("ci", _params(tmp_path, None))) == {"reference": None}


def test_an_unfetched_hub_checkpoint_names_the_key_and_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/external here
    cfg = load_profile("paper-1p5b", ROOT / "params.yaml")
    with pytest.raises(AssetError, match=r"profiles\.paper-1p5b\.models\.released_extractor: "
                                         r"'HIT-TMG/EviOmni-nq_train-1\.5B' is not a directory.*repro\.remote fetch"):
        checkpoint_record(cfg)


def test_a_checkpoint_without_safetensors_is_refused(tmp_path, stand_in):
    (stand_in / "model.safetensors").unlink()
    (stand_in / "pytorch_model.bin").write_bytes(b"pickle")
    cfg = load_profile("ci", _params(tmp_path, None, released_extractor=str(stand_in)))
    with pytest.raises(AssetError, match=r"has no \*\.safetensors"):
        checkpoint_record(cfg)


# --- dvc.yaml: what each evaluation stage needs ---


def _upstream(tmp_path: Path, eviomni: str) -> dict[str, set[str]]:
    """For each evaluation stage and Table 3's, the stages `dvc repro <stage>` runs before it (DVC's own graph, ci
    profile)."""
    from dvc.repo import Repo

    repo_dir = tmp_path / eviomni.replace("/", "_")
    repo_dir.mkdir()
    params = yaml.safe_load(_params(tmp_path, eviomni, released_extractor="some/dir").read_text())
    (repo_dir / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "ci"}, sort_keys=False))
    shutil.copy(ROOT / "dvc.yaml", repo_dir / "dvc.yaml")
    Repo.init(str(repo_dir), no_scm=True)
    with Repo(str(repo_dir)) as repo:
        graph = repo.index.graph
        by_name = {stage.name: stage for stage in graph}
        return {name: {stage.name for stage in nx.descendants(graph, by_name[name])}
                for name in [*EVALUATION_STAGES, "ablation_answer_rewards"]}


def test_under_the_switch_no_evaluation_stage_needs_the_grpo_run(tmp_path):
    released = _upstream(tmp_path, "released_extractor")
    trained = _upstream(tmp_path, "train/eviomni")
    for stage in EVALUATION_STAGES:
        assert "released_extractor" in released[stage], stage
        assert not {"train_eviomni", "format_warmup"} & released[stage], (stage, released[stage])
        assert {"train_eviomni", "format_warmup"} <= trained[stage], (stage, trained[stage])
        assert "released_extractor" not in trained[stage], stage
    for upstream in (released, trained):  # Table 3 trains under either switch; its reference row may be the main run
        assert "train_eviomni" in upstream["ablation_answer_rewards"]  # (D165)
        assert "released_extractor" not in upstream["ablation_answer_rewards"]
