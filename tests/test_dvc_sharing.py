"""Runs shared and compared the DVC way (D133, D134): every output is DVC-cached and linked, no write of the library
reaches the cache through a link, and each study declares its headline numbers (`metrics:`) and figure data
(`plots:`), which its notebook writes. The sharing recipe of docs/usage.md runs as written between two clones of a
one-stage pipeline, and so does the resumption of a stopped run (D243); push, pull and the comparisons of the whole
`ci` run are in tests/test_pipeline.py."""

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import ROOT
from repro.evaluation.records import RecordFile
from repro.generation.openai_client import read_cache
from repro.io import detach
from repro.ops.rehearsal.run import scratch_copy
from repro.reporting import plots
from repro.studies.training_dynamics import training_dynamics_data
from repro.train.grpo.logs import StepLog

DVC_YAML = yaml.safe_load((ROOT / "dvc.yaml").read_text())
STAGES = DVC_YAML["stages"]


def _linked_to_cache(tmp_path, name: str, text: str):
    """A workspace file hardlinked to a read-only 'cache' object, as `dvc checkout` leaves it with hardlinks."""
    cache = tmp_path / "cache-object"
    cache.write_text(text)
    cache.chmod(0o444)
    path = tmp_path / name
    os.link(cache, path)
    return cache, path


# --- no write through a link ---


def test_detach_gives_a_hardlinked_file_its_own_copy(tmp_path):
    cache, path = _linked_to_cache(tmp_path, "log.jsonl", "a\n")
    detach(path)
    assert path.stat().st_nlink == 1 and cache.stat().st_nlink == 1 and path.read_text() == "a\n"
    assert path.stat().st_mode & stat.S_IWUSR  # the copy is writable, unlike the cache object


def test_detach_replaces_a_symlink_by_a_copy(tmp_path):
    target = tmp_path / "cache-object"
    target.write_text("x")
    path = tmp_path / "file"
    path.symlink_to(target)
    detach(path)
    assert not path.is_symlink() and path.read_text() == "x" and target.read_text() == "x"


def test_detach_leaves_a_private_or_missing_file_alone(tmp_path):
    path = tmp_path / "file"
    detach(path)
    assert not path.exists()
    path.write_text("x")
    inode = path.stat().st_ino
    detach(path)
    assert path.stat().st_ino == inode


def test_appends_never_reach_the_cache_object(tmp_path):
    cache, log = _linked_to_cache(tmp_path, "train_log.jsonl", '{"step": 1}\n')
    StepLog(log).append({"step": 2})
    assert cache.read_text() == '{"step": 1}\n' and [r["step"] for r in StepLog(log).rows()] == [1, 2]

    records = RecordFile(tmp_path / "full.jsonl", {"method": "full"})
    cache_partial = tmp_path / "partial-object"
    records.resume()  # writes the partial file's header
    os.replace(records.partial_path, cache_partial)
    os.link(cache_partial, records.partial_path)
    before = cache_partial.read_text()
    records.append([{"id": "q1", "question": "q", "golden_answers": ["a"], "prediction": "a", "em": 1.0, "f1": 1.0}])
    assert cache_partial.read_text() == before and "q1" in records.partial_path.read_text()

    cache, completions = _linked_to_cache(tmp_path, "teacher_cache.jsonl", '{"key": "k", "texts": ["t"]}\n{"key"')
    assert read_cache(completions) == {"k": ["t"]}  # the cut last line is dropped in a private copy
    assert cache.read_text().endswith('{"key"') and completions.read_text().endswith("]}\n")


# --- metrics and plot data ---


def test_metrics_tree_nests_by_the_keys_and_writes_json_numbers():
    frame = pd.DataFrame({"dataset": ["NQ", "NQ", "TQA"], "method": ["Full", "EviOmni", "Full"],
                          "EM": [np.float64(30.5), 40.0, math.nan], "n": [np.int64(3), 3, 3]})
    tree = plots.metrics_tree(frame, ["dataset", "method"], ["EM", "n"])
    assert tree == {"NQ": {"Full": {"EM": 30.5, "n": 3}, "EviOmni": {"EM": 40.0, "n": 3}},
                    "TQA": {"Full": {"EM": None, "n": 3}}}
    assert type(tree["NQ"]["Full"]["n"]) is int and json.loads(json.dumps(tree)) == tree
    with pytest.raises(ValueError, match="two rows"):
        plots.metrics_tree(pd.concat([frame, frame]), ["dataset", "method"], ["EM"])


def test_headline_numbers_are_the_averages_over_the_datasets():
    frame = pd.DataFrame({"dataset": ["NQ", "TQA", "NQ", "TQA"], "method": ["Full", "Full", "Zero", "Zero"],
                          "EM": [30.0, 40.0, 10.0, 20.0], "CR": [1.0, 1.0, math.nan, math.nan]})
    assert plots.headline(frame, ["method"], ["EM", "CR"]) == {
        "Average": {"Full": {"EM": 35.0, "CR": 1.0}, "Zero": {"EM": 15.0, "CR": None}}}


