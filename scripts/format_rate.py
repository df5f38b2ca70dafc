"""How often a policy writes the exact rollout format, on the same prompts for every policy compared.

Samples `--samples` rollouts per prompt (temperature 1, `train.max_completion_length` tokens, as GRPO samples them)
for `--prompts` training prompts taken after the first `--offset` rows of the profile's training split, and counts
each rollout as well formatted (R^fmt = 1), cut off at the token limit, ended without `</answer>`, or other
(text outside the tags, repeated or misplaced tags). The measurement behind D39 and D90:

    python scripts/format_rate.py data/tiny/train/format_warmup/policy data/tiny/train/eviomni/checkpoints/checkpoint-8
"""

from __future__ import annotations

import argparse
import collections

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro.config import load_profile
from repro.formulas import prompts, tags
from repro.train.grpo.data import split_rows

KINDS = ("well formatted", "cut off", "no </answer>", "other")


def rollout_kind(text: str, n_tokens: int, max_tokens: int) -> str:
    if tags.is_well_formatted(text):
        return KINDS[0]
    if n_tokens >= max_tokens:
        return KINDS[1]
    return KINDS[2] if "</answer>" not in text else KINDS[3]


def format_counts(policy: str, rows: list[dict], samples: int, max_tokens: int, seed: int) -> collections.Counter:
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.bfloat16, use_safetensors=True)
    torch.manual_seed(seed)
    counts = collections.Counter()
    for row in tqdm(rows, desc=policy):
        batch = tokenizer([prompts.render_chat(tokenizer, row["prompt"])] * samples, return_tensors="pt",
                          add_special_tokens=False)
        with torch.no_grad():
            output = model.generate(**batch, do_sample=True, temperature=1.0, top_p=1.0, max_new_tokens=max_tokens,
                                    pad_token_id=tokenizer.pad_token_id)
        for ids in output[:, batch["input_ids"].shape[1]:]:
            n_tokens = int((ids != tokenizer.pad_token_id).sum())
            counts[rollout_kind(tokenizer.decode(ids, skip_special_tokens=True), n_tokens, max_tokens)] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policies", nargs="+", help="model directories to compare")
    parser.add_argument("--profile", help="profile name (default: the `profile` key of params.yaml)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="rollouts per prompt")
    parser.add_argument("--offset", type=int, default=100, help="first training row used")
    args = parser.parse_args()
    cfg = load_profile(args.profile)
    tokenizer = AutoTokenizer.from_pretrained(args.policies[0])
    rows = split_rows(cfg, "train", tokenizer, args.offset + args.prompts)[args.offset:]
    for policy in args.policies:
        counts = format_counts(policy, rows, args.samples, cfg.train.max_completion_length, cfg.seed)
        total = sum(counts.values())
        print(f"{policy}: " + ", ".join(f"{kind} {counts[kind]}/{total}" for kind in KINDS))


if __name__ == "__main__":
    main()
