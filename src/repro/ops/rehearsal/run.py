"""The rehearsal: paper-1p5b's own stage graph, run on this CPU from a hub mirror (issue #30, deliverable 4).

    python -m repro.ops.rehearsal run [--workdir DIR] [--keep]

In a scratch copy of the repository (its tracked and unignored files; `profile: rehearsal`), as a GPU user's first
day goes: build the mirror into `fetch.hub`, `python -m repro.ops.remote fetch` through the same code the hub path uses
(twice: the second must find everything in the lock and download nothing), `python -m repro.ops.preflight`, `dvc repro`
of every stage, and `dvc status`, which must report the pipeline up to date. Then docs/gpu.md's released path
(`released-1p5b`, issue #45) on the same graph: the rehearsal set as released-1p5b is set against paper-1p5b
(`released_params`), `dvc repro` of its two targets, which must retrain nothing, and `dvc status` of them. Every
command's output is streamed with the seconds since the start; the last lines are the minutes of each step and stage.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from repro.config import load_profile
from repro.data import layout
from repro.io import read_yaml
from repro.registry import STAGES

PROFILE = "rehearsal"
ROOT = Path(__file__).resolve().parents[4]  # src/repro/ops/rehearsal/run.py: the repository
STAGE_LINE = re.compile(r"^Running stage '([^']+)'")
RELEASED = "released-1p5b"  # docs/gpu.md's cheapest path to a paper number: the authors' checkpoint, Zero and Full
RELEASED_TARGETS = ("main_comparison", "distractor_setting")  # its command's targets, beside -S eviomni=...
# what of released-1p5b stays the rehearsal's own: what is fetched (no agents, no E5 index, the released extractor
# named for the agentic study), how many processes one GPU launches, and the decoding budget (a size: the rehearsal's
# evidence_max_new_tokens), which the rehearsal sets for its mirror and this CPU (tests/test_rehearsal.py)
RELEASED_KEPT = ("description", "models", "agentic", "retrieval", "fetch", "train", "qa_generator", "ar_study",
                 "released_check.max_new_tokens")


class RehearsalError(RuntimeError):
    """A step of the rehearsal failed; the message names the command."""


def scratch_copy(workdir: Path, profile: str = PROFILE, git_init: bool = True) -> None:
    """The repository's tracked and unignored files, copied into `workdir` (a new git repository with `git_init`),
    with `profile` selected."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, workdir / name)
    params = workdir / "params.yaml"
    params.write_text(re.sub(r"^profile: .*$", f"profile: {profile}", params.read_text(), count=1, flags=re.M))
    if git_init:
        subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)


class Clock:
    """Runs the steps, streaming their output with the seconds since the start, and keeps each one's duration."""

    def __init__(self, workdir: Path):
        self.workdir, self.start, self.steps = workdir, time.monotonic(), []
        self.stages: list[tuple[str | None, float]] = []  # (stage, start); None: the end of a step's last stage
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING")}

    def now(self) -> float:
        return time.monotonic() - self.start

    def run(self, name: str, command: list[str]) -> list[str]:
        started, lines = self.now(), []
        print(f"[{started:7.1f} s] $ {' '.join(command)}", flush=True)
        with subprocess.Popen(command, cwd=self.workdir, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1) as process:
            for line in process.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                print(f"[{self.now():7.1f} s] {line}", flush=True)
                if match := STAGE_LINE.match(line):
                    self.stages.append((match.group(1), self.now()))
        if self.stages and self.stages[-1][0] is not None:  # the step's last stage ends with it
            self.stages.append((None, self.now()))
        self.steps.append((name, self.now() - started))
        if process.returncode:
            raise RehearsalError(f"{name}: `{' '.join(command)}` exited with {process.returncode} (output above)")
        return lines

    def summary(self) -> str:
        rows = [f"{name:>12s}  {seconds / 60:5.2f} min" for name, seconds in self.steps]
        rows += [f"{'stage':>12s}  {(end - start) / 60:5.2f} min  {stage}"
                 for (stage, start), (_, end) in zip(self.stages, self.stages[1:]) if stage is not None]
        return "\n".join(rows + [f"{'total':>12s}  {self.now() / 60:5.2f} min"])


