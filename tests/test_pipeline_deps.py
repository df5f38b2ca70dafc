"""Each stage's code dependencies derived from the import graph (repro.ops.pipeline_deps, D195): dvc.yaml agrees with
the graph, and the graph follows every way this code imports, on a package written for the test."""

import json
import re
from pathlib import Path

import pytest

from repro.ops import pipeline_deps as deps
from repro.registry import Stage

ROOT = Path(__file__).resolve().parents[1]


def test_dvc_yaml_lists_each_stages_code_as_the_import_graph_derives_it(monkeypatch):
    monkeypatch.chdir(ROOT)  # the paths in dvc.yaml are relative to the repository root
    assert deps.differences() == {}, "run `python -m repro.ops.pipeline_deps --write`"


def test_each_stage_evaluating_a_method_list_depends_on_what_every_method_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert deps.missing_method_inputs() == {}
    pipeline = tmp_path / "dvc.yaml"  # FilCo's adapter dropped from Table 2's deps, SEER's from Table 4's
    text = (ROOT / "dvc.yaml").read_text()
    for stage, dropped in [("main_comparison", "data/${profile}/baselines/filco"),
                           ("latency", "data/${profile}/baselines/seer")]:
        head = text.index(f"\n  {stage}:")
        text = text[:head] + re.sub(rf"      - {re.escape(dropped)}( .*)?\n", "", text[head:], count=1)
    pipeline.write_text(text)
    assert deps.missing_method_inputs(pipeline) == {
        "main_comparison": ["filco: filco_train (data/${profile}/baselines/filco)"],
        "latency": ["seer: seer_train (data/${profile}/baselines/seer)"]}


