"""What the machine and a model directory allow: measured matmul peak and memory bandwidth, parameter counts; and
other work on the machine (`cores_busy`). Shared by the scripts here (a script in scripts/ imports it as `machine`)
and the tests that score beside other work (`from scripts.machine import cores_busy`)."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
import time

import torch


def matmul_peak(dtype: torch.dtype, size: int = 2048, seconds: float = 3.0) -> float:
    """Measured FLOP/s of square matmuls in `dtype` on this process's torch threads."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b  # warm-up
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start)


def memory_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """Measured bytes/s of reading a `gib`-GiB tensor (the best of `repeats` sums)."""
    x = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - start)
    return x.numel() * 4 / best


def model_sizes(model_dir: str) -> tuple[int, int]:
    """(all parameters, non-embedding parameters) of a safetensors directory, without loading the model."""
    from safetensors import safe_open

    total = embedding = 0
    for path in sorted(os.scandir(model_dir), key=lambda e: e.name):
        if path.name.endswith(".safetensors"):
            with safe_open(path.path, "pt") as f:
                for name in f.keys():
                    count = math.prod(f.get_slice(name).get_shape())
                    total += count
                    embedding += count if "embed_tokens" in name else 0
    return total, total - embedding


@contextlib.contextmanager
def cores_busy(processes: int = 2):
    """Other work on the machine: `processes` Python processes spinning on the cores while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
