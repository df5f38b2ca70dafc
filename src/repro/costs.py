"""ESTIMATED cost of running a profile on GPUs: GPU-hours, wall time, disk and GPU memory per stage (D137).

    python -m repro.costs --profile paper-1p5b [--gpu-memory 40]

Nothing here is measured: no GPU was available. Every figure is a formula over the profile's sizes (questions,
passages, steps, lengths, models) and the `Assumptions` below, computed twice, with an OPTIMISTIC and a PESSIMISTIC
set, to give a range. The formulas (P = parameters, n = GPUs a stage keeps busy):

- weights: P x 2 bytes in bf16 on a GPU, P x bytes as stored on the hub on disk; a Flat index: passages x dim x 4
  bytes; the corpus: passages x `PASSAGE_BYTES`; a GRPO checkpoint: 2P (bf16 weights) + 12P (fp32 master weights
  and Adam moments, DeepSpeed's layout);
- decoding (vLLM, and transformers' generate for SEER's sampler): one step reads the weights and the KV cache of
  the running sequences once, step = (2P + running x context x KV bytes per token) / tp / (bandwidth x
  efficiency) + overhead; N prompts of at most L new tokens (mean m) take max(L, N x m / running) steps, plus the
  prompts' prefill, 2P FLOPs per token;
- training: FLOPs per token x P x tokens / (n x peak x MFU); GRPO 6P (forward and backward) + 2P (recomputed
  activations, gradient checkpointing) + 2P (reference model, beta > 0) + 2P (old policy, when a generation batch
  spans several optimizer steps); LoRA SFT 4P (no weight gradients of the frozen base), DPO 6P (+ the reference
  forward). tokens = completions x (prompt + completion); steps = epochs x questions x G / completions per step;
- encoding the corpus: 2P x passages x passage tokens, one GPU; Flat search: 2 x queries x passages x dim FLOPs over
  the node's GPUs (faiss-gpu shards the index);
- GPU memory per GPU: GRPO's model states under ZeRO stage z (0: 16P; 2: 2P + 14P/n; 3: 16P/n), a bf16 reference
  model, checkpointed activations (micro-batch x sequence x hidden x (2 x layers + 34) bytes), fp32 log-probs over
  the completion (micro-batch x completion x vocab x 4) and the colocated vLLM share x card; an inference stage:
  one engine per base model at once (the studies keep them until they end) x its share x card;
- fixed costs: each stage starts a process (imports, papermill), each engine reads its weights and profiles memory
  (and captures CUDA graphs unless `enforce_eager`).

Sizes the profile does not hold are constants here: FlashRAG's split sizes, wiki-18's passage count, the models'
shapes (`SHAPES`, from their config.json). Stages run one after another, as `dvc repro` runs them, so the node's
wall time is their sum; a stage that uses 1 of 8 GPUs counts 1 GPU-hour per hour.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import yaml

from repro import remote
from repro.config import EvaluationConfig, LoRASFTConfig, Profile, is_main_design_run, is_main_run, load_profile
from repro.preflight import accelerate_processes

GB = 1e9
PASSAGE_TOKENS = 140  # a 100-word passage and its title in Qwen2.5's or BERT's tokens (about 1.3 per word)
INSTRUCTION_TOKENS = 220  # Table 14's instructions, the question and the chat template
ANSWER_TOKENS = 16  # a short answer, the QA generator's target
PASSAGE_BYTES = 666  # wiki-18.jsonl: ~14 GB for 21,015,324 passages
RESULT_BYTES = 800  # one retrieved passage in a contexts file (contents, id, score)
GZIP_RATIO = 0.35  # wiki-18.jsonl.gz / wiki-18.jsonl (English text; not read from the hub)
WIKI18_PASSAGES = 21_015_324
DEFAULT_SHARE = 0.9  # vLLM's gpu_memory_utilization when a profile sets none
FLASHRAG_QUESTIONS = {  # FlashRAG_datasets split sizes (the seeds' Table 4; anchors.md)
    "nq": {"train": 79_168, "dev": 8_757, "test": 3_610},
    "triviaqa": {"train": 78_785, "dev": 8_837, "test": 11_313},
    "hotpotqa": {"train": 90_447, "dev": 7_405},
    "2wikimultihopqa": {"train": 15_000, "dev": 12_576},
    "musique": {"train": 19_938, "dev": 2_417},
}
LLM_REFINERS = ("filco", "seer", "cot", "prompted_extractor", "eviomni", "eviomni_released")
OWN_ENGINE = ("eviomni", "eviomni_released")  # full checkpoints: an engine each; the rest share the base model's


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the formulas need of a model (its config.json); encoders only `params`, `stored_bytes` and `hidden`."""

    params: float
    stored_bytes: int = 2  # bytes per parameter on the hub: bf16 LLMs 2, fp32 encoders 4
    layers: int = 0
    hidden: int = 768
    kv_heads: int = 0
    head_dim: int = 128
    vocab: int = 0

    @property
    def weights(self) -> float:
        """Bytes on a GPU in bf16."""
        return 2 * self.params

    @property
    def kv_per_token(self) -> float:
        """KV-cache bytes of one token: keys and values of every layer in bf16."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


QWEN_1P5B = Shape(1.54e9, 2, 28, 1536, 2, 128, 151_936)
QWEN_7B = Shape(7.62e9, 2, 28, 3584, 4, 128, 152_064)
QWEN_32B = Shape(32.8e9, 2, 64, 5120, 8, 128, 152_064)
BERT_BASE = Shape(110e6, 4)
SHAPES = {
    "Qwen/Qwen2.5-1.5B-Instruct": QWEN_1P5B, "HIT-TMG/EviOmni-nq_train-1.5B": QWEN_1P5B,
    "Qwen/Qwen2.5-7B-Instruct": QWEN_7B, "HIT-TMG/EviOmni-nq_train-7B": QWEN_7B,
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3": QWEN_7B,
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3": QWEN_32B,
    "facebook/dpr-question_encoder-single-nq-base": BERT_BASE, "facebook/dpr-ctx_encoder-single-nq-base": BERT_BASE,
    "intfloat/e5-base-v2": BERT_BASE, "fangyuan/nq_extractive_compressor": BERT_BASE,
    "openai-community/gpt2": Shape(124e6, 4), "sentence-transformers/all-MiniLM-L6-v2": Shape(22.7e6, 4, hidden=384),
    "microsoft/llmlingua-2-xlm-roberta-large-meetingbank": Shape(560e6, 4, hidden=1024),
    "microsoft/deberta-v2-xlarge-mnli": Shape(885e6, 4, hidden=1536),
}


def shape(ref: str) -> Shape:
    if ref not in SHAPES:
        raise ValueError(f"repro.costs knows no shape for '{ref}'; add its parameters (and, for a generator, "
                         f"layers, hidden size, KV heads, vocabulary) to repro.costs.SHAPES")
    return SHAPES[ref]


@dataclasses.dataclass(frozen=True)
class Assumptions:
    """Throughputs of one A100-80GB (bf16) and the shape of the work; two sets bound the estimate."""

    name: str
    gpu_flops: float  # dense bf16 peak, FLOP/s
    bandwidth: float  # HBM bytes/s
    train_mfu: float  # share of the peak that training reaches
    prefill_mfu: float  # share of the peak of prompt processing and encoders
    bandwidth_efficiency: float  # share of the bandwidth a decode step reaches
    step_overhead: float  # s per vLLM decode step beyond its memory reads (CUDA graphs)
    eager_step_overhead: float  # the same with enforce_eager
    hf_step_overhead: float  # s per step of transformers' generate (SEER's sampler)
    generated_fraction: float  # mean new tokens / max new tokens of sampled and free-form outputs
    pad_to_max: bool  # training batches padded to the longest completion, encoder batches to max_length
    search_flops: float  # faiss-gpu Flat search, FLOP/s per GPU
    dp_efficiency: float  # transformers' DataParallel over the node's GPUs (LoRA SFT, DPO in one process)
    sync_seconds_per_gb: float  # GRPO: the policy's weights into the colocated vLLM engine, per generation batch
    stage_start: float  # s: a process, its imports (torch, transformers, vLLM), the papermill kernel
    light_stage_start: float  # s: the same for a stage that loads no model
    engine_start: float  # s: an engine's memory profiling, torch.compile and CUDA-graph capture
    eager_engine_start: float  # the same with enforce_eager
    disk_read: float  # bytes/s of weights read from local disk
    download: float  # bytes/s from the hub
    api_tokens_per_second: float  # one request to an OpenAI-compatible API (the AR study's teacher)


OPTIMISTIC = Assumptions(
    "optimistic", gpu_flops=312e12, bandwidth=2.0e12, train_mfu=0.40, prefill_mfu=0.50, bandwidth_efficiency=0.70,
    step_overhead=0.002, eager_step_overhead=0.006, hf_step_overhead=0.020, generated_fraction=0.4, pad_to_max=False,
    search_flops=40e12, dp_efficiency=0.7, sync_seconds_per_gb=0.5, stage_start=15, light_stage_start=10,
    engine_start=40, eager_engine_start=15, disk_read=2e9, download=200e6, api_tokens_per_second=40)
PESSIMISTIC = Assumptions(
    "pessimistic", gpu_flops=312e12, bandwidth=2.0e12, train_mfu=0.25, prefill_mfu=0.30, bandwidth_efficiency=0.50,
    step_overhead=0.005, eager_step_overhead=0.012, hf_step_overhead=0.040, generated_fraction=0.75, pad_to_max=True,
    search_flops=10e12, dp_efficiency=0.4, sync_seconds_per_gb=2.0, stage_start=30, light_stage_start=20,
    engine_start=90, eager_engine_start=30, disk_read=0.5e9, download=50e6, api_tokens_per_second=15)


# --- the formulas ------------------------------------------------------------------------------------------


def index_bytes(passages: int, dim: int) -> float:
    """A FAISS Flat index: one float32 vector per passage."""
    return passages * dim * 4


def decode_step_seconds(s: Shape, a: Assumptions, tp: int = 1, running: int = 1, context: float = 0,
                        overhead: float | None = None) -> float:
    """One decode step: the weights and the running sequences' KV cache read once, plus a fixed overhead."""
    reads = (s.weights + running * context * s.kv_per_token) / tp
    return reads / (a.bandwidth * a.bandwidth_efficiency) + (a.step_overhead if overhead is None else overhead)


