"""The extension exercise of docs/usage.md ("Extending the pipeline"), done on a scratch copy of the repository: a
baseline, a reward design and a stage are added in exactly the places the page lists, and then the project's own
checks pass there (the registry's and the stage table's tests, the code dependencies of dvc.yaml, the config, the
builder, the reward and the stage's command). A place the page does not list that becomes necessary fails here; so
does a page whose lists name other files than the exercise edits."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "usage.md"
COPIED = ("src", "tests", "notebooks", "configs", "data/paper", ".dvc/config", "dvc.yaml", "params.yaml",
          "pyproject.toml")

BASELINE = '''"""The first passage as evidence: the exercise's baseline."""

from repro.evaluation.refiners import Refinement, Refiner


class FirstPassage(Refiner):
    def refine(self, rows):
        return [Refinement(row["passages"][0]["contents"] if row["passages"] else "") for row in rows]

    def config(self):
        return {"refiner": "first_passage"}


def build(key, cfg, pool, params):
    return FirstPassage()
'''
METHOD_ROW = ('    Method("first_passage", "First passage", "VAR", None, "repro.baselines.first_passage:build", '
              '"answer", prompt="passages_qa"),\n')
SCORE = '''

def length_only_design(response: str, golden_answers, cfg: RewardsConfig) -> float:
    """The exercise's design: R^fmt alone."""
    return format_reward(response, cfg.format_check)
'''
DESIGN_ROW = '    RewardDesign("length_only", "length_only_design", (), (), "the extension exercise"),\n'
STAGE_MODULE = '''"""Stage `hello`: the exercise's stage, a file with the profile's name."""

from repro.config import Profile
from repro.data.layout import profile_dir
from repro.io import write_text
from repro.stages import command_line


def hello(cfg: Profile):
    return write_text(profile_dir(cfg.name) / "hello.txt", cfg.name)


main = command_line("hello", __doc__, hello)

if __name__ == "__main__":
    main()
'''
STAGE_ROW = '    Stage("hello"),\n'
DVC_STAGE = """
  hello:  # the extension exercise
    cmd: python -m repro.stages.hello --profile ${profile}
    deps:
      - src/repro/stages/hello.py
    outs:
      - data/${profile}/hello.txt
"""


def page_places(heading: str) -> set[str]:
    """The files the page's list under `heading` names (its backticked paths)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[:section.find("\n### ", 1) if "\n### " in section[1:] else len(section)]
    return set(re.findall(r"^\d+\. `([^`]+)`", section, re.M))


def insert_row(text: str, opening: str, row: str, last: bool = False) -> str:
    """`row` as the first (or last) row of the list that `opening` starts."""
    start = text.index(opening) + len(opening)
    at = text.index("]}", start) if last else text.index("\n", start) + 1
    return text[:at] + row + text[at:]


def add_baseline(repo: Path) -> set[str]:
    (repo / "src/repro/baselines/first_passage.py").write_text(BASELINE)
    registry = repo / "src/repro/registry.py"
    registry.write_text(insert_row(registry.read_text(), "METHODS: dict[str, Method] = {m.key: m for m in [",
                                   METHOD_ROW))
    params = repo / "params.yaml"
    ci = params.read_text()
    start = ci.index("\n  ci:\n")
    methods = re.compile(r"(\n    evaluation:[^\n]*\n      datasets:[^\n]*\n      methods: \[)")
    params.write_text(ci[:start] + methods.sub(r"\1first_passage, ", ci[start:], count=1))
    return {"src/repro/baselines/<name>.py", "src/repro/registry.py", "params.yaml"}


def add_reward_design(repo: Path) -> set[str]:
    rewards = repo / "src/repro/formulas/rewards.py"
    rewards.write_text(rewards.read_text() + SCORE)
    registry = repo / "src/repro/registry.py"
    registry.write_text(insert_row(registry.read_text(),
                                   "REWARD_DESIGNS: dict[str, RewardDesign] = {d.name: d for d in [", DESIGN_ROW))
    return {"src/repro/formulas/rewards.py", "src/repro/registry.py"}


def add_stage(repo: Path) -> set[str]:
    (repo / "src/repro/stages/hello.py").write_text(STAGE_MODULE)
    registry = repo / "src/repro/registry.py"
    registry.write_text(insert_row(registry.read_text(), "STAGES: dict[str, Stage] = {s.name: s for s in [",
                                   STAGE_ROW, last=True))
    pipeline = repo / "dvc.yaml"
    text = pipeline.read_text()
    plots = text.index("\nplots:")  # the stages end where the top-level plots begin
    pipeline.write_text(text[:plots].rstrip("\n") + "\n" + DVC_STAGE + text[plots:])
    return {"src/repro/stages/<name>.py", "src/repro/registry.py", "dvc.yaml"}


CHECK = """
from repro.config import RewardsConfig
from repro.config import load_profile
from repro.evaluation.methods import build_refiner
from repro.formulas.rewards import design_reward
from repro.ops.preflight import require

cfg = load_profile("ci")
assert "first_passage" in cfg.evaluation.methods
refiner = build_refiner("first_passage", cfg, pool=None, params=None)
assert refiner.refine([{"passages": [{"contents": "T\\nText."}]}])[0].evidence == "T\\nText."
assert design_reward("length_only", "<reason>r</reason><extract>e</extract><answer>a</answer>", ["a"],
                     RewardsConfig(design="length_only")) == 1.0
require(cfg, "hello")
"""


@pytest.mark.slow
def test_a_baseline_a_reward_design_and_a_stage_need_only_the_places_the_page_lists(tmp_path):
    repo = tmp_path / "repo"
    for name in COPIED:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, repo / name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)  # DVC's plan reads a repository
    assert add_baseline(repo) == page_places("### A Table 2 baseline")
    assert add_reward_design(repo) == page_places("### A reward design")
    assert add_stage(repo) == page_places("### A stage")
    env = {"PYTHONPATH": str(repo / "src"), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}

    def run(*cmd: str) -> str:
        result = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, f"{' '.join(cmd)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result.stdout

    run(sys.executable, "-m", "repro.ops.pipeline_deps", "--write")  # the page's command, not a place
    run(sys.executable, "-c", CHECK)
    run(sys.executable, "-m", "repro.stages.hello", "--profile", "ci")
    assert (repo / "data/ci/hello.txt").read_text() == "ci"
    # the registry's checks of the rows the exercise added (its notebook and DVC-plan checks see no new notebook or
    # gate), and dvc.yaml's code dependencies
    run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "tests/test_registry.py", "-k",
        "not notebook_imports and not gates",
        "tests/test_pipeline_deps.py::test_dvc_yaml_lists_each_stages_code_as_the_import_graph_derives_it")
