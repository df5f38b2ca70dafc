"""ESTIMATED cost of running a profile on GPUs: GPU-hours, wall time, disk and GPU memory per stage (D137).

    python -m repro.costs --profile paper-1p5b [--gpu-memory 40] [--gpus 8]
    python -m repro.costs --markdown            # writes docs/gpu-costs.md: the tables of PAGE_PROFILES

Nothing here is measured: no GPU was available. Every figure is a formula over the profile's sizes (questions,
passages, steps, lengths, models) and the `Assumptions` below, computed twice, with an OPTIMISTIC and a PESSIMISTIC
set, to give a range. The formulas (P = parameters, n = GPUs a stage keeps busy):

- weights: P x 2 bytes in bf16 on a GPU, P x bytes as stored on the hub on disk; a Flat index: passages x dim x 4
  bytes; the corpus: passages x `PASSAGE_BYTES`; a checkpoint as transformers and DeepSpeed write it
  (`checkpoint_bytes`: 16P under ZeRO-2, 14P under ZeRO-3, a LoRA run's adapter and its optimizer states only), as
  many as `save_total_limit` keeps plus the one written before the oldest is rotated away (`run_disk`), and the
  exported model;
- decoding (vLLM, and transformers' generate for SEER's sampler on a transformers evaluation backend): one step reads
  the weights and the KV cache of the running sequences once, step = (2P + running x context x KV bytes per token) /
  tp / (bandwidth x efficiency) + overhead; N prompts of at most L new tokens (mean m) take max(L, N x m / running)
  steps, plus the prompts' prefill, 2P FLOPs per token. The stages send their prompts in calls of a resumable chunk
  each (`chunk_size`), and an engine started with `data_parallel` (R replicas of tp GPUs each, `repro.sharding`) cuts
  every call into R slices answered at once, so a call takes as long as its largest slice, ceil(call / R) prompts
  (`calls_seconds`); the replicas start at once, in one engine start's wall time;
- training: FLOPs per token x P x tokens / (n x peak x MFU); GRPO 6P (forward and backward) + 2P (recomputed
  activations, gradient checkpointing) + 2P (reference model, beta > 0) + 2P (old policy, when a generation batch
  spans several optimizer steps); LoRA SFT 4P (no weight gradients of the frozen base), DPO 6P (+ the reference
  forward), over the DDP processes of the run's launcher at `dp_efficiency`. tokens = completions x (prompt +
  completion); steps = epochs x questions x G / completions per step;
- encoding the corpus: 2P x passages x passage tokens over the node's GPUs (a copy of the encoder on each, at
  `dp_efficiency`), the questions on one; Flat search: 2 x queries x passages x dim FLOPs over the node's GPUs
  (faiss-gpu shards the index);
- GPU memory per GPU: GRPO's model states under ZeRO stage z (0: 16P; 2: 2P + 14P/n; 3: 16P/n), a bf16 reference
  model, checkpointed activations (micro-batch x sequence x hidden x (2 x layers + 34) bytes), fp32 log-probs over
  the completion (micro-batch x completion x vocab x 4) and the colocated vLLM share x card; an inference stage:
  one engine per base model at once (the studies keep them until they end) x its share x card, on each GPU of
  each replica;
- fixed costs: each stage starts a process (imports, papermill), and so does each launch of training workers;
  each engine reads its weights and profiles memory (and captures CUDA graphs unless `enforce_eager`).

Sizes the profile does not hold are constants here: FlashRAG's split sizes, wiki-18's passage count, the models'
shapes (`SHAPES`, from their config.json). Stages run one after another, as `dvc repro` runs them, so the node's
wall time is their sum; the stages without a formula here (dvc.yaml's others, and those of a study set to null)
count their process start. GPU-hours busy count the GPUs a stage keeps busy (a study's engine replicas: every GPU of
the node with `data_parallel: auto`; Table 4's timing: one); GPU-hours held count the node's GPUs for the whole wall
time, which is what a rented node bills. The node has as many GPUs as the profile's largest launcher starts
processes (`repro.launchers.node_gpus`), or `--gpus`. Profiles that run on a CPU (tiny, ci, the rehearsal) are not
estimated (`covers`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from repro import launchers, remote, sharding
from repro.assets import EXTERNAL_DIR, is_hub_id
from repro.config import EvaluationConfig, LoRASFTConfig, Profile, is_main_design_run, is_main_run, load_profile
from repro.io import PIPELINE_FILE, pipeline_stages, write_text
from repro.registry import METHODS, settings_of

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
LLM_REFINERS = tuple(k for k, m in METHODS.items() if m.cost in ("llm", "llm_own_engine"))  # repro.registry.COSTS
OWN_ENGINE = tuple(k for k, m in METHODS.items() if m.cost == "llm_own_engine")  # an engine each; the rest share one


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
    intermediate: int = 0  # the MLP's width (LoRA on gate/up/down_proj)
    safetensors: bool = True  # False: the hub repo ships only pytorch_model.bin, which the fetch converts (D116)

    @property
    def weights(self) -> float:
        """Bytes on a GPU in bf16."""
        return 2 * self.params

    @property
    def kv_per_token(self) -> float:
        """KV-cache bytes of one token: keys and values of every layer in bf16."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


