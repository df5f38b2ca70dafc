"""The check's steps, each run in a process of its own under its own time limit by `repro.gpucheck.run`:

    python -m repro.gpucheck.steps STEP PLAN.json RESULT.json

A step reads the plan (shapes, device, work directory, tokenizer sources, the earlier steps' results) and writes its
measurements to RESULT.json; an exception is written there too, so the next step still runs. `peaks` times the
device's own limits (a bf16 matrix product, a device-to-device copy), which the later steps' shares are taken of.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
import traceback
from pathlib import Path

from repro.config import load_profile, with_overrides
from repro.gpucheck import models, workloads
from repro.gpucheck.grpo_worker import MEASURE
from repro.io import read_json, read_jsonl, write_json, write_jsonl
from repro.ops.costs import model as costs


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int) -> float:
    """Seconds per call of `fn`, after one warm-up call."""
    fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync(device)
    return (time.perf_counter() - start) / repeats


def peaks(plan: dict) -> dict:
    """bf16 matmul FLOP/s (an n x n product, 2n^3 FLOPs) and device-to-device copy bytes/s (read + write)."""
    import torch

    device, tiny = plan["device"], plan["shapes"] == "tiny"
    n, size = (256, 2**22) if tiny else (8192, 2**30)
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    matmul = timed(lambda: a @ b, device, 3 if tiny else 20)
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy = timed(lambda: dst.copy_(src), device, 3 if tiny else 20)
    return {"matmul_flops": 2 * n**3 / matmul, "copy_bytes_per_second": 2 * size / copy, "matmul_n": n,
            "copy_bytes": size}


def build_models(plan: dict) -> dict:
    """The random model directories the later steps load (the paper shapes: 3 GB, 15 GB and 0.4 GB of bf16/fp32)."""
    tiny, sources, root = plan["shapes"] == "tiny", Path(plan["tokenizers"]), Path(plan["work"]) / "models"
    start, out = time.perf_counter(), {}
    for name in models.CONFIGS:
        out[name] = str(models.build_causal_lm(name, tiny, sources, root / name, plan["device"]))
    out["dpr-ctx"] = str(models.build_encoder(tiny, sources, root / "dpr-ctx", plan["device"]))
    return {"dirs": out, "seconds": time.perf_counter() - start}


def model_dir(plan: dict, name: str) -> str:
    return plan["results"]["models"]["dirs"][name]


def shape_of(path: str) -> costs.Shape:
    """The cost model's view of a model directory's config (parameters counted from the safetensors index)."""
    config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    return costs.Shape(params=parameter_count(path), layers=config["num_hidden_layers"],
                       hidden=config["hidden_size"], kv_heads=config["num_key_value_heads"],
                       head_dim=config["hidden_size"] // config["num_attention_heads"], vocab=config["vocab_size"],
                       intermediate=config["intermediate_size"])


def parameter_count(path: str) -> int:
    from safetensors import safe_open

    total = 0
    for file in Path(path).glob("*.safetensors"):
        with safe_open(str(file), "pt") as f:
            for key in f.keys():
                total += math.prod(f.get_slice(key).get_shape())
    return total


def share(value: float, plan: dict, key: str) -> float | None:
    limit = plan["results"].get("peaks", {}).get(key)
    return value / limit if limit else None


def contexts_rows(tokenizer, spec: dict, count: int, seed: int = 0) -> list[dict]:
    """Contexts rows (QA row + top-k passages) whose extraction prompt is about `spec["prompt_tokens"]` long."""
    from repro.train.grpo.data import extraction_prompt
    from repro.formulas.prompts import render_chat

    def row(i: int, passage_tokens: int) -> dict:
        title = lambda j: workloads.text_of_tokens(tokenizer, 3, seed + j)  # noqa: E731
        text = lambda j: workloads.text_of_tokens(tokenizer, passage_tokens, seed + i * 31 + j)  # noqa: E731
        passages = [{"id": f"p{i}-{j}", "contents": f'"{title(j)}"\n{text(j)}'} for j in range(spec["topk"])]
        return {"id": f"q{i}", "question": workloads.text_of_tokens(tokenizer, 12, seed + i) + "?",
                "golden_answers": [workloads.text_of_tokens(tokenizer, 2, seed + 7 * i)], "passages": passages}

    empty = row(0, 1)
    overhead = len(tokenizer(render_chat(tokenizer, extraction_prompt(empty)), add_special_tokens=False)["input_ids"])
    per_passage = max(1, (spec["prompt_tokens"] - overhead) // spec["topk"])
    return [row(i, per_passage) for i in range(count)]


def prompt_length(tokenizer, messages: list[dict]) -> int:
    from repro.formulas.prompts import render_chat

    return len(tokenizer(render_chat(tokenizer, messages), add_special_tokens=False)["input_ids"])


def grpo(plan: dict) -> dict:
    """Two optimizer steps of EviOmniTrainer through `accelerate launch` of the profile's launcher on one process."""
    from transformers import AutoTokenizer

    from repro.train.grpo.data import extraction_rows
    from repro.train.launch import launch, launch_dir

    spec, root = plan["workloads"]["grpo"], Path(plan["work"]) / "grpo"
    path = model_dir(plan, spec["model"])
    tokenizer = AutoTokenizer.from_pretrained(path)
    cfg = load_profile(spec["profile"])
    cfg = with_overrides(cfg, {"models.extractor": path})
    train = dataclasses.replace(
        cfg.train, per_device_batch_size=spec["per_device_batch_size"],
        gradient_accumulation_steps=spec["gradient_accumulation_steps"],
        steps_per_generation=spec["steps_per_generation"], num_generations=spec["num_generations"],
        max_completion_length=spec["max_completion_length"], max_answer_length=spec["max_answer_length"],
        max_steps=spec["steps"], selection_metric=None, evaluate_initial=False, use_vllm=False,
        learning_rate=CHECK_LEARNING_RATE, accelerate_config=spec["launcher"], bf16=plan["device"] == "cuda")
    cfg = dataclasses.replace(cfg, train=train)
    prompts_needed = spec["per_device_batch_size"] * spec["steps_per_generation"] // spec["num_generations"]
    rows = extraction_rows(contexts_rows(tokenizer, spec, prompts_needed), tokenizer, cfg.rewards.length_unit)
    with launch_dir(cfg) as tmp:
        write_jsonl(tmp / "rows.jsonl", rows)
        start = time.perf_counter()
        launch(spec["launcher"], "repro.gpucheck.grpo_worker",
               ["--params", str(tmp / "params.yaml"), "--profile", cfg.name, "--rows", str(tmp / "rows.jsonl"),
                "--run-dir", str(root), "--memory-fraction", str(spec["memory_fraction"] if plan["device"] == "cuda"
                                                                 else 1.0)],
               key=f"gpucheck: {spec['launcher']}")
        wall = time.perf_counter() - start
    measured = read_json(root / MEASURE)
    shape = shape_of(path)
    prompt = prompt_length(tokenizer, rows[0]["prompt"])
    tokens = spec["steps"] * spec["gradient_accumulation_steps"] * spec["per_device_batch_size"] * (
        prompt + measured["mean_completion_tokens"])
    flops_per_param = 6 + 2 + 2  # forward and backward, recomputed activations, the reference model (beta > 0)
    train_seconds = sum(measured["train_seconds"])
    generation_bytes = sum(decode_bytes(shape, count, prompt_tokens, new)
                           for count, prompt_tokens, new in measured["generate_calls"])
    generation_seconds = sum(measured["generation_seconds"])
    return {**measured, "launch_seconds": wall, "prompt_tokens": prompt, "params": shape.params,
            "train_tokens": tokens, "flops_per_param": flops_per_param,
            "mfu": share(flops_per_param * shape.params * tokens / train_seconds, plan, "matmul_flops"),
            "generation_bytes": generation_bytes,
            "bandwidth_share": share(generation_bytes / generation_seconds, plan, "copy_bytes_per_second")
            if generation_seconds else None}


