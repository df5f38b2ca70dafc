"""One cost function per priced stage (a `cost` of repro.registry.STAGES), each a `StageCost` under one set of
assumptions; `stage_cost` applies a row's switch."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from repro.assets import is_hub_id
from repro.config import EvaluationConfig, LoRASFTConfig, Profile, is_main_design_run, is_main_run, launchers
from repro.io import pipeline_stages
from repro.ops import remote
from repro.ops.costs.measured import Measured
from repro.ops.costs.model import (ANSWER_TOKENS, Assumptions, DEFAULT_SHARE, GB, GZIP_RATIO, INSTRUCTION_TOKENS,
                                   LLM_REFINERS, OWN_ENGINE, PASSAGE_BYTES, PASSAGE_TOKENS, RESULT_BYTES, Shape,
                                   WIKI18_PASSAGES, calls_seconds, capped, checkpoint_bytes, corpus_passages,
                                   decode_step_seconds, encode_seconds, engine_seconds, generation_seconds, index_bytes,
                                   lora_params, node_gpus, prompt_tokens, questions, replicas, run_disk, search_seconds,
                                   shape, spread, step_overhead, tensor_parallel, train_seconds, zero_stage)
from repro.registry import METHODS, STAGES, Stage, settings_of



@dataclasses.dataclass(frozen=True)
class StageCost:
    """One stage under one set of assumptions (`estimate` merges the two)."""

    stage: str
    gpus: int  # GPUs the stage keeps busy most of its time
    wall: float  # seconds
    gpu_seconds: float
    disk: float  # bytes the stage leaves on disk
    memory: float  # peak bytes per GPU
    note: str = ""
    hint: str = ""  # what to change when `memory` exceeds the card
    problems: tuple[str, ...] = ()  # engines that cannot start: one line naming the key
    scratch: float = 0.0  # bytes beyond `disk` while it runs (a checkpoint written before the oldest is deleted)


MIN_KV = 1 * GB  # room an engine needs beyond its weights for a useful KV cache


def engine_problems(key: str, engines: list[tuple[Shape, float, int]], card: float) -> tuple[str, ...]:
    """vLLM engines alive at once on one GPU, as (model, memory share, tensor-parallel size): their shares must fit
    the GPU together (vLLM refuses to start otherwise) and each share must hold its weights and some KV cache."""
    problems = []
    if sum(share for _, share, _ in engines) > 0.95:
        problems.append(f"{key}: {len(engines)} engines at once ask {sum(sh for _, sh, _ in engines):.2f} of a GPU; "
                        f"lower gpu_memory_utilization so that they sum below 0.9")
    for s, share, tp in engines:
        if share * card < s.weights / tp + MIN_KV:
            problems.append(f"{key}: gpu_memory_utilization {share} holds {share * card / GB:.1f} GB < "
                            f"{s.weights / tp / GB:.1f} GB of weights per GPU + 1 GB of KV cache; raise it or "
                            f"tensor_parallel_size")
    return tuple(problems)


def fetch_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Downloads (no GPU): the hub models as stored, wiki-18 (gzip + jsonl), the prebuilt e5 index (parts +
    joined); a model repo without safetensors (`Shape.safetensors`) has its pytorch_model.bin converted, a second
    copy (`repro.ops.remote.bin_to_safetensors`, D116)."""
    download = disk = 0.0
    for row, _ in remote.needs(cfg):
        if row.repo == "PeterJinGo/wiki-18-corpus":
            corpus = WIKI18_PASSAGES * PASSAGE_BYTES
            download, disk = download + GZIP_RATIO * corpus, disk + (1 + GZIP_RATIO) * corpus
        elif row.repo == "PeterJinGo/wiki-18-e5-index":
            index = index_bytes(WIKI18_PASSAGES, 768)
            download, disk = download + index, disk + 2 * index
        elif row.repo_type == "model":
            stored = shape(row.repo).params * shape(row.repo).stored_bytes
            download, disk = download + stored, disk + stored * (1 if shape(row.repo).safetensors else 2)
    return StageCost("fetch", 0, download / a.download, 0, disk, 0, "network, no GPU; FlashRAG files not counted")


