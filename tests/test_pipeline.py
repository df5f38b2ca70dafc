"""End to end: `dvc repro` of every stage in dvc.yaml on the `ci` profile, in a scratch copy of the repo.

A broken notebook, a stage whose outputs are not declared, or a stage that is not idempotent fails here: a second
`dvc repro` must run nothing. The finished run is then shared the DVC way (D133): pushed to a local-directory remote,
cloned and pulled, it has nothing left to run. In the clone, whose GRPO run is then deleted, Table 2's stage and the
cases rerun on the released-checkpoint switch (D132) with a local directory standing in for the authors' checkpoint,
without training; the Table 2 stage reuses the other methods' persisted per-item records, byte for byte, and their
rows are unchanged; `dvc metrics diff` and `dvc plots diff` compare the two runs (D134). `dvc metrics show` prints a
row per study within 120 columns, and a study's headline numbers in full with its file named (D241).
"""

import json
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
from repro.config import load_profile
from repro.reporting.plots import FULL_METRICS_DIR, HEADLINE_KEYS, PLOTS_TEMPLATE


def _files_of_the_repository() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [f for f in listed.split("\0") if f and (ROOT / f).exists()]


GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
# rerun under the released switch: Table 2 and the cases after it; the other studies take its path (a load-time rewrite
# of every method list, tested in test_released_extractor.py, then the registry's `build_refiner`)
RELEASED_STAGES = ["main_comparison", "case_inspection"]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def _ok(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = _run(cmd, cwd)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def released_stand_in(tmp_path_factory) -> Path:
    """A local directory standing in for the authors' EviOmni checkpoint: a random Llama seeded differently from
    ci's models.extractor."""
    from repro.assets import build_tiny_random_llama

    path = tmp_path_factory.mktemp("EviOmni-nq_train-stand-in")
    build_tiny_random_llama(path, seed=1)
    return path


@pytest.fixture(scope="module")
def ci_checkout(tmp_path_factory, released_stand_in) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    for name in _files_of_the_repository():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    params = repo / "params.yaml"
    text = re.sub(r"^profile: .*$", "profile: ci", params.read_text(), count=1, flags=re.M)
    ci = text.index("\n  ci:\n")  # ci's released checkpoint: the stand-in (trained runs do not evaluate it)
    text = text[:ci] + text[ci:].replace("released_extractor: null", f"released_extractor: {released_stand_in}", 1)
    params.write_text(text)
    shutil.copy2(ROOT / PLOTS_TEMPLATE, repo / PLOTS_TEMPLATE)  # written by `make setup`, not tracked (D200)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


def _stages_run(result: subprocess.CompletedProcess) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", result.stdout))


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 6 minutes on 2 idle CPU cores; the suite's default limit is 300 s (D108)
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

    designs = load_profile("ci", ci_checkout / "params.yaml").reward_designs.designs
    summary = (ci_checkout / "results" / "ci" / "reward_designs" / "summary.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in summary[1:]] == [row.name for row in designs], "one row per reward design"

    weights = ci_checkout / "data" / "ci" / "train" / "eviomni" / "extractor" / "model.safetensors"
    assert weights.stat().st_nlink > 1, "outputs are hardlinks into .dvc/cache, not copies (D133)"

    again = _run(["dvc", "repro"], ci_checkout)  # every stage up to date, as `dvc status` would report it
    assert again.returncode == 0 and "Running stage" not in again.stdout, f"a second dvc repro ran:\n{again.stdout}"

    started = time.monotonic()
    clone = _shared_through_a_remote(ci_checkout, ci_checkout.parent / "dvc-remote")
    print(f"push, clone, pull: {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    _released_checkpoint_without_training(clone)
    print(f"released-checkpoint stages: {time.monotonic() - started:.0f} s")


def _shared_through_a_remote(checkout: Path, remote: Path) -> Path:
    """Push the finished run to a local-directory remote, clone the repository, pull: the clone is up to date."""
    _ok(["dvc", "remote", "add", "--default", "shared", str(remote)], checkout)
    _ok(["dvc", "push"], checkout)
    _ok(GIT + ["add", "--all"], checkout)
    _ok(GIT + ["commit", "-q", "-m", "the ci run"], checkout)
    clone = checkout.parent / "clone"
    _ok(GIT + ["clone", "-q", str(checkout), str(clone)], checkout.parent)
    assert not (clone / "data" / "ci").exists()
    _ok(["dvc", "pull"], clone)
    again = _ok(["dvc", "repro"], clone)
    assert not _stages_run(again), f"a pulled stage reran:\n{again.stdout}"
    metrics = json.loads(_ok(["dvc", "metrics", "show", "--json"], clone).stdout)
    (files,) = [rev["data"] for rev in metrics.values()]
    assert "metrics/main_comparison.json" in files and "metrics/noise_robustness.json" in files
    assert files["metrics/main_comparison.json"]["data"]["of"] == "EviOmni"
    assert all(set(f["data"]) <= set(HEADLINE_KEYS) for f in files.values()), files  # one table (D241)
    table = _ok(["dvc", "metrics", "show"], clone).stdout.splitlines()
    assert len(table) == 1 + len(files) and max(map(len, table)) <= 120, "\n".join(table)  # fits a terminal
    shown = json.loads(_ok(["dvc", "metrics", "show", f"{FULL_METRICS_DIR}/main_comparison.json", "--json"],
                           clone).stdout)
    (full,) = [rev["data"] for rev in shown.values()]
    assert "EviOmni" in full[f"{FULL_METRICS_DIR}/main_comparison.json"]["data"]["Average"]
    return clone


def _table2_without_eviomni(checkout: Path) -> dict:
    """Table 2's summary rows and per-item prediction files of every method but EviOmni's."""
    summary = (checkout / "results" / "ci" / "main_comparison" / "summary.csv").read_text().splitlines()
    predictions = checkout / "data" / "ci" / "predictions" / "main_comparison"
    return {"summary": [line for line in summary if "EviOmni" not in line],
            "records": {str(p.relative_to(predictions)): p.read_bytes() for p in sorted(predictions.rglob("*.jsonl"))
                        if not p.name.startswith("eviomni")}}


def _released_checkpoint_without_training(clone: Path) -> None:
    """`eviomni: released_extractor` on a machine without a GRPO run: the evaluation stages run, training does not."""
    shutil.rmtree(clone / "data" / "ci" / "train")  # the GRPO run, its format warm-up and the Table 3 runs
    params = clone / "params.yaml"
    params.write_text(re.sub(r"^eviomni: .*$", "eviomni: released_extractor", params.read_text(), count=1,
                             flags=re.M))
    before = _table2_without_eviomni(clone)
    result = _ok(["dvc", "repro", *RELEASED_STAGES], clone)
    assert _stages_run(result) == set(RELEASED_STAGES), result.stdout
    after = _table2_without_eviomni(clone)  # the other methods' per-item records reused, their rows unchanged
    assert after == before and len(before["summary"]) > 2, {k: (before[k], after[k]) for k in before}
    status = _ok(["dvc", "status", "train_eviomni"], clone)
    assert "deleted" in status.stdout and not (clone / "data" / "ci" / "train").exists()  # still not trained

    table2 = (clone / "results" / "ci" / "main_comparison" / "table2.csv").read_text().splitlines()[0].split(",")
    assert "EviOmni (released)" in table2 and "EviOmni" not in table2, table2
    released = json.loads((clone / "data" / "ci" / "released_extractor" / "extractor.json").read_text())
    manifest = clone / "data" / "ci" / "predictions" / "main_comparison" / "fanoutqa" / "eviomni_released.manifest.json"
    refiner = json.loads(manifest.read_text())["config"]["refiner"]  # Table 14 on the stand-in's weights
    assert refiner["refiner"] == "rational_extractor" and refiner["model"].startswith(released["fingerprint"])

    # the two runs compared: the committed one (trained extractor) and the workspace (released checkpoint)
    table2_diff = json.loads(_ok(["dvc", "metrics", "diff", "--json"], clone).stdout)["metrics/main_comparison.json"]
    assert table2_diff["of"] == {"old": "EviOmni", "new": "EviOmni (released)"}
    full = f"{FULL_METRICS_DIR}/main_comparison.json"  # an output, not a `metrics:`: compared when named
    table2_diff = json.loads(_ok(["dvc", "metrics", "diff", "--targets", full, "--json"], clone).stdout)[full]
    assert table2_diff["Average.EviOmni.EM"]["new"] is None
    assert table2_diff["Average.EviOmni (released).EM"]["old"] is None
    runs = json.loads(_ok(["dvc", "exp", "show", "--json"], clone).stdout)
    lines = [run["data"]["metrics"]["metrics/main_comparison.json"]["data"] for run in runs]
    assert [line["of"] for line in lines] == ["EviOmni (released)", "EviOmni"]
    plots = json.loads(_ok(["dvc", "plots", "diff", "HEAD", "--json"], clone).stdout)["data"]
    assert set(plots) == {"figure4_training_dynamics", "figure5_noise_robustness", "figure7_length_rewards"}
    (figure5,) = plots["figure5_noise_robustness"]
    assert set(figure5["revisions"]) == {"HEAD", "workspace"}