def differences_applied(base: object, changed: object, target: object, kept: tuple[str, ...] = (),
                        path: str = "") -> object:
    """`target` with every leaf in which `changed` differs from `base` set to `changed`'s value (mappings merged),
    except under the dotted paths of `kept`."""
    if isinstance(base, dict) and isinstance(changed, dict) and isinstance(target, dict):
        return {**target, **{key: differences_applied(base.get(key), value, target.get(key), kept, f"{path}{key}.")
                             for key, value in changed.items()
                             if f"{path}{key}" not in kept and (key not in base or base[key] != value)}}
    return changed


def released_params(params: dict) -> dict:
    """params.yaml on the released path: `eviomni: released_extractor`, and the rehearsal profile changed where
    released-1p5b differs from paper-1p5b, outside RELEASED_KEPT (values as parsed, anchors expanded)."""
    profiles = params["profiles"]
    rehearsal = differences_applied(profiles["paper-1p5b"], profiles[RELEASED], profiles[PROFILE], RELEASED_KEPT)
    return {**params, "eviomni": "released_extractor", "profiles": {**profiles, PROFILE: rehearsal}}


def rehearse_released(clock: Clock, workdir: Path) -> None:
    """The released path's stage graph after the full one: its command runs only the stages the switch changes, none
    of which trains (a training stage that runs must be one its section switches off), every test set gets the
    released extractor's predictions, and its targets are then up to date."""
    params = workdir / "params.yaml"
    params.write_text(yaml.safe_dump(released_params(read_yaml(params)), sort_keys=False, allow_unicode=True))
    cfg = load_profile(PROFILE, params)
    ran = [match.group(1) for line in clock.run("released path", ["dvc", "repro", *RELEASED_TARGETS])
           if (match := STAGE_LINE.match(line))]
    trained = [name for name in ran if STAGES[name].trains
               and (STAGES[name].switch is None or getattr(cfg, STAGES[name].switch) is not None)]
    if trained:
        raise RehearsalError(f"the released path retrained {trained}: it must train nothing the full graph trained")
    expected = [layout.predictions_path(PROFILE, study, dataset, "eviomni_released")  # a study's name is its stage's
                for study, section in zip(RELEASED_TARGETS, (cfg.evaluation, cfg.distractor))
                for dataset in section.datasets]
    missing = [str(path) for path in expected if not (workdir / path).is_file()]
    if missing:
        raise RehearsalError(f"the released path wrote no predictions of the released extractor: {missing}")
    status = clock.run("dvc status", ["dvc", "status", *RELEASED_TARGETS])
    if not any("up to date" in line for line in status):
        raise RehearsalError("dvc status after the released path: its targets are not up to date (output above)")


def rehearse(workdir: Path) -> Clock:
    """Every step of a GPU user's first day, on paper-1p5b's stage graph; raises RehearsalError at the first failure."""
    scratch_copy(workdir)
    cfg = load_profile(PROFILE, workdir / "params.yaml")
    clock = Clock(workdir)
    python = [sys.executable, "-m"]
    clock.run("mirror", [*python, "repro.ops.rehearsal", "mirror", cfg.fetch.hub])
    clock.run("fetch", [*python, "repro.ops.remote", "fetch", "--profile", PROFILE])
    lock = (workdir / cfg.fetch.lock).read_bytes()
    clock.run("fetch again", [*python, "repro.ops.remote", "fetch", "--profile", PROFILE])
    if (workdir / cfg.fetch.lock).read_bytes() != lock:
        raise RehearsalError(f"a second fetch changed {cfg.fetch.lock}: the lock is not exact")
    clock.run("preflight", [*python, "repro.ops.preflight", "--profile", PROFILE])
    clock.run("dvc repro", ["dvc", "repro"])
    status = clock.run("dvc status", ["dvc", "status"])
    if not any("up to date" in line for line in status):
        raise RehearsalError("dvc status after the rehearsal: stages are not up to date (output above)")
    rehearse_released(clock, workdir)
    return clock


def main(workdir: str | None = None, keep: bool = False) -> None:
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="repro-rehearsal-"))
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise SystemExit(f"error: {root} is not empty; give an empty or new --workdir")
    try:
        clock = rehearse(root)
        print(clock.summary())
    except RehearsalError as err:
        raise SystemExit(f"error: {err}; the scratch copy is kept in {root}") from None
    if not keep:
        shutil.rmtree(root)
