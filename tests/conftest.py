import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The test suite never touches a model hub, and paths in params.yaml are relative to the repository root.
for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DVC_NO_ANALYTICS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.chdir(ROOT)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct exported from its packaged GGUF, once per session (about 20 s)."""
    from repro.assets import export_smollm2

    path = tmp_path_factory.mktemp("smollm2-135m-instruct")
    export_smollm2(path)
    return path


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """The 2-layer random Llama with SmolLM2's tokenizer and chat template."""
    from repro.assets import build_tiny_random_llama

    path = tmp_path_factory.mktemp("tiny-random-llama")
    build_tiny_random_llama(path)
    return path