def generation_seconds(s: Shape, a: Assumptions, prompts: int, prompt_tokens: float, max_new: int, tp: int = 1,
                       max_running: int = 256, overhead: float | None = None) -> float:
    """`prompts` generations of at most `max_new` tokens: the longest one bounds a small batch, the running
    sequences' throughput a large one; plus the prompts' prefill."""
    if prompts <= 0:
        return 0.0
    mean_new = a.generated_fraction * max_new
    running = min(prompts, max_running)
    steps = max(max_new, prompts * mean_new / running)
    step = decode_step_seconds(s, a, tp, running, prompt_tokens + mean_new / 2, overhead)
    return steps * step + 2 * s.params * prompts * prompt_tokens / (tp * a.gpu_flops * a.prefill_mfu)


def train_seconds(s: Shape, a: Assumptions, tokens: float, flops_per_param: float, gpus: float) -> float:
    return flops_per_param * s.params * tokens / (gpus * a.gpu_flops * a.train_mfu)


def encode_seconds(params: float, a: Assumptions, texts: float, tokens: float) -> float:
    """Forward passes of an encoder (or any prefill-only scoring) on one GPU."""
    return 2 * params * texts * tokens / (a.gpu_flops * a.prefill_mfu)


def search_seconds(a: Assumptions, queries: float, passages: int, dim: int, gpus: int) -> float:
    return 2 * queries * passages * dim / (gpus * a.search_flops)


