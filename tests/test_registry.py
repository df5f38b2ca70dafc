"""The registry (repro.registry): every row resolves to a builder in a layer `repro.evaluation.methods` may import
(importlib slips past import-linter), and what other modules derive from the rows agrees with them."""

import dataclasses
import importlib
import inspect
import typing
from pathlib import Path

import pytest
import yaml
from importlinter.api import read_configuration

from repro import config, costs, registry
from repro.config import load_profile, read_params
from repro.evaluation.methods import build_refiner
from repro.io import pipeline_stages
from repro.paper import load_paper_tables

ROOT = Path(__file__).resolve().parents[1]
LAYERS = next(c for c in read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]
              if c["type"] == "layers")["layers"]


def layer_of(module: str) -> int:
    """The index of the layer holding `module` (0 is the top), by its longest listed prefix."""
    found = [(len(name), i) for i, layer in enumerate(LAYERS) for name in layer.replace(":", "|").split("|")
             if module == name.strip() or module.startswith(name.strip() + ".")]
    return max(found)[1]


@pytest.mark.parametrize("method", registry.METHODS.values(), ids=list(registry.METHODS))
def test_every_row_resolves_to_a_builder_that_build_refiner_may_import(method):
    module, _, function = method.build.partition(":")
    builder = getattr(importlib.import_module(module), function)
    assert list(inspect.signature(builder).parameters) == ["key", "cfg", "pool", "params"]
    assert layer_of(module) >= layer_of("repro.evaluation.methods"), f"{module} sits above build_refiner's layer"
    assert method.group in registry.GROUPS and method.cost in registry.COSTS
    assert (method.cost == "compressor") == (method.model_field is not None)
    if method.paper_method:
        assert method.paper_method in set(load_paper_tables(2)["method"]), method.key


def test_the_rows_are_what_the_config_and_the_cost_model_read():
    assert typing.get_args(config.EvaluationMethod) == tuple(registry.METHODS)
    assert len({m.label for m in registry.METHODS.values()}) == len(registry.METHODS)
    assert set(costs.OWN_ENGINE) <= set(costs.LLM_REFINERS) == {"filco", "seer", "cot", "prompted_extractor",
                                                                  "eviomni", "eviomni_released"}
    for name in read_params()["profiles"]:  # every settings path a listed method reads exists in every profile
        cfg = load_profile(name)
        for section in registry.METHOD_LISTS:
            for key in getattr(cfg, section).methods if getattr(cfg, section) else []:
                assert registry.missing_settings(cfg, registry.METHODS[key]) is None, (name, key)


def test_the_stages_a_row_names_are_stages_and_each_method_list_has_its_stage():
    stages = pipeline_stages(ROOT / "dvc.yaml")
    assert {s for m in registry.METHODS.values() for s in m.stages} <= set(stages)
    assert set(registry.METHOD_LISTS.values()) <= set(stages)
    for section in registry.METHOD_LISTS:  # a section of the profile whose `methods` are registry keys
        hint = typing.get_type_hints(config.Profile)[section]
        (section_class,) = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        assert typing.get_type_hints(section_class)["methods"] == list[config.EvaluationMethod], section


def test_a_listed_method_without_its_settings_names_the_key(tmp_path):
    params = read_params()
    params["profiles"]["ci"]["baselines"] = {"selective_context": None, "llmlingua2": None, "recomp": None}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    listed = [m for m in load_profile("ci").evaluation.methods if registry.METHODS[m].cost == "compressor"]
    assert listed, "the ci profile lists a compressor"
    with pytest.raises(config.ConfigError, match=rf"profiles.ci.evaluation.methods: {listed[0]} reads baselines\."):
        load_profile("ci", path)
    del params["profiles"]["ci"]["evaluation"], params["profiles"]["ci"]["latency"]
    params["profiles"]["ci"]["distractor"] = params["profiles"]["ci"]["noise_robustness"] = None
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ValueError, match=r"method recomp needs params.yaml: profiles.ci.baselines.recomp"):
        build_refiner("recomp", load_profile("ci", path), pool=None, params=None)


@pytest.mark.parametrize("design", registry.REWARD_DESIGNS.values(), ids=list(registry.REWARD_DESIGNS))
def test_every_reward_design_scores_with_a_function_of_repro_rewards_on_known_inputs(design):
    from repro import rewards
    from repro.config import RewardsConfig

    score = getattr(rewards, design.score)
    parameters = inspect.signature(score).parameters
    assert list(parameters)[:3] == ["response", "golden_answers", "cfg"]
    assert tuple(list(parameters)[3:]) == design.requires and set(design.requires) <= set(registry.INPUTS)
    assert set(design.knobs) <= {f.name for f in dataclasses.fields(RewardsConfig)} and design.source
    assert typing.get_args(typing.get_type_hints(RewardsConfig)["design"]) == tuple(registry.REWARD_DESIGNS)