def data_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Encode the corpus with every dense retriever not imported (a copy of the encoder on each of the node's GPUs,
    `repro.retrieval.dense`), encode the questions of every open-domain split (one GPU) and search them (the index
    over the node's GPUs)."""
    r, n, gpus = cfg.retrieval, corpus_passages(cfg), node_gpus(cfg)
    imported = cfg.fetch.prebuilt_index if cfg.fetch and cfg.data.corpus.max_passages is None else None
    dense = {name: r.retrievers[name] for name in dict.fromkeys([*r.evaluate, r.agentic])
             if r.retrievers[name].method == "dense"}
    queries = sum(questions(cfg, d.name, split) for d in cfg.data.datasets if d.setting == "open" for split in d.splits)
    passages = one_gpu = search = 0.0  # one_gpu: the questions' encoding and the weights, read once
    memory, disk = 0.0, (n * PASSAGE_BYTES if cfg.data.corpus.max_passages else 0.0)
    for name, ret in dense.items():
        encoder = shape(ret.passage_encoder or ret.query_encoder)
        tokens = ret.passage_max_length if a.pad_to_max else PASSAGE_TOKENS
        if name != imported:
            passages += spread(encode_seconds(encoder.params, a, n, tokens), gpus, a)
            one_gpu += encoder.weights / a.disk_read
            disk += index_bytes(n, encoder.hidden)
        if name in r.evaluate:
            one_gpu += encode_seconds(shape(ret.query_encoder).params, a, queries, ret.query_max_length)
            search += search_seconds(a, queries, n, encoder.hidden, gpus)
        index = n * encoder.hidden * (2 if ret.gpu_fp16 else 4) / gpus  # its shard on each GPU (D210)
        memory = max(memory, encoder.weights + index)
    disk += queries * len(r.evaluate) * r.topk * RESULT_BYTES
    wall = a.stage_start + one_gpu + passages + search
    return StageCost("data", gpus, wall, a.stage_start + one_gpu + (passages + search) * gpus, disk, memory,
                     f"{n:,} passages, {len(dense)} dense index(es), {queries:,} questions")


def grpo_wall(cfg: Profile, a: Assumptions, max_steps: int | None = None, subset=None) -> tuple[float, int]:
    """(seconds, optimizer steps) of one GRPO run of `cfg.train` (see the module docstring)."""
    t, s, n = cfg.train, shape(cfg.models.extractor), node_gpus(cfg)
    completions = t.per_device_batch_size * n * t.gradient_accumulation_steps
    steps = max_steps if max_steps and max_steps > 0 else math.ceil(
        t.epochs * capped(questions(cfg, t.dataset, "train"), t.max_train_questions) * t.num_generations / completions)
    spg = t.steps_per_generation or t.gradient_accumulation_steps
    generations = math.ceil(steps * t.gradient_accumulation_steps / (spg * t.num_iterations))
    prompt, mean = prompt_tokens(cfg.retrieval.topk), a.generated_fraction * t.max_completion_length
    masked = len({"rationale", "evidence"} & set(subset or cfg.rewards.answer_subset))
    tp = t.vllm_tensor_parallel_size

    def rollouts(count: int) -> float:  # the rollouts and their masked answers o_r, o_e on one process's engine
        return (generation_seconds(s, a, count, prompt, t.max_completion_length, tp)
                + generation_seconds(s, a, masked * count, prompt + mean, t.max_answer_length, tp))

    completion = t.max_completion_length if a.pad_to_max else mean
    flops = 6 + 2 * t.gradient_checkpointing + 2 * (t.beta > 0) + 2 * (spg > t.gradient_accumulation_steps
                                                                       or t.num_iterations > 1)
    tokens = completions * (prompt + completion) * t.num_iterations
    measured = a.measured.run("grpo", s.params) if a.measured else None  # one GPU's tokens per second, measured
    step = tokens / n / measured.tokens_per_second if measured else train_seconds(s, a, tokens, flops, n)
    dev = math.ceil(capped(questions(cfg, t.dataset, "dev"), t.dev_max_questions) / n)
    evaluations = 0 if t.selection_metric is None else int(t.evaluate_initial) + math.ceil(steps / t.save_steps)
    wall = (generations * (rollouts(t.per_device_batch_size * spg) + s.weights / GB * a.sync_seconds_per_gb)
            + steps * step + evaluations * rollouts(dev) + engine_seconds(s, a, {}) + 2 * s.weights / a.disk_read)
    return wall + (a.stage_start if t.accelerate_config else 0), steps  # accelerate launches its own workers


def model_states(p: float, zero: int, n: int) -> float:
    """Bytes per GPU of a bf16 model's weights, gradients and fp32 Adam states under ZeRO stage `zero` on n GPUs."""
    return {0: 16 * p, 1: 4 * p + 12 * p / n, 2: 2 * p + 14 * p / n, 3: 16 * p / n}[zero]


def grpo_memory(cfg: Profile, card: float, measured: Measured | None = None) -> float:
    """The formula of the module docstring; with a measured GRPO step of the same model, its peak (one process, the
    colocated engine's share left out) with the model states resharded over the node's GPUs, plus the engine."""
    t, s, n = cfg.train, shape(cfg.models.extractor), node_gpus(cfg)
    p = s.params
    colocated = t.vllm_gpu_memory_utilization * card if t.use_vllm and t.vllm_mode == "colocate" else 0
    run = measured.run("grpo", p) if measured else None
    if run:
        zero = zero_stage(cfg)
        return run.peak_bytes - model_states(p, zero, run.processes) + model_states(p, zero, n) + colocated
    states = model_states(p, zero_stage(cfg), n)
    reference = (2 * p / (n if zero_stage(cfg) == 3 else 1)) if t.beta > 0 else 0
    tokens = t.per_device_batch_size * (prompt_tokens(cfg.retrieval.topk) + t.max_completion_length)
    activations = tokens * s.hidden * (2 * s.layers + 34 if t.gradient_checkpointing else 34 * s.layers)
    logprobs = t.per_device_batch_size * t.max_completion_length * s.vocab * 4
    return states + reference + activations + logprobs + colocated


def grpo_disk(cfg: Profile, steps: int) -> tuple[float, float]:
    """`run_disk` of a GRPO run of `steps` steps: its checkpoints (`train.lora`: the adapter's) and the exported
    extractor (a LoRA run's merged into the model)."""
    t, s = cfg.train, shape(cfg.models.extractor)
    trained = lora_params(s, t.lora.rank, t.lora.target_modules) if t.lora else s.params
    checkpoint = checkpoint_bytes(trained, launchers.zero_stage(t.accelerate_config), t.lora is not None)
    return run_disk(checkpoint, math.ceil(steps / t.save_steps), t.save_total_limit, s.weights)


GRPO_HINT = ("halve train.per_device_batch_size and double gradient_accumulation_steps, or ZeRO-3 "
             "(configs/accelerate/zero3.yaml)")


def grpo_problems(cfg: Profile, card: float) -> tuple[str, ...]:
    t = cfg.train
    if not (t.use_vllm and t.vllm_mode == "colocate"):
        return ()
    return engine_problems(f"params.yaml: profiles.{cfg.name}.train.vllm", [(shape(cfg.models.extractor),
                           t.vllm_gpu_memory_utilization, t.vllm_tensor_parallel_size)], card)


def train_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    wall, steps = grpo_wall(cfg, a, cfg.train.max_steps)
    n, (disk, scratch) = node_gpus(cfg), grpo_disk(cfg, steps)
    wall += a.stage_start
    return StageCost("train_eviomni", n, wall, wall * n, disk, grpo_memory(cfg, card, a.measured), f"{steps:,} steps",
                     GRPO_HINT, grpo_problems(cfg, card), scratch)


def lora_processes(sft: LoRASFTConfig) -> int:
    """The worker processes of a LoRA run's launcher (`accelerate_config`): DDP, one per GPU."""
    return launchers.processes(sft.accelerate_config)


def lora_examples(sft: LoRASFTConfig, examples: int) -> tuple[float, int]:
    """(examples seen, optimizer steps) of a LoRA run whose batches span its launcher's processes."""
    batch = sft.per_device_batch_size * sft.gradient_accumulation_steps * lora_processes(sft)
    seen = examples * sft.epochs if sft.max_steps <= 0 else min(examples * sft.epochs, sft.max_steps * batch)
    return seen, math.ceil(seen / batch)


def lora_seconds(a: Assumptions, sft: LoRASFTConfig, model: str, examples: int, tokens: float,
                 flops_per_param: float = 4) -> float:
    """A LoRA run in the DDP worker processes of `sft.accelerate_config` (`repro.train.lora.runner.train_lora`): the
    weights read, then the training spread over the processes. The launch's start is the stage's to count, once for the
    runs it trains one after the other."""
    s = shape(model)
    seen, _ = lora_examples(sft, examples)
    measured = a.measured.run(lora_kind(flops_per_param), s.params) if a.measured else None
    one_gpu = (seen * tokens / measured.tokens_per_second if measured
               else train_seconds(s, a, seen * tokens, flops_per_param, 1))
    return s.weights / a.disk_read + spread(one_gpu, lora_processes(sft), a)


def lora_kind(flops_per_param: float) -> str:
    """The measured run that prices a LoRA run of `flops_per_param`: SFT (4P) or DPO (6P, the reference forward)."""
    return "sft" if flops_per_param == 4 else "dpo"


def lora_disk(sft: LoRASFTConfig, model: str, examples: int) -> tuple[float, float]:
    """`run_disk` of a LoRA run: checkpoints of the adapter and its optimizer states, and the adapter/ directory
    (PEFT's `save_pretrained`, in the adapter's dtype: fp32, bf16 under DeepSpeed)."""
    adapter = lora_params(shape(model), sft.lora_rank, sft.target_modules)
    zero = launchers.zero_stage(sft.accelerate_config)
    _, steps = lora_examples(sft, examples)
    return run_disk(checkpoint_bytes(adapter, zero, lora=True), math.ceil(steps / sft.save_steps),
                    sft.save_total_limit, adapter * (4 if zero is None else 2))


def lora_memory(sft: LoRASFTConfig, model: str, tokens: float, sequences: int = 1,
                measured: Measured | None = None) -> float:
    """bf16 weights, activations without checkpointing and fp32 logits of a micro-batch of the longest examples
    (longer ones than max_length are dropped), each example `sequences` sequences (DPO: chosen and rejected); or the
    peak of a measured step of the same model and kind."""
    s = shape(model)
    run = measured.run("dpo" if sequences == 2 else "sft", s.params) if measured else None
    if run:
        return run.peak_bytes
    return s.weights + sequences * sft.per_device_batch_size * min(tokens, sft.max_length) * (
        s.hidden * 34 * s.layers + s.vocab * 4)


def qa_generator_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    q = cfg.qa_generator
    long = prompt_tokens(cfg.retrieval.topk) + ANSWER_TOKENS
    short = INSTRUCTION_TOKENS + ANSWER_TOKENS  # Table 12: the question alone
    per_question = [long if i == "passages" or a.pad_to_max else short for i in q.inputs]
    n = sum(capped(questions(cfg, d, q.split), q.max_train_questions) for d in q.datasets)
    wall = 2 * a.stage_start + lora_seconds(a, q, cfg.models.generator, n * len(per_question),
                                            sum(per_question) / len(per_question))  # the stage's and the launch's
    disk, scratch = lora_disk(q, cfg.models.generator, n * len(per_question))
    gpus = lora_processes(q)
    return StageCost("qa_generator", gpus, wall, wall * gpus, disk,
                     lora_memory(q, cfg.models.generator, long, measured=a.measured),
                     f"{n * len(per_question):,} examples",
                     "halve qa_generator.per_device_batch_size and double gradient_accumulation_steps", (), scratch)


def filco_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    f = cfg.filco
    n = sum(capped(questions(cfg, d, f.split), f.max_train_questions) for d in f.datasets)
    tokens = prompt_tokens(cfg.retrieval.topk) + 4 * ANSWER_TOKENS  # the silver sentences as the target
    wall = 2 * a.stage_start + lora_seconds(a, f, cfg.models.extractor, n, tokens)  # the stage's and the launch's
    disk, scratch = lora_disk(f, cfg.models.extractor, n)
    gpus = lora_processes(f)
    return StageCost("filco_train", gpus, wall, wall * gpus, disk,
                     lora_memory(f, cfg.models.extractor, tokens, measured=a.measured),
                     f"{n:,} examples", "halve filco.per_device_batch_size and double gradient_accumulation_steps",
                     (), scratch)


def seer_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """M samples per question in calls of `seer.chunk_size` questions on the evaluation's backend
    (`repro.baselines.seer.candidate_pools`: vLLM with `evaluation.options`, over its replicas; transformers'
    generate on one GPU, `seer.batch_size` questions at a time), the answerer's two log-likelihoods per candidate on
    transformers (one GPU), then DPO of a LoRA in the workers of `seer.accelerate_config`."""
    sr, ev = cfg.seer, cfg.evaluation
    s, generator = shape(cfg.models.extractor), shape(cfg.models.generator)
    n = sum(capped(questions(cfg, d, sr.split), sr.max_train_questions) for d in sr.datasets)
    prompt = prompt_tokens(cfg.retrieval.topk)
    assess = encode_seconds(generator.params, a, 2 * sr.num_samples * n, prompt)
    encoder = shape(sr.similarity_model).weights if sr.conciseness == "similarity" else 0.0
    if ev.backend == "vllm":
        tp, count = tensor_parallel(ev.options), replicas(cfg, ev.backend, ev.options)
        sample = calls_seconds(s, a, n, sr.chunk_size, count, prompt, sr.max_new_tokens, tp,
                               step_overhead(a, ev.options), sr.num_samples)
        sampler, sampling_gpus = engine_seconds(s, a, ev.options), count * tp
        share = ev.options.get("gpu_memory_utilization", DEFAULT_SHARE)
        memory = share * card + generator.weights + encoder  # GPU 0: a replica, the answerer, the encoder
        problems = engine_problems(f"params.yaml: profiles.{cfg.name}.evaluation.options", [(s, share, tp)], card)
        hint = "lower evaluation.options.gpu_memory_utilization"
    else:
        running = sr.batch_size * sr.num_samples
        sample = math.ceil(n / sr.batch_size) * sr.max_new_tokens * decode_step_seconds(
            s, a, 1, running, prompt + sr.max_new_tokens / 2, a.hf_step_overhead)
        sampler, sampling_gpus = s.weights / a.disk_read, 1
        memory = s.weights + generator.weights + running * (prompt + sr.max_new_tokens) * s.kv_per_token
        problems, hint = (), "lower seer.batch_size"
    pair_tokens = 2 * (prompt + a.generated_fraction * sr.max_new_tokens)
    # after the sampling
    dpo_memory = lora_memory(sr, cfg.models.extractor, pair_tokens / 2, sequences=2, measured=a.measured)
    if dpo_memory > memory:
        memory, hint = dpo_memory, "halve seer.per_device_batch_size and double gradient_accumulation_steps"
    dpo = a.stage_start + lora_seconds(a, sr, cfg.models.extractor, n * sr.max_pairs_per_question, pair_tokens, 6)
    one_gpu = a.stage_start + assess + generator.weights / a.disk_read  # the stage's process, the answerer
    wall = one_gpu + sampler + sample + dpo
    disk, scratch = lora_disk(sr, cfg.models.extractor, n * sr.max_pairs_per_question)
    return StageCost("seer_train", max(sampling_gpus, lora_processes(sr)), wall,
                     one_gpu + sampling_gpus * (sampler + sample) + dpo * lora_processes(sr), disk, memory,
                     f"{n:,} questions x {sr.num_samples} samples", hint, problems, scratch)


def study_cost(cfg: Profile, a: Assumptions, card: float, name: str, ev: EvaluationConfig,
               sets: list[tuple[int, int]], extra_engines: int = 0, section: str = "evaluation") -> StageCost:
    """Every method of `ev` on sets of (questions, passages per prompt), in chunks of `ev.chunk_size` questions: the
    refiner's output (LLM refiners decode on the engine's replicas, compressors score the passages on one GPU), then
    the QA generator's answer (the replicas); one engine per base model at once."""
    extractor, generator = shape(cfg.models.extractor), shape(cfg.models.generator)
    tp, share = tensor_parallel(ev.options), ev.options.get("gpu_memory_utilization", DEFAULT_SHARE)
    count, overhead = replicas(cfg, ev.backend, ev.options), step_overhead(a, ev.options)
    compressors = {k: getattr(settings_of(cfg, METHODS[k]), METHODS[k].model_field) for k in ev.methods
                   if METHODS[k].cost == "compressor"}  # the model each scores the passages with
    decode = one_gpu = 0.0
    for method in ev.methods:
        for n, passages in sets:
            prompt = prompt_tokens(passages)
            if method in LLM_REFINERS:
                decode += calls_seconds(extractor, a, n, ev.chunk_size, count, prompt, ev.evidence_max_new_tokens, tp,
                                        overhead)
            elif method in compressors:
                one_gpu += encode_seconds(shape(compressors[method]).params, a, n, passages * PASSAGE_TOKENS)
            answer_prompt = INSTRUCTION_TOKENS if method == "zero" else prompt
            decode += calls_seconds(generator, a, n, ev.chunk_size, count, answer_prompt, ev.answer_max_new_tokens, tp,
                                    overhead)
    at_once = 1 + len(set(ev.methods) & set(OWN_ENGINE))
    engines = at_once + extra_engines  # started in all (the ablation's extractors one after another)
    loaded = [shape(compressors[m]) for m in ev.methods if m in compressors]
    one_gpu += a.stage_start + sum(s.params * s.stored_bytes for s in loaded) / a.disk_read
    replicated = decode + engines * engine_seconds(extractor, a, ev.options)
    memory = at_once * share * card + sum(s.weights for s in loaded)
    key = f"params.yaml: profiles.{cfg.name}.{section}.options"
    return StageCost(name, count * tp, one_gpu + replicated, one_gpu + count * tp * replicated, 0, memory,
                     f"{len(ev.methods)} methods x {sum(n for n, _ in sets):,} questions, {engines} engine(s)",
                     f"lower {section}.options.gpu_memory_utilization",
                     engine_problems(key, [(extractor, share, tp)] * at_once, card))


def main_comparison_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    ev = cfg.evaluation
    sets = [(capped(questions(cfg, d, ev.split), ev.max_questions), cfg.retrieval.topk) for d in ev.datasets]
    cost = study_cost(cfg, a, card, "main_comparison", ev, sets)
    if not ev.reading_check_questions:
        return cost
    check = study_cost(cfg, a, card, "", dataclasses.replace(ev, methods=["zero", "full"]),
                       [(ev.reading_check_questions, cfg.retrieval.topk)] * len(ev.datasets))  # Zero vs Full (D91)
    # the check runs in the stage's process, with engines of its own
    return dataclasses.replace(cost, wall=cost.wall + check.wall - a.stage_start,
                               gpu_seconds=cost.gpu_seconds + check.gpu_seconds - a.stage_start)


def distractor_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    d = cfg.distractor
    ev = dataclasses.replace(cfg.evaluation, datasets=d.datasets, methods=d.methods, split=d.split,
                             max_questions=d.max_questions)
    sets = [(capped(questions(cfg, x, d.split), d.max_questions), cfg.data.distractor_paragraphs) for x in d.datasets]
    return study_cost(cfg, a, card, "distractor_setting", ev, sets)


def noise_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    nr, noise = cfg.noise_robustness, cfg.noise
    ev = dataclasses.replace(cfg.evaluation, methods=nr.methods)
    sets = [(capped(questions(cfg, d, noise.split), nr.max_questions), cfg.retrieval.topk + k)
            for d in noise.datasets for k in noise.counts]
    return study_cost(cfg, a, card, "noise_robustness", ev, sets)


def latency_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Warm-up and timed batches of `batch_size` queries per method and dataset (each batch latency-bound)."""
    lat, s = cfg.latency, shape(cfg.models.extractor)
    tp = tensor_parallel(lat.options)
    batch = generation_seconds(s, a, lat.batch_size, prompt_tokens(cfg.retrieval.topk), lat.max_new_tokens, tp,
                               overhead=step_overhead(a, lat.options))
    batches = sum(lat.warmup_batches + lat.repetitions * math.ceil(capped(questions(cfg, d, lat.split), lat.queries)
                                                                  / lat.batch_size) for d in lat.datasets)
    engines = 1 + len(set(lat.methods) & set(OWN_ENGINE))
    wall = a.stage_start + len(lat.methods) * batches * batch + engines * engine_seconds(s, a, lat.options)
    share = lat.options.get("gpu_memory_utilization", DEFAULT_SHARE)
    return StageCost("latency", tp, wall, wall * tp, 0, engines * share * card,
                     f"{len(lat.methods)} methods x {batches} batches of {lat.batch_size}",
                     "lower latency.options.gpu_memory_utilization",
                     engine_problems(f"params.yaml: profiles.{cfg.name}.latency.options", [(s, share, tp)] * engines,
                                     card))


def trained_extractors_cost(cfg: Profile, a: Assumptions, card: float, stage: str, runs: list[tuple[float, int]],
                            section, extractors: int, reused: str = "") -> StageCost:
    """GRPO runs one after another (`runs`: grpo_wall of each), then `extractors` extractors (the runs' and any reused
    one) evaluated like Table 2's EviOmni column on the test sets of `section` (datasets, split, max_questions), one
    extractor engine at a time."""
    n = node_gpus(cfg)
    ev = dataclasses.replace(cfg.evaluation, datasets=section.datasets, methods=["eviomni"],
                             max_questions=section.max_questions)
    sets = [(capped(questions(cfg, d, section.split), section.max_questions), cfg.retrieval.topk)
            for d in section.datasets]
    evaluation = study_cost(cfg, a, card, "", ev, sets * extractors, extra_engines=extractors - 1)
    train = sum(wall for wall, _ in runs)
    note = f"{len(runs)} GRPO run(s)" + (f" of {runs[0][1]:,} steps" if runs else "") + reused
    grpo = (grpo_memory(cfg, card, a.measured), grpo_problems(cfg, card)) if runs else (0.0, ())
    disks = [grpo_disk(cfg, steps) for _, steps in runs]
    return StageCost(stage, n, train + evaluation.wall, train * n + evaluation.gpu_seconds, sum(d for d, _ in disks),
                     max(grpo[0], evaluation.memory), note, f"{GRPO_HINT}; {evaluation.hint}",
                     grpo[1] + evaluation.problems, max((s for _, s in disks), default=0.0))


def ablation_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """One GRPO run per answer subset that is not the main run (that one is reused, D165), then each extractor
    evaluated like Table 2's EviOmni column."""
    ab = cfg.ablation
    trained = [subset for subset in ab.subsets if not is_main_run(cfg, subset)]
    runs = [grpo_wall(cfg, a, ab.max_steps or cfg.train.max_steps, subset) for subset in trained]
    reused = ", the main run's reused" if len(trained) < len(ab.subsets) else ""
    return trained_extractors_cost(cfg, a, card, "ablation_answer_rewards", runs, ab, len(ab.subsets), reused)


def reward_designs_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """One GRPO run per reward design that is not the main run (that one is reused, D170), each costed as EviOmni's
    run (the other designs generate no o_r, o_e: an upper bound), then each extractor evaluated like Table 2's EviOmni
    column; the NLI pass over the evidence is not counted (one classifier forward per item, against GRPO runs)."""
    rd = cfg.reward_designs
    trained = [row for row in rd.designs if not is_main_design_run(cfg, row)]
    runs = [grpo_wall(cfg, a, rd.max_steps or cfg.train.max_steps)] * len(trained)
    reused = ", the main run's reused" if len(trained) < len(rd.designs) else ""
    return trained_extractors_cost(cfg, a, card, "reward_designs", runs, rd, len(rd.designs), reused)


def length_tuning_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """One GRPO run of `length_tuning.max_steps` steps per (τ, γ), one after another; each run's checkpoints and
    extractor are deleted once its dev score is read, so the disk holds one run's at a time, and none after (D150)."""
    lt, n = cfg.length_tuning, node_gpus(cfg)
    pairs = len(lt.tau) * len(lt.gamma)
    wall, steps = grpo_wall(cfg, a, lt.max_steps)
    total = a.stage_start + pairs * wall
    return StageCost("length_tuning", n, total, total * n, 0, grpo_memory(cfg, card, a.measured),
                     f"{pairs} GRPO runs of {steps:,} steps", GRPO_HINT, grpo_problems(cfg, card),
                     sum(grpo_disk(cfg, steps)))


AGENTIC_CHUNK_BATCHES = 8  # repro.studies.agentic.CHUNK_BATCHES: items per resumable chunk, in agentic.batch_size


def agentic_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Each agent in each condition, dataset by dataset in chunks of AGENTIC_CHUNK_BATCHES x `batch_size` items
    (`repro.studies.agentic.run_study`): `max_actions` searches and a final turn per item, one call per turn for the
    chunk on the agent's replicas, the context growing by a turn and an observation each time (every item active to
    the end: an upper bound); with the extractor, one extraction call per search on its replicas; Eval-RAR's
    evaluation step written separately, one more generation per search."""
    ag = cfg.agentic
    if not cfg.models.agents:
        return None  # no agent to run (released-1p5b)
    items = [capped(questions(cfg, d, ag.split), ag.n_items) for d in ag.datasets]
    chunk = AGENTIC_CHUNK_BATCHES * ag.batch_size
    extractor = shape(ag.extractor or cfg.models.released_extractor or cfg.models.extractor)
    tp, extractor_tp = tensor_parallel(ag.agent_options), tensor_parallel(ag.extractor_options)
    agents, extractors = replicas(cfg, ag.backend, ag.agent_options), replicas(cfg, ag.backend, ag.extractor_options)
    overhead = step_overhead(a, ag.agent_options)
    turns, mean_new = ag.max_actions + 1, a.generated_fraction * ag.max_new_tokens
    observation = min(ag.max_obs_tokens, ag.topk * PASSAGE_TOKENS)
    with_extractor = "with" in ag.conditions
    extract = with_extractor * ag.max_actions * sum(
        calls_seconds(extractor, a, n, chunk, extractors, prompt_tokens(ag.topk), ag.extractor_max_new_tokens,
                      extractor_tp, step_overhead(a, ag.extractor_options)) for n in items)
    separate_evaluation = "eval_rar" in ag.conditions and ag.evaluate_step == "separate"
    runs = len(ag.conditions) + separate_evaluation * ag.max_actions / turns  # an evaluation costs about a turn
    seconds = engine_seconds(extractor, a, ag.extractor_options) if with_extractor else 0.0
    for agent in cfg.models.agents:
        s = shape(agent)
        turn = sum(calls_seconds(s, a, n, chunk, agents, INSTRUCTION_TOKENS + i * (mean_new + observation),
                                 ag.max_new_tokens, tp, overhead) for i in range(turns) for n in items)
        seconds += runs * turn + extract + engine_seconds(s, a, ag.agent_options)
    n, dim = corpus_passages(cfg), shape(cfg.retrieval.retrievers[cfg.retrieval.agentic].query_encoder).hidden
    search = search_seconds(a, len(ag.conditions) * len(cfg.models.agents) * sum(items) * ag.max_actions, n, dim,
                            node_gpus(cfg))
    agent_share = ag.agent_options.get("gpu_memory_utilization", DEFAULT_SHARE)
    extractor_share = ag.extractor_options.get("gpu_memory_utilization", DEFAULT_SHARE)
    memory = (agent_share + extractor_share) * card + n * dim * 2 / node_gpus(cfg)  # fp16 index shard (D214)
    key = f"params.yaml: profiles.{cfg.name}.agentic"
    problems = engine_problems(f"{key}.agent_options + extractor_options", [
        (max((shape(m) for m in cfg.models.agents), key=lambda x: x.params), agent_share, tp),
        (extractor, extractor_share, extractor_tp)], card)
    wall = a.stage_start + seconds + search
    gpus = max(agents * tp, extractors * extractor_tp if with_extractor else 0)
    return StageCost("agentic_search_r1", gpus, wall, wall * gpus, 0, memory,
                     f"{len(cfg.models.agents)} agent(s) x {len(ag.conditions)} conditions x {sum(items):,} items",
                     "lower agentic.agent_options / extractor_options gpu_memory_utilization", problems)


def ar_teacher_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """The teacher's responses in calls of `teacher.chunk_size` questions: an API (no GPU: the stage can run on any
    machine, docs/gpu.md), or a local engine over its replicas."""
    t = cfg.ar_study.teacher
    n = capped(questions(cfg, t.dataset, t.split), t.questions)
    memory, gpus, problems = 0.0, 0, ()
    if t.backend == "openai":
        teacher = n * t.samples * a.generated_fraction * t.max_new_tokens / (
            a.api_tokens_per_second * t.options.get("max_workers", 1))
    else:
        s, tp, count = shape(t.model), tensor_parallel(t.options), replicas(cfg, t.backend, t.options)
        teacher = calls_seconds(s, a, n, t.chunk_size, count, prompt_tokens(cfg.retrieval.topk), t.max_new_tokens,
                                tp, step_overhead(a, t.options), t.samples) + engine_seconds(s, a, t.options)
        gpus, share = count * tp, t.options.get("gpu_memory_utilization", DEFAULT_SHARE)
        memory = share * card
        problems = engine_problems(f"params.yaml: profiles.{cfg.name}.ar_study.teacher.options", [(s, share, tp)], card)
    note = f"{n * t.samples:,} teacher responses" + (" over the API (no GPU)" if t.backend == "openai" else "")
    return StageCost("ar_study_teacher", gpus, a.stage_start + teacher, (a.stage_start + teacher) * gpus, 0, memory,
                     note, "lower ar_study.teacher.options.gpu_memory_utilization", problems)


def ar_train_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """The rational and vanilla LoRA runs, one after the other in one launch of their workers (every teacher question
    kept: an upper bound)."""
    t, ar = cfg.ar_study.teacher, cfg.ar_study
    n = capped(questions(cfg, t.dataset, t.split), t.questions)
    tokens = prompt_tokens(cfg.retrieval.topk) + a.generated_fraction * t.max_new_tokens
    sft = a.stage_start + 2 * lora_seconds(a, ar.sft, ar.student, n, tokens)
    disk, scratch = lora_disk(ar.sft, ar.student, n)  # each of the two runs, one after the other
    gpus = lora_processes(ar.sft)
    return StageCost("ar_study_train", gpus, a.stage_start + sft, sft * gpus, 2 * disk,
                     lora_memory(ar.sft, ar.student, tokens, measured=a.measured),
                     f"2 LoRA runs of at most {n:,} examples",
                     "halve ar_study.sft.per_device_batch_size and double gradient_accumulation_steps", (), scratch)


def ar_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Both variants on each set, in calls of `evaluation.chunk_size` questions on the student's replicas."""
    e, s = cfg.ar_study.evaluation, shape(cfg.ar_study.student)
    sets = [capped(questions(cfg, d, e.split), e.max_questions) for d in (e.in_distribution, e.out_of_distribution)]
    tp, count = tensor_parallel(e.options), replicas(cfg, e.backend, e.options)
    variant = sum(calls_seconds(s, a, n, e.chunk_size, count, prompt_tokens(cfg.retrieval.topk), e.max_new_tokens, tp,
                                step_overhead(a, e.options)) for n in sets)
    engines = 1 if e.backend == "vllm" else 2  # vLLM: one engine, the variants' adapters as LoRA requests (D94)
    replicated = 2 * variant + engines * engine_seconds(s, a, e.options)
    share = e.options.get("gpu_memory_utilization", DEFAULT_SHARE) if e.backend == "vllm" else 0
    problems = engine_problems(f"params.yaml: profiles.{cfg.name}.ar_study.evaluation.options", [(s, share, tp)],
                               card) if share else ()
    return StageCost("ar_study", count * tp, a.stage_start + replicated, a.stage_start + count * tp * replicated, 0,
                     share * card, f"2 variants x {sum(sets):,} questions",
                     "lower ar_study.evaluation.options.gpu_memory_utilization", problems)