QWEN_1P5B = Shape(1.54e9, 2, 28, 1536, 2, 128, 151_936, 8960)
QWEN_7B = Shape(7.62e9, 2, 28, 3584, 4, 128, 152_064, 18_944)
QWEN_32B = Shape(32.8e9, 2, 64, 5120, 8, 128, 152_064, 27_648)
BERT_BASE = Shape(110e6, 4)
BERT_BASE_BIN = dataclasses.replace(BERT_BASE, safetensors=False)
SHAPES = {
    "Qwen/Qwen2.5-1.5B-Instruct": QWEN_1P5B, "HIT-TMG/EviOmni-nq_train-1.5B": QWEN_1P5B,
    "Qwen/Qwen2.5-7B-Instruct": QWEN_7B, "HIT-TMG/EviOmni-nq_train-7B": QWEN_7B,
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3": QWEN_7B,
    "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3": QWEN_32B,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": QWEN_32B,  # the AR study's local teacher (D140)
    "facebook/dpr-question_encoder-single-nq-base": BERT_BASE_BIN,
    "facebook/dpr-ctx_encoder-single-nq-base": BERT_BASE_BIN,
    "intfloat/e5-base-v2": BERT_BASE, "fangyuan/nq_extractive_compressor": BERT_BASE_BIN,
    "openai-community/gpt2": Shape(124e6, 4), "sentence-transformers/all-MiniLM-L6-v2": Shape(22.7e6, 4, hidden=384),
    "microsoft/llmlingua-2-xlm-roberta-large-meetingbank": Shape(560e6, 4, hidden=1024),
    "microsoft/deberta-v2-xlarge-mnli": Shape(885e6, 4, hidden=1536, safetensors=False),
}


def shape(ref: str) -> Shape:
    if ref not in SHAPES:
        raise ValueError(f"repro.costs knows no shape for '{ref}'; add its parameters (and, for a generator, "
                         f"layers, hidden size, KV heads, vocabulary) to repro.costs.SHAPES")
    return SHAPES[ref]


@dataclasses.dataclass(frozen=True)
class Assumptions:
    """Throughputs of one A100-80GB (bf16) and the shape of the work; two sets bound the estimate.

    `dp_efficiency` (0.9 / 0.75) covers the two jobs split over the node's GPUs with a whole model on each: the LoRA
    runs' DDP processes all-reduce only the adapter's gradients (a few MB a step) and wait for the slowest rank; the
    corpus encoder's copies (one thread per GPU in one process, `repro.retrieval.encoders`) share the process's CPU
    time for tokenising and wait for the last batch. Neither exchanges much over NVLink, hence near-linear scaling;
    the pessimistic set leaves a quarter to the CPU side and stragglers."""

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
    dp_efficiency: float  # n GPUs doing n slices of one job, each with a whole copy of the model, reach n x this
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
    search_flops=40e12, dp_efficiency=0.9, sync_seconds_per_gb=0.5, stage_start=15, light_stage_start=10,
    engine_start=40, eager_engine_start=15, disk_read=2e9, download=200e6, api_tokens_per_second=40)