CHECK_LEARNING_RATE = 1e-2  # one Adam step moves each weight by about this much: visibly, in bf16 (D222)


def decode_bytes(shape: costs.Shape, sequences: int, prompt: float, new_tokens: int) -> float:
    """Bytes a batched decode reads, as the cost model counts them: the weights and the running KV cache each step."""
    return new_tokens * (shape.weights + sequences * (prompt + new_tokens / 2) * shape.kv_per_token)


def lora_step(plan: dict, model: str, kind: str) -> dict:
    """One optimizer step of the LoRA runner (`repro.train.lora.runner.train_lora`) on `model`'s shape."""
    from transformers import AutoTokenizer

    from repro.train.lora.runner import LoRARun, train_lora

    spec = plan["workloads"][f"{kind}_{model}"]
    path = model_dir(plan, model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    cfg = load_profile(spec["profile"])
    section = dataclasses.replace(getattr(cfg, spec["section"]), max_steps=1, save_steps=10**6,
                                  accelerate_config=spec["launcher"], bf16=plan["device"] == "cuda",
                                  gradient_accumulation_steps=1)
    cfg = dataclasses.replace(cfg, **{spec["section"]: section})
    batch = spec["per_device_batch_size"]
    prompts = [[{"role": "user", "content": workloads.text_of_tokens(tokenizer, spec["prompt_tokens"], i)}]
               for i in range(batch)]
    answer = lambda i: [{"role": "assistant",  # noqa: E731
                         "content": workloads.text_of_tokens(tokenizer, spec["completion_tokens"], 1000 + i)}]
    rows = ([{"prompt": p, "completion": answer(i)} for i, p in enumerate(prompts)] if kind == "sft" else
            [{"prompt": p, "chosen": answer(i), "rejected": answer(500 + i)} for i, p in enumerate(prompts)])
    root = Path(plan["work"]) / f"{kind}-{model}"
    start = time.perf_counter()
    train_lora(cfg, [LoRARun(spec["section"], kind, path, rows, root, {"gpucheck": spec})], progress=False,
               worker="repro.gpucheck.lora_worker")
    wall = time.perf_counter() - start
    measured = read_json(root / MEASURE)
    log = list(read_jsonl(root / "train_log.jsonl"))
    losses = [entry["loss"] for entry in log if "loss" in entry]
    runtime = next(entry["train_runtime"] for entry in log if "train_runtime" in entry)
    shape = shape_of(path)
    sequence = prompt_length(tokenizer, prompts[0]) + spec["completion_tokens"]
    sequences = batch * (1 if kind == "sft" else 2)
    flops_per_param = 4 if kind == "sft" else 6  # no weight gradients of the frozen base; DPO's reference forward
    checks = {"losses_finite": bool(losses) and all(math.isfinite(x) for x in losses),
              "fused_head_triton": measured["fused_head"]["triton"] > 0 if plan["device"] == "cuda" else None}
    return {**measured, "checks": checks, "ok": all(v is not False for v in checks.values()),
            "launch_seconds": wall, "train_seconds": runtime, "losses": losses, "params": shape.params,
            "sequence_tokens": sequence, "sequences": sequences, "flops_per_param": flops_per_param,
            "mfu": share(flops_per_param * shape.params * sequence * sequences / runtime, plan, "matmul_flops")}


def encoder(plan: dict) -> dict:
    """The data stage's passage encoder (DPR's context tower, BERT-base) at its batch: passages per second."""
    import numpy as np

    from repro.retrieval.encoders import TextEncoder

    spec, device = plan["workloads"]["encoder"], plan["device"]
    path = model_dir(plan, "dpr-ctx")
    dtype = spec["dtype"] if device == "cuda" else "float32"  # fp16 matrix products are a GPU's
    enc = TextEncoder(path, spec["pooling"], normalize=False, batch_size=spec["batch_size"], dtype=dtype,
                      devices=[device])
    n = spec["batch_size"] * spec["batches"]
    texts = [(workloads.text_of_tokens(enc.tokenizer, 3, i),
              workloads.text_of_tokens(enc.tokenizer, spec["max_length"], i)) for i in range(min(n, 64))]
    passages = [texts[i % len(texts)] for i in range(n)]
    enc.encode(passages[: spec["batch_size"]], max_length=spec["max_length"], progress=False)  # warm-up
    sync(device)
    start = time.perf_counter()
    vectors = enc.encode(passages, max_length=spec["max_length"], progress=False)
    sync(device)
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in enc.model.parameters())
    config = enc.model.config
    tokens = n * spec["max_length"]
    width = 2 if dtype == "float16" else 4
    moved = spec["batches"] * params * width + 2 * tokens * config.hidden_size * config.num_hidden_layers * width
    return {"passages": n, "seconds": seconds, "passages_per_second": n / seconds, "dtype": dtype, "params": params,
            "ok": bool(np.isfinite(vectors).all()),
            "mfu": share(2 * params * tokens / seconds, plan, "matmul_flops"),
            "bytes_moved": moved, "bandwidth_share": share(moved / seconds, plan, "copy_bytes_per_second")}


