"""Benchmark of the retrieval layer on a profile's corpus (default: the embedded one, profile `tiny`).

    python scripts/bench_retrieval.py [--profile tiny] [--encode-sample 1000] [--out bench.json]

Reports passages/s encoded by the default dense retriever (on a sample), the FAISS index build time over
all passage embeddings, queries/s of FAISS top-5 against a plain numpy scoring loop over the same
embeddings (one query at a time, measured in the same run), and the wall time of a fully cached
re-run of the retrieval step. Needs the data stage to have run (it reuses the saved index for the
embeddings). A benchmark, not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from repro.config import load_profile
from repro.data import layout
from repro.data.qa import read_qa
from repro.io import write_json
from repro.retrieval import faiss_index
from repro.retrieval import prepare as data_stage
from repro.retrieval.run import FAISS_FILE, RetrievalSession


def timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


def build_index(passages: np.ndarray, factory: str):
    index = faiss_index.new_index(passages.shape[1], factory)
    if not index.is_trained:
        index.train(passages)
    index.add(passages)
    return index


def numpy_top_k(passages: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The baseline: score every passage for one query at a time and keep the k best."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for i, query in enumerate(queries):
        scores = passages @ query
        best = np.argpartition(-scores, k)[:k]
        out[i] = best[np.argsort(-scores[best])]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--encode-sample", type=int, default=1000, help="passages encoded to measure passages/s")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions of each search timing (best kept)")
    parser.add_argument("--out", help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)

    cfg = load_profile(args.profile)
    name, k = cfg.retrieval.default, cfg.retrieval.topk
    store, fingerprint = data_stage.open_corpus(cfg)
    session = RetrievalSession(cfg, store, fingerprint, progress=False)
    if session.ensure_index(name) != "cached":
        raise SystemExit(f"the index of '{name}' was not built by the data stage; run `dvc repro data` first")
    retriever = session.retriever(name)

    sample = [p["contents"] for _, p in zip(range(args.encode_sample), store)]
    _, encode_s = timed(retriever.encode_passages, sample, False)

    saved = faiss_index.load_index(layout.index_dir(cfg.name, name) / FAISS_FILE)
    passages = saved.reconstruct_n(0, saved.ntotal)
    index, build_s = timed(build_index, passages, retriever.cfg.index)

    questions = [r["question"] for d in cfg.data.datasets if d.setting == "open" for s in d.splits
                 for r in read_qa(layout.qa_path(cfg.name, d.name, s))]
    queries = retriever.encode_queries(questions)
    faiss_s = min(timed(faiss_index.search, index, queries, k)[1] for _ in range(args.repeats))
    numpy_s = min(timed(numpy_top_k, passages, queries, k)[1] for _ in range(args.repeats))
    same = bool((faiss_index.search(index, queries, k)[1] == numpy_top_k(passages, queries, k)).all())

    cached_s = timed(data_stage.run_retrieval, cfg, store, fingerprint, False)[1]
    numbers = {
        "profile": cfg.name, "retriever": name, "passages": int(saved.ntotal), "dim": int(passages.shape[1]),
        "queries": len(queries), "encode_passages_per_s": len(sample) / encode_s,
        "index_build_s (faiss add, embeddings given)": build_s,
        "index_build_s (estimated incl. encoding)": build_s + saved.ntotal * encode_s / len(sample),
        "faiss_top5_queries_per_s": len(queries) / faiss_s, "numpy_loop_top5_queries_per_s": len(queries) / numpy_s,
        "faiss_speedup_over_numpy_loop": numpy_s / faiss_s, "faiss_equals_numpy_top5": same,
        "cached_rerun_of_retrieval_step_s": cached_s,
    }
    for key, value in numbers.items():
        print(f"{key:48s} {value:.4g}" if isinstance(value, float) else f"{key:48s} {value}")
    if args.out:
        write_json(args.out, numbers)
    return numbers


if __name__ == "__main__":
    main()