def prompt_tokens(passages: int) -> float:
    return INSTRUCTION_TOKENS + passages * PASSAGE_TOKENS


# --- what a profile asks for -------------------------------------------------------------------------------


def capped(n: int, cap: int | None) -> int:
    return n if cap is None or cap < 0 else min(n, cap)


def questions(cfg: Profile, dataset: str, split: str) -> int:
    """Questions of `split` of a FlashRAG set after the profile's data.datasets limit."""
    spec = next(d for d in cfg.data.datasets if d.name == dataset)
    if spec.name not in FLASHRAG_QUESTIONS or spec.splits.get(split) not in FLASHRAG_QUESTIONS[spec.name]:
        raise ValueError(f"repro.costs knows no size for {dataset}/{split}; add it to FLASHRAG_QUESTIONS")
    return capped(FLASHRAG_QUESTIONS[spec.name][spec.splits[split]], spec.max_questions)


def corpus_passages(cfg: Profile) -> int:
    if Path(cfg.data.corpus.source) != remote.WIKI18:
        raise ValueError(f"repro.costs estimates profiles over {remote.WIKI18}; {cfg.name} reads "
                         f"{cfg.data.corpus.source}")
    return capped(WIKI18_PASSAGES, cfg.data.corpus.max_passages)


def node_gpus(cfg: Profile) -> int:
    """The GPUs of the node the profile is written for: its GRPO launcher's processes."""
    return max(1, accelerate_processes(cfg))


def zero_stage(cfg: Profile) -> int:
    """DeepSpeed's ZeRO stage of the profile's GRPO launcher (0: none)."""
    path = cfg.train.accelerate_config if cfg.train else None
    launcher = yaml.safe_load(Path(path).read_text()) if path and Path(path).exists() else {}
    file = (launcher.get("deepspeed_config") or {}).get("deepspeed_config_file")
    return int(json.loads(Path(file).read_text())["zero_optimization"]["stage"]) if file else 0


def engine_seconds(s: Shape, a: Assumptions, options: dict) -> float:
    start = a.eager_engine_start if options.get("enforce_eager") else a.engine_start
    return start + s.weights / a.disk_read


# --- stages ------------------------------------------------------------------------------------------------


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
    joined); DPR's .bin gets a safetensors copy (D116)."""
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
            download, disk = download + stored, disk + stored * (2 if row.build else 1)
    return StageCost("fetch (network, no GPU)", 0, download / a.download, 0, disk, 0, "FlashRAG files not counted")


