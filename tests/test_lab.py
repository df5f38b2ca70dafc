"""`make lab` leaves a run as it was (repro.ops.lab, D197, D232, D233). Through `make lab`'s server on 127.0.0.1: a
save of a table and a notebook that `dvc add` linked to the cache changes the workspace only, and a checkpoint lives
outside the outputs and restores without touching the cache. In a real browser (Debian's Chromium, driven by
Playwright), on a finished stage of the `ci` pipeline: opening a notebook and a table and closing them leaves `dvc
status` up to date; running a cell and saving makes that one output "modified", with the cache intact."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT, free_port
from repro.ops.lab import CHECKPOINT_ROOT
from repro.ops.rehearsal.run import scratch_copy

TOKEN = "repro-lab-test"
AUTH = {"Authorization": f"token {TOKEN}"}
LAB_COMMAND = [sys.executable, "-m", "repro.ops.lab"]  # the recipe of `make lab`, checked below
CHROMIUM = shutil.which("chromium")
PATIENCE = 120  # seconds for each thing the browser waits for: the suite runs beside it on every core


def test_make_lab_runs_the_command_these_tests_start():
    recipe = re.search(r"^lab:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert recipe == "$(PY) -m repro.ops.lab"


def dvc(repo: Path, *args: str) -> str:
    """`dvc ARGS` in `repo`, its stages' `python` this venv's."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"dvc {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


@contextlib.contextmanager
def make_lab(root: Path, home: Path):
    """`make lab`'s server on `root` (its working directory, as `make lab` from the repository root), on a free port
    of 127.0.0.1 with a token; `home` stands in for the user's home (Lab's workspaces, the kernel's runtime files)."""
    home.mkdir(exist_ok=True)
    port = free_port()
    server = subprocess.Popen(
        [*LAB_COMMAND, "--no-browser", "--allow-root", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}"],
        cwd=root, env=dict(os.environ, HOME=str(home)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(urllib.request.Request(f"{url}/api/status", headers=AUTH), timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None:
                    pytest.fail(f"the server exited: {server.stderr.read().decode()[-2000:]}")
                time.sleep(0.1)
        else:
            pytest.fail("the server did not answer within 60 s")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def cache_objects(repo: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in (repo / ".dvc" / "cache").rglob("*") if path.is_file()}


def checkpoint_of(repo: Path, path: str) -> Path:
    """Where `make lab` keeps the checkpoint of `path` (relative to `repo`)."""
    stem, suffix = Path(path).stem, Path(path).suffix
    return repo / CHECKPOINT_ROOT / Path(path).parent / ".ipynb_checkpoints" / f"{stem}-checkpoint{suffix}"


# --- through the server's API ---


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


@pytest.fixture
def lab_server(outputs, tmp_path):
    with make_lab(outputs, tmp_path / "home") as url:
        yield url


def api(url: str, path: str, method: str, model: dict | None = None) -> dict:
    request = urllib.request.Request(f"{url}/api/contents/{path}", method=method,
                                     data=json.dumps(model).encode() if model is not None else None,
                                     headers={"Content-Type": "application/json", **AUTH})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
        return json.loads(body) if body else {}


def test_a_save_from_lab_leaves_the_cache_intact_and_dvc_status_reports_it(outputs, lab_server):
    before = cache_objects(outputs)
    api(lab_server, "results/table.csv", "PUT",
        {"type": "file", "format": "text", "content": "method,em\neviomni,99.9\n"})
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("edited in Lab")])
    api(lab_server, "results/study.ipynb", "PUT", {"type": "notebook", "content": notebook})

    assert cache_objects(outputs) == before  # not a byte of the cache changed
    assert (outputs / "results" / "table.csv").read_text() == "method,em\neviomni,99.9\n"
    assert "edited in Lab" in (outputs / "results" / "study.ipynb").read_text()
    assert all(os.stat(outputs / "results" / name).st_nlink == 1 for name in ("table.csv", "study.ipynb"))
    assert "modified:" in dvc(outputs, "status") and "results" in dvc(outputs, "status")
    dvc(outputs, "checkout", "--force")
    assert (outputs / "results" / "table.csv").read_text() == "method,em\neviomni,41.1\n"  # the run's bytes, back


def test_checkpoints_live_outside_the_outputs_and_restore_without_touching_the_cache(outputs, lab_server):
    assert api(lab_server, "results/table.csv/checkpoints", "POST")["id"] == "checkpoint"
    assert checkpoint_of(outputs, "results/table.csv").read_text() == "method,em\neviomni,41.1\n"
    assert not list((outputs / "results").rglob("*checkpoint*")) and "up to date" in dvc(outputs, "status")
    # the stage reruns (a new object, linked) while the file is open; Lab's "Revert to checkpoint" then copies the
    # older bytes back into the file, not into the new cache object
    (outputs / "results" / "table.csv").unlink()
    (outputs / "results" / "table.csv").write_text("method,em\neviomni,50.0\n")
    dvc(outputs, "add", "results")
    assert os.stat(outputs / "results" / "table.csv").st_nlink == 2
    before = cache_objects(outputs)
    api(lab_server, "results/table.csv/checkpoints/checkpoint", "POST")
    assert (outputs / "results" / "table.csv").read_text() == "method,em\neviomni,41.1\n"
    assert cache_objects(outputs) == before and os.stat(outputs / "results" / "table.csv").st_nlink == 1


# --- in a browser, on a finished stage of the ci pipeline ---

STAGE = "length_rewards"  # the cheapest stage of the pipeline with an executed notebook and tables (~15 s)
NOTEBOOK = f"results/ci/{STAGE}/{STAGE}.ipynb"
TABLE = f"results/ci/{STAGE}/figure7_curves.csv"


@pytest.fixture(scope="module")
def finished_stage(tmp_path_factory) -> Path:
    """A scratch copy of the repository whose `ci` run of STAGE is finished (`dvc repro STAGE`; the whole pipeline,
    which tests/test_pipeline.py runs, takes minutes): its outputs linked to the cache, `dvc status` up to date."""
    repo = tmp_path_factory.mktemp("lab-repo")
    scratch_copy(repo, "ci")
    dvc(repo, "repro", STAGE)
    return repo


def dvc_status(repo: Path) -> dict:
    return json.loads(dvc(repo, "status", "--json", STAGE))


def repository_files(repo: Path) -> set[str]:
    """The files of the scratch repository outside git's, DVC's and the Lab's own directories."""
    return {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()
            and p.relative_to(repo).parts[0] not in (".git", ".dvc") and not p.is_relative_to(repo / CHECKPOINT_ROOT)}


def open_in_lab(page, url: str, path: str, ready: str) -> None:
    """Open `path` as a user does, from its Lab URL, and wait for `ready` (a CSS selector) to show."""
    page.goto(f"{url}/lab/tree/{path}?token={TOKEN}")
    page.wait_for_selector(ready, timeout=PATIENCE * 1000)


def tab_of(path: str) -> str:
    return f"#jp-main-dock-panel .lm-TabBar-tab:has-text('{Path(path).name}')"


def close_tab(page, path: str) -> None:
    """Close the document's tab; if Lab asks whether to save a change (a late kernel message can mark a notebook
    changed after its save, under load), answer as a user who has saved would: save."""
    tab = page.locator(tab_of(path))
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    dialog = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
    deadline = time.monotonic() + PATIENCE
    while tab.count() and time.monotonic() < deadline:
        if dialog.count():
            dialog.first.click()
        time.sleep(0.2)
    tab.wait_for(state="detached", timeout=1_000)


def wait_for(condition, what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.2)


KERNEL_IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH: `make browser` installs Debian's")
def test_opening_running_saving_and_closing_in_a_browser_leaves_the_run_as_it_was(finished_stage, tmp_path):
    from playwright.sync_api import sync_playwright

    repo = finished_stage
    files, cache = repository_files(repo), cache_objects(repo)
    assert dvc_status(repo) == {}
    with make_lab(repo, tmp_path / "home") as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        # looked at: a table and the executed notebook opened (Lab checkpoints both), the kernel up, both closed
        for path, ready in ((TABLE, ".jp-CSVViewer"), (NOTEBOOK, KERNEL_IDLE)):
            open_in_lab(page, url, path, ready)
            wait_for(lambda path=path: checkpoint_of(repo, path).exists(), f"Lab's checkpoint of {path}")
            close_tab(page, path)
        assert dvc_status(repo) == {} and repository_files(repo) == files and cache_objects(repo) == cache

        # worked on: a new cell run (in the kernel, started at the repository root), the notebook saved and closed
        open_in_lab(page, url, NOTEBOOK, KERNEL_IDLE)
        page.locator(".jp-Notebook .jp-Cell").first.click()
        for key in ("Escape", "b", "Enter"):  # command mode, a cell below, edit it
            page.keyboard.press(key)
        page.keyboard.type("import os; os.getcwd()")
        page.keyboard.press("Shift+Enter")
        page.wait_for_selector(f".jp-OutputArea-output:has-text({json.dumps(repr(str(repo)))})", timeout=PATIENCE * 1000)
        page.wait_for_selector(KERNEL_IDLE, timeout=PATIENCE * 1000)  # the run finished: nothing changes the notebook after
        page.keyboard.press("Control+s")
        wait_for(lambda: "os.getcwd()" in (repo / NOTEBOOK).read_text(), "the save")
        page.locator(f"{tab_of(NOTEBOOK)}:not(.jp-mod-dirty)").wait_for(timeout=PATIENCE * 1000)  # saved as shown
        close_tab(page, NOTEBOOK)
        browser.close()

    assert dvc_status(repo) == {STAGE: [{"changed outs": {f"results/ci/{STAGE}": "modified"}}]}
    assert cache_objects(repo) == cache, "a byte of the cache changed"
    assert repository_files(repo) == files and (repo / NOTEBOOK).stat().st_nlink == 1
    dvc(repo, "checkout", "--force", STAGE)  # the run's notebook back from the cache
    assert dvc_status(repo) == {} and "os.getcwd()" not in (repo / NOTEBOOK).read_text()
