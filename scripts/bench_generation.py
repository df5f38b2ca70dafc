"""Generation engines side by side: transformers (batched) against vLLM, on the same model and prompts.
`transformers-sdpa` is the transformers engine with SDPA's decode kernel instead of the CPU default
`sdpa_grouped_decode` (D168).

The prompts are RAG QA prompts (the paper's Table 11 template, as chat messages) over three Wikipedia lead
paragraphs each from the embedded OVOS corpus of `tiny`; decoding is greedy with a fixed number of new tokens. Each
engine is started (timed: that is what a pipeline stage pays once), then answers all prompts `--repeats` times;
the median is reported, with end-to-end time (start + one pass) for a stage that answers the prompts once.

The machine's limit for the same work comes from two measured numbers: the bf16 matmul peak (FLOP/s) and the
memory bandwidth (bytes/s). Prefill needs 2 x (non-embedding parameters) FLOPs per prompt token; each decode
step reads every weight once (bandwidth-bound) and does 2 x parameters FLOPs per sequence in the batch
(compute-bound), whichever is slower. An engine's "of limit" is the bound's time over its measured time.

    .venv/bin/python scripts/bench_generation.py                        # SmolLM2-135M, 64 prompts x 32 tokens
    .venv/bin/python scripts/bench_generation.py --engines vllm --prompts 16 --out /tmp/bench.json
    .venv/bin/python scripts/bench_generation.py --adapter data/tiny/qa_generator/adapter   # vLLM's LoRA path
    .venv/bin/python scripts/bench_generation.py --engines transformers-sdpa transformers \
        --prompts 32 --max-new-tokens 128 --batch-size 16                                   # D168's decode kernel
    .venv/bin/python scripts/bench_generation.py --engines transformers --prompts 64 --max-new-tokens 128 \
        --batch-size 16 64                                                                  # one engine, two batches
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from machine import matmul_peak, memory_bandwidth, model_sizes

from repro import assets
from repro.formulas.prompts import chat_messages, format_passages, rag_qa_prompt
from repro.generation import GenerationParams, make_generator
from repro.generation.prompting import encode


def rag_prompts(count: int, passages_per_prompt: int = 3) -> list[list[dict[str, str]]]:
    """`count` chat prompts, each asking about one Wikipedia article given it and its neighbours."""
    with open(assets.OVOS_SUMMARIES.verified()) as f:
        articles = sorted(json.load(f).values(), key=lambda a: a["title"])
    step = len(articles) // count
    prompts = []
    for i in range(count):
        chosen = articles[i * step : i * step + passages_per_prompt]
        document = format_passages([{"title": a["title"], "text": a["extract"]} for a in chosen])
        prompts.append(chat_messages(rag_qa_prompt(f"What is {chosen[0]['title']}?", document)))
    return prompts


def lower_bound_seconds(prompt_tokens: int, steps_and_batch: list[tuple[int, int]], params: int,
                        non_embedding: int, bytes_per_param: int, peak: float, bandwidth: float) -> float:
    """The machine's limit: prefill at the matmul peak, then each decode step at the slower of its two bounds."""
    prefill = prompt_tokens * 2 * non_embedding / peak
    decode = sum(steps * max(params * bytes_per_param / bandwidth, batch * 2 * params / peak)
                 for steps, batch in steps_and_batch)
    return prefill + decode


