"""How a profile turns into a study: the method registry and the models it names."""

import dataclasses
import typing

import pytest

from repro.config import EvaluationMethod, load_profile
from repro.evaluation.methods import build_refiner, extractor_model
from repro.evaluation.refiners import ClosedBook, FullPassages
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.registry import METHODS

def test_every_configurable_method_is_registered():
    assert set(METHODS) == set(typing.get_args(EvaluationMethod))
    assert {m.key for m in METHODS.values() if m.group == "VAR"} == {
        "lead_sentence", "selective_context", "llmlingua2", "llmlingua2_standin", "recomp", "filco", "seer"}
    for name in ("ci", "tiny", "paper-1p5b", "paper-7b"):
        cfg = load_profile(name)
        assert set(cfg.evaluation.methods) <= set(METHODS) and set(cfg.latency.methods) <= set(METHODS)
        assert set(cfg.distractor.methods) | set(cfg.noise_robustness.methods) <= set(METHODS)
        datasets = {d.name for d in cfg.data.datasets}
        assert set(cfg.evaluation.datasets) | set(cfg.distractor.datasets) | set(cfg.ablation.datasets) <= datasets
        assert {d.setting for d in cfg.data.datasets if d.name in cfg.distractor.datasets} == {"distractor"}


def test_methods_without_a_model_load_nothing():
    cfg, pool = load_profile("ci"), ModelPool()
    assert isinstance(build_refiner("zero", cfg, pool, GenerationParams()), ClosedBook)
    assert isinstance(build_refiner("full", cfg, pool, GenerationParams()), FullPassages)
    assert pool._loaded == {}


def test_llmlingua2_without_a_real_checkpoint_points_to_the_standin():
    cfg = load_profile("tiny")
    with pytest.raises(ValueError, match=r"method llmlingua2 needs params.yaml: profiles.tiny.baselines.llmlingua2."
                                         r"model \(or list llmlingua2_standin, which this profile can build\)"):
        build_refiner("llmlingua2", cfg, ModelPool(), GenerationParams())


def test_prompted_methods_name_their_model():
    cfg = load_profile("paper-1p5b")
    assert extractor_model("cot", cfg) == extractor_model("prompted_extractor", cfg) == "Qwen/Qwen2.5-1.5B-Instruct"
    assert extractor_model("eviomni_released", cfg) == "HIT-TMG/EviOmni-nq_train-1.5B"
    without = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, released_extractor=None))
    with pytest.raises(ValueError, match="released_extractor"):
        extractor_model("eviomni_released", without)
    with pytest.raises(ValueError, match="runs no model"):
        extractor_model("full", cfg)


def test_a_null_noise_robustness_section_evaluates_nothing_and_records_it(tmp_path, monkeypatch):
    """released-1p5b's `noise_robustness: null`: no prediction, the stage's output directory says not requested."""
    import json

    from repro.evaluation.tables import summarize_files
    from repro.studies.comparison import run_noise_robustness
    from repro.studies.figures import plot_noise_robustness

    cfg = dataclasses.replace(load_profile("ci"), noise_robustness=None)
    monkeypatch.chdir(tmp_path)
    files = run_noise_robustness(cfg)
    assert files.empty
    record = tmp_path / "data" / "ci" / "predictions" / "noise_robustness" / "study.json"
    assert json.loads(record.read_text()) == {"requested": False}
    summary = summarize_files(files)
    assert summary.empty and "noise" in summary.columns
    assert plot_noise_robustness(summary).axes[0].texts[0].get_text() == "Figure 5: not requested by this profile"
