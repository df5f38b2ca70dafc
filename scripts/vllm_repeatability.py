"""Do vLLM's CPU engine's greedy texts repeat from run to run, alone and beside other work? (issue #31, deliverable 6)

One policy (`--model`, default SmolLM2-135M-Instruct as `tiny` materialises it) writes greedy rollouts for `--prompts`
held-out-like questions (GRPO's extraction prompt over five 100-word Wikipedia passages: a FanOutQA leaf question,
two passages of its evidence page and one each of three other pages), through
`make_generator("vllm", model, dtype=models.inference, **train.heldout_options)` of `--profile`, as
`repro.studies.heldout.score_policy` writes them. Each condition runs in a fresh interpreter (a run of its own, as a
stage would be), under `load` with two Python processes spinning on the cores for the whole run:

    inproc_alone_1        the engine in this process (D193, the default), alone: the reference
    inproc_alone_2        the same again
    inproc_alone_2_warm   a second call on inproc_alone_2's engine: its prefix cache now holds every prompt
    inproc_load           in process, under load
    inproc_reversed       in process, the prompts in reversed order (compared prompt by prompt)
    inproc_seqs1          in process, max_num_seqs=1 (one request at a time: no batching at all)
    inproc_no_prefix      in process, enable_prefix_caching=False
    inproc_threads1       in process, torch on 1 thread instead of the machine's
    mp_alone_1, mp_alone_2, mp_load
                          vLLM's own engine core and worker processes (before D193), forced here by making
                          `vllm_backend.runs_in_process` answer False in the run's interpreter (no library change)

For each condition: how many of the N texts differ from the reference and from the condition's pair (mp_load against
mp_alone_1, ...), the earliest first differing token (the texts re-tokenised), and the run's times. Prints a markdown
table; `--out` also writes the table, the settings and every text as JSON.

    .venv/bin/python scripts/vllm_repeatability.py                                  # 48 prompts x 64 tokens
    .venv/bin/python scripts/vllm_repeatability.py --prompts 16 --max-new-tokens 32 \
        --conditions inproc_alone_1 inproc_load mp_alone_1 mp_load --out /tmp/repeat.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cores_busy

REFERENCE = "inproc_alone_1"


@dataclasses.dataclass(frozen=True)
class Condition:
    in_process: bool = True
    load: bool = False
    reverse: bool = False
    max_num_seqs: int | None = None
    prefix_caching: bool | None = None
    threads: int | None = None
    warm_repeat: bool = False  # a second call on the same engine, recorded as "<name>_warm"
    pair: str = REFERENCE  # what else this condition is compared with


CONDITIONS = {
    "inproc_alone_1": Condition(),
    "inproc_alone_2": Condition(warm_repeat=True),
    "inproc_load": Condition(load=True),
    "inproc_reversed": Condition(reverse=True),
    "inproc_seqs1": Condition(max_num_seqs=1),
    "inproc_no_prefix": Condition(prefix_caching=False),
    "inproc_threads1": Condition(threads=1),
    "mp_alone_1": Condition(in_process=False),
    "mp_alone_2": Condition(in_process=False, pair="mp_alone_1"),
    "mp_load": Condition(in_process=False, load=True, pair="mp_alone_1"),
}
WARM_PAIR = {"inproc_alone_2_warm": "inproc_alone_2"}


def heldout_like_rows(count: int) -> list[dict]:
    """`count` contexts rows spread over FanOutQA's open-domain leaf questions whose evidence page is in the offline
    Wikipedia extracts: two 100-word passages of the evidence page first, then the first passage of each of the next
    three pages in title order (the data stage's `contents` format)."""
    from repro.assets import FANOUTQA_DEV, OVOS_SUMMARIES
    from repro.data.corpus import chunk_words, make_contents, ovos_pages
    from repro.data.fanoutqa import open_domain_rows, read_fanoutqa

    pages = ovos_pages(OVOS_SUMMARIES.verified())
    questions, _ = open_domain_rows(read_fanoutqa(FANOUTQA_DEV.verified()), pages, {"all": 1.0})
    questions = sorted(questions, key=lambda row: str(row["id"]))
    titles = sorted(title for title, text in pages.items() if text.strip())
    if count > len(questions):
        raise ValueError(f"only {len(questions)} questions, {count} wanted")
    step = len(questions) // count
    rows = []
    for i in range(count):
        question = questions[i * step]
        title = question["metadata"]["evidence_title"]
        at = titles.index(title)
        chunks = [(title, chunk) for chunk in chunk_words(pages[title], 100)[:2]]
        chunks += [(t, chunk_words(pages[t], 100)[0]) for t in (titles[(at + k) % len(titles)] for k in range(1, 4))]
        rows.append({"id": str(question["id"]), "question": question["question"],
                     "golden_answers": question["golden_answers"],
                     "passages": [{"id": f"{i}-{j}", "contents": make_contents(t, text), "score": 1.0 - j / 10}
                                  for j, (t, text) in enumerate(chunks)]})
    return rows


def run_condition(name: str, model: str, args: argparse.Namespace, result: Path) -> None:
    """In a fresh interpreter: start the engine as `name` says, write the rollouts, save texts and settings."""
    import torch

    from repro.config import load_profile
    from repro.generation import GenerationParams, make_generator
    from repro.generation import vllm_backend
    from repro.train.grpo.data import extraction_row
    from transformers import AutoTokenizer

    condition = CONDITIONS[name]
    if condition.threads is not None:
        torch.set_num_threads(condition.threads)
    if not condition.in_process:
        vllm_backend.runs_in_process = lambda engine: False
    extra = {}
    if condition.max_num_seqs is not None:
        extra["max_num_seqs"] = condition.max_num_seqs
    if condition.prefix_caching is not None:
        extra["enable_prefix_caching"] = condition.prefix_caching
    if extra:
        start_engine = vllm_backend.start_engine
        vllm_backend.start_engine = lambda engine, *rest: start_engine({**engine, **extra}, *rest)

    cfg = load_profile(args.profile)
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [extraction_row(row, tokenizer, cfg.rewards.length_unit)["prompt"]
               for row in heldout_like_rows(args.prompts)]
    order = list(range(len(prompts)))[::-1] if condition.reverse else list(range(len(prompts)))
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    record = {"threads": torch.get_num_threads(), "affinity": sorted(os.sched_getaffinity(0)),
              "options": dict(cfg.train.heldout_options), "extra": extra, "dtype": cfg.models.inference}
    t0 = time.perf_counter()
    with make_generator("vllm", model, dtype=cfg.models.inference, progress=False,
                        **cfg.train.heldout_options) as generator:
        record["start_s"] = time.perf_counter() - t0
        engine = generator.llm.llm_engine.vllm_config
        record["engine"] = {"max_num_seqs": engine.scheduler_config.max_num_seqs,
                            "max_num_batched_tokens": engine.scheduler_config.max_num_batched_tokens,
                            "enable_prefix_caching": engine.cache_config.enable_prefix_caching,
                            "executor": str(engine.parallel_config.distributed_executor_backend),
                            "multiprocessing": os.environ.get(vllm_backend.MULTIPROCESSING_VARIABLE)}
        calls = {}
        for call in [name, f"{name}_warm"] if condition.warm_repeat else [name]:
            t1 = time.perf_counter()
            texts = generator.generate([prompts[i] for i in order], params)
            by_prompt = [None] * len(prompts)
            for i, text in zip(order, texts):
                by_prompt[i] = text
            calls[call] = {"generate_s": time.perf_counter() - t1, "texts": by_prompt}
        t2 = time.perf_counter()
    record["stop_s"] = time.perf_counter() - t2
    result.write_text(json.dumps({"record": record, "calls": calls}))


def first_difference(tokenizer, a: str, b: str) -> int | None:
    """The first token position where the two texts differ (None: equal)."""
    if a == b:
        return None
    x, y = (tokenizer(t, add_special_tokens=False)["input_ids"] for t in (a, b))
    return next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))


