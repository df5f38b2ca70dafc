"""The registry (repro.registry): every row resolves to a builder in a layer `repro.evaluation.methods` may import
(importlib slips past import-linter), and what other modules derive from the rows agrees with them."""

import dataclasses
import importlib
import inspect
import shutil
import typing
from pathlib import Path

import pytest
import yaml
from importlinter.api import read_configuration

from repro import config, registry
from repro.config import load_profile, read_params
from repro.evaluation.methods import build_refiner
from repro.io import pipeline_stages
from repro.ops.costs import model, stages as cost_functions
from repro.reporting.paper import load_paper_tables

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
    assert method.prompt in (None, "table14", "passages_qa")
    if method.paper_method:
        assert method.paper_method in set(load_paper_tables(2)["method"]), method.key


def test_the_rows_are_what_the_config_and_the_cost_model_read():
    assert typing.get_args(config.EvaluationMethod) == tuple(registry.METHODS)
    assert len({m.label for m in registry.METHODS.values()}) == len(registry.METHODS)
    assert set(model.OWN_ENGINE) <= set(model.LLM_REFINERS)
    assert {"filco", "seer", "cot", "prompted_extractor", "eviomni", "eviomni_released"} <= set(model.LLM_REFINERS)
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
    from repro.formulas import metrics, rewards
    from repro.config import RewardsConfig

    score = getattr(rewards, design.score)
    parameters = inspect.signature(score).parameters
    assert list(parameters)[:3] == ["response", "golden_answers", "cfg"]
    given = design.requires + (("answer_metric",) if design.eq5_terms else ())
    assert tuple(list(parameters)[3:]) == given and set(design.requires) <= set(registry.INPUTS)
    assert design.answer_metric in metrics.ANSWER_METRICS
    if design.eq5_terms:  # what score_rollout reads to log the terms
        assert {"o_r", "o_e", "passages_length", "tokenizer"} <= set(design.requires)
    assert set(design.knobs) <= {f.name for f in dataclasses.fields(RewardsConfig)} and design.source
    assert typing.get_args(typing.get_type_hints(RewardsConfig)["design"]) == tuple(registry.REWARD_DESIGNS)


DVC_STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
NOTEBOOK_RUNNER = "python -m repro.ops.notebooks {name} --profile ${{profile}}"


def test_dvc_yaml_the_stage_modules_and_the_stage_rows_agree():
    assert list(registry.STAGES) == list(DVC_STAGES), "STAGES lists dvc.yaml's stages in dvc.yaml's order"
    modules = sorted(p.stem for p in (ROOT / "src" / "repro" / "stages").glob("*.py") if p.stem != "__init__")
    assert modules == sorted(registry.STAGES), "one module under src/repro/stages/ per stage, named after it"
    for stage in registry.STAGES.values():
        cmd = DVC_STAGES[stage.name]["cmd"]
        if stage.notebook:
            assert cmd == NOTEBOOK_RUNNER.format(name=stage.name), stage.name
            assert (ROOT / "notebooks" / f"{stage.notebook}.ipynb").exists(), stage.name
            assert f"results/${{profile}}/{stage.notebook}" in _dvc_paths(stage.name, "outs"), stage.name
        else:
            assert cmd.startswith(f"python -m repro.stages.{stage.name} "), stage.name
            assert callable(importlib.import_module(f"repro.stages.{stage.name}").main), stage.name


def _dvc_paths(stage: str, key: str) -> list[str]:
    return [next(iter(e)) if isinstance(e, dict) else e for e in DVC_STAGES[stage].get(key, [])]