def data_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Encode the corpus with every dense retriever not imported (one GPU), encode and search the questions of every
    open-domain split (index over the node's GPUs)."""
    r, n, gpus = cfg.retrieval, corpus_passages(cfg), node_gpus(cfg)
    imported = cfg.fetch.prebuilt_index if cfg.fetch and cfg.data.corpus.max_passages is None else None
    dense = {name: r.retrievers[name] for name in dict.fromkeys([*r.evaluate, r.agentic])
             if r.retrievers[name].method == "dense"}
    queries = sum(questions(cfg, d.name, split) for d in cfg.data.datasets if d.setting == "open" for split in d.splits)
    encode = search = 0.0
    memory, disk = 0.0, (n * PASSAGE_BYTES if cfg.data.corpus.max_passages else 0.0)
    for name, ret in dense.items():
        encoder = shape(ret.passage_encoder or ret.query_encoder)
        tokens = ret.passage_max_length if a.pad_to_max else PASSAGE_TOKENS
        if name != imported:
            encode += encode_seconds(encoder.params, a, n, tokens) + encoder.weights / a.disk_read
            disk += index_bytes(n, encoder.hidden)
        if name in r.evaluate:
            encode += encode_seconds(shape(ret.query_encoder).params, a, queries, ret.query_max_length)
            search += search_seconds(a, queries, n, encoder.hidden, gpus)
        memory = max(memory, encoder.weights + n * encoder.hidden * 2 / gpus)  # fp16 index shard (faiss-gpu)
    disk += queries * len(r.evaluate) * r.topk * RESULT_BYTES
    wall = a.stage_start + encode + search
    return StageCost("data", gpus, wall, wall - search + search * gpus, disk, memory,
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
    step = train_seconds(s, a, completions * (prompt + completion) * t.num_iterations, flops, n)
    dev = math.ceil(capped(questions(cfg, t.dataset, "dev"), t.dev_max_questions) / n)
    evaluations = int(t.evaluate_initial) + math.ceil(steps / t.save_steps)
    wall = (generations * (rollouts(t.per_device_batch_size * spg) + s.weights / GB * a.sync_seconds_per_gb)
            + steps * step + evaluations * rollouts(dev) + engine_seconds(s, a, {}) + 2 * s.weights / a.disk_read)
    return wall + (a.stage_start if t.accelerate_config else 0), steps  # accelerate launches its own workers


def grpo_memory(cfg: Profile, card: float) -> float:
    t, s, n = cfg.train, shape(cfg.models.extractor), node_gpus(cfg)
    p = s.params
    states = {0: 16 * p, 1: 4 * p + 12 * p / n, 2: 2 * p + 14 * p / n, 3: 16 * p / n}[zero_stage(cfg)]
    reference = (2 * p / (n if zero_stage(cfg) == 3 else 1)) if t.beta > 0 else 0
    tokens = t.per_device_batch_size * (prompt_tokens(cfg.retrieval.topk) + t.max_completion_length)
    activations = tokens * s.hidden * (2 * s.layers + 34 if t.gradient_checkpointing else 34 * s.layers)
    logprobs = t.per_device_batch_size * t.max_completion_length * s.vocab * 4
    colocated = t.vllm_gpu_memory_utilization * card if t.use_vllm and t.vllm_mode == "colocate" else 0
    return states + reference + activations + logprobs + colocated


def grpo_disk(cfg: Profile) -> float:
    """Checkpoints kept (bf16 weights + fp32 optimizer states) and the exported extractor."""
    p = shape(cfg.models.extractor).params
    return (cfg.train.save_total_limit or 2) * 14 * p + 2 * p


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
    n = node_gpus(cfg)
    wall += a.stage_start
    return StageCost("train_eviomni", n, wall, wall * n, grpo_disk(cfg), grpo_memory(cfg, card), f"{steps:,} steps",
                     GRPO_HINT, grpo_problems(cfg, card))


def lora_seconds(cfg: Profile, a: Assumptions, sft: LoRASFTConfig, model: str, examples: int, tokens: float,
                 flops_per_param: float = 4) -> float:
    """A LoRA run inside its stage's process (whose start the stage counts once); transformers' Trainer spreads each
    batch over the node's GPUs (DataParallel)."""
    n, s = node_gpus(cfg), shape(model)
    batch = sft.per_device_batch_size * sft.gradient_accumulation_steps * n
    seen = examples * sft.epochs if sft.max_steps <= 0 else min(examples * sft.epochs, sft.max_steps * batch)
    gpus = n * a.dp_efficiency if n > 1 else 1
    return s.weights / a.disk_read + train_seconds(s, a, seen * tokens, flops_per_param, gpus)


def lora_memory(sft: LoRASFTConfig, model: str, tokens: float) -> float:
    """bf16 weights, activations without checkpointing and fp32 logits of a micro-batch of the longest examples
    (longer ones than max_length are dropped)."""
    s = shape(model)
    return s.weights + sft.per_device_batch_size * min(tokens, sft.max_length) * (s.hidden * 34 * s.layers
                                                                                   + s.vocab * 4)


def qa_generator_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    q = cfg.qa_generator
    long = prompt_tokens(cfg.retrieval.topk) + ANSWER_TOKENS
    short = INSTRUCTION_TOKENS + ANSWER_TOKENS  # Table 12: the question alone
    per_question = [long if i == "passages" or a.pad_to_max else short for i in q.inputs]
    n = sum(capped(questions(cfg, d, q.split), q.max_train_questions) for d in q.datasets)
    wall = a.stage_start + lora_seconds(cfg, a, q, cfg.models.generator, n * len(per_question),
                                        sum(per_question) / len(per_question))
    return StageCost("qa_generator", node_gpus(cfg), wall, wall * node_gpus(cfg), 0,
                     lora_memory(q, cfg.models.generator, long), f"{n * len(per_question):,} examples",
                     "halve qa_generator.per_device_batch_size and double gradient_accumulation_steps")


def filco_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    f = cfg.filco
    n = sum(capped(questions(cfg, d, f.split), f.max_train_questions) for d in f.datasets)
    tokens = prompt_tokens(cfg.retrieval.topk) + 4 * ANSWER_TOKENS  # the silver sentences as the target
    wall = a.stage_start + lora_seconds(cfg, a, f, cfg.models.extractor, n, tokens)
    return StageCost("filco_train", node_gpus(cfg), wall, wall * node_gpus(cfg), 0,
                     lora_memory(f, cfg.models.extractor, tokens), f"{n:,} examples",
                     "halve filco.per_device_batch_size and double gradient_accumulation_steps")


def seer_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """M samples per question with transformers' generate on one GPU, the answerer's two log-likelihoods per
    candidate, then DPO on LoRA."""
    sr, s = cfg.seer, shape(cfg.models.extractor)
    n = sum(capped(questions(cfg, d, sr.split), sr.max_train_questions) for d in sr.datasets)
    prompt, running = prompt_tokens(cfg.retrieval.topk), sr.batch_size * sr.num_samples
    sample = math.ceil(n / sr.batch_size) * sr.max_new_tokens * decode_step_seconds(
        s, a, 1, running, prompt + sr.max_new_tokens / 2, a.hf_step_overhead)
    assess = encode_seconds(shape(cfg.models.generator).params, a, 2 * sr.num_samples * n, prompt)
    pair_tokens = 2 * (prompt + a.generated_fraction * sr.max_new_tokens)
    dpo = lora_seconds(cfg, a, sr, cfg.models.extractor, n * sr.max_pairs_per_question, pair_tokens, 6)
    wall = a.stage_start + sample + assess + dpo + 2 * s.weights / a.disk_read
    memory = 2 * s.weights + running * (prompt + sr.max_new_tokens) * s.kv_per_token
    return StageCost("seer_train", 1, wall, wall - dpo + dpo * node_gpus(cfg), 0, memory,
                     f"{n:,} questions x {sr.num_samples} samples", "lower seer.batch_size")


def study_cost(cfg: Profile, a: Assumptions, card: float, name: str, ev: EvaluationConfig,
               sets: list[tuple[int, int]], extra_engines: int = 0, section: str = "evaluation") -> StageCost:
    """Every method of `ev` on sets of (questions, passages per prompt): the refiner's output (LLM refiners decode,
    compressors score the passages), then the QA generator's answer; one engine per base model at once."""
    extractor, generator = shape(cfg.models.extractor), shape(cfg.models.generator)
    tp, share = ev.options.get("tensor_parallel_size", 1), ev.options.get("gpu_memory_utilization", DEFAULT_SHARE)
    overhead = a.eager_step_overhead if ev.options.get("enforce_eager") else a.step_overhead
    compressors = {"selective_context": cfg.baselines.selective_context.model, "recomp": cfg.baselines.recomp.model,
                   "llmlingua2": cfg.baselines.llmlingua2.model, "llmlingua2_standin": cfg.baselines.llmlingua2.standin}
    seconds = 0.0
    for method in ev.methods:
        for n, passages in sets:
            prompt = prompt_tokens(passages)
            if method in LLM_REFINERS:
                seconds += generation_seconds(extractor, a, n, prompt, ev.evidence_max_new_tokens, tp, 256, overhead)
            elif method in compressors:
                seconds += encode_seconds(shape(compressors[method]).params, a, n, passages * PASSAGE_TOKENS)
            answer_prompt = INSTRUCTION_TOKENS if method == "zero" else prompt
            seconds += generation_seconds(generator, a, n, answer_prompt, ev.answer_max_new_tokens, tp, 256, overhead)
    at_once = 1 + len(set(ev.methods) & set(OWN_ENGINE))
    engines = at_once + extra_engines  # started in all (the ablation's extractors one after another)
    loaded = [shape(compressors[m]) for m in ev.methods if m in compressors]
    wall = (a.stage_start + seconds + engines * engine_seconds(extractor, a, ev.options)
            + sum(s.params * s.stored_bytes for s in loaded) / a.disk_read)
    memory = at_once * share * card + sum(s.weights for s in loaded)
    key = f"params.yaml: profiles.{cfg.name}.{section}.options"
    return StageCost(name, tp, wall, wall * tp, 0, memory,
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
    same_process = a.stage_start * cost.gpus  # the check runs in the stage's process, with engines of its own
    return dataclasses.replace(cost, wall=cost.wall + check.wall - a.stage_start,
                               gpu_seconds=cost.gpu_seconds + check.gpu_seconds - same_process)


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
    tp = lat.options.get("tensor_parallel_size", 1)
    overhead = a.eager_step_overhead if lat.options.get("enforce_eager") else a.step_overhead
    batch = generation_seconds(s, a, lat.batch_size, prompt_tokens(cfg.retrieval.topk), lat.max_new_tokens, tp,
                               overhead=overhead)
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
    grpo = (grpo_memory(cfg, card), grpo_problems(cfg, card)) if runs else (0.0, ())
    return StageCost(stage, n, train + evaluation.wall, train * n + evaluation.gpu_seconds, len(runs) * grpo_disk(cfg),
                     max(grpo[0], evaluation.memory), note, f"{GRPO_HINT}; {evaluation.hint}",
                     grpo[1] + evaluation.problems)


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
    """One GRPO run of `length_tuning.max_steps` steps per (τ, γ), one after another; each run's checkpoints are
    deleted once its dev score is read, so the disk holds one run's at a time (D150)."""
    lt, n = cfg.length_tuning, node_gpus(cfg)
    pairs = len(lt.tau) * len(lt.gamma)
    wall, steps = grpo_wall(cfg, a, lt.max_steps)
    total = a.stage_start + pairs * wall
    return StageCost("length_tuning", n, total, total * n, grpo_disk(cfg), grpo_memory(cfg, card),
                     f"{pairs} GRPO runs of {steps:,} steps", GRPO_HINT, grpo_problems(cfg, card))


def agentic_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Each agent in each condition: `max_actions` searches and a final turn per item, the context growing by a
    turn and an observation each time; with the extractor, one extraction per search; Eval-RAR's evaluation step
    written separately, one more generation per search."""
    ag = cfg.agentic
    items = sum(capped(questions(cfg, d, ag.split), ag.n_items) for d in ag.datasets)
    extractor = shape(ag.extractor or cfg.models.released_extractor or cfg.models.extractor)
    tp = ag.agent_options.get("tensor_parallel_size", 1)
    overhead = a.eager_step_overhead if ag.agent_options.get("enforce_eager") else a.step_overhead
    turns, mean_new = ag.max_actions + 1, a.generated_fraction * ag.max_new_tokens
    observation = min(ag.max_obs_tokens, ag.topk * PASSAGE_TOKENS)
    with_extractor = "with" in ag.conditions
    extract = with_extractor * ag.max_actions * generation_seconds(
        extractor, a, items, prompt_tokens(ag.topk), ag.extractor_max_new_tokens, overhead=overhead)
    separate_evaluation = "eval_rar" in ag.conditions and ag.evaluate_step == "separate"
    runs = len(ag.conditions) + separate_evaluation * ag.max_actions / turns  # an evaluation costs about a turn
    seconds = engine_seconds(extractor, a, ag.extractor_options) if with_extractor else 0.0
    for agent in cfg.models.agents:
        s = shape(agent)
        turn = sum(generation_seconds(s, a, items, INSTRUCTION_TOKENS + i * (mean_new + observation), ag.max_new_tokens,
                                      tp, overhead=overhead) for i in range(turns))
        seconds += runs * turn + extract + engine_seconds(s, a, ag.agent_options)
    n, dim = corpus_passages(cfg), shape(cfg.retrieval.retrievers[cfg.retrieval.agentic].query_encoder).hidden
    search = search_seconds(a, len(ag.conditions) * len(cfg.models.agents) * items * ag.max_actions, n, dim,
                            node_gpus(cfg))
    agent_share = ag.agent_options.get("gpu_memory_utilization", DEFAULT_SHARE)
    extractor_share = ag.extractor_options.get("gpu_memory_utilization", DEFAULT_SHARE)
    memory = (agent_share + extractor_share) * card + n * dim * 2 / node_gpus(cfg)  # fp16 index shard (faiss-gpu)
    key = f"params.yaml: profiles.{cfg.name}.agentic"
    problems = engine_problems(f"{key}.agent_options + extractor_options", [
        (max((shape(m) for m in cfg.models.agents), key=lambda x: x.params), agent_share, tp),
        (extractor, extractor_share, ag.extractor_options.get("tensor_parallel_size", 1))], card)
    wall = a.stage_start + seconds + search
    return StageCost("agentic_search_r1", tp, wall, wall * tp, 0, memory,
                     f"{len(cfg.models.agents)} agent(s) x {len(ag.conditions)} conditions x {items:,} items",
                     "lower agentic.agent_options / extractor_options gpu_memory_utilization", problems)


def ar_train_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """The teacher's responses (an API, or a local engine), then the rational and vanilla LoRA runs."""
    t, ar = cfg.ar_study.teacher, cfg.ar_study
    n = capped(questions(cfg, t.dataset, t.split), t.questions)
    prompt, target = prompt_tokens(cfg.retrieval.topk), a.generated_fraction * t.max_new_tokens
    gpus, memory, teacher, problems = node_gpus(cfg), 0.0, 0.0, ()
    if t.backend == "openai":
        teacher = n * t.samples * target / (a.api_tokens_per_second * t.options.get("max_workers", 1))
    elif t.backend in ("vllm", "transformers"):
        s, tp = shape(t.model), t.options.get("tensor_parallel_size", 1)
        teacher = generation_seconds(s, a, n * t.samples, prompt, t.max_new_tokens, tp)
        teacher += engine_seconds(s, a, t.options)
        share = t.options.get("gpu_memory_utilization", DEFAULT_SHARE)
        memory = share * card
        problems = engine_problems(f"params.yaml: profiles.{cfg.name}.ar_study.teacher.options", [(s, share, tp)], card)
    tokens = prompt + target
    sft = 2 * lora_seconds(cfg, a, ar.sft, ar.student, n, tokens)  # in one process; every question kept: an upper bound
    memory = max(memory, lora_memory(ar.sft, ar.student, tokens))
    wall = a.stage_start + teacher + sft
    note = f"{n * t.samples:,} teacher responses" + (" over the API (no GPU)" if t.backend == "openai" else "")
    return StageCost("ar_study_train", gpus, wall, sft * gpus + (teacher if t.backend != "openai" else 0), 0, memory,
                     note, "halve ar_study.sft.per_device_batch_size and double gradient_accumulation_steps", problems)


def ar_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    e, s = cfg.ar_study.evaluation, shape(cfg.ar_study.student)
    n = sum(capped(questions(cfg, d, e.split), e.max_questions) for d in (e.in_distribution, e.out_of_distribution))
    tp = e.options.get("tensor_parallel_size", 1)
    overhead = a.eager_step_overhead if e.options.get("enforce_eager") else a.step_overhead
    variant = generation_seconds(s, a, n, prompt_tokens(cfg.retrieval.topk), e.max_new_tokens, tp, overhead=overhead)
    engines = 1 if e.backend == "vllm" else 2  # vLLM: one engine, the variants' adapters as LoRA requests (D94)
    wall = a.stage_start + 2 * variant + engines * engine_seconds(s, a, e.options)
    share = e.options.get("gpu_memory_utilization", DEFAULT_SHARE) if e.backend == "vllm" else 0
    problems = engine_problems(f"params.yaml: profiles.{cfg.name}.ar_study.evaluation.options", [(s, share, tp)],
                               card) if share else ()
    return StageCost("ar_study", tp, wall, wall * tp, 0, share * card, f"2 variants x {n:,} questions",
                     "lower ar_study.evaluation.options.gpu_memory_utilization", problems)


LIGHT_STAGES = ("assets", "length_rewards", "significance_reported", "retrieval_quality", "format_warmup",
                "training_dynamics", "case_inspection", "released_extractor")


def light_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Stages that load no model; `length_tuning: null` still starts its stage, which records "not requested"."""
    light = LIGHT_STAGES + (("length_tuning",) if cfg.length_tuning is None else ())
    return StageCost(f"{len(light)} light stages", 0, len(light) * a.light_stage_start, 0, 0, 0,
                     "CPU: " + ", ".join(light))


STAGES: list[tuple[str, Callable[[Profile, Assumptions, float], StageCost]]] = [
    ("fetch", fetch_stage), ("data", data_stage), ("train", train_stage), ("qa_generator", qa_generator_stage),
    ("filco", filco_stage), ("seer", seer_stage), ("evaluation", main_comparison_stage),
    ("distractor", distractor_stage), ("noise_robustness", noise_stage), ("latency", latency_stage),
    ("ablation", ablation_stage), ("reward_designs", reward_designs_stage), ("length_tuning", length_tuning_stage),
    ("agentic", agentic_stage),
    ("ar_study", ar_train_stage), ("ar_study", ar_stage),
    ("data", light_stage),
]  # (the profile section a stage needs, its cost)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A stage's range: (optimistic, pessimistic) wall seconds and GPU-seconds; disk, memory and what does not fit
    do not depend on the throughput assumptions."""

    stage: str
    gpus: int
    wall: tuple[float, float]
    gpu_seconds: tuple[float, float]
    disk: float
    memory: float
    note: str
    problems: tuple[str, ...]  # one line each: what cannot run on the card, and the key to change


def without_starts(a: Assumptions) -> Assumptions:
    """`a` with free process and engine starts: what the work itself costs."""
    return dataclasses.replace(a, stage_start=0, light_stage_start=0, engine_start=0, eager_engine_start=0,
                               disk_read=math.inf)


def estimate(cfg: Profile, card: float = 80 * GB, bounds: tuple[Assumptions, Assumptions] = (OPTIMISTIC, PESSIMISTIC)
             ) -> list[Estimate]:
    """One row per stage the profile configures, under the two `bounds`."""
    rows = []
    for section, cost in STAGES:
        if getattr(cfg, section, None) is None:
            continue
        low, high = (cost(cfg, a, card) for a in bounds)
        problems = tuple(f"{high.stage}: {p}" for p in high.problems) or (  # engine problems say why already
            (f"{high.stage}: about {high.memory / GB:.0f} GB per GPU > {card / GB:.0f} GB; {high.hint}",)
            if high.memory > card else ())
        rows.append(Estimate(high.stage, high.gpus, (low.wall, high.wall), (low.gpu_seconds, high.gpu_seconds),
                             high.disk, high.memory, high.note, problems))
    return rows


EXTRA_RUN_STAGES = ("ablation_answer_rewards", "reward_designs")  # the studies that train GRPO runs of their own


def totals(rows: list[Estimate], extra_runs: bool = True) -> dict:
    """Sums over the stages after fetching (with or without EXTRA_RUN_STAGES: Table 3's ablation and the reward-design
    study); disk over every stage."""
    chosen = [r for r in rows if not r.stage.startswith("fetch") and (extra_runs or r.stage not in EXTRA_RUN_STAGES)]
    return {"wall": tuple(sum(r.wall[i] for r in chosen) for i in (0, 1)),
            "gpu_seconds": tuple(sum(r.gpu_seconds[i] for r in chosen) for i in (0, 1)),
            "disk": sum(r.disk for r in rows), "memory": max((r.memory for r in chosen), default=0)}


def start_seconds(cfg: Profile, card: float = 80 * GB) -> tuple[float, float]:
    """The part of the total wall time that process and engine starts take, which no smaller size removes."""
    work = totals(estimate(cfg, card, (without_starts(OPTIMISTIC), without_starts(PESSIMISTIC))))["wall"]
    return tuple(t - w for t, w in zip(totals(estimate(cfg, card))["wall"], work))


def _range(values: tuple[float, float], unit: float) -> str:
    low, high = (v / unit for v in values)
    digits = 0 if high >= 100 else 1 if high >= 10 else 2
    return f"{low:.{digits}f}-{high:.{digits}f}"


def table(cfg: Profile, card: float = 80 * GB) -> str:
    """The estimate as a markdown table with totals (with and without the studies of extra GRPO runs), then what does
    not fit."""
    rows = estimate(cfg, card)
    unit, label = (60, "min") if totals(rows)["wall"][1] < 4 * 3600 else (3600, "h")
    lines = [f"`{cfg.name}`: ESTIMATES on one node of {node_gpus(cfg)} A100 GPU(s) of {card / GB:.0f} GB "
             f"(optimistic-pessimistic; `python -m repro.costs --profile {cfg.name} --gpu-memory {card / GB:.0f}`)",
             "", f"| stage | GPUs | GPU-{label} | wall {label} | disk GB | GB per GPU | notes |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r.stage} | {r.gpus} | {_range(r.gpu_seconds, unit)} | {_range(r.wall, unit)} | "
                     f"{r.disk / GB:.1f} | {r.memory / GB:.0f}{' (!)' if r.problems else ''} | {r.note} |")
    for name, t in (("total", totals(rows)),
                    ("total without Table 3's ablation and the reward designs", totals(rows, extra_runs=False))):
        lines.append(f"| **{name}** | | {_range(t['gpu_seconds'], unit)} | {_range(t['wall'], unit)} | "
                     f"{t['disk'] / GB:.0f} | {t['memory'] / GB:.0f} | |")
    lines.append(f"| of the total, process and engine starts | | | {_range(start_seconds(cfg, card), unit)} | | | |")
    problems = list(dict.fromkeys(p for r in rows for p in r.problems))
    if problems:
        lines += ["", "(!) does not fit as configured:", *(f"- {p}" for p in problems)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ESTIMATED GPU-hours, wall time, disk and GPU memory per stage of a "
                                                 "profile (formulas and assumptions: repro/costs.py, D137)")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    parser.add_argument("--gpu-memory", type=float, default=80, help="GB per GPU (default 80; try 40)")
    args = parser.parse_args(argv)
    print(table(load_profile(args.profile), args.gpu_memory * GB))


if __name__ == "__main__":
    main()