def released_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost | None:
    """Each released checkpoint the profile uses (`released_references`), checked before use (D179): its engine on
    the evaluation's backend and options, then Table 14 on `released_check.questions` questions in one call, one
    checkpoint after the other (`repro.studies.released.run_check`). Without one, the stage records a null
    reference: a light stage (None)."""
    refs, ev, check = released_references(cfg), cfg.evaluation, cfg.released_check
    if not refs or ev is None:
        return None
    tp, count = tensor_parallel(ev.options), replicas(cfg, ev.backend, ev.options)
    share = ev.options.get("gpu_memory_utilization", DEFAULT_SHARE)
    replicated = sum(engine_seconds(shape(ref), a, ev.options) + calls_seconds(
        shape(ref), a, check.questions, check.questions, count, prompt_tokens(cfg.retrieval.topk),
        ev.evidence_max_new_tokens, tp, step_overhead(a, ev.options)) for ref in refs)
    key = f"params.yaml: profiles.{cfg.name}.evaluation.options"
    return StageCost("released_extractor", count * tp, a.stage_start + replicated,
                     a.stage_start + count * tp * replicated, 0, share * card,
                     f"{len(refs)} checkpoint(s) x {check.questions} {check.dataset} {check.split} questions",
                     "lower evaluation.options.gpu_memory_utilization",
                     sum((engine_problems(key, [(shape(ref), share, tp)], card) for ref in refs), ()))


