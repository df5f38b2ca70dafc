"""The layers of src/repro (docs/architecture.md, "Layers"): the import-linter contracts of pyproject.toml hold, they
cover every module, and they catch an upward import."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
from importlinter.api import read_configuration

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package under `src` (import-linter finds it through PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def layer_modules() -> set[str]:
    layers = next(c for c in CONTRACTS if c["type"] == "layers")["layers"]
    return {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}


def test_the_import_contracts_hold():
    result = lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CONTRACTS)} kept, 0 broken" in result.stdout


def test_every_module_belongs_to_a_layer():
    graph = grimp.build_graph("repro", cache_dir=None)
    layers = layer_modules()
    packages = {"repro", "repro.evaluation"}  # package inits that import nothing; their modules are layered one by one
    unlayered = sorted(m for m in graph.modules if m not in packages
                       and not any(m == layer or m.startswith(layer + ".") for layer in layers))
    assert unlayered == [], f"add these modules to a layer in pyproject.toml: {unlayered}"
    assert not graph.find_modules_directly_imported_by("repro.evaluation")


def test_an_upward_import_breaks_the_contract(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "repro", src / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    sft = src / "repro" / "train" / "sft.py"
    sft.write_text(sft.read_text(encoding="utf-8") + "\n\ndef _upward():\n    from repro.evaluation.study import Study\n",
                   encoding="utf-8")
    result = lint_imports(src)
    assert result.returncode != 0
    assert "repro.train.sft -> repro.evaluation.study" in result.stdout
