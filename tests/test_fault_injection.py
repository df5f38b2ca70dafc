"""Kill -9 at seeded random moments: a `ci` GRPO run (`python -m repro.train`) and an evaluation run (the runner
behind the evaluation stages) are sent SIGKILL at a few points, rerun until they finish, and must end with what an
uninterrupted run writes: the same per-item records, step logs, checkpoint state and trained weights. Wall-clock
fields (times of steps, chunks and evaluations) are the only ones allowed to differ.

The first kill of the training run lands a seeded 0-0.2 s after `checkpoint-1` appears, i.e. most likely while it is
being saved; the first kill of the evaluation run once its partial file holds a seeded number of records; the others
at the uninterrupted run's start-up time plus a seeded random fraction of its active time."""

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT
from test_evaluation_runner import contexts_row
from test_train_e2e import contexts

from repro.config import load_profile
from repro.io import read_jsonl, write_jsonl
from repro.train.launch import write_profile

pytestmark = pytest.mark.slow

SEED = 19
TIMES = {"wall_time", "step_time", "eval_time", "refine_seconds", "answer_seconds"}  # wall-clock fields
EVALUATE = """
import sys
from repro.evaluation.answering import Answerer
from repro.evaluation.refiners import FullPassages
from repro.evaluation.runner import evaluate
from repro.generation import GenerationParams
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import read_jsonl

model, rows, out = sys.argv[1:]
generator = TransformersGenerator(model, dtype="float32", device="cpu", progress=False)
answerer = Answerer(generator, "tiny-llama", GenerationParams(max_new_tokens=4, batch_size=2))
evaluate(list(read_jsonl(rows)), FullPassages(), answerer, out, length_tokenizer=generator.tokenizer,
         tokenizer_id="tiny", chunk_size=2, progress=False)
"""


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with open(cwd / "stderr.log", "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=log)


def wait_for(process: subprocess.Popen, ready: Callable[[], bool]) -> float:
    """The time `ready()` became true (or the process ended, whichever came first)."""
    while process.poll() is None and not ready():
        time.sleep(0.005)
    return time.monotonic()


def run_to_end(args: list[str], cwd: Path, marker: Path) -> tuple[float, float]:
    """Run uninterrupted; returns the start-up time (until `marker` appears) and the active time after it."""
    started = time.monotonic()
    process = start(args, cwd)
    active = wait_for(process, marker.exists)
    assert process.wait(timeout=600) == 0, (cwd / "stderr.log").read_text()[-3000:]
    return active - started, time.monotonic() - active


def kill_after(args: list[str], cwd: Path, delay: float, ready: Callable[[], bool] = lambda: True) -> bool:
    """Start, wait until `ready()`, then `delay` seconds, and SIGKILL the process if it still runs; returns
    whether it was killed."""
    process = start(args, cwd)
    deadline = wait_for(process, ready) + delay
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    return process.wait() == -signal.SIGKILL


def lines(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def without_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMES} for row in rows]


@pytest.fixture(scope="module")
def grpo_workdir(tiny_llama_dir, tmp_path_factory) -> Path:
    """A working directory with the ci profile (2 GRPO steps, a checkpoint each step) and its contexts files."""
    workdir = tmp_path_factory.mktemp("grpo")
    cfg = load_profile("ci", params_path=ROOT / "params.yaml")
    train = dataclasses.replace(cfg.train, max_steps=2, save_steps=1, steps_per_generation=1, dev_max_questions=1,
                                max_completion_length=12, format_warmup=None)
    cfg = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=str(tiny_llama_dir)), train=train)
    for split, part in (("train", contexts(8)[:6]), ("dev", contexts(8)[6:])):
        write_jsonl(workdir / "data" / "ci" / "retrieval" / "minilm" / "fanoutqa" / f"{split}.jsonl", part)
    write_profile(cfg, workdir / "params.yaml")
    return workdir


def grpo_outputs(run: Path) -> dict:
    state = json.loads((run / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    selection = json.loads((run / "selection.json").read_text())
    return {"train_log": without_times(list(read_jsonl(run / "train_log.jsonl"))),
            "dev_eval": without_times(list(read_jsonl(run / "dev_eval.jsonl"))),
            "state": {k: state[k] for k in ("global_step", "max_steps", "best_metric", "best_global_step")},
            "log_history": without_times(state["log_history"]),
            "selection": {k: selection[k] for k in ("metric", "value", "step", "last_step")},
            "weights": (run / "extractor" / "model.safetensors").read_bytes()}


def test_a_grpo_run_killed_at_random_moments_ends_as_an_uninterrupted_run(grpo_workdir):
    rng = random.Random(SEED)
    args = lambda run: ["-m", "repro.train.grpo", "--params", "params.yaml", "--profile", "ci",  # noqa: E731
                        "--run-dir", run]
    startup, active = run_to_end(args("whole"), grpo_workdir, grpo_workdir / "whole" / "run_config.json")

    killed = grpo_workdir / "killed"
    assert kill_after(args("killed"), grpo_workdir, rng.uniform(0, 0.2),
                      ready=(killed / "checkpoints" / "checkpoint-1").exists)
    kill_after(args("killed"), grpo_workdir, startup + rng.uniform(0, 1) * active)
    run_to_end(args("killed"), grpo_workdir, killed / "run_config.json")

    whole, resumed = grpo_outputs(grpo_workdir / "whole"), grpo_outputs(killed)
    assert [row["step"] for row in resumed["train_log"]] == [1, 2]
    assert [row["step"] for row in resumed["dev_eval"]] == [0, 1, 2]
    assert resumed == whole


@pytest.fixture(scope="module")
def evaluation_workdir(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("evaluation")
    write_jsonl(workdir / "rows.jsonl", [contexts_row(i, answer_in_passages=i % 3 > 0) for i in range(40)])
    return workdir


def test_an_evaluation_run_killed_at_random_moments_ends_as_an_uninterrupted_run(evaluation_workdir,
                                                                                 tiny_llama_dir):
    rng = random.Random(SEED)
    args = lambda out: ["-c", EVALUATE, str(tiny_llama_dir), "rows.jsonl", out]  # noqa: E731
    partial = lambda out: evaluation_workdir / out.replace(".jsonl", ".partial.jsonl")  # noqa: E731
    startup, active = run_to_end(args("whole.jsonl"), evaluation_workdir, partial("whole.jsonl"))

    records = rng.randint(1, 30)  # the first kill: once the partial file holds this many records
    assert kill_after(args("killed.jsonl"), evaluation_workdir, 0,
                      ready=lambda: lines(partial("killed.jsonl")) > records)  # header + records
    assert not (evaluation_workdir / "killed.jsonl").exists()  # killed mid-way
    for _ in range(2):
        kill_after(args("killed.jsonl"), evaluation_workdir, startup + rng.uniform(0, 1) * active)
    run_to_end(args("killed.jsonl"), evaluation_workdir, partial("killed.jsonl"))

    whole, resumed = (list(read_jsonl(evaluation_workdir / name)) for name in ("whole.jsonl", "killed.jsonl"))
    assert [r["id"] for r in resumed] == [f"q{i}" for i in range(40)]
    assert without_times(resumed) == without_times(whole)
    assert not partial("killed.jsonl").exists()