PESSIMISTIC = Assumptions(
    "pessimistic", gpu_flops=312e12, bandwidth=2.0e12, train_mfu=0.25, prefill_mfu=0.30, bandwidth_efficiency=0.50,
    step_overhead=0.005, eager_step_overhead=0.012, hf_step_overhead=0.040, generated_fraction=0.75, pad_to_max=True,
    search_flops=10e12, dp_efficiency=0.75, sync_seconds_per_gb=2.0, stage_start=30, light_stage_start=20,
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


def calls_seconds(s: Shape, a: Assumptions, prompts: int, per_call: int, replicas: int, prompt_tokens: float,
                  max_new: int, tp: int = 1, overhead: float | None = None, samples: int = 1) -> float:
    """`prompts` sent in calls of `per_call` (a stage's resumable chunks, the last one the rest), each call cut into
    `replicas` slices answered at once (`repro.sharding.shard_bounds`): a call lasts as long as its largest slice,
    ceil(call / replicas) prompts of `samples` completions each (vLLM's `n`)."""
    full, rest = divmod(prompts, per_call)

    def call(size: int) -> float:
        return generation_seconds(s, a, math.ceil(size / replicas) * samples, prompt_tokens, max_new, tp,
                                  overhead=overhead)

    return full * call(per_call) + call(rest)


def spread(seconds: float, gpus: int, a: Assumptions) -> float:
    """One GPU's `seconds` of work cut into slices over `gpus` GPUs (DDP, the corpus encoder's copies)."""
    return seconds / (gpus * a.dp_efficiency) if gpus > 1 else seconds


def train_seconds(s: Shape, a: Assumptions, tokens: float, flops_per_param: float, gpus: float) -> float:
    return flops_per_param * s.params * tokens / (gpus * a.gpu_flops * a.train_mfu)


def encode_seconds(params: float, a: Assumptions, texts: float, tokens: float) -> float:
    """Forward passes of an encoder (or any prefill-only scoring) on one GPU."""
    return 2 * params * texts * tokens / (a.gpu_flops * a.prefill_mfu)


def search_seconds(a: Assumptions, queries: float, passages: int, dim: int, gpus: int) -> float:
    return 2 * queries * passages * dim / (gpus * a.search_flops)


def prompt_tokens(passages: int) -> float:
    return INSTRUCTION_TOKENS + passages * PASSAGE_TOKENS


def lora_params(s: Shape, rank: int, modules: Sequence[str]) -> float:
    """A LoRA adapter's parameters: rank x (in + out features) of each target module in each layer (Qwen2's
    projections: q and o hidden x hidden, k and v hidden x KV heads x head size, the MLP's hidden x intermediate)."""
    kv, mlp = s.kv_heads * s.head_dim, s.hidden + s.intermediate
    features = {"q_proj": 2 * s.hidden, "o_proj": 2 * s.hidden, "k_proj": s.hidden + kv, "v_proj": s.hidden + kv,
                "gate_proj": mlp, "up_proj": mlp, "down_proj": mlp}
    unknown = sorted(set(modules) - set(features))
    if unknown:
        raise ValueError(f"repro.costs.lora_params knows no LoRA target module {unknown}; add its in + out features")
    return s.layers * rank * sum(features[m] for m in modules)


ADAM_STATES = 12  # bytes per trained parameter in DeepSpeed's optimizer files: fp32 master weights, exp_avg, exp_avg_sq


def checkpoint_bytes(trained: float, zero: int | None, lora: bool = False) -> float:
    """One transformers checkpoint of a bf16 run that trains `trained` parameters (the whole model's, or a LoRA
    adapter's), without its tokenizer, scheduler, RNG and trainer-state files (megabytes).

    Under DeepSpeed (`zero`: its ZeRO stage), `Trainer._save_checkpoint` calls `save_model`, then
    `_save_optimizer_and_scheduler`, i.e. the engine's `save_checkpoint` (transformers 5.17 trainer.py;
    DeepSpeed runtime/engine.py):
    - `_save_zero_checkpoint`: each rank's `bf16_zero_pp_rank_<r>_mp_rank_00_optim_states.pt`, its partition of the
      fp32 master weights and Adam's exp_avg and exp_avg_sq (`single_partition_of_fp32_groups` and the base optimizer
      state in zero/stage_1_and_2.py; `fp32_flat_groups` and the optimizer state in zero/stage3.py): 12 bytes per
      trained parameter, summed over the ranks;
    - `_save_checkpoint`: `mp_rank_00_model_states.pt`, the module's state dict in bf16 (the engine casts the module,
      `_configure_distributed_model`), 2 bytes per parameter, only the trained ones of a PEFT model (transformers
      passes `exclude_frozen_parameters`); under ZeRO-3 each rank's `zero_pp_rank_<r>_..._model_states.pt` holds
      partitioned parameters, empty tensors (`free_param` in zero/partition_parameters.py): nothing;
    - `save_model`: the 16-bit weights (ZeRO-3: gathered, `stage3_gather_16bit_weights_on_model_save`), 2 bytes per
      parameter saved (a PEFT model saves its adapter).
    Without DeepSpeed: `save_model`'s weights (a bf16 model: 2 bytes; a LoRA adapter, which PEFT upcasts to fp32: 4)
    and `optimizer.pt`, torch's AdamW exp_avg and exp_avg_sq in the trained parameters' dtype."""
    if zero is None:
        return 3 * (4 if lora else 2) * trained  # the weights and two moments
    return (2 + (2 if zero < 3 else 0) + ADAM_STATES) * trained


def run_disk(checkpoint: float, saves: int, limit: int | None, exported: float) -> tuple[float, float]:
    """(bytes a run leaves, bytes beyond them while it runs) for `saves` checkpoints under `save_total_limit` `limit`
    and an exported model. transformers' `Trainer._save_checkpoint` writes a checkpoint, then `rotate_checkpoints`
    (trainer_utils.py) deletes the oldest beyond the limit, never the latest nor `best_model_checkpoint` (which
    `sort_checkpoints` moves out of the rotation): a limit of 2 or more keeps `limit` checkpoints, the best among them,
    and holds `limit + 1` while a save is written; None keeps every one."""
    kept, during = (saves, saves) if limit is None else (min(saves, limit), min(saves, limit + 1))
    left = kept * checkpoint + exported
    return left, max(0.0, during * checkpoint - left)


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
    """The GPUs of the node the profile is written for: the most processes any of its launchers starts. The stages'
    throughput counts them; `--gpus` only changes what is held."""
    return launchers.node_gpus(cfg)


def zero_stage(cfg: Profile) -> int:
    """DeepSpeed's ZeRO stage of the profile's GRPO launcher (0: none)."""
    return launchers.zero_stage(cfg.train.accelerate_config if cfg.train else None) or 0


def engine_seconds(s: Shape, a: Assumptions, options: dict) -> float:
    """An engine's start: its replicas start at once, each reading the weights (from the page cache after the first)."""
    start = a.eager_engine_start if options.get("enforce_eager") else a.engine_start
    return start + s.weights / a.disk_read


def step_overhead(a: Assumptions, options: dict) -> float:
    return a.eager_step_overhead if options.get("enforce_eager") else a.step_overhead


def tensor_parallel(options: dict) -> int:
    return options.get("tensor_parallel_size") or 1


def replicas(cfg: Profile, backend: str, options: dict) -> int:
    """Replicas of an engine with `options` on the node's GPUs, by the engine's rule (`repro.sharding.replica_count`
    of `data_parallel`); 1 for a backend other than vLLM."""
    if backend != "vllm":
        return 1
    return sharding.replica_count(options.get("data_parallel"), tensor_parallel(options), node_gpus(cfg))


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
    copy (`repro.remote.bin_to_safetensors`, D116)."""
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
        memory = max(memory, encoder.weights + n * encoder.hidden * 2 / gpus)  # fp16 index shard (faiss-gpu)
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
    step = train_seconds(s, a, completions * (prompt + completion) * t.num_iterations, flops, n)
    dev = math.ceil(capped(questions(cfg, t.dataset, "dev"), t.dev_max_questions) / n)
    evaluations = 0 if t.selection_metric is None else int(t.evaluate_initial) + math.ceil(steps / t.save_steps)
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
    return StageCost("train_eviomni", n, wall, wall * n, disk, grpo_memory(cfg, card), f"{steps:,} steps",
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
    """A LoRA run in the DDP worker processes of `sft.accelerate_config` (`repro.train.sft.train_lora`): the weights
    read, then the training spread over the processes. The launch's start is the stage's to count, once for the
    runs it trains one after the other."""
    s = shape(model)
    seen, _ = lora_examples(sft, examples)
    return s.weights / a.disk_read + spread(train_seconds(s, a, seen * tokens, flops_per_param, 1),
                                            lora_processes(sft), a)


def lora_disk(sft: LoRASFTConfig, model: str, examples: int) -> tuple[float, float]:
    """`run_disk` of a LoRA run: checkpoints of the adapter and its optimizer states, and the adapter/ directory
    (PEFT's `save_pretrained`, in the adapter's dtype: fp32, bf16 under DeepSpeed)."""
    adapter = lora_params(shape(model), sft.lora_rank, sft.target_modules)
    zero = launchers.zero_stage(sft.accelerate_config)
    _, steps = lora_examples(sft, examples)
    return run_disk(checkpoint_bytes(adapter, zero, lora=True), math.ceil(steps / sft.save_steps),
                    sft.save_total_limit, adapter * (4 if zero is None else 2))


def lora_memory(sft: LoRASFTConfig, model: str, tokens: float, sequences: int = 1) -> float:
    """bf16 weights, activations without checkpointing and fp32 logits of a micro-batch of the longest examples
    (longer ones than max_length are dropped), each example `sequences` sequences (DPO: chosen and rejected)."""
    s = shape(model)
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
    return StageCost("qa_generator", gpus, wall, wall * gpus, disk, lora_memory(q, cfg.models.generator, long),
                     f"{n * len(per_question):,} examples",
                     "halve qa_generator.per_device_batch_size and double gradient_accumulation_steps", (), scratch)


def filco_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    f = cfg.filco
    n = sum(capped(questions(cfg, d, f.split), f.max_train_questions) for d in f.datasets)
    tokens = prompt_tokens(cfg.retrieval.topk) + 4 * ANSWER_TOKENS  # the silver sentences as the target
    wall = 2 * a.stage_start + lora_seconds(a, f, cfg.models.extractor, n, tokens)  # the stage's and the launch's
    disk, scratch = lora_disk(f, cfg.models.extractor, n)
    gpus = lora_processes(f)
    return StageCost("filco_train", gpus, wall, wall * gpus, disk, lora_memory(f, cfg.models.extractor, tokens),
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
    dpo_memory = lora_memory(sr, cfg.models.extractor, pair_tokens / 2, sequences=2)  # after the sampling
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
    grpo = (grpo_memory(cfg, card), grpo_problems(cfg, card)) if runs else (0.0, ())
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
    return StageCost("length_tuning", n, total, total * n, 0, grpo_memory(cfg, card),
                     f"{pairs} GRPO runs of {steps:,} steps", GRPO_HINT, grpo_problems(cfg, card),
                     sum(grpo_disk(cfg, steps)))


AGENTIC_CHUNK_BATCHES = 8  # repro.agentic.study.CHUNK_BATCHES: items per resumable chunk, in agentic.batch_size


def agentic_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Each agent in each condition, dataset by dataset in chunks of AGENTIC_CHUNK_BATCHES x `batch_size` items
    (`repro.agentic.study.run_study`): `max_actions` searches and a final turn per item, one call per turn for the
    chunk on the agent's replicas, the context growing by a turn and an observation each time (every item active to
    the end: an upper bound); with the extractor, one extraction call per search on its replicas; Eval-RAR's
    evaluation step written separately, one more generation per search."""
    ag = cfg.agentic
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
    memory = (agent_share + extractor_share) * card + n * dim * 2 / node_gpus(cfg)  # fp16 index shard (faiss-gpu)
    key = f"params.yaml: profiles.{cfg.name}.agentic"
    problems = engine_problems(f"{key}.agent_options + extractor_options", [
        (max((shape(m) for m in cfg.models.agents), key=lambda x: x.params), agent_share, tp),
        (extractor, extractor_share, extractor_tp)], card)
    wall = a.stage_start + seconds + search
    gpus = max(agents * tp, extractors * extractor_tp if with_extractor else 0)
    return StageCost("agentic_search_r1", gpus, wall, wall * gpus, 0, memory,
                     f"{len(cfg.models.agents)} agent(s) x {len(ag.conditions)} conditions x {sum(items):,} items",
                     "lower agentic.agent_options / extractor_options gpu_memory_utilization", problems)


def ar_train_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """The teacher's responses in calls of `teacher.chunk_size` questions (an API, or a local engine over its
    replicas), then the rational and vanilla LoRA runs, one after the other in one launch of their workers."""
    t, ar = cfg.ar_study.teacher, cfg.ar_study
    n = capped(questions(cfg, t.dataset, t.split), t.questions)
    prompt, target = prompt_tokens(cfg.retrieval.topk), a.generated_fraction * t.max_new_tokens
    memory, teacher, teacher_gpus, problems = 0.0, 0.0, 0, ()
    if t.backend == "openai":
        teacher = n * t.samples * target / (a.api_tokens_per_second * t.options.get("max_workers", 1))
    elif t.backend in ("vllm", "transformers"):
        s, tp, count = shape(t.model), tensor_parallel(t.options), replicas(cfg, t.backend, t.options)
        teacher = calls_seconds(s, a, n, t.chunk_size, count, prompt, t.max_new_tokens, tp,
                                step_overhead(a, t.options), t.samples) + engine_seconds(s, a, t.options)
        teacher_gpus = count * tp
        share = t.options.get("gpu_memory_utilization", DEFAULT_SHARE)
        memory = share * card
        problems = engine_problems(f"params.yaml: profiles.{cfg.name}.ar_study.teacher.options", [(s, share, tp)], card)
    tokens = prompt + target
    sft = a.stage_start + 2 * lora_seconds(a, ar.sft, ar.student, n, tokens)  # every question kept: an upper bound
    memory = max(memory, lora_memory(ar.sft, ar.student, tokens))
    wall = a.stage_start + teacher + sft
    note = f"{n * t.samples:,} teacher responses" + (" over the API (no GPU)" if t.backend == "openai" else "")
    disk, scratch = lora_disk(ar.sft, ar.student, n)  # each of the two runs, one after the other
    gpus = lora_processes(ar.sft)
    return StageCost("ar_study_train", max(gpus, teacher_gpus), wall, sft * gpus + teacher * teacher_gpus, 2 * disk,
                     memory, note, "halve ar_study.sft.per_device_batch_size and double gradient_accumulation_steps",
                     problems, scratch)


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


def released_stage(cfg: Profile, a: Assumptions, card: float) -> StageCost:
    """Each released checkpoint the profile uses (`released_references`), checked before use (D179): its engine on
    the evaluation's backend and options, then Table 14 on `released_check.questions` questions in one call, one
    checkpoint after the other (`repro.evaluation.released.run_check`). Without one, the stage records a null
    reference: a light stage."""
    refs, ev, check = released_references(cfg), cfg.evaluation, cfg.released_check
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
    """The released checkpoints the profile checks, by `repro.evaluation.released.checked_references`' rule:
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


def configured(section: str) -> Callable[[Profile], bool]:
    return lambda cfg: getattr(cfg, section, None) is not None


def checks_released(cfg: Profile) -> bool:
    return cfg.released_check is not None and cfg.evaluation is not None and bool(released_references(cfg))


FETCH = "fetch"  # `python -m repro.remote fetch`, before `dvc repro`: the one costed step that is not a dvc.yaml stage
# stage: (whether the profile gives it work, its cost), for `fetch` and the dvc.yaml stages that load a model; the
# stages come from dvc.yaml in its order (`repro.io.pipeline_stages`), and those without a row here are light
STAGE_COSTS: dict[str, tuple[Callable[[Profile], bool], Callable[[Profile, Assumptions, float], StageCost]]] = {
    FETCH: (configured("fetch"), fetch_stage), "data": (configured("data"), data_stage),
    "train_eviomni": (configured("train"), train_stage), "length_tuning": (configured("length_tuning"),
                                                                           length_tuning_stage),
    "qa_generator": (configured("qa_generator"), qa_generator_stage), "filco_train": (configured("filco"), filco_stage),
    "seer_train": (configured("seer"), seer_stage), "released_extractor": (checks_released, released_stage),
    "main_comparison": (configured("evaluation"), main_comparison_stage),
    "ablation_answer_rewards": (configured("ablation"), ablation_stage),
    "reward_designs": (configured("reward_designs"), reward_designs_stage),
    "distractor_setting": (configured("distractor"), distractor_stage),
    "noise_robustness": (configured("noise_robustness"), noise_stage), "latency": (configured("latency"), latency_stage),
    "agentic_search_r1": (configured("agentic"), agentic_stage),
    "ar_study_train": (configured("ar_study"), ar_train_stage), "ar_study": (configured("ar_study"), ar_stage),
}


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A stage's range: (optimistic, pessimistic) wall seconds and GPU-seconds busy; disk, memory and what does not fit
    do not depend on the throughput assumptions."""

    stage: str
    gpus: int
    wall: tuple[float, float]
    gpu_seconds: tuple[float, float]
    disk: float
    memory: float
    note: str
    problems: tuple[str, ...]  # one line each: what cannot run on the card, and the key to change
    scratch: float = 0.0  # bytes beyond `disk` while the stage runs


def without_starts(a: Assumptions) -> Assumptions:
    """`a` with free process and engine starts: what the work itself costs."""
    return dataclasses.replace(a, stage_start=0, light_stage_start=0, engine_start=0, eager_engine_start=0,
                               disk_read=math.inf)


def estimate(cfg: Profile, card: float = 80 * GB, bounds: tuple[Assumptions, Assumptions] = (OPTIMISTIC, PESSIMISTIC)
             ) -> list[Estimate]:
    """One row per stage the profile gives work, under the two `bounds`, then one for the light stages; a profile the
    model does not estimate (`covers`) is a ValueError that says why."""
    if reason := uncovered(cfg):
        raise ValueError(reason)
    steps = [FETCH, *pipeline_stages()]
    ranged = [tuple(STAGE_COSTS[name][1](cfg, a, card) for a in bounds) for name in steps
              if name in STAGE_COSTS and STAGE_COSTS[name][0](cfg)]
    light = [name for name in steps[1:] if name not in {high.stage for _, high in ranged}]
    rows = []
    for low, high in [*ranged, tuple(light_stage(light, a) for a in bounds)]:
        problems = tuple(f"{high.stage}: {p}" for p in high.problems) or (  # engine problems say why already
            (f"{high.stage}: about {high.memory / GB:.0f} GB per GPU > {card / GB:.0f} GB; {high.hint}",)
            if high.memory > card else ())
        rows.append(Estimate(high.stage, high.gpus, (low.wall, high.wall), (low.gpu_seconds, high.gpu_seconds),
                             high.disk, high.memory, high.note, problems, high.scratch))
    return rows


EXTRA_RUN_STAGES = ("ablation_answer_rewards", "reward_designs")  # the studies that train GRPO runs of their own


def totals(rows: list[Estimate], extra_runs: bool = True, node: int = 1) -> dict:
    """Sums over the stages after fetching (with or without EXTRA_RUN_STAGES: Table 3's ablation and the reward-design
    study): wall time, GPU-seconds busy, GPU-seconds held (`node` GPUs for the whole wall time); disk over every stage
    at its peak: what the stages leave plus the largest transient (a checkpoint written before rotation)."""
    kept = [r for r in rows if extra_runs or r.stage not in EXTRA_RUN_STAGES]
    chosen = [r for r in kept if r.stage != "fetch"]
    wall = tuple(sum(r.wall[i] for r in chosen) for i in (0, 1))
    return {"wall": wall, "gpu_seconds": tuple(sum(r.gpu_seconds[i] for r in chosen) for i in (0, 1)),
            "held": tuple(node * w for w in wall),
            "disk": sum(r.disk for r in kept) + max((r.scratch for r in kept), default=0.0),
            "memory": max((r.memory for r in chosen), default=0)}


def start_seconds(cfg: Profile, card: float = 80 * GB) -> tuple[float, float]:
    """The part of the total wall time that process and engine starts take, which no smaller size removes."""
    work = totals(estimate(cfg, card, (without_starts(OPTIMISTIC), without_starts(PESSIMISTIC))))["wall"]
    return tuple(t - w for t, w in zip(totals(estimate(cfg, card))["wall"], work))


def held_gpus(cfg: Profile, gpus: int | None = None) -> int:
    """The GPUs of the node: `gpus`, or the profile's largest launcher; a node with fewer cannot run that launcher."""
    need = node_gpus(cfg)
    if gpus is None:
        return need
    if gpus < need:
        key, path = max(launchers.launchers(cfg).items(), key=lambda item: launchers.processes(item[1]))
        raise ValueError(f"--gpus {gpus}: {key}: {path} launches {need} processes; set num_processes there")
    return gpus


def _range(values: tuple[float, float], unit: float) -> str:
    low, high = (v / unit for v in values)
    digits = 0 if high >= 100 else 1 if high >= 10 else 2
    return f"{low:.{digits}f}-{high:.{digits}f}"


LEGEND = ("GPU-hours busy count the GPUs a stage keeps busy, GPU-hours held the node's GPUs for the whole wall "
          "time (what a rented node bills); disk is what a stage leaves, and the totals add the largest checkpoint in "
          "flight (written before the oldest is rotated away); the totals leave out the fetch.")


def ablation_line(cfg: Profile, rows: list[Estimate], unit: float, label: str, node: int) -> str:
    """What Table 3's ablation costs and the key that switches it off."""
    if cfg.ablation is None:
        return "Table 3's ablation: not requested (`ablation: null`); its stage records so and trains nothing."
    row = next(r for r in rows if r.stage == "ablation_answer_rewards")
    return (f"Table 3's ablation (`ablation_answer_rewards`): {_range(tuple(node * w for w in row.wall), unit)} "
            f"GPU-{label} held, {_range(row.wall, unit)} {label} of wall time, {row.disk / GB:.0f} GB of disk. "
            f"`ablation: null` (params.yaml: profiles.{cfg.name}.ablation) switches it off: its stage then records "
            f"\"not requested\".")


def table(cfg: Profile, card: float = 80 * GB, gpus: int | None = None, legend: bool = True) -> str:
    """The estimate as a markdown table with totals (with and without the studies of extra GRPO runs), then what
    Table 3's ablation costs and what does not fit; `gpus`: the node's GPUs (default: `node_gpus`)."""
    rows, node = estimate(cfg, card), held_gpus(cfg, gpus)
    unit, label = (60, "min") if totals(rows)["wall"][1] < 4 * 3600 else (3600, "h")
    option = f" --gpus {gpus}" if gpus is not None else ""
    lines = [f"`{cfg.name}`: ESTIMATES on one node of {node} A100 GPU(s) of {card / GB:.0f} GB "
             f"(optimistic-pessimistic; `python -m repro.costs --profile {cfg.name} --gpu-memory {card / GB:.0f}"
             f"{option}`)", "",
             f"| stage | GPUs busy | GPU-{label} busy | GPU-{label} held | wall {label} | disk GB | GB per GPU | "
             "notes |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        held = _range(tuple(node * w for w in r.wall), unit) if r.stage != "fetch" else "-"
        lines.append(f"| {r.stage} | {r.gpus} | {_range(r.gpu_seconds, unit)} | {held} | {_range(r.wall, unit)} | "
                     f"{r.disk / GB:.1f} | {r.memory / GB:.0f}{' (!)' if r.problems else ''} | {r.note} |")
    for name, t in (("total", totals(rows, node=node)),
                    ("total without Table 3's ablation and the reward designs", totals(rows, False, node))):
        lines.append(f"| **{name}** | | {_range(t['gpu_seconds'], unit)} | {_range(t['held'], unit)} | "
                     f"{_range(t['wall'], unit)} | {t['disk'] / GB:.0f} | {t['memory'] / GB:.0f} | |")
    lines.append(f"| of the total, process and engine starts | | | | {_range(start_seconds(cfg, card), unit)} | | | |")
    lines += ["", *([LEGEND, ""] if legend else []), ablation_line(cfg, rows, unit, label, node)]
    problems = list(dict.fromkeys(p for r in rows for p in r.problems))
    if problems:
        lines += ["", "(!) does not fit as configured:", *(f"- {p}" for p in problems)]
    return "\n".join(lines)


# --- the generated page ------------------------------------------------------------------------------------

PAGE = Path("docs/gpu-costs.md")
PAGE_PROFILES = ("paper-1p5b", "paper-7b", "gpu-smoke", "gpu-smoke-2gpu")
PAGE_COMMAND = "python -m repro.costs --markdown"


def markdown(params_path: str | Path = "params.yaml") -> str:
    """docs/gpu-costs.md: the tables of PAGE_PROFILES on 80 GB cards, under a line saying how it is made."""
    head = [f"<!-- Generated by `{PAGE_COMMAND}` from params.yaml and src/repro/costs.py; do not edit: rerun it "
            f"(tests/test_costs.py fails while this page differs from its output). -->", "",
            "# GPU costs (estimates)", "",
            "Every number here is an ESTIMATE: nothing ran on a GPU. The formulas and their two sets of assumptions "
            "(optimistic-pessimistic) are in `src/repro/costs.py` (D137); `python -m repro.costs --profile P "
            "[--gpu-memory 40] [--gpus N]` prints one profile's table.", "", LEGEND, ""]
    tables = [table(load_profile(name, params_path), legend=False) for name in PAGE_PROFILES]
    return "\n".join(head) + "\n" + "\n\n".join(tables) + "\n"


# --- disk still to be written (repro.preflight) ------------------------------------------------------------


GPU_OPTIONS = ("gpu_memory_utilization", "tensor_parallel_size")  # engine options that only a GPU run sets
ENGINE_OPTIONS = (("evaluation", "options"), ("latency", "options"), ("agentic", "agent_options"),
                  ("agentic", "extractor_options"))  # the studies' engines, by (section, options key)


def uncovered(cfg: Profile) -> str | None:
    """Why the model does not estimate `cfg`, or None: it estimates GPU runs over wiki-18 (the paper profiles,
    gpu-smoke), not the CPU profiles (tiny and ci over their own corpora; the rehearsal, whose engines are sized by
    `kv_cache_memory_bytes` on vLLM's CPU build rather than by a share of a GPU)."""
    if cfg.data is None or Path(cfg.data.corpus.source) != remote.WIKI18:
        return (f"repro.costs estimates GPU profiles over {remote.WIKI18}; {cfg.name} reads "
                f"{cfg.data.corpus.source if cfg.data else 'no corpus'}")
    engines = [getattr(getattr(cfg, section, None), key, None) or {} for section, key in ENGINE_OPTIONS]
    if not any(k in options for options in engines for k in GPU_OPTIONS):
        return (f"repro.costs estimates GPU profiles; no engine of {cfg.name} asks for a GPU (none of its "
                f"{', '.join(f'{s}.{k}' for s, k in ENGINE_OPTIONS)} sets {' or '.join(GPU_OPTIONS)}): a CPU profile")
    return None


def covers(cfg: Profile) -> bool:
    """Whether the model estimates `cfg` (`uncovered`)."""
    return uncovered(cfg) is None


def stage_outputs(cfg: Profile, pipeline: str | Path = PIPELINE_FILE) -> dict[str, list[Path]]:
    """{stage: what it writes}: the fetch's data/external, each dvc.yaml stage's `outs` for the profile."""
    stages = pipeline_stages(pipeline)
    return {FETCH: [EXTERNAL_DIR], **{
        name: [Path(str(next(iter(out)) if isinstance(out, dict) else out).replace("${profile}", cfg.name))
               for out in stage.get("outs", [])] for name, stage in stages.items()}}


def tree_bytes(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes of the files under `path` not in `seen` (device, inode), which it extends: a file linked twice (DVC's
    cache links, the e5 index linked from data/external into the data stage's index) counts once."""
    files = [path] if path.is_file() else [Path(root, f) for root, _, names in os.walk(path) for f in names]
    total = 0
    for stat in (f.stat() for f in files if f.exists()):
        if (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_size
    return total


def disk_to_write(cfg: Profile, stage: str | None = None) -> tuple[float, dict[str, float]]:
    """(bytes, {stage: bytes}) the profile's stages (or `stage` alone) still write: each stage's disk less what its
    outputs hold already (`stage_outputs`), plus the largest transient of the stages left (a checkpoint written
    before the oldest is rotated away)."""
    outputs, left, scratch, seen = stage_outputs(cfg), {}, 0.0, set()
    for r in estimate(cfg):  # the fetch first: a file the data stage links from data/external is the fetch's
        present = sum(tree_bytes(p, seen) for p in outputs.get(r.stage, []))
        if (stage is None or r.stage == stage) and (r.disk > present or r.scratch > 0 and not present):
            left[r.stage], scratch = max(r.disk - present, 0.0), max(scratch, r.scratch)
    return sum(left.values()) + scratch, left


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ESTIMATED GPU-hours, wall time, disk and GPU memory per stage of a "
                                                 "profile (formulas and assumptions: repro/costs.py, D137)")
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    parser.add_argument("--gpu-memory", type=float, default=80, help="GB per GPU (default 80; try 40)")
    parser.add_argument("--gpus", type=int, help="GPUs on the node, which the held GPU-hours count (default: the most "
                                                 "processes a launcher of the profile starts)")
    parser.add_argument("--markdown", nargs="?", const=str(PAGE), metavar="PATH",
                        help=f"write the tables of {', '.join(PAGE_PROFILES)} to PATH (default {PAGE}) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        write_text(args.markdown, markdown())
        print(f"wrote {args.markdown}")
        return
    try:
        print(table(load_profile(args.profile), args.gpu_memory * GB, args.gpus))
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