def write_package(root: Path) -> None:
    """repro/: a notebook runner, modules imported at the top, in a function, relatively, lazily through a package's
    `_EXPORTS`, as a `-m` worker, through the preflight (not followed), and one module nothing imports."""
    files = {
        "__init__.py": "",
        "ops/__init__.py": "",
        "ops/notebooks.py": "from repro.ops import preflight\n",
        "ops/preflight.py": "from repro.ops import costs\n",
        "ops/costs.py": "",
        "a.py": "import json\n\ndef f():\n    from repro.b import g\n    return g\n",
        "b.py": "from . import c\n\ndef g():\n    return 'repro.worker'\n",
        "c.py": "",
        "worker/__init__.py": "",
        "worker/__main__.py": "from ..pkg import lazy_name\n",
        "pkg/__init__.py": "_EXPORTS = {'lazy_name': 'lazy'}\n",
        "pkg/lazy.py": "",
        "pkg/other.py": "",
        "unused.py": "import repro.c\n",
    }
    for name, text in files.items():
        path = root / "src" / "repro" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    cell = {"cell_type": "code", "source": ["%matplotlib inline\n", "from repro.a import f\n"], "metadata": {},
            "outputs": [], "execution_count": None}
    (root / "notebooks").mkdir()
    (root / "notebooks" / "study.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                                 "nbformat_minor": 5}))


@pytest.fixture
def study_stage(monkeypatch):
    """A notebook stage `study` (notebooks/study.ipynb) beside the real rows."""
    monkeypatch.setitem(deps.STAGES, "study", Stage("study", "study"))


def test_the_graph_follows_function_relative_lazy_and_worker_imports_but_not_the_preflight(tmp_path, study_stage):
    write_package(tmp_path)
    src, notebooks = tmp_path / "src", tmp_path / "notebooks"
    code = deps.stage_code("python -m repro.ops.notebooks study --profile ${profile}", src, notebooks)
    assert code == sorted(f"{src.as_posix()}/repro/{name}" for name in [
        "__init__.py", "ops/__init__.py", "ops/notebooks.py", "a.py", "b.py", "c.py",
        "worker",  # every module of worker/: its directory
        "pkg/__init__.py", "pkg/lazy.py"])
    assert deps.stage_code("python -m repro.worker", src, notebooks) == sorted(
        f"{src.as_posix()}/repro/{name}" for name in ["__init__.py", "worker", "pkg/__init__.py", "pkg/lazy.py"])
    with pytest.raises(ValueError, match="python -m repro"):
        deps.stage_code("bash run.sh", src, notebooks)


def test_the_check_names_what_is_missing_and_the_rewrite_keeps_everything_else(tmp_path, monkeypatch, study_stage):
    write_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    pipeline = tmp_path / "dvc.yaml"
    pipeline.write_text(
        "# the pipeline\n"
        "stages:\n"
        "  study:  # a study\n"
        "    cmd: python -m repro.ops.notebooks study --profile ${profile}\n"
        "    deps:\n"
        "      - notebooks/study.ipynb\n"
        "      - src/repro/ops/notebooks.py\n"
        "      - src/repro/unused.py\n"
        "      - data/${profile}/assets  # kept by hand\n"
        "    outs:\n"
        "      - results/${profile}/study\n")
    assert deps.differences(pipeline) == {"study": {
        "missing": ["src/repro/__init__.py", "src/repro/a.py", "src/repro/b.py", "src/repro/c.py",
                    "src/repro/ops/__init__.py", "src/repro/pkg/__init__.py", "src/repro/pkg/lazy.py",
                    "src/repro/worker"],
        "extra": ["src/repro/unused.py"]}}
    assert deps.rewrite(pipeline) == ["study"]
    assert deps.differences(pipeline) == {}
    lines = pipeline.read_text().splitlines()
    assert lines[:6] == ["# the pipeline", "stages:", "  study:  # a study",
                         "    cmd: python -m repro.ops.notebooks study --profile ${profile}", "    deps:",
                         "      - notebooks/study.ipynb"]
    assert lines[-4:] == ["      - src/repro/worker", "      - data/${profile}/assets  # kept by hand", "    outs:",
                          "      - results/${profile}/study"]
    assert deps.rewrite(pipeline) == []  # nothing left to change

    pipeline.write_text(pipeline.read_text().replace("      - src/repro/a.py", "      - src/repro/a.py  # why"))
    with pytest.raises(ValueError, match="src/repro/a.py carries a comment"):
        deps.rewrite(pipeline)


def test_a_new_stage_gets_its_code_at_the_end_of_its_deps(tmp_path, monkeypatch):
    write_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    pipeline = tmp_path / "dvc.yaml"
    pipeline.write_text("stages:\n  worker:\n    cmd: python -m repro.worker\n    deps:\n      - data/x\n"
                        "    outs:\n      - out\n")
    assert deps.rewrite(pipeline) == ["worker"]
    assert pipeline.read_text().splitlines()[4:10] == [
        "      - data/x", "      - src/repro/__init__.py", "      - src/repro/pkg/__init__.py",
        "      - src/repro/pkg/lazy.py", "      - src/repro/worker", "    outs:"]


def test_the_registry_builders_are_code_of_the_stages_that_build_methods(tmp_path, monkeypatch):
    """repro.evaluation.methods resolves the registry's "module:function" builders (RESOLVERS): a stage importing it
    needs their modules; a stage that only reads the registry's rows does not."""
    files = {"__init__.py": "", "registry.py": "ROWS = {'x': 'repro.builder:build'}\n", "builder.py": "",
             "evaluation/__init__.py": "", "evaluation/methods.py": "from repro import registry\n",
             "table.py": "from repro import registry\n", "study.py": "from repro.evaluation import methods\n"}
    for name, text in files.items():
        (tmp_path / "src" / "repro" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "repro" / name).write_text(text)
    src = tmp_path / "src"
    assert f"{src.as_posix()}/repro/builder.py" in deps.stage_code("python -m repro.study", src)
    assert f"{src.as_posix()}/repro/builder.py" not in deps.stage_code("python -m repro.table", src)