def test_metrics_and_plot_data_go_to_the_paths_dvc_yaml_declares(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = plots.compare({"EviOmni": 1.0}, "EM", of="EviOmni")
    paths = plots.save_metrics(line, {"NQ": {"EM": 1.0}}, "main_comparison")
    assert [p.as_posix() for p in paths] == ["metrics/main_comparison.json", "metrics/full/main_comparison.json"]
    assert json.loads(paths[0].read_text()) == line and json.loads(paths[1].read_text()) == {"NQ": {"EM": 1.0}}
    summary = pd.DataFrame({"dataset": ["NQ", "NQ"], "noise": [0, 2], "method": ["Full", "Full"], "EM": [3.0, 2.5]})
    path = plots.save_plot_data(summary, "figure5_noise_robustness", x="noise", y="EM", series="method",
                                panel="dataset")
    assert path.as_posix() == "plots/figure5_noise_robustness.csv"
    assert path.read_text().splitlines() == ["panel,series,noise,EM", "NQ,Full,0,3", "NQ,Full,2,2.5"]


def test_figure4_data_is_tidy_over_the_logged_steps():
    log = pd.DataFrame({"f1_full": [0.5, None, 0.7], "f1_rationale": [0.1, None, 0.2], "len_reason": [30, 31, 32]},
                       index=pd.Index([1, 2, 3], name="step"))
    data = training_dynamics_data(log)
    assert list(data.columns) == ["step", "panel", "series", "value"]
    assert data[data["series"] == "o_f (full context)"]["step"].tolist() == [1, 3]  # not generated at step 2
    assert set(data["panel"]) == {"(a) answer reward (F1)", "(b) mean length (tokens)"}
    assert "$" not in "".join(data["series"])


def test_figure7_data_names_panel_and_series():
    data = plots.length_reward_plot_data(plots.length_reward_curves((0.5,), (1.0,), x_rationale=[0.0],
                                                                    x_evidence=[0.5]))
    assert data[["panel", "series"]].values.tolist() == [["(a) rationale: sigmoid(x/tau)", "tau=0.5"],
                                                         ["(b) evidence: x^gamma", "gamma=1"]]


# --- dvc.yaml and .dvc/ ---


def _outs(stage: dict) -> dict[str, dict]:
    """Output path -> its properties, of `outs:` and `metrics:`."""
    entries = {}
    for entry in stage.get("outs", []) + stage.get("metrics", []):
        path, props = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        entries[path] = props or {}
    return entries


def test_every_output_is_cached_and_the_resumable_ones_persist():
    for name, stage in STAGES.items():
        for path, props in _outs(stage).items():
            assert props.get("cache", True), f"{name}: {path} is not DVC-cached"
    persisted = {path for stage in STAGES.values() for path, props in _outs(stage).items() if props.get("persist")}
    for name in ("main_comparison", "distractor_setting", "noise_robustness", "ablation_answer_rewards",
                 "reward_designs"):
        assert f"data/${{profile}}/predictions/{name}" in persisted  # per-item records, read by resumable runners
    assert {"data/${profile}/train/eviomni", "data/${profile}/index", "data/${profile}/qa_generator",
            "data/${profile}/train/ablation", "data/${profile}/train/reward_designs"} <= persisted


def test_cache_links_where_the_file_system_allows():
    config = (ROOT / ".dvc" / "config").read_text()
    assert re.search(r"^\s*type = hardlink,symlink$", config, re.M)


def _notebook_code(stage: dict) -> str:
    notebook = next((d for d in stage["deps"] if d.startswith("notebooks/")), None)
    if notebook is None:
        return ""
    cells = json.loads((ROOT / notebook).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_each_study_declares_the_metrics_its_notebook_writes():
    declared = {name: [m for m in stage.get("metrics", [])] for name, stage in STAGES.items()}
    assert {name for name, files in declared.items() if files} == {
        "retrieval_quality", "train_eviomni", "training_dynamics", "main_comparison", "ablation_answer_rewards",
        "reward_designs", "distractor_setting", "noise_robustness", "latency", "agentic_search_r1", "ar_study", "claims"}
    for name, files in declared.items():
        code = _notebook_code(STAGES[name])
        assert files in ([], [f"metrics/{name}.json"]), name
        assert bool(files) == bool(re.search(rf'save_metrics\((?:(?!save_metrics).)*?"{name}"\)', code, re.S)), name


def test_each_plot_reads_a_csv_that_a_stage_writes():
    template = json.loads((ROOT / ".dvc" / "plots" / "series.json").read_text())
    assert template["facet"]["column"]["field"] == "panel"
    assert template["spec"]["encoding"]["color"]["field"] == "series"
    outs = {path: name for name, stage in STAGES.items() for path in _outs(stage)}
    for definition in DVC_YAML["plots"]:
        (plot_id, props), = definition.items()
        (csv, y), = props["y"].items()
        assert props["template"] == "series" and csv == f"plots/{plot_id}.csv", plot_id
        code = _notebook_code(STAGES[outs[csv]])
        assert re.search(rf'save_plot_data\(.*?"{plot_id}", x="{props["x"]}",\s*y="{y}"', code, re.S), plot_id


# --- the sharing recipe of docs/usage.md, between two clones ---

RECIPE_REMOTE = "/mnt/team/eviomni-dvc"


def sharing_recipe() -> tuple[list[str], list[str]]:
    """The command lines of docs/usage.md's sharing block, comments dropped: those run where the run finished, and
    those run in another clone (after its "on another machine" line)."""
    here, there = _usage_block("Sharing and comparing runs with DVC").split("# on another machine", 1)
    return _command_lines(here), _command_lines(there.split("\n", 1)[1])


def _usage_block(heading: str) -> str:
    """The first bash block of docs/usage.md's section `heading`."""
    section = (ROOT / "docs" / "usage.md").read_text().split(f"## {heading}\n", 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def _command_lines(text: str) -> list[str]:
    commands = (line.split("  #")[0].strip() for line in text.splitlines())
    return [command for command in commands if command and not command.startswith("#")]


def _bash(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@localhost", GIT_COMMITTER_NAME="test",
               GIT_COMMITTER_EMAIL="test@localhost")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)


def _sh(command: str, cwd: Path) -> str:
    result = _bash(command, cwd)
    assert result.returncode == 0, f"{command} in {cwd}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def test_the_recipe_commits_the_record_and_pushes_the_outputs():
    here, there = sharing_recipe()
    assert any("git add dvc.lock" in line for line in here) and any(line.startswith("dvc push") for line in here)
    assert there == ["dvc pull && dvc status"]


def _outputs(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in (repo / "results" / "ci").rglob("*") if p.is_file()}


SHARED_STAGE = "length_rewards"  # the cheapest stage with outputs (~10 s); the whole ci pipeline takes minutes


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_sharing_recipe_brings_a_finished_run_to_another_clone_up_to_date(tmp_path):
    origin, first, second, remote = (tmp_path / name for name in ("origin.git", "first", "second", "dvc-remote"))
    _sh(f"git init -q --bare {origin} && git clone -q {origin} {first}", tmp_path)
    scratch_copy(first, "ci", git_init=False)  # into the clone: its commit is the repository
    pipeline = yaml.safe_load((first / "dvc.yaml").read_text())  # a one-stage pipeline: `dvc status` covers it all
    (first / "dvc.yaml").write_text(yaml.safe_dump({"stages": {SHARED_STAGE: pipeline["stages"][SHARED_STAGE]}}))
    _sh("git add --all && git commit -q -m 'the repository' && git push -q origin HEAD", first)
    _sh("dvc repro", first)
    assert "dvc.lock" in _sh("git status --porcelain", first)  # what the recipe commits

    here, there = sharing_recipe()
    for command in here:
        _sh(command.replace(RECIPE_REMOTE, str(remote)), first)
    _sh(f"git clone -q {origin} {second}", tmp_path)
    assert not (second / "results" / "ci").exists()
    (status,) = [_sh(command, second) for command in there]
    assert "Data and pipelines are up to date." in status
    assert _outputs(second) == _outputs(first) and len(_outputs(first)) > 3
    assert not _sh("git status --porcelain", first)  # nothing of the run left uncommitted


# --- resuming a stopped run, as docs/usage.md says ---


def resume_recipe() -> list[str]:
    """The command lines of docs/usage.md's "A run that stopped" block: the run that stopped, then its resumption."""
    return _command_lines(_usage_block("A run that stopped"))


def test_a_stopped_run_resumes_under_dvc_repro_and_dvc_exp_run_would_delete_its_checkpoints(tmp_path):
    """DVC's experiment executor checks out every stage it runs (`checkout --force`) before running it, which deletes
    a `persist: true` output that the last run left but no dvc.lock records; `dvc repro` keeps it (D243). The stage
    stands in for a training run that is killed after its first checkpoint: it records which checkpoints it found,
    saves the next one, and finishes only if it found one."""
    started, resumed = resume_recipe()
    assert started.startswith("dvc exp run -S profile=") and resumed == "dvc repro"
    stage = {"cmd": "mkdir -p run && ls run > found && touch run/checkpoint-$(ls run | wc -l) && test -s found",
             "params": ["profile"], "outs": [{"run": {"persist": True}}, "found"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": stage}}))
    (tmp_path / "params.yaml").write_text("profile: tiny\n")
    _sh("git init -q && dvc init -q && git add --all && git commit -q -m 'the repository'", tmp_path)

    def stops(command: str) -> str:
        killed = _bash(command, tmp_path)
        assert killed.returncode != 0 and "failed to reproduce 'train'" in killed.stderr, killed.stderr[-2000:]
        return (tmp_path / "found").read_text()

    assert stops(started) == "" and (tmp_path / "run" / "checkpoint-0").exists()
    assert stops(started) == "", "dvc exp run kept the stopped run's checkpoint"  # it deleted checkpoint-0 first
    _sh(resumed, tmp_path)
    assert (tmp_path / "found").read_text() == "checkpoint-0\n"  # resumed from the stopped run's checkpoint
    assert "profile: paper-1p5b" in (tmp_path / "params.yaml").read_text()  # the profile -S set, still in place