def compare(tokenizer, texts: list[str], other: list[str]) -> tuple[int, int | None]:
    """(how many texts differ, the earliest first differing token)."""
    positions = [first_difference(tokenizer, a, b) for a, b in zip(texts, other)]
    differing = [p for p in positions if p is not None]
    return len(differing), (min(differing) if differing else None)


def default_model(ref: str, profile: str, scratch: list[str]) -> str:
    """`ref` resolved for `profile`; the embedded SmolLM2 not materialised yet is exported to a scratch directory."""
    from repro import assets

    try:
        return assets.resolve(ref, profile)
    except assets.AssetError:
        if ref != "embedded:smollm2-135m-instruct":
            raise
        path = tempfile.mkdtemp(prefix="vllm-repeat-smollm2-")
        scratch.append(path)
        print(f"{ref} is not materialised for {profile}: exporting it to {path}", flush=True)
        assets.export_smollm2(Path(path))
        return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m-instruct",
                        help="local directory or embedded:<name> (materialised for --profile)")
    parser.add_argument("--profile", default="tiny", help="whose train.heldout_options and models.inference are used")
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=list(CONDITIONS),
                        help=f"in this order; {REFERENCE} is the reference and always runs first")
    parser.add_argument("--out", help="also write the results (with every text) as JSON to this path")
    parser.add_argument("--run-condition", help=argparse.SUPPRESS)  # the fresh interpreter's entry point
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.run_condition:
        run_condition(args.run_condition, args.model, args, Path(args.result))
        return

    scratch: list[str] = []
    try:
        model = default_model(args.model, args.profile, scratch)
        results, calls = {}, {}
        work = tempfile.mkdtemp(prefix="vllm-repeat-")
        scratch.append(work)
        names = [REFERENCE] + [n for n in args.conditions if n != REFERENCE]
        started = time.perf_counter()
        for name in names:
            result = Path(work) / f"{name}.json"
            command = [sys.executable, __file__, "--run-condition", name, "--result", str(result), "--model", model,
                       "--profile", args.profile, "--prompts", str(args.prompts),
                       "--max-new-tokens", str(args.max_new_tokens)]
            load = contextlib.nullcontext() if not CONDITIONS[name].load else cores_busy()
            t0 = time.perf_counter()
            with load:
                finished = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if finished.returncode != 0:
                print(finished.stdout[-5000:])
                raise SystemExit(f"condition {name} failed with code {finished.returncode}")
            results[name] = json.loads(result.read_text())
            results[name]["record"]["run_s"] = time.perf_counter() - t0
            calls.update(results[name]["calls"])
            print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
        total = time.perf_counter() - started

        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model)
        reference = calls[REFERENCE]["texts"]
        rows = []
        for name in names:
            record = results[name]["record"]
            for call, output in results[name]["calls"].items():
                pair = WARM_PAIR.get(call, CONDITIONS[name].pair)
                differ, first = compare(tokenizer, output["texts"], reference)
                row = {"condition": call, "differ_vs_ref": differ, "first_token_vs_ref": first,
                       "pair": pair if pair != REFERENCE and pair in calls else None,
                       "differ_vs_pair": None, "first_token_vs_pair": None,
                       "start_s": round(record["start_s"], 1), "generate_s": round(output["generate_s"], 1),
                       "run_s": round(record["run_s"], 1), "threads": record["threads"], **record["engine"]}
                if row["pair"]:
                    row["differ_vs_pair"], row["first_token_vs_pair"] = compare(tokenizer, output["texts"],
                                                                                calls[pair]["texts"])
                rows.append(row)

        n = args.prompts
        print(f"\nmodel={args.model} ({model}) profile={args.profile} prompts={n} max_new_tokens={args.max_new_tokens} "
              f"options={results[REFERENCE]['record']['options']} dtype={results[REFERENCE]['record']['dtype']} "
              f"cpus={os.cpu_count()} total {total:.0f} s\n")
        print("| condition | differ vs ref | first token | pair | differ vs pair | first token | start s | "
              "generate s | run s | threads | max_num_seqs | prefix cache | executor |")
        print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        dash = lambda v: "-" if v is None else v  # noqa: E731
        for r in rows:
            vs_pair = "-" if r["pair"] is None else f"{r['differ_vs_pair']}/{n}"
            print(f"| {r['condition']} | {r['differ_vs_ref']}/{n} | {dash(r['first_token_vs_ref'])} | "
                  f"{dash(r['pair'])} | {vs_pair} | "
                  f"{dash(r['first_token_vs_pair'])} | {r['start_s']} | {r['generate_s']} | {r['run_s']} | "
                  f"{r['threads']} | {r['max_num_seqs']} | {r['enable_prefix_caching']} | {r['executor']} |")
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"args": {k: v for k, v in vars(args).items() if k not in ("run_condition", "result")},
                           "model": model, "total_s": total, "rows": rows,
                           "records": {name: results[name]["record"] for name in names},
                           "texts": {call: output["texts"] for call, output in calls.items()}}, f, indent=1)
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
