"""SeleCtx's self-information: batched across passages versus one forward pass per passage, same model and texts.

The passages are the first 100 words of Wikipedia lead extracts from the embedded OVOS corpus, split into
sentences by Selective Context's rule. With `--condition-on sentence` (the default, as the released code) every
sentence is one scored text: "per passage" scores the sentences of one passage per forward pass, "batched"
sorts all sentences by length into batches of `--batch-size`. With `--condition-on passage` a passage is one
text. Each mode runs `--repeats` times in alternating order; the median is reported, with the largest
difference of the self-information values between the modes.

    .venv/bin/python scripts/bench_selective_context.py                      # SmolLM2-135M, 40 passages
    .venv/bin/python scripts/bench_selective_context.py --condition-on passage --batch-size 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro import assets
from repro.baselines.selective_context import self_information
from repro.data.sentences import selective_context_sentences
from repro.generation.transformers_backend import resolve_dtype


def passages(count: int, words: int = 100) -> list[str]:
    """The first `words` words of `count` lead extracts spread over the corpus."""
    with open(assets.OVOS_SUMMARIES.verified()) as f:
        articles = sorted(json.load(f).values(), key=lambda a: a["title"])
    long_enough = [a["extract"] for a in articles if len(a["extract"].split()) >= words]
    step = len(long_enough) // count
    return [" ".join(long_enough[i * step].split()[:words]) for i in range(count)]


def scored_texts(passage_list: list[str], condition_on: str) -> list[list[str]]:
    """Per passage, the texts scored on their own."""
    return [selective_context_sentences(p) if condition_on == "sentence" else [p] for p in passage_list]


def timed(groups: list[list[str]], model, tokenizer, batch_size: int, per_passage: bool):
    """Seconds and the flat list of token values."""
    start = time.perf_counter()
    if per_passage:
        infos = [info for group in groups for info in self_information(group, model, tokenizer, len(group))]
    else:
        infos = self_information([t for group in groups for t in group], model, tokenizer, batch_size)
    return time.perf_counter() - start, [v for info in infos for v in info.values]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded:smollm2-135m-instruct",
                        help="local directory, hub id, or embedded:<name> (materialised for --profile)")
    parser.add_argument("--profile", default="tiny", help="profile whose materialised assets embedded: uses")
    parser.add_argument("--passages", type=int, default=40)
    parser.add_argument("--condition-on", choices=["sentence", "passage"], default="sentence")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    path = assets.resolve(args.model, args.profile)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(args.dtype, torch.device("cpu")),
                                                 use_safetensors=True).eval()
    groups = scored_texts(passages(args.passages), args.condition_on)
    self_information(groups[0], model, tokenizer)  # warm-up
    tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for group in groups for t in group)
    load_before = os.getloadavg()[0]

    modes = {"per passage": True, f"batched ({args.batch_size}/batch)": False}
    seconds, values = {name: [] for name in modes}, {}
    for repeat in range(args.repeats):
        for name in (list(modes) if repeat % 2 == 0 else list(reversed(modes))):
            elapsed, values[name] = timed(groups, model, tokenizer, args.batch_size, modes[name])
            seconds[name].append(elapsed)

    per_passage = statistics.median(seconds["per passage"])
    reference = values["per passage"]
    rows = []
    for name, times in seconds.items():
        elapsed = statistics.median(times)
        rows.append(dict(mode=name, seconds=round(elapsed, 3), tokens_per_s=round(tokens / elapsed, 1),
                         speedup=round(per_passage / elapsed, 2),
                         max_abs_diff=max(abs(a - b) for a, b in zip(values[name], reference, strict=True))))
    texts = sum(map(len, groups))
    print(f"model={args.model} dtype={args.dtype} threads={torch.get_num_threads()} passages={len(groups)} "
          f"condition_on={args.condition_on} scored_texts={texts} tokens={tokens} repeats={args.repeats} "
          f"load_avg={load_before:.1f}->{os.getloadavg()[0]:.1f}")
    print(f"{'mode':<22}{'seconds':>9}{'tokens/s':>10}{'speedup':>9}{'max |diff|':>12}")
    for r in rows:
        print(f"{r['mode']:<22}{r['seconds']:>9}{r['tokens_per_s']:>10}{r['speedup']:>8}x{r['max_abs_diff']:>12.2e}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(args=vars(args), scored_texts=texts, tokens=tokens, rows=rows), f, indent=2)


if __name__ == "__main__":
    main()
