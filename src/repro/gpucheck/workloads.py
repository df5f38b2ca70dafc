"""What each step runs, read from the paper profiles: GRPO at `paper-1p5b`'s per-GPU batch and lengths, the LoRA runs at
`paper-7b`'s (and `paper-1p5b`'s) QA-generator SFT and SEER DPO sections, the data stage's DPR batch, Table 2's
evaluation batch; `tiny` keeps every code path at sizes a CPU runs in seconds. Lengths the profiles leave to the data
(prompt, answer, sampled completion) are the cost model's (`repro.ops.costs.model`), so that what the check measures
is what the cost model prices."""

from __future__ import annotations

import random

from repro.config import load_profile
from repro.ops.costs import model as costs

GRPO_PROFILE, LORA_PROFILES = "paper-1p5b", {"qwen2.5-7b": "paper-7b", "qwen2.5-1.5b": "paper-1p5b"}
TINY_GRPO = dict(per_device_batch_size=2, gradient_accumulation_steps=1, steps_per_generation=2, num_generations=2,
                 max_completion_length=8, max_answer_length=4, prompt_tokens=60)
TINY_LORA = dict(per_device_batch_size=2, prompt_tokens=40, completion_tokens=8)
CPU_LAUNCHER = "configs/accelerate/cpu-1proc.yaml"  # DeepSpeed is not in the CPU stack: the project's CPU launcher
ONE_GPU_DDP = "configs/accelerate/ddp-1gpu.yaml"  # ddp.yaml's launch path on one GPU
ONE_GPU_ZERO2 = "configs/accelerate/zero2-1gpu.yaml"  # zero2.yaml's DeepSpeed file and launch path, one process


def grpo(tiny: bool, cuda: bool) -> dict:
    cfg = load_profile(GRPO_PROFILE)
    t = cfg.train
    spec = dict(profile=cfg.name, per_device_batch_size=t.per_device_batch_size,
                gradient_accumulation_steps=t.gradient_accumulation_steps,
                steps_per_generation=t.steps_per_generation, num_generations=t.num_generations,
                max_completion_length=t.max_completion_length, max_answer_length=t.max_answer_length,
                prompt_tokens=int(costs.prompt_tokens(cfg.retrieval.topk)), topk=cfg.retrieval.topk,
                memory_fraction=round(1 - t.vllm_gpu_memory_utilization, 4) if t.vllm_mode == "colocate" else 1.0,
                launcher=ONE_GPU_ZERO2 if cuda else CPU_LAUNCHER, profile_launcher=t.accelerate_config,
                model="qwen2.5-1.5b", steps=2)
    return {**spec, **(TINY_GRPO if tiny else {})}


def lora(model: str, kind: str, tiny: bool, cuda: bool) -> dict:
    """SFT on the QA generator's section (prompt + short answer), DPO on SEER's (prompt + a sampled candidate each)."""
    cfg = load_profile(LORA_PROFILES[model])
    section = "qa_generator" if kind == "sft" else "seer"
    sft = getattr(cfg, section)
    completion = costs.ANSWER_TOKENS if kind == "sft" else int(
        costs.PESSIMISTIC.generated_fraction * cfg.seer.max_new_tokens)
    spec = dict(profile=cfg.name, section=section, kind=kind, model=model,
                per_device_batch_size=sft.per_device_batch_size, max_length=sft.max_length,
                prompt_tokens=int(costs.prompt_tokens(cfg.retrieval.topk)), completion_tokens=completion,
                launcher=ONE_GPU_DDP if cuda else CPU_LAUNCHER)
    return {**spec, **(TINY_LORA if tiny else {})}


def encoder(tiny: bool) -> dict:
    cfg = load_profile(GRPO_PROFILE)
    dpr = cfg.retrieval.retrievers[cfg.retrieval.default]
    spec = dict(profile=cfg.name, retriever=cfg.retrieval.default, batch_size=dpr.batch_size,
                max_length=dpr.passage_max_length, dtype=dpr.dtype, pooling=dpr.pooling, batches=4)
    return {**spec, **(dict(batch_size=4, max_length=32, batches=2) if tiny else {})}


def generation(tiny: bool) -> dict:
    cfg = load_profile(GRPO_PROFILE)
    ev = cfg.evaluation
    spec = dict(profile=cfg.name, batch_size=ev.batch_size, max_new_tokens=ev.evidence_max_new_tokens,
                prompt_tokens=int(costs.prompt_tokens(cfg.retrieval.topk)), model="qwen2.5-1.5b")
    return {**spec, **(dict(batch_size=2, max_new_tokens=8, prompt_tokens=40) if tiny else {})}


def words(tokenizer, count: int, seed: int) -> list[str]:
    """`count` words drawn from the tokenizer's alphabetic tokens, seeded."""
    pool = sorted({w for w in (tokenizer.convert_tokens_to_string([t]).strip()
                               for t in list(tokenizer.get_vocab())[:20000]) if w.isalpha() and len(w) > 2})
    rng = random.Random(seed)
    return [rng.choice(pool) for _ in range(count)]


def text_of_tokens(tokenizer, tokens: int, seed: int) -> str:
    """A text of `tokens` tokens of random words (each word one token or more)."""
    ids = tokenizer(" ".join(words(tokenizer, tokens, seed)), add_special_tokens=False)["input_ids"][:tokens]
    return tokenizer.decode(ids)
