"""What a launched worker measures beside the training code: which path TRL's fused LM head takes, and peak memory."""

from __future__ import annotations

import resource


def count_fused_head_paths() -> dict:
    """Count the fused LM head's kernel choices from now on: "triton" each time a tile is folded by its Triton kernel,
    "torch" each time by its torch path (`trl.kernels.chunked_logprob._use_triton`, asked once per tile)."""
    from trl.kernels import chunked_logprob

    counts = {"triton": 0, "torch": 0}
    original = chunked_logprob._use_triton

    def counted(device) -> bool:
        used = original(device)
        counts["triton" if used else "torch"] += 1
        return used

    chunked_logprob._use_triton = counted
    return counts


def reset_peak_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_memory() -> dict:
    """The device's peak allocated and reserved bytes since the reset (None on a CPU) and the process's peak RSS."""
    import torch

    cuda = torch.cuda.is_available()
    return {"peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
            "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
