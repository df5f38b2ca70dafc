"""`python -m repro.gpucheck bundle DIR`: what the check needs beyond a GPU image that has Python 3.12, torch,
transformers, peft, accelerate, safetensors, tokenizers, numpy, pandas, scipy and PyYAML (and their dependencies), in
at most 60 MiB, with the one command that installs it offline and runs the check:

    sh DIR/install.sh            # from the repository root: pip --no-index --no-deps --target DIR/site, then the check

DIR/wheels holds TRL, datasets and DeepSpeed with the dependencies such an image lacks (`WHEELS`, at the project's
pins where it has one); DeepSpeed is an sdist on PyPI, built here into a pure-Python wheel with its ops left to
JIT (`DS_BUILD_OPS=0`, `DS_ACCELERATOR=cuda`, D223). DIR/tokenizers holds the rehearsal's tokenizers, which the check
widens to Qwen's vocabulary (`repro.gpucheck.models`). `--python-version` builds for another interpreter (the test
installs a bundle for its own, beside a copy of the image's package set). Needs PyPI.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from repro.gpucheck import models
from repro.io import write_json, write_text

LIMIT = 60 * 2**20
# (distribution, version): the project's pin where requirements.txt / environment.yml has one, else the CPU stack's
# resolved version; pyarrow at datasets' minimum, whose wheel is 6 MB smaller than 26.0's (D223)
WHEELS = (("trl", "1.16.0"), ("datasets", "5.2.0"), ("pyarrow", "24.0.0"), ("dill", "0.4.1"),
          ("multiprocess", "0.70.19"), ("xxhash", "4.1.0"),
          ("pydantic", "2.14.4"), ("pydantic-core", "2.50.5"), ("annotated-types", "0.8.0"),
          ("typing-inspection", "0.4.5"), ("typing-extensions", "4.16.0"),
          ("hjson", "3.1.0"), ("msgpack", "1.2.4"), ("ninja", "1.13.2"), ("py-cpuinfo", "9.0.0"), ("einops", "0.8.2"),
          ("nvidia-ml-py", "13.615.71"))
SDISTS = (("deepspeed", "0.19.8"),)  # environment.yml's pin
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
INSTALL = """#!/bin/sh
# The GPU check, offline: the wheels beside this file into a scratch directory (no dependency resolution: the image
# has the rest), then `python -m repro.gpucheck` with the bundled tokenizers. Run it from the repository root.
#   sh {name}/install.sh [--shapes tiny] [--out DIR]     PYTHON=python3.12 SCRATCH=/tmp/site to change either
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${{PYTHON:-python3}}
SCRATCH=${{SCRATCH:-$HERE/site}}
"$PYTHON" -m pip install --quiet --no-index --no-deps --target "$SCRATCH" "$HERE"/wheels/*.whl
export PYTHONPATH="$SCRATCH:$(pwd)/src${{PYTHONPATH:+:$PYTHONPATH}}"
exec "$PYTHON" -m repro.gpucheck --tokenizers "$HERE/tokenizers" "$@"
"""


def pip(*args: str, env: dict | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def download_wheels(out: Path, python_version: str) -> None:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    pip("download", "--quiet", "--only-binary=:all:", "--no-deps", "--python-version", python_version,
        "--implementation", "cp", *platforms, "-d", str(out), *(f"{name}=={version}" for name, version in WHEELS))


def build_sdist_wheels(out: Path) -> None:
    """DeepSpeed's wheel from its sdist, in pip's isolated build environment (no torch there, so no op is compiled and
    no build extension is configured); DS_ACCELERATOR=cuda records the CUDA accelerator a GPU install would."""
    env = {**os.environ, "DS_BUILD_OPS": "0", "DS_ACCELERATOR": "cuda"}
    with tempfile.TemporaryDirectory() as tmp:
        pip("download", "--quiet", "--no-binary=:all:", "--no-deps", "-d", tmp,
            *(f"{name}=={version}" for name, version in SDISTS))
        for sdist in sorted(Path(tmp).glob("*.tar.gz")):
            pip("wheel", "--quiet", "--no-deps", "-w", str(out), str(sdist), env=env)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_bundle(out: str | Path, python_version: str = "3.12") -> dict:
    """Write the bundle into `out` (a new or empty directory); returns its manifest. Refuses a bundle over LIMIT."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; the bundle is written into a new directory")
    wheels, tokenizers = out / "wheels", out / "tokenizers"
    wheels.mkdir(parents=True)
    download_wheels(wheels, python_version)
    build_sdist_wheels(wheels)
    models.write_tokenizer_sources(tokenizers)
    write_text(out / "install.sh", INSTALL.format(name=out.name))
    files = sorted(p for p in out.rglob("*") if p.is_file())
    manifest = {"python_version": python_version, "wheels": [f"{n}=={v}" for n, v in WHEELS + SDISTS],
                "files": {str(p.relative_to(out)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files}}
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"].values())
    write_json(out / "manifest.json", manifest)
    if manifest["bytes"] > LIMIT:
        raise ValueError(f"{out}: the bundle holds {manifest['bytes'] / 2**20:.1f} MiB > {LIMIT / 2**20:.0f} MiB")
    print(f"{out}: {len(files)} files, {manifest['bytes'] / 2**20:.1f} MiB; offline install and check: "
          f"sh {out}/install.sh", flush=True)
    return manifest


def unmet_requirements(names: list[str]) -> list[str]:
    """For the installed distributions `names`, each Requires-Dist (no extra; markers of this interpreter) that no
    installed distribution satisfies: what the offline install left out or the image holds in a version too old."""
    from importlib import metadata

    from packaging.requirements import Requirement

    problems = []
    for name in names:
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed")
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                version = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{name} needs {req}: not installed")
                continue
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                problems.append(f"{name} needs {req}: {version} installed")
    return problems


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m repro.gpucheck bundle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="a new directory for the bundle")
    parser.add_argument("--python-version", default="3.12", help="the interpreter the wheels are for (default 3.12)")
    args = parser.parse_args(argv)
    write_bundle(args.dir, args.python_version)
