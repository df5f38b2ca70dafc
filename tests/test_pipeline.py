"""End to end: `dvc repro` of every stage in dvc.yaml on the `ci` profile, in a scratch copy of the repo.

A broken notebook, a stage whose outputs are not declared, or a stage that is not idempotent fails here: a second
`dvc repro` must run nothing, and a forced rerun of the Table 2 stage (which reuses its persisted per-item
records) must write byte-identical tables.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT


def _files_of_the_repository() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [f for f in listed.split("\0") if f and (ROOT / f).exists()]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def ci_checkout(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    for name in _files_of_the_repository():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    params = repo / "params.yaml"
    params.write_text(re.sub(r"^profile: .*$", "profile: ci", params.read_text(), count=1, flags=re.M))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


@pytest.mark.slow
@pytest.mark.timeout(1200)  # about 4 minutes on 2 CPU cores; the suite's default limit is 300 s (D108)
def test_dvc_pipeline_runs_end_to_end_on_the_ci_profile(ci_checkout):
    started = time.monotonic()
    result = _run(["dvc", "repro"], ci_checkout)
    assert result.returncode == 0, f"dvc repro failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    print(f"ci pipeline: {time.monotonic() - started:.0f} s")

    lock = yaml.safe_load((ci_checkout / "dvc.lock").read_text())["stages"]
    declared = yaml.safe_load((ci_checkout / "dvc.yaml").read_text())["stages"]
    assert set(lock) == set(declared), "every stage of dvc.yaml ran"
    for stage, entry in lock.items():
        for out in entry.get("outs", []):
            path = ci_checkout / out["path"]
            assert path.exists() and (path.is_file() or any(path.iterdir())), f"{stage}: empty output {path}"

    status = _run(["dvc", "status"], ci_checkout)
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout

    again = _run(["dvc", "repro"], ci_checkout)
    assert again.returncode == 0 and "Running stage" not in again.stdout, f"a second dvc repro ran:\n{again.stdout}"

    tables = ci_checkout / "results" / "ci" / "main_comparison"
    before = {p.name: p.read_bytes() for p in sorted(tables.iterdir()) if p.suffix in (".csv", ".md")}
    started = time.monotonic()
    forced = _run(["dvc", "repro", "--force", "--single-item", "main_comparison"], ci_checkout)
    assert forced.returncode == 0, f"forced rerun failed:\n{forced.stdout[-4000:]}\n{forced.stderr[-4000:]}"
    assert "Running stage 'main_comparison'" in forced.stdout
    print(f"forced main_comparison: {time.monotonic() - started:.0f} s")
    after = {p.name: p.read_bytes() for p in sorted(tables.iterdir()) if p.suffix in (".csv", ".md")}
    assert "table2.csv" in before and after == before, sorted(n for n in before if after.get(n) != before[n])
