"""The cost model's assumptions, the models' shapes, the formulas (decoding, training, encoding, search, memory, disk)
and what a profile asks for (questions, passages, GPUs, engines)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from repro.config import Profile
from repro.config import launchers
from repro.generation import sharding
from repro.ops import remote
from repro.ops.costs.measured import Measured
from repro.registry import METHODS



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
        raise ValueError(f"repro.ops.costs knows no shape for '{ref}'; add its parameters (and, for a generator, "
                         f"layers, hidden size, KV heads, vocabulary) to repro.ops.costs.model.SHAPES")
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
    search_flops: float  # Flat search (a matrix product per shard, D214), FLOP/s per GPU
    dp_efficiency: float  # n GPUs doing n slices of one job, each with a whole copy of the model, reach n x this
    sync_seconds_per_gb: float  # GRPO: the policy's weights into the colocated vLLM engine, per generation batch
    stage_start: float  # s: a process, its imports (torch, transformers, vLLM), the papermill kernel
    light_stage_start: float  # s: the same for a stage that loads no model
    engine_start: float  # s: an engine's memory profiling, torch.compile and CUDA-graph capture
    eager_engine_start: float  # the same with enforce_eager
    disk_read: float  # bytes/s of weights read from local disk
    download: float  # bytes/s from the hub
    api_tokens_per_second: float  # one request to an OpenAI-compatible API (the AR study's teacher)
    measured: Measured | None = None  # training figures of a GPU check, in place of train_mfu and the memory formulas


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
    `replicas` slices answered at once (`repro.generation.sharding.shard_bounds`): a call lasts as long as its largest
    slice, ceil(call / replicas) prompts of `samples` completions each (vLLM's `n`)."""
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
        raise ValueError(f"repro.ops.costs.model.lora_params knows no LoRA target module {unknown}; "
                         "add its in + out features")
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
        raise ValueError(f"repro.ops.costs knows no size for {dataset}/{split}; add it to FLASHRAG_QUESTIONS")
    return capped(FLASHRAG_QUESTIONS[spec.name][spec.splits[split]], spec.max_questions)


def corpus_passages(cfg: Profile) -> int:
    if Path(cfg.data.corpus.source) != remote.WIKI18:
        raise ValueError(f"repro.ops.costs estimates profiles over {remote.WIKI18}; {cfg.name} reads "
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
    """Replicas of an engine with `options` on the node's GPUs, by the engine's rule
    (`repro.generation.sharding.replica_count` of `data_parallel`); 1 for a backend other than vLLM."""
    if backend != "vllm":
        return 1
    return sharding.replica_count(options.get("data_parallel"), tensor_parallel(options), node_gpus(cfg))
