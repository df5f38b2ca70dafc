"""The layers of src/repro (docs/architecture.md, "Layers"): the import-linter contracts of pyproject.toml hold, they
cover every module, and they catch an upward import."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    src = ROOT / "src"
    modules = {".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
               for path in src.glob("repro/**/*.py")}
    layers = layer_modules()
    unlayered = sorted(m for m in modules if not any(m == layer or m.startswith(layer + ".") for layer in layers))
    # `repro` and `repro.evaluation` (whose modules sit in two layers, around the baselines) are packages outside every
    # layer: their __init__ may import nothing, or it would carry imports the contract does not see
    assert unlayered == ["repro", "repro.evaluation"], f"add these modules to a layer in pyproject.toml: {unlayered}"
    for package in unlayered:
        init = src.joinpath(*package.split("."), "__init__.py")
        imports = [node for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
                   if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.module != "__future__")]
        assert imports == [], f"{init} imports {[ast.unparse(node) for node in imports]}"


def test_an_upward_import_and_training_imported_by_the_operations_break_the_contracts(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "repro", src / "repro", ignore=shutil.ignore_patterns("__pycache__"))
    runner = src / "repro" / "train" / "lora" / "runner.py"
    upward = "\n\ndef _upward():\n    from repro.studies.comparison import Study\n"  # inside a function: still upward
    runner.write_text(runner.read_text(encoding="utf-8") + upward, encoding="utf-8")
    costs = src / "repro" / "ops" / "costs" / "stages.py"
    sideways = "\n\ndef _sideways():\n    from repro.train.lora.runner import LoRARun\n"
    costs.write_text(costs.read_text(encoding="utf-8") + sideways, encoding="utf-8")
    result = lint_imports(src)
    assert result.returncode != 0
    assert "repro.train.lora.runner -> repro.studies.comparison" in result.stdout
    assert "repro.ops.costs.stages -> repro.train.lora.runner" in result.stdout
