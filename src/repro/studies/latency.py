"""Table 4: inference latency of evidence extraction, in seconds per query (§4.5).

The paper times extraction only, on one A800 with batch size 64 and 768 max new tokens. Here a refiner is
built once (model load excluded), warmed up on `warmup_batches` batches of the same shape, then the whole
query set is refined in batches of `batch_size`, `repetitions` times; seconds per query is the median
repetition's wall time over the number of queries (D49). A method with an adapter (FilCo, SEER) is timed as a model:
on vLLM its adapter is merged into a plain copy first, so no LoRA kernel runs (D213). Decoding is greedy, so every repetition yields the same
evidence, whose length (extractor tokens) is reported as mean and std like the paper's §4.5, beside the length
of the raw generated text (what the decoder actually spent its steps on).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from repro.config import Profile
from repro.data import layout
from repro.evaluation.methods import build_refiner
from repro.evaluation.refiners import Refinement, Refiner
from repro.formulas.metrics import text_length
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.registry import METHODS
from repro.studies.comparison import evaluation_rows, length_tokenizer


# a row of `run_latency`: the method, the dataset, the decoding budget, `measure_latency`'s figures
RESULT_COLUMNS = ["method", "dataset", "max new tokens", "queries", "batch size", "repetitions", "seconds per query",
                  "seconds per repetition", "evidence tokens mean", "evidence tokens std", "output tokens mean",
                  "output tokens std"]


def _batches(rows: Sequence[dict], size: int) -> list[Sequence[dict]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _length_stats(texts: list[str], tokenizer, name: str) -> dict:
    lengths = [text_length(t, "tokens", tokenizer) for t in texts]
    return {f"{name} tokens mean": float(np.mean(lengths)), f"{name} tokens std": float(np.std(lengths))}


def measure_latency(refiner: Refiner, rows: Sequence[dict], *, batch_size: int, repetitions: int = 3,
                    warmup_batches: int = 1, tokenizer=None, progress: bool = True) -> dict:
    """Seconds per query of `refiner` over `rows` (median of `repetitions`), and the evidence lengths."""
    if not rows or batch_size < 1 or repetitions < 1:
        raise ValueError("need rows, batch_size >= 1 and repetitions >= 1")
    batches = _batches(rows, batch_size)
    for i in range(warmup_batches):
        refiner.refine(batches[i % len(batches)])
    seconds, outputs = [], []
    for _ in tqdm(range(repetitions), desc="latency", unit="rep", disable=not progress):
        started = time.perf_counter()
        outputs = [r for batch in batches for r in refiner.refine(batch)]
        seconds.append(time.perf_counter() - started)
    result = {"queries": len(rows), "batch size": batch_size, "repetitions": repetitions,
              "seconds per query": statistics.median(seconds) / len(rows),
              "seconds per repetition": seconds}
    if tokenizer is not None:
        result.update(_evidence_lengths(outputs, tokenizer))
    return result


def _evidence_lengths(outputs: list[Refinement], tokenizer) -> dict:
    evidence = [o.evidence or "" for o in outputs]
    raw = [o.raw if o.raw is not None else o.evidence or "" for o in outputs]
    return {**_length_stats(evidence, tokenizer, "evidence"), **_length_stats(raw, tokenizer, "output")}


def run_latency(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Table 4 for a profile, long form: one row per (method, dataset) of `cfg.latency`; `latency: null`: no row
    (not requested)."""
    lat = cfg.latency
    if lat is None:
        print(f"profiles.{cfg.name}.latency is null: Table 4 is not requested", flush=True)
        return pd.DataFrame(columns=RESULT_COLUMNS)
    params = GenerationParams(max_new_tokens=lat.max_new_tokens, batch_size=lat.batch_size)
    tokenizer = length_tokenizer(cfg)
    results = []
    with ModelPool(lat.backend, cfg.models.inference, progress=False, options=lat.options,
                   merge_root=layout.profile_dir(cfg.name)) as pool:  # FilCo, SEER: their adapters merged (D213)
        for key in lat.methods:
            refiner = build_refiner(key, cfg, pool, params)
            for dataset in lat.datasets:
                rows = evaluation_rows(cfg, dataset, lat.split, lat.queries)
                measured = measure_latency(refiner, rows, batch_size=lat.batch_size, repetitions=lat.repetitions,
                                           warmup_batches=lat.warmup_batches, tokenizer=tokenizer, progress=progress)
                results.append({"method": METHODS[key].label, "dataset": dataset,
                                "max new tokens": lat.max_new_tokens, **measured})
    return pd.DataFrame(results)


def table4(results: pd.DataFrame, labels: dict[str, str] | None = None, paper: pd.DataFrame | None = None,
           source: str = "this run") -> pd.DataFrame:
    """Table 4's layout: one row per (source, method), seconds per query per dataset and their average; `paper`
    (rows of repro.reporting.paper.load_paper_tables(4)) adds the paper's rows, whose "Average" column is printed."""
    ours = results.assign(dataset=results["dataset"].map(lambda d: (labels or {}).get(d, d)))
    wide = ours.pivot_table(index="method", columns="dataset", values="seconds per query", sort=False)
    wide["Average"] = wide.mean(axis=1)
    frames = [wide.reset_index().assign(source=source)]
    if paper is not None:
        printed = paper.pivot_table(index="method", columns="dataset", values="value", sort=False)
        frames.append(printed.reset_index().assign(source="paper (1.5B, A800)"))
    table = pd.concat(frames, ignore_index=True)
    table.columns.name = None
    return table[["source", "method", *[c for c in table.columns if c not in ("source", "method")]]]