def released_references(cfg: Profile) -> list[str]:
    """The released checkpoints the profile checks, by `repro.studies.released.checked_references`' rule:
    models.released_extractor, and agentic.extractor when it is another hub checkpoint."""
    refs = [cfg.models.released_extractor] if cfg.models.released_extractor else []
    agentic = cfg.agentic.extractor if cfg.agentic is not None else None
    return refs + ([agentic] if agentic and is_hub_id(agentic) and agentic not in refs else [])


def light_stage(names: Sequence[str], a: Assumptions) -> StageCost:
    """dvc.yaml's stages that no formula here costs: those that load no model (tables, figures, the format warm-up of
    the paper profiles), and a study set to null or with nothing to check, which still starts its stage to record
    so. Each costs its process start."""
    return StageCost(f"{len(names)} light stages", 0, len(names) * a.light_stage_start, 0, 0, 0,
                     "CPU: " + ", ".join(names))


GRPO_STAGES = ("train_eviomni", "ablation_answer_rewards", "reward_designs", "length_tuning")


def measured_stages(cfg: Profile, m: Measured) -> set[str]:
    """The stages whose training time and memory `m` replaces: those training a model of a measured shape and kind."""
    extractor = shape(cfg.models.extractor).params
    rows = set(GRPO_STAGES) if cfg.train and m.run("grpo", extractor) else set()
    lora = {"qa_generator": ("sft", cfg.models.generator), "filco_train": ("sft", cfg.models.extractor),
            "seer_train": ("dpo", cfg.models.extractor),
            "ar_study_train": ("sft", cfg.ar_study.student if cfg.ar_study else None)}
    return rows | {stage for stage, (kind, model) in lora.items() if model and m.run(kind, shape(model).params)}


FETCH = "fetch"  # `python -m repro.ops.remote fetch`, before `dvc repro`: the one priced step that is no dvc.yaml stage
FETCH_STAGE = Stage(FETCH, switch="fetch", cost="fetch_stage")


def priced_stages() -> list[Stage]:
    """`fetch`, then the stages the model prices (`repro.registry.STAGES` rows with a `cost`), in dvc.yaml's order."""
    return [FETCH_STAGE, *(STAGES[name] for name in pipeline_stages() if STAGES[name].cost)]


def stage_cost(cfg: Profile, stage: Stage, a: Assumptions, card: float) -> StageCost | None:
    """The stage's cost under `a`, or None when the profile gives it no work (its switch section is null, or its cost
    function finds nothing to do)."""
    if getattr(cfg, stage.switch, None) is None:
        return None
    return globals()[stage.cost](cfg, a, card)
