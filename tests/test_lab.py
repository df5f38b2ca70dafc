"""Saving from JupyterLab never reaches the DVC cache (repro.ops.lab, D197): a real Jupyter server on 127.0.0.1 saves a
table and a notebook that `dvc add` linked to the cache, the cache objects keep their bytes, and `dvc status`
reports the outputs as modified."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

TOKEN = "repro-lab-test"
AUTH = {"Authorization": f"token {TOKEN}"}


def dvc(repo: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def outputs(tmp_path):
    """A DVC repository whose results/ is a tracked output, hardlinked to its cache as this project configures."""
    repo = tmp_path / "repo"
    (repo / "results").mkdir(parents=True)
    (repo / "results" / "table.csv").write_text("method,em\neviomni,41.1\n")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("executed")]),
                   repo / "results" / "study.ipynb")
    dvc(repo, "init", "--no-scm")
    dvc(repo, "config", "cache.type", "hardlink,symlink")
    dvc(repo, "add", "results")
    assert all(os.stat(repo / "results" / name).st_nlink == 2 for name in ("table.csv", "study.ipynb"))
    return repo


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def lab_server(outputs):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.root_dir={outputs}", f"--IdentityProvider.token={TOKEN}",
         "--ServerApp.contents_manager_class=repro.ops.lab.DetachingContentsManager"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(urllib.request.Request(f"{url}/api/status", headers=AUTH), timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None:
                    pytest.fail(f"the server exited: {server.stderr.read().decode()[-2000:]}")
                time.sleep(0.1)
        else:
            pytest.fail("the server did not answer within 30 s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def save(url: str, path: str, model: dict) -> int:
    request = urllib.request.Request(f"{url}/api/contents/{path}", method="PUT", data=json.dumps(model).encode(),
                                     headers={"Content-Type": "application/json", **AUTH})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def cache_objects(repo: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in (repo / ".dvc" / "cache").rglob("*") if path.is_file()}


def test_a_save_from_lab_leaves_the_cache_intact_and_dvc_status_reports_it(outputs, lab_server):
    before = cache_objects(outputs)
    assert save(lab_server, "results/table.csv",
                {"type": "file", "format": "text", "content": "method,em\neviomni,99.9\n"}) == 200
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("edited in Lab")])
    assert save(lab_server, "results/study.ipynb", {"type": "notebook", "content": notebook}) == 200

    assert cache_objects(outputs) == before  # not a byte of the cache changed
    assert (outputs / "results" / "table.csv").read_text() == "method,em\neviomni,99.9\n"
    assert "edited in Lab" in (outputs / "results" / "study.ipynb").read_text()
    assert all(os.stat(outputs / "results" / name).st_nlink == 1 for name in ("table.csv", "study.ipynb"))
    assert "modified:" in dvc(outputs, "status") and "results" in dvc(outputs, "status")
    dvc(outputs, "checkout", "--force")
    assert (outputs / "results" / "table.csv").read_text() == "method,em\neviomni,41.1\n"  # the run's bytes, back
