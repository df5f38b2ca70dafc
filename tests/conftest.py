import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The test suite never touches a model hub, and paths in params.yaml are relative to the repository root.
for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DVC_NO_ANALYTICS"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.chdir(ROOT)
