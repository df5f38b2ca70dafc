"""Data parallelism over replicas of one engine, as pure functions: how many replicas `data_parallel` asks for and
which devices each one is pinned to, which contiguous slice of the prompts each replica answers, and how their
outputs are put back in input order.

    replica_devices("auto", 1, ["0", "1", "2", "3"])  # ["0", "1", "2", "3"]: one engine per GPU
    replica_devices("auto", 2, ["0", "1", "2", "3"])  # ["0,1", "2,3"]: tensor parallel inside each replica
    shard_bounds(10, 4)                               # [(0, 3), (3, 6), (6, 8), (8, 10)]

A replica's devices are a CUDA_VISIBLE_DEVICES value; None leaves the environment as it is (one replica: today's
engine in the calling process; or several on a machine without GPUs, where they share the CPU). The slices follow
vLLM's offline data-parallel example (`examples/features/data_parallel/data_parallel_offline.py`): the first
`count % shards` replicas get one prompt more than the others.

The engine replicas are `repro.generation.vllm_backend.EngineReplicas`; this module sits low in the layers so that
the cost model and the preflight count replicas by the engine's rule (`replica_count`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

AUTO = "auto"


def visible_devices(cuda_visible_devices: str | None, device_count: int) -> list[str]:
    """The GPU ids a process may pin its replicas to: the entries of CUDA_VISIBLE_DEVICES when it is set (indices
    or UUIDs, kept as written), else 0 .. device_count - 1."""
    if cuda_visible_devices is not None:
        return [device.strip() for device in cuda_visible_devices.split(",") if device.strip()]
    return [str(i) for i in range(device_count)]


def replica_count(data_parallel: int | str | None, tensor_parallel_size: int, gpus: int) -> int:
    """Replicas of an engine: None or 1 is one; "auto" is one per `tensor_parallel_size` visible GPUs (one on a
    machine without GPUs); N is N."""
    if tensor_parallel_size < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if data_parallel is None:
        return 1
    if data_parallel == AUTO:
        return max(1, gpus // tensor_parallel_size)
    if isinstance(data_parallel, bool) or not isinstance(data_parallel, int) or data_parallel < 1:
        raise ValueError(f"data_parallel must be 'auto', null or a replica count >= 1, got {data_parallel!r}")
    return data_parallel


def replica_devices(data_parallel: int | str | None, tensor_parallel_size: int,
                    visible: Sequence[str]) -> list[str | None]:
    """One entry per replica: the comma-separated GPUs it is pinned to (`tensor_parallel_size` of them, taken in
    order from `visible`), or None for a replica that is not pinned (see the module docstring)."""
    replicas = replica_count(data_parallel, tensor_parallel_size, len(visible))
    if replicas == 1:
        return [None]
    if not visible:
        return [None] * replicas
    needed = replicas * tensor_parallel_size
    if needed > len(visible):
        raise ValueError(f"data_parallel={data_parallel} replicas x tensor_parallel_size={tensor_parallel_size} "
                         f"need {needed} GPUs; {len(visible)} are visible ({','.join(visible)})")
    return [",".join(visible[r * tensor_parallel_size:(r + 1) * tensor_parallel_size]) for r in range(replicas)]


def shard_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of each of `shards` contiguous slices of `count` items, in order; sizes differ by at most one,
    larger first (a slice is empty when there are fewer items than shards)."""
    if count < 0 or shards < 1:
        raise ValueError(f"need count >= 0 and shards >= 1, got {count} and {shards}")
    floor, remainder = divmod(count, shards)

    def start(rank: int) -> int:
        return rank * floor + min(rank, remainder)

    return [(start(rank), start(rank + 1)) for rank in range(shards)]


def split(items: Sequence[T], shards: int) -> list[list[T]]:
    """`items` cut into `shard_bounds(len(items), shards)` slices."""
    return [list(items[start:end]) for start, end in shard_bounds(len(items), shards)]


def merge(parts: Sequence[Sequence[T]], sizes: Sequence[int]) -> list[T]:
    """The replicas' outputs in input order: `parts[r]` answers the `sizes[r]` items of slice r, one output each."""
    if len(parts) != len(sizes):
        raise ValueError(f"{len(parts)} outputs for {len(sizes)} slices")
    merged: list[T] = []
    for rank, (part, size) in enumerate(zip(parts, sizes)):
        if len(part) != size:
            raise RuntimeError(f"replica {rank} returned {len(part)} outputs for {size} prompts")
        merged.extend(part)
    return merged
