"""Each stage's code dependencies, derived from the import graph rather than kept by hand (issue #32, D195).

A stage's command runs one module (`python -m repro.X ...`); `python -m repro.ops.notebooks STAGE` also runs the code
cells of the stage's notebook (its row in repro.registry.STAGES). The stage depends on every module of `repro` that
these import, directly or through other modules, with:
- imports inside functions (they run when the function is called);
- the `__init__.py` of every package on the way (importing `repro.a.b` runs `repro/__init__.py` and
  `repro/a/__init__.py`), and a package's `__main__.py` where it is run with `-m`;
- the lazy exports a package declares in its `_EXPORTS` dict (name → submodule), followed on `from pkg import name`;
- a string literal that is exactly a module's name (a `-m` target of a worker process, e.g. `"repro.train.grpo"`);
- for a module of RESOLVERS, the modules named by the "module:attribute" string literals of the module it resolves
  them for (`repro.evaluation.methods` imports `repro.registry`'s builders when a study builds a method).
`PREFLIGHT` is not followed: it refuses a run before it starts and writes nothing, so a change to it (or to the cost
model it reads) cannot change an output, and following it would make every stage stale with each such change.

A package whose every module is needed is listed as its directory. `dvc.yaml` holds the result under each stage's
`deps:`, beside the data, notebook and requirement files kept by hand. Of those, the check also holds a stage that
evaluates a profile's methods (`repro.registry.METHOD_LISTS`) to depend on an output of every stage a method's
row names (`Method.stages`: its weights, its adapter), so that any method a profile lists there runs on fresh inputs:

    python -m repro.ops.pipeline_deps            # check: exit 1, printing each stage's missing and extra entries
    python -m repro.ops.pipeline_deps --write    # rewrite the src/ entries of every stage's deps in place
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from repro.config import TRAINED_EVIOMNI
from repro.io import PIPELINE_FILE, InputError, pipeline_stages, read_json_object
from repro.registry import METHOD_LISTS, METHODS, STAGES

PACKAGE = "repro"
SRC = Path("src")
NOTEBOOKS = Path("notebooks")
NOTEBOOK_RUNNER = "repro.ops.notebooks"
PREFLIGHT = "repro.ops.preflight"
_MODULE_NAME = re.compile(rf"{PACKAGE}(\.[A-Za-z_]\w*)+")
_REFERENCE = re.compile(rf"({PACKAGE}(?:\.[A-Za-z_]\w*)+):[A-Za-z_]\w*")  # "module:attribute"
# a module that imports the "module:attribute" references of another's string literals (repro.registry's builders,
# which only build_refiner imports): a stage that needs the first needs the modules those references name
RESOLVERS = {"repro.evaluation.methods": "repro.registry"}
_COMMAND = re.compile(r"python -m (\S+)(?: (\S+))?")
_DEP = re.compile(r"^(?P<indent>\s+)- (?P<path>\S+)(?P<comment>\s+#.*)?$")


def module_file(name: str, src: Path = SRC) -> Path | None:
    """The file that defines module `name` under `src` (a package's `__init__.py`), or None outside it."""
    base = src.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def _is_package(name: str, src: Path) -> bool:
    return src.joinpath(*name.split("."), "__init__.py").is_file()


@functools.cache
def _lazy_exports(package: str, src: Path) -> dict[str, str]:
    """A package's `_EXPORTS` (name → submodule) from its `__init__.py`; {} for a module or without one."""
    if not _is_package(package, src):
        return {}
    for node in ast.parse(module_file(package, src).read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values)
                    if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
    return {}


def imported_modules(source: str, name: str, src: Path = SRC) -> set[str]:
    """The modules of `PACKAGE` that the code `source` of module `name` imports (relative imports resolved against
    it), as the module docstring says; names that are not modules under `src` are left out."""
    tree = ast.parse(source)
    package = name if _is_package(name, src) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            exports = _lazy_exports(base, src.resolve())
            for alias in node.names:
                found.add(f"{base}.{exports.get(alias.name, alias.name)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            found.add(node.value)
            if _is_package(node.value, src):  # run with -m: its __main__
                found.add(f"{node.value}.__main__")
    return {m for m in found if m.split(".")[0] == PACKAGE and module_file(m, src)}


def referenced_modules(source: str, src: Path = SRC) -> set[str]:
    """The modules of `PACKAGE` that the "module:attribute" string literals of the code `source` name."""
    return {named.group(1) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and (named := _REFERENCE.fullmatch(node.value))
            and module_file(named.group(1), src)}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def notebook_source(path: Path) -> str:
    """The code cells of a notebook, IPython magics and shell lines left out."""
    cells = read_json_object(path).get("cells")
    if not isinstance(cells, list):
        raise InputError(path, "not a notebook: no `cells` list")
    lines = [line for cell in cells if cell["cell_type"] == "code" for line in "".join(cell["source"]).splitlines()
             if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def closure(roots: Iterable[str], extra_sources: Iterable[str] = (), src: Path = SRC) -> set[Path]:
    """The files of every module that `roots` (module names) and `extra_sources` (code, e.g. a notebook's) need."""
    pending = {m for root in roots for m in _with_parents(root)}
    for source in extra_sources:
        pending |= {m for found in imported_modules(source, PACKAGE, src) for m in _with_parents(found)}
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen or name == PREFLIGHT or module_file(name, src) is None:
            continue
        seen.add(name)
        imports = imported_modules(module_file(name, src).read_text(encoding="utf-8"), name, src)
        if name in RESOLVERS:
            imports |= referenced_modules(module_file(RESOLVERS[name], src).read_text(encoding="utf-8"), src)
        pending |= {m for found in imports for m in _with_parents(found)} - seen
    return {module_file(name, src) for name in seen}


def collapse(files: set[Path]) -> list[str]:
    """`files` as dvc.yaml lists them: a package directory wherever every module under it is needed."""
    listed, covered = [], set()
    for directory in sorted({f.parent for f in files}, key=lambda d: len(d.parts)):
        if any(parent in covered for parent in directory.parents) or directory in covered:
            continue
        if set(directory.rglob("*.py")) <= files:
            covered.add(directory)
            listed.append(directory.as_posix())
    listed += [f.as_posix() for f in files if not any(parent in covered for parent in f.parents)]
    return sorted(listed)


def stage_code(command: str, src: Path = SRC, notebooks: Path = NOTEBOOKS) -> list[str]:
    """The src/ entries of the deps of a stage that runs `command`."""
    match = _COMMAND.match(command)
    if match is None or match.group(1).split(".")[0] != PACKAGE:
        raise ValueError(f"{PIPELINE_FILE}: cannot derive the code dependencies of {command!r}; expected "
                         f"`python -m {PACKAGE}.<module> ...`")
    module, argument = match.groups()
    roots = [module] + ([f"{module}.__main__"] if _is_package(module, src) else [])
    sources = [notebook_source(notebooks / f"{STAGES[argument].notebook}.ipynb")] if module == NOTEBOOK_RUNNER else []
    return collapse(closure(roots, sources, src))


def _is_code(path: str) -> bool:
    return path.startswith(f"{SRC.as_posix()}/")


def differences(pipeline: Path = PIPELINE_FILE) -> dict[str, dict[str, list[str]]]:
    """Per stage whose listed code dependencies are not the derived ones: the `missing` and `extra` entries."""
    stages = pipeline_stages(pipeline)
    found = {}
    for stage, spec in stages.items():
        listed = {d for d in spec.get("deps", []) if isinstance(d, str) and _is_code(d)}
        derived = set(stage_code(spec["cmd"]))
        if listed != derived:
            found[stage] = {"missing": sorted(derived - listed), "extra": sorted(listed - derived)}
    return found


def _path(entry: str | dict) -> str:
    return entry if isinstance(entry, str) else next(iter(entry))


def _covers(dep: str, out: str) -> bool:
    return dep == out or out.startswith(f"{dep}/") or dep.startswith(f"{out}/")


def missing_method_inputs(pipeline: Path = PIPELINE_FILE) -> dict[str, list[str]]:
    """Per stage evaluating a method list (METHOD_LISTS): each method whose row names a stage none of whose outputs
    it depends on, as "method: stage (its outputs)". `${eviomni}` reads as the trained run's path: under the released
    switch the `eviomni` method becomes `eviomni_released` (`repro.config.with_released_eviomni`)."""
    stages = pipeline_stages(pipeline)
    found = {}
    for stage in METHOD_LISTS.values():
        deps = [_path(d).replace("${eviomni}", TRAINED_EVIOMNI) for d in stages[stage].get("deps", [])]
        lacking = []
        for method in METHODS.values():
            for needed in method.stages:
                outs = [_path(o) for o in stages[needed].get("outs", [])]
                if not any(_covers(dep, out) for dep in deps for out in outs):
                    lacking.append(f"{method.key}: {needed} ({', '.join(outs)})")
        if lacking:
            found[stage] = lacking
    return found


def rewrite(pipeline: Path = PIPELINE_FILE) -> list[str]:
    """Replace the src/ entries of every stage's deps in `pipeline` by the derived ones, at the place of the first
    (the other lines, comments included, stay as they are), or at the end of its deps when it lists none yet (a new
    stage); returns the stages changed."""
    stages = pipeline_stages(pipeline)
    out, changed, stage, in_deps, written = [], [], None, False, False

    def write_derived(indent: str) -> None:
        derived = stage_code(stages[stage]["cmd"])
        listed = [d for d in stages[stage]["deps"] if isinstance(d, str) and _is_code(d)]
        if sorted(listed) != derived:
            changed.append(stage)
        out.extend(f"{indent}- {path}" for path in derived)

    for line in pipeline.read_text(encoding="utf-8").splitlines():
        if in_deps and not _DEP.match(line):
            in_deps = False
            if not written:  # a stage with no code dependency listed yet: they go at the end of its deps
                write_derived("      ")
                written = True
        if (heading := re.match(r"^  ([\w-]+):", line)) and heading.group(1) in stages:
            stage, in_deps, written = heading.group(1), False, False
        elif stage and re.match(r"^    deps:\s*$", line):
            in_deps = True
        dep = _DEP.match(line) if in_deps else None
        if dep and _is_code(dep.group("path")):
            if dep.group("comment"):
                raise ValueError(f"{pipeline}: stage {stage}: the code dependency {dep.group('path')} carries a "
                                 f"comment, which a rewrite would lose; move it to the stage's heading")
            if not written:
                write_derived(dep.group("indent"))
                written = True
            continue
        out.append(line)
    pipeline.write_text("\n".join(out) + "\n", encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"rewrite the code dependencies in {PIPELINE_FILE}")
    args = parser.parse_args(argv)
    if args.write:
        print(f"{PIPELINE_FILE}: rewrote the code dependencies of {rewrite() or 'no stage'}")
        return
    found = differences()
    for stage, diff in found.items():
        print(f"{PIPELINE_FILE}: stage {stage}: missing {diff['missing']}, not imported {diff['extra']}")
    unfed = missing_method_inputs()
    for stage, lacking in unfed.items():
        print(f"{PIPELINE_FILE}: stage {stage} evaluates methods that read stages it does not depend on; add an "
              f"output of each to its deps: {lacking}")
    if found or unfed:
        sys.exit(f"{len(found)} stage(s) disagree with the import graph (run `python -m repro.ops.pipeline_deps "
                 f"--write`), {len(unfed)} lack a method's inputs (add them by hand)")


if __name__ == "__main__":
    main()