def test_a_stage_row_names_its_metrics_plots_cost_checks_and_readers_as_they_are():
    from repro.ops import preflight
    from repro.reporting import ledger

    profile_fields = {f.name for f in dataclasses.fields(config.Profile)}
    for stage in registry.STAGES.values():
        assert (f"metrics/{stage.name}.json" in _dvc_paths(stage.name, "metrics")) == stage.metrics, stage.name
        assert (f"metrics/full/{stage.name}.json" in _dvc_paths(stage.name, "outs")) == stage.metrics, stage.name
        assert [p for p in _dvc_paths(stage.name, "outs") if p.startswith("plots/")] == [
            f"plots/{plot}.csv" for plot in stage.plots], stage.name
        assert stage.switch is None or stage.switch in profile_fields, stage.name
        assert stage.cost is None or callable(getattr(cost_functions, stage.cost)), stage.name
        assert set(stage.checks) <= set(preflight.CONTEXT_CHECKS), stage.name
        assert stage.claims is None or stage.claims.reader in ledger.READERS, stage.name
        if stage.extra_runs or stage.claims or stage.verdict or stage.methods or stage.checks:
            assert stage.notebook or stage.cost, f"{stage.name}: a study is a notebook or a costed stage"
    assert set(preflight.CONTEXT_CHECKS) == {c for s in registry.STAGES.values() for c in s.checks}
    assert set(ledger.READERS) == {s.claims.reader for s in registry.STAGES.values() if s.claims}


def test_each_notebook_imports_its_stage_module_alone():
    import ast
    import json

    for stage in (s for s in registry.STAGES.values() if s.notebook):
        cells = json.loads((ROOT / "notebooks" / f"{stage.notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        imported = {node.module for node in ast.walk(ast.parse(code)) if isinstance(node, ast.ImportFrom)} | {
            alias.name for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Import) for alias in node.names}
        assert {m for m in imported if m and m.split(".")[0] == "repro"} == {f"repro.stages.{stage.name}"}, stage.name
        module = importlib.import_module(f"repro.stages.{stage.name}")
        names = {a.asname or a.name for node in ast.walk(ast.parse(code)) if isinstance(node, ast.ImportFrom)
                 and node.module == f"repro.stages.{stage.name}" for a in node.names}
        assert names == set(module.__all__), f"{stage.name}: __all__ is what its notebook imports"


def test_dvc_runs_the_gates_before_every_stage_that_trains(monkeypatch):
    """A stage that can refuse the run and trains nothing (the released checkpoints' floors) runs first, so that a
    refusal costs no GPU-hour of training: the order is DVC's own plan of `dvc repro`."""
    from dvc.repo import Repo
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    monkeypatch.chdir(ROOT)
    with Repo(str(ROOT)) as repo:
        plan = [s.name for s in plan_repro(get_active_graph(repo.index.graph), collect_stages(repo, ["dvc.yaml"]))]
    assert sorted(plan) == sorted(registry.STAGES)
    gates = [plan.index(s.name) for s in registry.STAGES.values() if s.gate]
    trained = [plan.index(s.name) for s in registry.STAGES.values() if s.trains]
    assert gates and trained and max(gates) < min(trained), plan


def test_the_released_checkpoints_path_trains_nothing_but_the_qa_generator(tmp_path, monkeypatch):
    """docs/gpu.md's cheapest path to a paper number: `dvc exp run -S profile=released-1p5b -S
    eviomni=released_extractor main_comparison distractor_setting`, as DVC plans it. The LoRA baselines' stages are in
    the plan (Table 2's stage reads their outputs) but their sections are null: they record "not requested"."""
    from dvc.repo import Repo
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    from repro.config import load_profile

    params = (ROOT / "params.yaml").read_text().replace("\nprofile: tiny\n", "\nprofile: released-1p5b\n", 1)
    (tmp_path / "params.yaml").write_text(params.replace("\neviomni: train/eviomni\n",
                                                         "\neviomni: released_extractor\n", 1))
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    monkeypatch.chdir(tmp_path)
    Repo.init(str(tmp_path), no_scm=True)
    with Repo(str(tmp_path)) as repo:
        targets = collect_stages(repo, ["main_comparison", "distractor_setting"])
        plan = [s.name for s in plan_repro(get_active_graph(repo.index.graph), targets)]
    trained = {name for name in plan if registry.STAGES[name].trains}
    assert trained == {"qa_generator", "filco_train", "seer_train"}, plan
    cfg = load_profile("released-1p5b", tmp_path / "params.yaml")
    assert cfg.filco is None and cfg.seer is None and "released_extractor" in plan
    assert set(cfg.evaluation.methods) == set(cfg.distractor.methods) == {"zero", "full", "eviomni_released"}
