"""A damaged file that a run wrote or a user edits is refused with its path (and line where there is one), never with
a bare JSONDecodeError or YAMLError (D234). The retrieval manifests' case is in tests/test_retrieval_cache.py."""

import re

import nbformat
import pytest

from repro.config import launchers
from repro.config.schema import ConfigError, read_params
from repro.io import InputError, read_json, read_json_object, read_yaml, write_json
from repro.ops import pipeline_deps, remote
from repro.reporting.paper import load_claims
from repro.train.grpo.logs import TrainRun


def refused(error, path, line: int | None = None):
    """pytest.raises(error) whose message starts with `path` (and `:line`)."""
    where = re.escape(f"{path}:{line}" if line else str(path))
    return pytest.raises(error, match=rf"^{where}(:\d+)?: ")


CUT_JSON = '{\n  "config": {"k1": 0.9,\n  "models": '
BAD_YAML = "num_processes: 2\ndistributed_type: [MULTI_GPU\n"


def test_the_io_readers_name_the_file_and_line(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(CUT_JSON)
    with refused(InputError, path, 3):
        read_json(path)
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: expected a JSON object, got list"):
        read_json_object(path)
    path = tmp_path / "launcher.yaml"
    path.write_text(BAD_YAML)
    with refused(InputError, path, 3):
        read_yaml(path)
    path.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:2: invalid UTF-8"):
        read_yaml(path)
    path.write_text("")
    assert read_yaml(path) is None


def test_a_damaged_params_file_is_refused_naming_it(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("profile: ci\nprofiles:\n  ci: {seed: [0,\n")
    with refused(ConfigError, params, 4):
        read_params(params)


def test_a_damaged_launcher_or_deepspeed_file_is_refused_naming_it(tmp_path):
    launcher = tmp_path / "launcher.yaml"
    launcher.write_text(BAD_YAML)
    with refused(InputError, launcher):
        launchers.processes(str(launcher))
    deepspeed = tmp_path / "zero3.json"
    deepspeed.write_text('{"zero_optimization": {"stage": ')
    launcher.write_text(f"distributed_type: DEEPSPEED\ndeepspeed_config: {{deepspeed_config_file: {deepspeed}}}\n")
    with refused(InputError, deepspeed):
        launchers.zero_stage(str(launcher))


def test_a_damaged_notebook_is_refused_naming_it(tmp_path):
    notebook = tmp_path / "study.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), notebook)
    assert pipeline_deps.notebook_source(notebook) == "x = 1"
    notebook.write_text(notebook.read_text()[:40])
    with refused(InputError, notebook):
        pipeline_deps.notebook_source(notebook)
    notebook.write_text('{"metadata": {}}')
    with pytest.raises(InputError, match="no `cells` list"):
        pipeline_deps.notebook_source(notebook)


def test_a_damaged_claims_file_is_refused_naming_it(tmp_path):
    claims = tmp_path / "claims.yaml"
    claims.write_text("- id: c1\n  kind: sign\n  better: [EviOmni\n")
    with refused(InputError, claims):
        load_claims(claims)


def test_a_damaged_fetch_manifest_or_selection_is_refused_naming_it(tmp_path, monkeypatch):
    manifest = tmp_path / "manifest.json"
    manifest.write_text(CUT_JSON)
    monkeypatch.setattr(remote, "MANIFEST", manifest)
    with refused(InputError, manifest):
        remote.read_manifest()
    run = TrainRun(tmp_path / "run")
    write_json(run.selection_file, {"checkpoint": "checkpoint-4"})
    assert run.selection() == {"checkpoint": "checkpoint-4"}
    run.selection_file.write_text('{"checkpoint": "checkp')
    with refused(InputError, run.selection_file):
        run.selection()