def run_engine(name: str, model: str, prompts, params: GenerationParams, dtype: str, repeats: int,
               adapter: str | None, kv_cache_bytes: int):
    """(start seconds, median generation seconds, completions) of one engine; with `adapter`, transformers merges
    it into the model and vLLM serves it as a LoRA request."""
    start = time.perf_counter()
    options = (dict(max_model_len=2048, enforce_eager=True, kv_cache_memory_bytes=kv_cache_bytes,
                    enable_lora=adapter is not None) if name == "vllm" else
               dict(attn_implementation="sdpa") if name == "transformers-sdpa" else {})
    backend = name.removesuffix("-sdpa")
    with make_generator(backend, model, adapter=adapter, dtype=dtype, progress=False, **options) as generator:
        started = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            completions = generator.generate(prompts, params)
            times.append(time.perf_counter() - t0)
    return started, statistics.median(times), completions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m-instruct",
                        help="local directory, hub id, or embedded:<name> (materialised for --profile)")
    parser.add_argument("--profile", default="tiny", help="profile whose materialised assets embedded: uses")
    parser.add_argument("--engines", nargs="+", default=["transformers", "vllm"],
                        choices=["transformers", "transformers-sdpa", "vllm"])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8],
                        help="transformers' prompts per forward batch; several: each engine at each size")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--adapter", help="a LoRA adapter directory both engines answer through (e.g. the QA "
                        "generator's, data/tiny/qa_generator/adapter)")
    parser.add_argument("--kv-cache-gib", type=float, default=2.0, help="the vLLM engine's KV cache")
    parser.add_argument("--out", help="also write the results as JSON to this path")
    args = parser.parse_args(argv)

    model = assets.resolve(args.model, args.profile)
    prompts = rag_prompts(args.prompts)
    torch_dtype = getattr(torch, args.dtype)
    peak, bandwidth = matmul_peak(torch_dtype), memory_bandwidth()
    total_params, non_embedding = model_sizes(model)
    load_before = os.getloadavg()[0]

    runs = [(name, size) for name in args.engines for size in args.batch_size]

    def label(name: str, size: int) -> str:
        return f"{name} b{size}" if len(args.batch_size) > 1 else name

    results = {(name, size): run_engine(name, model, prompts,
                                        GenerationParams(max_new_tokens=args.max_new_tokens, batch_size=size),
                                        args.dtype, args.repeats, args.adapter, int(args.kv_cache_gib * 2**30))
               for name, size in runs}
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    prompt_tokens = sum(len(encode(tokenizer, p)) for p in prompts)
    rows, reference = [], results[runs[0]][2]
    for (name, size), (started, seconds, completions) in results.items():
        new_tokens = sum(len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions)
        batches = ([(args.max_new_tokens, min(size, len(prompts) - k))
                    for k in range(0, len(prompts), size)] if name.startswith("transformers")
                   else [(args.max_new_tokens, len(prompts))])  # vLLM schedules all prompts together
        bound = lower_bound_seconds(prompt_tokens, batches, total_params, non_embedding,
                                    torch_dtype.itemsize, peak, bandwidth)
        rows.append(dict(engine=label(name, size), start_s=round(started, 1), generate_s=round(seconds, 2),
                         end_to_end_s=round(started + seconds, 1),
                         tokens_per_s=round((prompt_tokens + new_tokens) / seconds, 1),
                         new_tokens_per_s=round(new_tokens / seconds, 1), limit_s=round(bound, 2),
                         of_limit=round(bound / seconds, 3),
                         same_text=sum(a == b for a, b in zip(completions, reference))))

    print(f"model={args.model} adapter={args.adapter} dtype={args.dtype} prompts={len(prompts)} prompt_tokens={prompt_tokens} "
          f"(mean {prompt_tokens / len(prompts):.0f}) max_new_tokens={args.max_new_tokens} "
          f"params={total_params / 1e6:.1f}M (non-embedding {non_embedding / 1e6:.1f}M) repeats={args.repeats}")
    print(f"machine: {args.dtype} matmul peak {peak / 1e9:.0f} GFLOP/s, memory bandwidth {bandwidth / 1e9:.1f} GB/s, "
          f"torch threads {torch.get_num_threads()}, load {load_before:.1f}->{os.getloadavg()[0]:.1f}")
    print(f"{'engine':<22}{'start s':>9}{'gen s':>8}{'e2e s':>8}{'tok/s':>9}{'new tok/s':>11}{'limit s':>9}"
          f"{'of limit':>10}{'same text':>11}")
    for r in rows:
        print(f"{r['engine']:<22}{r['start_s']:>9}{r['generate_s']:>8}{r['end_to_end_s']:>8}{r['tokens_per_s']:>9}"
              f"{r['new_tokens_per_s']:>11}{r['limit_s']:>9}{r['of_limit']:>10}{r['same_text']:>8}/{len(prompts)}")
    if len(rows) == 2:
        a, b = rows
        print(f"ratio {b['engine']}/{a['engine']}: generation {a['generate_s'] / b['generate_s']:.2f}x, "
              f"end to end {a['end_to_end_s'] / b['end_to_end_s']:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(args=vars(args), prompt_tokens=prompt_tokens, peak_flops=peak,
                           bandwidth_bytes=bandwidth, params=total_params, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
