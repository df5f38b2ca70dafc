"""FAISS indexes over inner-product embeddings.

The index is described by a FAISS `index_factory` string: "Flat" (exact inner product, the default and
what the paper's DPR/E5 indexes are), "IVF4096,Flat" or "HNSW32" (approximate), or any other factory
string. Search-time knobs (nprobe, efSearch) go through FAISS's ParameterSpace. When faiss-gpu and GPUs
are present the index is copied to all of them, sharded, as Search-R1's retrieval server does: in fp32 (exact) unless
the retriever asks for fp16 (`gpu_fp16`, Search-R1's setting for its E5 index).
"""

from __future__ import annotations

import os

import faiss
import numpy as np

from repro.io import atomic_path


def new_index(dim: int, factory: str = "Flat") -> faiss.Index:
    return faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)


def set_search_parameters(index: faiss.Index, params: dict[str, int]) -> None:
    """e.g. {"nprobe": 64} for IVF or {"efSearch": 128} for HNSW; no-op for an empty dict."""
    space = faiss.GpuParameterSpace() if _on_gpu(index) else faiss.ParameterSpace()
    for name, value in params.items():
        space.set_index_parameter(index, name, value)


def gpu_count() -> int:
    return faiss.get_num_gpus() if hasattr(faiss, "StandardGpuResources") else 0


def _on_gpu(index: faiss.Index) -> bool:
    return hasattr(faiss, "GpuIndex") and isinstance(index, (faiss.GpuIndex, faiss.IndexShards))


def to_gpus(index: faiss.Index, fp16: bool = False) -> faiss.Index:
    """The index sharded over all GPUs if faiss-gpu sees any (its codes in fp16 with `fp16`), else the index
    unchanged."""
    if gpu_count() == 0:
        return index
    options = faiss.GpuMultipleClonerOptions()
    options.shard, options.useFloat16 = True, fp16
    return faiss.index_cpu_to_all_gpus(index, co=options)


def save_index(index: faiss.Index, path: str | os.PathLike) -> None:
    if _on_gpu(index):
        index = faiss.index_gpu_to_cpu(index)
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))


def load_index(path: str | os.PathLike) -> faiss.Index:
    return faiss.read_index(str(path))


def search(index: faiss.Index, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, row numbers), each of shape (n_queries, k), best first."""
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
