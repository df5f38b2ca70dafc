"""FAISS indexes over inner-product embeddings, searched on the GPUs through torch (D214).

The index is described by a FAISS `index_factory` string: "Flat" (exact inner product, the default and
what the paper's DPR/E5 indexes are), "IVF4096,Flat" or "HNSW32" (approximate), or any other factory
string. Search-time knobs (nprobe, efSearch) go through FAISS's ParameterSpace. FAISS builds, saves, loads and
searches the index on the CPU (faiss-cpu in both environments). Where GPUs are visible, a Flat index is sharded
over all of them as Search-R1's retrieval server shards it with faiss-gpu, in fp32 (exact) unless the retriever asks
for fp16 (`gpu_fp16`, Search-R1's setting for its E5 index), and searched as faiss-gpu's `GpuIndexFlat` does: one
matrix product per shard and a top-k, merged across shards. No faiss-gpu wheel carries code for Hopper and
installs beside torch's CUDA 13.0 runtime (D214); torch's kernels are the ones the models already run on.
"""

from __future__ import annotations

import contextlib
import os

import faiss
import numpy as np
import torch

from repro.io import atomic_path

TILE_BYTES = 1 << 30  # the largest block of scores one shard computes at once


def new_index(dim: int, factory: str = "Flat") -> faiss.Index:
    return faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)


class FlatShards:
    """A Flat inner-product index's vectors split in row order over `devices`, searched exactly (fp32) or on fp16
    copies (fp16 products accumulated in fp32, as faiss-gpu's `useFloat16`)."""

    def __init__(self, index: faiss.IndexFlat, devices: list[str], fp16: bool = False):
        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"FlatShards searches inner products; the index's metric is {index.metric_type}")
        self.ntotal, self.d, self.fp16 = index.ntotal, index.d, fp16
        vectors = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)
        bounds = np.linspace(0, index.ntotal, len(devices) + 1).astype(int)
        dtype = torch.float16 if fp16 else torch.float32
        self.shards = [(int(start), torch.from_numpy(vectors[start:end]).to(device, dtype))
                       for device, start, end in zip(devices, bounds[:-1], bounds[1:]) if end > start]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        found = []
        with torch.inference_mode(), _exact_matmul():
            for start, shard in self.shards:
                q = torch.from_numpy(queries).to(shard.device, shard.dtype)
                tile = max(1, TILE_BYTES // (4 * len(queries)))
                for at in range(0, len(shard), tile):
                    scores = (q @ shard[at:at + tile].T).float()
                    top = scores.topk(min(k, scores.shape[1]), dim=1)
                    found.append((top.values.cpu(), top.indices.cpu() + start + at))
        scores, rows = torch.cat([s for s, _ in found], 1), torch.cat([r for _, r in found], 1)
        top = scores.topk(min(k, scores.shape[1]), dim=1)
        scores, rows = top.values.numpy(), rows.gather(1, top.indices).numpy()
        if rows.shape[1] < k:  # FAISS pads with row -1 and score -FLT_MAX past the corpus
            pad = k - rows.shape[1]
            scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=np.finfo(np.float32).min)
            rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
        return scores.astype(np.float32), rows.astype(np.int64)


@contextlib.contextmanager
def _exact_matmul():
    """fp32 products in full precision for the search (no TF32), whatever the process set."""
    saved, torch.backends.cuda.matmul.allow_tf32 = torch.backends.cuda.matmul.allow_tf32, False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def set_search_parameters(index: faiss.Index | FlatShards, params: dict[str, int]) -> None:
    """e.g. {"nprobe": 64} for IVF or {"efSearch": 128} for HNSW (indexes FAISS searches on the CPU); no-op for
    an empty dict."""
    space = faiss.ParameterSpace()
    for name, value in params.items():
        space.set_index_parameter(index, name, value)


def gpu_count() -> int:
    return torch.cuda.device_count()


def to_gpus(index: faiss.Index, fp16: bool = False) -> faiss.Index | FlatShards:
    """A Flat index sharded over all visible GPUs (its vectors in fp16 with `fp16`); any other index, or no GPU:
    the index unchanged, searched by FAISS on the CPU."""
    if gpu_count() == 0 or not isinstance(index, faiss.IndexFlat):
        return index
    return FlatShards(index, [f"cuda:{i}" for i in range(gpu_count())], fp16)


def save_index(index: faiss.Index, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))


def load_index(path: str | os.PathLike, mmap: bool = False) -> faiss.Index:
    """`mmap`: a Flat index's vectors mapped from the file, read-only, not read into memory (FAISS's
    IO_FLAG_MMAP_IFC; IO_FLAG_MMAP maps only IVF lists)."""
    flags = faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY if mmap else 0
    return faiss.read_index(str(path), flags)


def search(index: faiss.Index | FlatShards, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, row numbers), each of shape (n_queries, k), best first."""
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