def generation(plan: dict) -> dict:
    """The transformers backend on the device: stop strings, seeded sampling, greedy repeatability, then one timed
    batch of Table 2's size and evidence length."""
    from repro.generation import GenerationParams
    from repro.generation.transformers_backend import TransformersGenerator

    spec, device = plan["workloads"]["generation"], plan["device"]
    path = model_dir(plan, spec["model"])
    gen = TransformersGenerator(path, dtype="bfloat16", device=device, progress=False)
    prompts = [[{"role": "user", "content": workloads.text_of_tokens(gen.tokenizer, 32, i)}] for i in range(4)]
    greedy = GenerationParams(max_new_tokens=24, batch_size=4)
    first, again = gen.generate(prompts, greedy), gen.generate(prompts, greedy)
    sampled = dataclasses.replace(greedy, do_sample=True, seed=3)
    a, b = gen.generate(prompts, sampled), gen.generate(prompts, sampled)
    other = gen.generate(prompts, dataclasses.replace(sampled, seed=4))
    # a random model's greedy text repeats one token: the stop is a word of a seeded sample, which the same seed
    # samples again (finished rows keep drawing, so the other rows' draws are unchanged)
    words = a[0].split()
    stop = words[len(words) // 2] if len(words) > 2 else None
    stopped = gen.generate(prompts, dataclasses.replace(sampled, stop=(stop,))) if stop else []
    checks = {"greedy_repeatable": first == again, "seeded_sampling_repeatable": a == b,
              "another_seed_differs": a != other,
              "stop_string_cuts": bool(stop) and stopped == [text.split(stop)[0] for text in a]}
    batch = [[{"role": "user", "content": workloads.text_of_tokens(gen.tokenizer, spec["prompt_tokens"], 100 + i)}]
             for i in range(spec["batch_size"])]
    params = GenerationParams(max_new_tokens=spec["max_new_tokens"], batch_size=spec["batch_size"])
    sync(device)
    start = time.perf_counter()
    outputs = gen.generate(batch, params)
    sync(device)
    seconds = time.perf_counter() - start
    shape = shape_of(path)
    new = [len(gen.tokenizer(o, add_special_tokens=False)["input_ids"]) for o in outputs]
    moved = decode_bytes(shape, spec["batch_size"], spec["prompt_tokens"], spec["max_new_tokens"])
    return {"checks": checks, "ok": all(checks.values()), "batch": spec["batch_size"],
            "max_new_tokens": spec["max_new_tokens"], "mean_new_tokens": sum(new) / len(new), "seconds": seconds,
            "tokens_per_second": sum(new) / seconds, "bytes_moved": moved,
            "bandwidth_share": share(moved / seconds, plan, "copy_bytes_per_second")}


STEPS = {
    "peaks": peaks, "models": build_models, "grpo_qwen2.5-1.5b": grpo,
    "sft_qwen2.5-7b": lambda plan: lora_step(plan, "qwen2.5-7b", "sft"),
    "dpo_qwen2.5-7b": lambda plan: lora_step(plan, "qwen2.5-7b", "dpo"),
    "sft_qwen2.5-1.5b": lambda plan: lora_step(plan, "qwen2.5-1.5b", "sft"),
    "dpo_qwen2.5-1.5b": lambda plan: lora_step(plan, "qwen2.5-1.5b", "dpo"),
    "encoder": encoder, "generation": generation,
}


def main(argv: list[str] | None = None) -> None:
    name, plan_file, result_file = argv or sys.argv[1:]
    start = time.perf_counter()
    try:
        result = {"ok": True, **STEPS[name](read_json(plan_file))}
        result["ok"] = bool(result["ok"])
    except Exception as err:  # recorded, so that the next step runs: the check reports every failure at once
        result = {"ok": False, "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-4000:]}
    result["wall_seconds"] = time.perf_counter() - start
    write_json(result_file, result)


if __name__ == "__main__":
    main()
