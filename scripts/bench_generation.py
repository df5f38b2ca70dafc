"""Throughput of batched generation versus a per-query loop, side by side on the same model and prompts.

The prompts are RAG QA prompts (the paper's Table 11 template, as chat messages) over three Wikipedia lead
paragraphs from the embedded OVOS corpus; decoding is greedy with a fixed number of new tokens. Each
configuration runs `--repeats` times (in alternating order, to spread out machine noise) and the median
is reported. Generated tokens are counted by re-tokenising the completions.

    .venv/bin/python scripts/bench_generation.py                       # SmolLM2-135M, 32 prompts x 32 tokens
    .venv/bin/python scripts/bench_generation.py --batch-sizes 8 32 --dtype bfloat16 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from repro import assets
from repro.generation import GenerationParams
from repro.generation.prompting import encode
from repro.generation.transformers_backend import TransformersGenerator
from repro.prompts import chat_messages, format_passages, rag_qa_prompt


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


def timed(generator, prompts, params: GenerationParams, one_by_one: bool) -> tuple[float, list[str]]:
    """Seconds and completions for all prompts, in one `generate` call or one call per prompt."""
    start = time.perf_counter()
    if one_by_one:
        completions = [text for p in prompts for text in generator.generate([p], params)]
    else:
        completions = generator.generate(prompts, params)
    return time.perf_counter() - start, completions


def measure(generator, prompts, max_new_tokens: int, batch_sizes: list[int], repeats: int):
    """Generated token count and one result row per mode (the per-query loop first)."""
    modes = {"per-query loop": (1, True), **{f"batched ({size}/batch)": (size, False) for size in batch_sizes}}
    seconds = {name: [] for name in modes}
    outputs = {}
    for repeat in range(repeats):
        for name in (list(modes) if repeat % 2 == 0 else list(reversed(modes))):
            batch_size, one_by_one = modes[name]
            params = GenerationParams(max_new_tokens=max_new_tokens, batch_size=batch_size)
            elapsed, outputs[name] = timed(generator, prompts, params, one_by_one)
            seconds[name].append(elapsed)

    reference = outputs["per-query loop"]
    new_tokens = sum(len(generator.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in reference)
    loop_time = statistics.median(seconds["per-query loop"])
    rows = []
    for name, times in seconds.items():
        elapsed = statistics.median(times)
        rows.append(dict(mode=name, seconds=round(elapsed, 2), queries_per_s=round(len(prompts) / elapsed, 3),
                         tokens_per_s=round(new_tokens / elapsed, 1), speedup=round(loop_time / elapsed, 2),
                         same_text_as_loop=sum(a == b for a, b in zip(outputs[name], reference))))
    return new_tokens, rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m-instruct",
                        help="local directory, hub id, or embedded:<name> (materialised for --profile)")
    parser.add_argument("--profile", default="tiny", help="profile whose materialised assets embedded: uses")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"])
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    generator = TransformersGenerator(assets.resolve(args.model, args.profile), dtype=args.dtype, progress=False)
    prompts = rag_prompts(args.prompts)
    prompt_tokens = [len(encode(generator.tokenizer, p)) for p in prompts]
    generator.generate(prompts[:2], GenerationParams(max_new_tokens=4, batch_size=2))  # warm-up
    load_before = os.getloadavg()[0]

    new_tokens, rows = measure(generator, prompts, args.max_new_tokens, args.batch_sizes, args.repeats)
    print(f"model={args.model} dtype={args.dtype} threads={torch.get_num_threads()} prompts={len(prompts)} "
          f"prompt_tokens(mean)={statistics.mean(prompt_tokens):.0f} max_new_tokens={args.max_new_tokens} "
          f"generated_tokens={new_tokens} repeats={args.repeats} "
          f"load_avg={load_before:.1f}->{os.getloadavg()[0]:.1f}")
    print(f"{'mode':<22}{'seconds':>9}{'queries/s':>11}{'tokens/s':>10}{'speedup':>9}{'same text':>11}")
    for r in rows:
        print(f"{r['mode']:<22}{r['seconds']:>9}{r['queries_per_s']:>11}{r['tokens_per_s']:>10}"
              f"{r['speedup']:>8}x{r['same_text_as_loop']:>8}/{len(prompts)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(args=vars(args), generated_tokens=new_tokens, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
