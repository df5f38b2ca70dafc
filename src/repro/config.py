"""Typed experiment profiles read from params.yaml.

params.yaml holds a top-level `profile` key (the profile `dvc repro` runs) and a `profiles` mapping. Every
profile is written out in full (YAML anchors share sections), so the keys DVC tracks for a stage,
`profiles.<profile>.<section>`, are exactly the values the stage reads. Each section is a dataclass: a
misspelt or unknown key fails loudly with its full path instead of being silently ignored.

    >>> cfg = load_profile("ci")          # or load_profile() for the selected one
    >>> cfg.retrieval.topk
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from repro.registry import KL_ESTIMATORS, METHODS, REWARD_DESIGNS, missing_settings

PARAMS_FILE = "params.yaml"


class ConfigError(ValueError):
    """A profile that does not match the schema."""


# The keyword arguments of each generation backend's constructor (repro.generation: TransformersGenerator,
# VLLMGenerator, OpenAIClientGenerator; tests/test_config.py keeps them in sync), against which the `options`
# dicts of a profile are checked at load time (D107). "progress" is always set by the caller.
GENERATOR_OPTIONS = {
    "transformers": ("adapter", "dtype", "attn_implementation", "device", "progress"),
    "vllm": ("adapter", "dtype", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "max_lora_rank",
             "enable_lora", "enforce_eager", "kv_cache_memory_bytes", "cpu_reserved_cores", "data_parallel",
             "progress"),
    "openai": ("base_url", "api_key", "api_key_env", "max_workers", "timeout", "max_retries", "backoff",
               "max_retry_after", "deadline", "cache_path", "progress"),
    "heuristic": (),
}


def check_generator_options(options: dict, backend: str, where: str, set_by_caller: tuple[str, ...] = ("progress",)):
    """ConfigError naming the key path if `options` holds a name the backend's constructor does not take (or one
    the caller sets itself)."""
    allowed = [name for name in GENERATOR_OPTIONS[backend] if name not in set_by_caller]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown option(s) {unknown} for backend {backend}; allowed: {allowed}")
    replicas = options.get("data_parallel")  # engine replicas (repro.sharding)
    if replicas not in (None, "auto") and (type(replicas) is not int or replicas < 1):
        raise ConfigError(f"{where}.data_parallel: 'auto', null or a replica count >= 1, got {replicas!r}")


@dataclasses.dataclass(frozen=True)
class ModelsConfig:
    """Model references: `embedded:<name>` (materialised under data/assets by repro.assets), a local
    directory, or a Hugging Face hub id (paper profiles, on machines that can reach the weights)."""

    extractor: str = dataclasses.field(
        metadata={"help": "the policy trained by GRPO (EviOmni) and the backbone of FilCo/SEER/CoT"})
    generator: str = dataclasses.field(metadata={"help": "the LoRA QA generator's base model (Appendix A.2)"})
    agents: list[str] = dataclasses.field(metadata={"help": "Search-R1 agents of the agentic study (Table 5)"})
    released_extractor: str | None = dataclasses.field(
        default=None, metadata={"help": "the authors' EviOmni checkpoint, for inference-only runs"})
    dtype: typing.Literal["float32", "bfloat16", "float16", "auto"] = dataclasses.field(
        default="float32", metadata={"help": "weights when training"})
    inference_dtype: typing.Literal["float32", "bfloat16", "float16", "auto"] | None = dataclasses.field(
        default=None,
        metadata={"help": "weights when only generating or scoring (evaluation, latency, SEER's sampling); None: "
                          "`dtype` (D87)"})

    @property
    def inference(self) -> str:
        """The dtype of the models that only run inference."""
        return self.inference_dtype or self.dtype


RewardDesignName = typing.Literal[tuple(REWARD_DESIGNS)]  # the rows of repro.registry.REWARD_DESIGNS
KLEstimator = typing.Literal[KL_ESTIMATORS]


@dataclasses.dataclass(frozen=True)
class RewardsConfig:
    """Rewards, masking and advantage of §3.1-3.3 (Eqs. 4-7, 10-11); choices in docs/decisions.md."""

    weights: tuple[float, ...] = dataclasses.field(
        default=(0.8, 0.1, 0.1), metadata={"help": "λ1 answer, λ2 length, λ3 format (Eq. 5)"})
    answer_subset: tuple[str, ...] = dataclasses.field(
        default=("rationale", "evidence", "full"), metadata={"help": "averaged into R^ans (Table 3)"})
    tau: float = dataclasses.field(
        default=0.5, metadata={"help": "τ of Eq. 10, grid {0.1, 0.2, 0.5, 1.0}; chosen value unreported (D16)"})
    gamma: float = dataclasses.field(
        default=0.5, metadata={"help": "γ of Eq. 11, grid {0.1, 0.3, 0.5, 0.8, 1.0}; chosen value unreported (D16)"})
    omega: float = dataclasses.field(default=0.9, metadata={"help": "ω of Eq. 11"})
    eps_std: float = dataclasses.field(default=0.1, metadata={"help": "ε_std of Eq. 7"})
    length_unit: typing.Literal["tokens", "words"] = dataclasses.field(
        default="tokens", metadata={"help": "L_r, L_e, L_P and CR (D13)"})
    mask_mode: typing.Literal["empty_tags", "drop", "placeholder"] = dataclasses.field(
        default="empty_tags", metadata={"help": "a masked span (D6)"})
    prefill_answer_tag: bool = dataclasses.field(
        default=True, metadata={"help": "open the answer turn with \"<answer>\" for o_r, o_e, o_f (D7)"})
    format_check: typing.Literal["strict", "lenient"] = dataclasses.field(
        default="strict", metadata={"help": "R^fmt: D18's exact form, or tagged parts in order amid free text (D147)"})
    masked_answer_prompt: typing.Literal["table14", "table11"] = dataclasses.field(
        default="table14", metadata={"help": "o_r/o_e continue Table 14 (D7), or answer Table 11's QA prompt (D148)"})
    design: RewardDesignName = dataclasses.field(
        default="eviomni", metadata={"help": "reward design, a row of repro.registry.REWARD_DESIGNS (D125)"})
    evinote_reading: typing.Literal["paper", "code"] = dataclasses.field(
        default="paper", metadata={"help": "EviNote-RAG's Eq. 5 as printed, or its released code (D126)"})
    arena_accuracy: typing.Literal["em", "f1"] = dataclasses.field(
        default="em", metadata={"help": "ARENA's accuracy reward on o_f: EM (ARENA's choice) or F1 (D129)"})
    nli_model: str | None = dataclasses.field(
        default=None, metadata={"help": "MNLI classifier of R_EQR (designs evinote, eviomni_eqr; D126)"})

    def __post_init__(self):
        if len(self.weights) != 3 or any(w < 0 for w in self.weights):
            raise ConfigError(f"rewards.weights: expected 3 non-negative numbers, got {list(self.weights)}")
        allowed = ("rationale", "evidence", "full")
        if not self.answer_subset or len(set(self.answer_subset)) != len(self.answer_subset) or not set(
            self.answer_subset
        ) <= set(allowed):
            raise ConfigError(f"rewards.answer_subset: expected distinct names from {list(allowed)}")
        if self.tau <= 0 or self.gamma < 0 or not 0 <= self.omega <= 1 or self.eps_std < 0:
            raise ConfigError("rewards: need tau > 0, gamma >= 0, 0 <= omega <= 1, eps_std >= 0")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """The retrieval corpus (App. A.3: the Dec-2018 Wikipedia dump in 100-word passages)."""

    source: str = dataclasses.field(
        metadata={"help": "embedded:ovos-wiki, or a passages jsonl such as data/external/wiki-18.jsonl"})
    format: typing.Literal["ovos-summaries", "passages"] = dataclasses.field(
        metadata={"help": "pages to chunk, or ready {\"id\",\"contents\"} passages"})
    chunk_words: int = dataclasses.field(default=100, metadata={"help": "passage length in words when chunking pages"})
    max_pages: int | None = dataclasses.field(
        default=None, metadata={"help": "keep the first N pages plus every evidence page of an embedded question (ci)"})
    max_passages: int | None = dataclasses.field(
        default=None, metadata={"help": "the first N passages of a passages file, in file order (gpu-smoke; D135)"})

    def __post_init__(self):
        if self.max_passages is not None and (self.max_passages < 1 or self.format != "passages"):
            raise ConfigError(f"data.corpus.max_passages: {self.max_passages} needs format 'passages' and a value >= 1")


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """One QA dataset and the splits the studies use."""

    name: str = dataclasses.field(metadata={"help": "directory name under data/<profile>/qa/"})
    label: str = dataclasses.field(metadata={"help": "name in tables (NQ, TQA, HotpotQA, ...)"})
    format: typing.Literal["fanoutqa", "ovos-describe", "flashrag", "musique", "wiki-multihop"] = dataclasses.field(
        metadata={"help": "the source's layout, read by repro.data.loaders"})
    setting: typing.Literal["open", "distractor"] = dataclasses.field(
        metadata={"help": "retrieve from the corpus, or use the shipped paragraphs"})
    source: str = dataclasses.field(
        metadata={"help": "embedded:fanoutqa-dev, a local directory / file, or a hub dataset repo (FlashRAG)"})
    splits: dict[str, str] = dataclasses.field(
        metadata={"help": "our split -> the source's split or file (HotpotQA: test -> dev)"})
    question_types: list[str] | None = dataclasses.field(
        default=None, metadata={"help": "only these metadata.type count in retrieval quality (bridge)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "first N questions of each split (ci)"})


@dataclasses.dataclass(frozen=True)
class DataConfig:
    corpus: CorpusConfig = dataclasses.field(metadata={"help": "the retrieval corpus"})
    datasets: list[DatasetConfig] = dataclasses.field(metadata={"help": "the QA sets, each with its source and splits"})
    split_fractions: dict[str, float] = dataclasses.field(
        metadata={"help": "hashed train/dev/test split of the embedded sets"})
    distractor_paragraphs: int = dataclasses.field(
        default=10, metadata={"help": "paragraphs per built distractor-setting question (gold + distractors)"})
    min_distractors: int = dataclasses.field(
        default=8, metadata={"help": "App. A.3: \"two gold paragraphs and 8-9 distractor paragraphs\""})

    def __post_init__(self):
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ConfigError(f"data.datasets: duplicate names in {names}")


@dataclasses.dataclass(frozen=True)
class RetrieverConfig:
    """A dense retriever (any transformers encoder + FAISS) or BM25."""

    method: typing.Literal["dense", "bm25"] = dataclasses.field(
        metadata={"help": "dense (an encoder and a FAISS index) or bm25 (bm25s)"})
    query_encoder: str | None = dataclasses.field(
        default=None, metadata={"help": "model dir, hub id or embedded:<name>"})
    passage_encoder: str | None = dataclasses.field(
        default=None, metadata={"help": "DPR's context encoder; None = the query encoder (E5, MiniLM)"})
    pooling: typing.Literal["cls", "mean", "pooler"] = dataclasses.field(
        default="mean", metadata={"help": "DPR: pooler; E5/MiniLM: mean"})
    query_prefix: str = dataclasses.field(default="", metadata={"help": "E5: \"query: \""})
    passage_prefix: str = dataclasses.field(default="", metadata={"help": "E5: \"passage: \""})
    passage_input: typing.Literal["contents", "title_text_pair"] = dataclasses.field(
        default="contents", metadata={"help": "DPR: (title, text) pair"})
    normalize: bool = dataclasses.field(
        default=True, metadata={"help": "L2-normalise embeddings (E5, MiniLM); DPR uses raw inner products"})
    query_max_length: int = dataclasses.field(default=64, metadata={"help": "query tokens the encoder reads"})
    passage_max_length: int = dataclasses.field(default=256, metadata={"help": "passage tokens the encoder reads"})
    batch_size: int = dataclasses.field(default=64, metadata={"help": "texts per encoder batch"})
    dtype: typing.Literal["float32", "bfloat16", "float16"] = dataclasses.field(
        default="float32", metadata={"help": "the encoder's weights"})
    index: str = dataclasses.field(
        default="Flat", metadata={"help": "FAISS index_factory string: Flat (exact), IVF4096,Flat, HNSW32, ..."})
    search_params: dict[str, int] = dataclasses.field(default_factory=dict, metadata={"help": "e.g. nprobe, efSearch"})
    encode_block: int = dataclasses.field(
        default=100_000, metadata={"help": "passages encoded and added to the index per block"})
    k1: float = dataclasses.field(
        default=0.9, metadata={"help": "BM25 parameters (Pyserini's defaults for Wikipedia passages)"})
    b: float = dataclasses.field(
        default=0.4, metadata={"help": "BM25's b (bm25s; Lucene's default 0.75, Pyserini's 0.4)"})

    def __post_init__(self):
        if self.method == "dense" and not self.query_encoder:
            raise ConfigError("retrieval: a dense retriever needs a query_encoder")


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
    topk: int = dataclasses.field(metadata={"help": "passages per question (the paper: 5)"})
    retrievers: dict[str, RetrieverConfig] = dataclasses.field(
        metadata={"help": "name -> retriever; `default` and `agentic` name the ones the studies read"})
    default: str = dataclasses.field(
        metadata={"help": "retriever whose top-k feed the traditional-RAG studies (the paper: DPR)"})
    agentic: str = dataclasses.field(metadata={"help": "retriever of the Search-R1 study (the paper: E5)"})
    evaluate: list[str] = dataclasses.field(
        metadata={"help": "retrievers run on every open-domain split and reported in Table 8"})

    def __post_init__(self):
        for name in [self.default, self.agentic, *self.evaluate]:
            if name not in self.retrievers:
                raise ConfigError(f"retrieval: unknown retriever '{name}'; defined: {sorted(self.retrievers)}")
        if self.default not in self.evaluate:
            raise ConfigError(f"retrieval.evaluate must include the default retriever '{self.default}'")


@dataclasses.dataclass(frozen=True)
class NoiseConfig:
    """Irrelevant passages added per question for the robustness study (Figure 5)."""

    counts: list[int] = dataclasses.field(metadata={"help": "the paper: 0, 2, 4, 6, 8"})
    position: typing.Literal["append", "prepend", "random"] = dataclasses.field(
        default="append", metadata={"help": "where the irrelevant passages go among the top-k (Figure 5)"})
    seed: int = dataclasses.field(default=0, metadata={"help": "the draw of the irrelevant passages"})
    datasets: list[str] = dataclasses.field(
        default_factory=list, metadata={"help": "open-domain datasets to build noisy sets for"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split the noisy contexts are built for"})


# dev metrics that select a checkpoint (train.selection_metric) or a (τ, γ) pair (length_tuning.metric)
SelectionMetric = typing.Literal["f1_evidence", "em_evidence", "f1_full", "em_full", "f1_rationale", "em_rationale",
                                 "reward_final"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """GRPO training of the extractor (§3.3, App. A.2). The paper gives lr, β, ε, 1 epoch and dev-set selection;
    every other value is a choice (docs/decisions.md D37-D43), set per profile. Batch sizes count completions
    (G per prompt): prompts per optimizer step = per_device_batch_size × processes × gradient_accumulation_steps
    / G."""

    dataset: str = dataclasses.field(metadata={"help": "the data.datasets entry trained on (the paper: NQ)"})
    seed: int | None = dataclasses.field(
        default=None,
        metadata={"help": "GRPO's (sampling, data order); None: the profile's, which also seeds the warm-up and data"})
    learning_rate: float = dataclasses.field(default=1e-6, metadata={"help": "App. A.2"})
    beta: float = dataclasses.field(
        default=0.01,
        metadata={"help": "KL coefficient β (App. A.2), k3 estimator in the loss, reference = initial model"})
    kl_estimator: KLEstimator = dataclasses.field(
        default="k3",
        metadata={"help": "KL estimator in the loss: TRL's k3, or ARENA's k2 ½(log π_θ − log π_ref)² (D130)"})
    epsilon: float = dataclasses.field(default=0.2, metadata={"help": "PPO clip ε (App. A.2)"})
    loss_type: typing.Literal["grpo", "dapo", "bnpo", "dr_grpo"] = dataclasses.field(
        default="grpo", metadata={"help": "Eq. 8's per-response mean"})
    num_generations: int = dataclasses.field(default=8, metadata={"help": "G"})
    per_device_batch_size: int = dataclasses.field(
        default=8, metadata={"help": "completions per process and micro-batch"})
    gradient_accumulation_steps: int = dataclasses.field(
        default=1, metadata={"help": "micro-batches per optimizer step"})
    steps_per_generation: int | None = dataclasses.field(
        default=None, metadata={"help": "micro-batches per generation batch (None: = accumulation steps)"})
    num_iterations: int = dataclasses.field(default=1, metadata={"help": "μ, policy updates per generation batch"})
    max_completion_length: int = dataclasses.field(default=768, metadata={"help": "tokens of the rollout r + e + o_f"})
    max_answer_length: int = dataclasses.field(default=32, metadata={"help": "tokens of o_r and o_e"})
    temperature: float = dataclasses.field(default=1.0, metadata={"help": "rollout sampling"})
    top_p: float = dataclasses.field(default=1.0, metadata={"help": "nucleus sampling of the rollouts"})
    sample_answers: bool = dataclasses.field(
        default=True, metadata={"help": "o_r, o_e sampled like the rollout (False: greedy)"})
    epochs: float = dataclasses.field(default=1.0, metadata={"help": "App. A.2: one epoch"})
    max_steps: int = dataclasses.field(default=-1, metadata={"help": "> 0 stops earlier (the CPU profiles' budget)"})
    max_train_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "first N training questions (None: all)"})
    require_answer_in_passages: bool = dataclasses.field(
        default=False,
        metadata={"help": "drop training questions whose top-k passages hold no golden answer (#3; D26: keep "
                          "them; D149)"})
    lr_scheduler: str = dataclasses.field(default="constant", metadata={"help": "transformers' scheduler name"})
    warmup_steps: int = dataclasses.field(default=0, metadata={"help": "learning-rate warm-up steps"})
    weight_decay: float = dataclasses.field(default=0.0, metadata={"help": "AdamW's weight decay"})
    max_grad_norm: float = dataclasses.field(default=1.0, metadata={"help": "gradient clipping"})
    bf16: bool = dataclasses.field(default=False, metadata={"help": "bf16 autocast (GPU, or CPUs with AMX)"})
    gradient_checkpointing: bool = dataclasses.field(
        default=False, metadata={"help": "recompute activations in the backward pass (memory for time)"})
    save_steps: int = dataclasses.field(
        default=100, metadata={"help": "checkpoint (and dev evaluation) every N steps, and at the end"})
    save_total_limit: int | None = dataclasses.field(
        default=2, metadata={"help": "checkpoints kept (the last and the best always are); >= 2 or None"})
    dev_max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "first N dev questions for model selection (None: all)"})
    selection_metric: SelectionMetric | None = dataclasses.field(
        default="f1_evidence", metadata={"help": "None: no dev selection, the last step exported (D192)"})
    evaluate_initial: bool = dataclasses.field(
        default=True, metadata={"help": "also score the initial policy on dev (reference row, never selected)"})
    score_single_checkpoint: bool = dataclasses.field(default=True, metadata={
        "help": "False: a run whose only checkpoint is its last has no dev pass, nothing to select (D172, D177)"})
    accelerate_config: str | None = dataclasses.field(
        default=None, metadata={"help": "configs/accelerate/*.yaml: launch worker processes through accelerate"})
    use_vllm: bool = dataclasses.field(
        default=False, metadata={"help": "generate the rollouts with vLLM (TRL's use_vllm)"})
    vllm_mode: typing.Literal["colocate", "server"] = dataclasses.field(
        default="colocate",
        metadata={"help": "TRL's vLLM mode: an engine in each process, or a `trl vllm-serve` server"})
    vllm_gpu_memory_utilization: float = dataclasses.field(
        default=0.3, metadata={"help": "the colocated engine's share of GPU memory"})
    vllm_tensor_parallel_size: int = dataclasses.field(
        default=1, metadata={"help": "the colocated engine's tensor parallelism"})
    vllm_max_model_length: int | None = dataclasses.field(
        default=None, metadata={"help": "must hold prompt + rollout + o_r/o_e answer"})
    vllm_server_base_url: str | None = dataclasses.field(
        default=None, metadata={"help": "server mode: the `vllm serve` address (None: TRL's 0.0.0.0:8000)"})
    vllm_importance_sampling_correction: bool = dataclasses.field(
        default=False,
        metadata={"help": "TRL's correction of the vLLM-sampler/trainer mismatch (on in TRL); Eq. 8 has none, so "
                          "off by default (D139)"})
    format_warmup: FormatWarmupConfig | None = dataclasses.field(
        default=None, metadata={"help": "SFT that teaches the tags before GRPO (CPU stand-ins; D90)"})
    heldout_questions: int | None = dataclasses.field(
        default=None,
        metadata={"help": "seeded dev questions on which the notebook checks the starting policy's evidence "
                          "answer-recall against a random-sentence extractor (D141); None: no check"})
    heldout_backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers",
        metadata={"help": "the engine that scores the two policies on them (both the same, so the test is "
                          "paired): dev selection's transformers, or vLLM (its CPU build 1.8x faster end to end "
                          "on tiny; D171); options: its make_generator kwargs"})
    heldout_options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict,
        metadata={"help": "make_generator kwargs of heldout_backend (vLLM: lengths, KV cache, cores; D171)"})
    lora: PolicyLoRAConfig | None = dataclasses.field(
        default=None, metadata={"help": "None: full fine-tuning (the paper); else a LoRA policy (CPU profiles; D144)"})
    shared_prefill: bool = dataclasses.field(
        default=False,
        metadata={"help": "transformers generation and scoring: a prefix the rows share runs once (D145)"})
    attn_implementation: str | None = dataclasses.field(
        default=None, metadata={"help": "the policy's; None: transformers' default (sdpa); D146"})
    rollout_model: typing.Literal["policy", "merged_copy"] = dataclasses.field(
        default="policy", metadata={"help": "transformers generation from the policy, or from a plain copy with the "
                                            "adapter merged in, in bf16 under train.bf16, refreshed each step (D162)"})

    def __post_init__(self):
        if self.num_generations < 2:
            raise ConfigError("train.num_generations: GRPO needs at least 2 completions per prompt")
        positive = ("learning_rate", "per_device_batch_size", "gradient_accumulation_steps", "num_iterations",
                    "max_completion_length", "max_answer_length", "temperature", "save_steps")
        bad = [name for name in positive if not getattr(self, name) > 0]
        if bad or self.beta < 0 or self.epsilon <= 0 or not 0 < self.top_p <= 1:
            raise ConfigError(f"train: need positive {bad or positive}, beta >= 0, epsilon > 0, 0 < top_p <= 1")
        if self.heldout_questions is not None and self.heldout_questions < 2:
            raise ConfigError("train.heldout_questions: a paired test needs at least 2 questions (or null)")
        check_generator_options(self.heldout_options, self.heldout_backend, "train.heldout_options",
                                ("adapter", "dtype", "progress"))
        if self.rollout_model == "merged_copy" and self.use_vllm:
            raise ConfigError("train.rollout_model: merged_copy generates through transformers; with use_vllm, vLLM "
                              "generates from its own synced copy (set rollout_model: policy)")
        if self.save_total_limit is not None and self.save_total_limit < 2:
            # transformers keeps only the best checkpoint at the end when the limit is 1: the run could not resume
            raise ConfigError("train.save_total_limit must be >= 2 (or null) so the last and the best both stay")


EvaluationMethod = typing.Literal[tuple(METHODS)]  # the rows of repro.registry


@dataclasses.dataclass(frozen=True)
class SelectiveContextConfig:
    """SeleCtx (Li et al., 2023): self-information of lexical units under a causal LM, the lowest-scoring
    `reduce_ratio` of the units removed (repro.baselines.selective_context; decisions D59-D61)."""

    model: str = dataclasses.field(metadata={"help": "causal LM whose -log p(token | preceding) scores the units"})
    reduce_ratio: float = dataclasses.field(
        default=0.5, metadata={"help": "percentile of unit self-information below which units are removed"})
    unit: typing.Literal["token", "phrase", "sentence"] = dataclasses.field(
        default="phrase", metadata={"help": "the original's default: noun-chunk phrases"})
    aggregate: typing.Literal["mean", "sum"] = dataclasses.field(
        default="mean", metadata={"help": "a unit's score from its tokens' (released code: mean)"})
    condition_on: typing.Literal["sentence", "passage"] = dataclasses.field(
        default="sentence", metadata={"help": "what a token is conditioned on"})
    phrase_parser: str | None = dataclasses.field(
        default=None, metadata={"help": "spaCy pipeline splitting sentences into phrases (unit: phrase)"})
    batch_size: int = dataclasses.field(default=16, metadata={"help": "texts per forward pass"})

    def __post_init__(self):
        if not 0 <= self.reduce_ratio < 1 or self.batch_size < 1:
            raise ConfigError("baselines.selective_context: need 0 <= reduce_ratio < 1 and batch_size >= 1")
        if self.unit == "phrase" and not self.phrase_parser:
            raise ConfigError("baselines.selective_context: unit 'phrase' needs a phrase_parser (spaCy pipeline)")


@dataclasses.dataclass(frozen=True)
class LLMLingua2Config:
    """LLMLingua-2 (Pan et al., 2024) through the llmlingua package (repro.baselines.llmlingua2; D61-D63)."""

    tiktoken: str = dataclasses.field(
        metadata={"help": "cl100k_base.tiktoken, seeded into tiktoken's cache (llmlingua counts GPT-3.5 tokens)"})
    model: str | None = dataclasses.field(
        default=None, metadata={"help": "a real LLMLingua-2 checkpoint: method `llmlingua2`"})
    standin: str | None = dataclasses.field(
        default=None,
        metadata={"help": "the untrained stand-in where no checkpoint ships: method `llmlingua2_standin`"})
    rate: float = dataclasses.field(default=0.33, metadata={"help": "share of words kept (llmlingua's `rate`)"})
    force_tokens: list[str] = dataclasses.field(
        default_factory=lambda: ["\n", "?"], metadata={"help": "tokens llmlingua always keeps"})
    batch_size: int = dataclasses.field(
        default=50, metadata={"help": "llmlingua2 max_batch_size (512-token chunks per forward pass)"})

    def __post_init__(self):
        if not 0 < self.rate <= 1 or self.batch_size < 1:
            raise ConfigError("baselines.llmlingua2: need 0 < rate <= 1 and batch_size >= 1")


@dataclasses.dataclass(frozen=True)
class RecompConfig:
    """RECOMP extractive (Xu et al., 2024): the top-n sentences by dual-encoder score against the query,
    in their original order (repro.baselines.recomp; D61, D64, D65)."""

    model: str = dataclasses.field(
        metadata={"help": "sentence-transformers directory or hub id (RECOMP's released compressors load as mean "
                          "pooling)"})
    top_n: int = dataclasses.field(default=5, metadata={"help": "sentences kept (D64)"})
    batch_size: int = dataclasses.field(default=64, metadata={"help": "sentences per encoder batch"})

    def __post_init__(self):
        if self.top_n < 1 or self.batch_size < 1:
            raise ConfigError("baselines.recomp: need top_n >= 1 and batch_size >= 1")


@dataclasses.dataclass(frozen=True)
class BaselinesConfig:
    """Table 2's vanilla-refinement baselines, one section per compressor (repro.registry names the section each
    method reads; a profile needs only those of the methods its studies list)."""

    selective_context: SelectiveContextConfig | None = dataclasses.field(
        default=None, metadata={"help": "SeleCtx's settings (methods selective_context)"})
    llmlingua2: LLMLingua2Config | None = dataclasses.field(
        default=None, metadata={"help": "LLMLingua-2's settings (methods llmlingua2, llmlingua2_standin)"})
    recomp: RecompConfig | None = dataclasses.field(
        default=None, metadata={"help": "RECOMP's settings (method recomp)"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoRASFTConfig:
    """A LoRA adapter and the HF Trainer settings that fit it (repro.train.sft); shared by the QA generator and the
    trained baselines (FilCo's filter, SEER's extractor)."""

    section: typing.ClassVar[str] = "lora"  # the params.yaml section, in error messages
    lora_rank: int = dataclasses.field(default=8, metadata={"help": "App. A.2"})
    lora_alpha: int = dataclasses.field(default=16, metadata={"help": "LoRA's alpha"})
    lora_dropout: float = dataclasses.field(default=0.05, metadata={"help": "LoRA's dropout"})
    target_modules: list[str] = dataclasses.field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], metadata={"help": "the modules LoRA adapts"})
    learning_rate: float = dataclasses.field(default=2e-4, metadata={"help": "AdamW's learning rate"})
    epochs: float = dataclasses.field(
        default=1.0, metadata={"help": "passes over the examples (max_steps > 0 stops earlier)"})
    max_steps: int = dataclasses.field(default=-1, metadata={"help": "> 0 stops earlier (the CPU profiles' budget)"})
    per_device_batch_size: int = dataclasses.field(default=4, metadata={"help": "examples per process and micro-batch"})
    gradient_accumulation_steps: int = dataclasses.field(
        default=1, metadata={"help": "micro-batches per optimizer step"})
    max_length: int = dataclasses.field(
        default=2048,
        metadata={"help": "tokens; longer examples are dropped, never truncated (that would cut the answer)"})
    lr_scheduler: str = dataclasses.field(default="linear", metadata={"help": "transformers' scheduler name"})
    warmup_steps: float = dataclasses.field(default=0.0, metadata={"help": "< 1: a fraction of the training steps"})
    bf16: bool = dataclasses.field(default=False, metadata={"help": "bf16 mixed precision"})
    save_steps: int = dataclasses.field(
        default=50, metadata={"help": "a checkpoint every N steps (the run resumes from the last)"})
    save_total_limit: int | None = dataclasses.field(default=2, metadata={"help": "checkpoints kept (None: all)"})

    def __post_init__(self):
        positive = ("lora_rank", "learning_rate", "per_device_batch_size", "gradient_accumulation_steps",
                    "max_length", "save_steps")
        bad = [name for name in positive if not getattr(self, name) > 0]
        if bad:
            raise ConfigError(f"{self.section}: need positive {bad}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaunchedLoRAConfig(LoRASFTConfig):
    """A LoRA run of its own stage, trained in worker processes of `accelerate launch` (repro.train.launch), never in
    the stage's process: with several GPUs visible, one process would be DataParallel, which TRL refuses."""

    accelerate_config: str = dataclasses.field(
        metadata={"help": "configs/accelerate/*.yaml: the workers' processes and distribution (DDP, CPU)"})


@dataclasses.dataclass(frozen=True)
class PolicyLoRAConfig:
    """GRPO on a LoRA adapter of the starting policy instead of all its weights (D144): the reference model is the
    policy with the adapter disabled (no second copy), and the selected adapter is merged into a plain extractor."""

    rank: int = dataclasses.field(metadata={"help": "LoRA's rank"})
    alpha: int = dataclasses.field(metadata={"help": "LoRA's alpha"})
    target_modules: list[str] = dataclasses.field(metadata={"help": "the modules LoRA adapts"})

    def __post_init__(self):
        if self.rank < 1 or self.alpha <= 0 or not self.target_modules:
            raise ConfigError("train.lora: need rank >= 1, alpha > 0 and at least one target module")


WarmupTargets = typing.Literal["format_only", "string_inclusion"]
WarmupAnswers = typing.Literal["model", "span"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class FormatWarmupConfig(LoRASFTConfig):
    """A LoRA SFT of the policy on rollouts in the exact format before GRPO (repro.train.warmup, D90): a stand-in for
    the instruction following of the paper's 1.5B/7B models, which the 135M CPU model lacks. The adapter is merged.
    `targets`: format_only (a seeded random sentence, blind to the golden answers; D141) or string_inclusion (the
    sentence holding a golden answer and that answer: the supervision GRPO should learn; D142). `answers`, for
    format_only: the base model's own greedy answer after the target's extract (D189) or a span of the sentence
    (D141)."""

    section: typing.ClassVar[str] = "train.format_warmup"
    targets: WarmupTargets = dataclasses.field(
        default="format_only",
        metadata={"help": "format_only (a seeded random sentence, D141) or string_inclusion (D142)"})
    answers: WarmupAnswers = dataclasses.field(
        default="model",
        metadata={"help": "format_only's answer: the base model's own (D189) or a span of the sentence (D141)"})
    split: str = dataclasses.field(default="train", metadata={"help": "of train.dataset"})
    max_train_questions: int = dataclasses.field(
        default=32,
        metadata={"help": "a seeded subset (string_inclusion: of the questions whose passages hold an answer)"})
    max_length: int = dataclasses.field(default=1024, metadata={"help": "tokens per example; longer ones are dropped"})


@dataclasses.dataclass(frozen=True, kw_only=True)
class QAGeneratorConfig(LaunchedLoRAConfig):
    """LoRA SFT of the QA generator (App. A.2): models.generator learns to give the golden answer from (q, P)
    with Table 11's prompt and from q alone with Table 12's (for Zero). The paper gives the LoRA rank (8);
    every other value is ours (docs/decisions.md)."""

    section: typing.ClassVar[str] = "qa_generator"
    datasets: list[str] = dataclasses.field(metadata={"help": "data.datasets entries whose `split` is fine-tuned on"})
    split: str = dataclasses.field(default="train", metadata={"help": "the split its training examples come from"})
    inputs: list[typing.Literal["passages", "question"]] = dataclasses.field(
        default_factory=lambda: ["passages", "question"],
        metadata={"help": "what the generator reads besides the evidence (App. A.2)"})
    max_train_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions per dataset (None: all)"})
    require_answer_in_passages: bool = dataclasses.field(
        default=False, metadata={"help": "keep only questions whose top-k passages hold a golden answer"})

    def __post_init__(self):
        super().__post_init__()
        if not self.datasets or not self.inputs:
            raise ConfigError("qa_generator: need datasets and inputs")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FilCoConfig(LaunchedLoRAConfig):
    """FilCo (Wang et al. 2023; repro.baselines.filco): silver filtered contexts of the training questions by
    String Inclusion or Lexical Overlap, then LoRA SFT of models.extractor as the filter M_ctx (D66-D70)."""

    section: typing.ClassVar[str] = "filco"
    datasets: list[str] = dataclasses.field(
        metadata={"help": "data.datasets entries whose `split` gives the silver training examples"})
    split: str = dataclasses.field(default="train", metadata={"help": "the split its silver contexts come from"})
    criterion: typing.Literal["strinc", "lexical"] = dataclasses.field(
        default="strinc", metadata={"help": "FilCo's STRINC or LEXICAL oracle (CXMI: D68)"})
    lexical_threshold: float = dataclasses.field(
        default=0.5, metadata={"help": "λ: a sentence is kept when its unigram F1 with the answer reaches it"})
    max_train_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions per dataset (None: all)"})
    require_silver: bool = dataclasses.field(
        default=True, metadata={"help": "drop questions whose passages yield an empty silver context (D69)"})

    def __post_init__(self):
        super().__post_init__()
        if not self.datasets or not 0 <= self.lexical_threshold <= 1:
            raise ConfigError("filco: need datasets and 0 <= lexical_threshold <= 1")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SEERConfig(LaunchedLoRAConfig):
    """SEER (Zhao et al. 2024a; repro.baselines.seer): candidate evidences sampled from models.extractor, scored
    for faithfulness, helpfulness and conciseness, combined by CoV-weighting, turned into preference pairs and
    aligned with TRL's DPO on a LoRA adapter (D71-D76)."""

    section: typing.ClassVar[str] = "seer"
    datasets: list[str] = dataclasses.field(
        metadata={"help": "data.datasets entries whose `split` gives the training questions"})
    split: str = dataclasses.field(default="train", metadata={"help": "the split its candidates are sampled on"})
    max_train_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions per dataset (None: all)"})
    require_answer_in_passages: bool = dataclasses.field(
        default=True, metadata={"help": "helpfulness needs an answer the passages can support (D75)"})
    num_samples: int = dataclasses.field(default=8, metadata={"help": "M candidates sampled per question"})
    dedup_threshold: float = dataclasses.field(
        default=0.9, metadata={"help": "a candidate this similar (unigram Jaccard) to a kept one is a duplicate"})
    temperature: float = dataclasses.field(default=1.0, metadata={"help": "sampling of the candidates"})
    top_p: float = dataclasses.field(default=1.0, metadata={"help": "nucleus sampling of the candidates"})
    max_new_tokens: int = dataclasses.field(default=128, metadata={"help": "tokens of a sampled candidate"})
    batch_size: int = dataclasses.field(
        default=4, metadata={"help": "prompts per forward batch when sampling and scoring"})
    chunk_size: int = dataclasses.field(default=8, metadata={"help": "questions per resumable chunk of candidates"})
    conciseness: typing.Literal["similarity", "length"] = dataclasses.field(
        default="similarity", metadata={"help": "D73"})
    similarity_model: str = dataclasses.field(
        default="embedded:all-minilm-l6-v2", metadata={"help": "sentence encoder of the conciseness expert"})
    cov_smoothing: float = dataclasses.field(
        default=0.0, metadata={"help": "added to each criterion's coefficient of variation before normalising (D74)"})
    min_margin: float = dataclasses.field(
        default=0.0, metadata={"help": "a pair needs chosen score - rejected score > min_margin"})
    max_pairs_per_question: int = dataclasses.field(
        default=1, metadata={"help": "the best candidate against the 1..k worst (D76)"})
    beta: float = dataclasses.field(default=0.1, metadata={"help": "DPO β"})

    def __post_init__(self):
        super().__post_init__()
        positive = ("num_samples", "temperature", "max_new_tokens", "batch_size", "chunk_size",
                    "max_pairs_per_question", "beta")
        bad = [name for name in positive if not getattr(self, name) > 0]
        if bad or not self.datasets or not 0 < self.top_p <= 1 or not 0 <= self.dedup_threshold <= 1:
            raise ConfigError(f"seer: need datasets, 0 < top_p <= 1, 0 <= dedup_threshold <= 1 and positive "
                              f"{bad or positive}")
        if self.cov_smoothing < 0 or self.min_margin < 0:
            raise ConfigError("seer: cov_smoothing and min_margin must be >= 0")


@dataclasses.dataclass(frozen=True)
class EvaluationConfig:
    """Table 2: each method's evidence answered by the QA generator on `split` of each dataset (repro.evaluation)."""

    datasets: list[str] = dataclasses.field(metadata={"help": "Table 2's rows (data.datasets names)"})
    methods: list[EvaluationMethod] = dataclasses.field(metadata={"help": "Table 2's columns, in order"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split evaluated (Table 2: test)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions of each set (None: all; CPU budget)"})
    backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers", metadata={"help": "the generation engine of the refiners and the QA generator"})
    options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "engine kwargs (vLLM: memory, lengths)"})
    qa_adapter: bool = dataclasses.field(
        default=True,
        metadata={"help": "answer with the LoRA generator of the qa_generator stage (False: the base model)"})
    batch_size: int = dataclasses.field(
        default=8, metadata={"help": "prompts per forward batch (transformers backend)"})
    chunk_size: int = dataclasses.field(
        default=64, metadata={"help": "questions per resumable chunk, flushed to the partial file"})
    answer_max_new_tokens: int = dataclasses.field(default=32, metadata={"help": "tokens of the QA generator's answer"})
    evidence_max_new_tokens: int = dataclasses.field(
        default=768, metadata={"help": "CoT and extractor outputs (the paper's latency setting)"})
    reading_check_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "Zero vs Full on N answerable questions per set (None: no check)"})

    def __post_init__(self):
        if not self.datasets or not self.methods or len(set(self.methods)) != len(self.methods):
            raise ConfigError("evaluation: need datasets and distinct methods")
        positive = ("batch_size", "chunk_size", "answer_max_new_tokens", "evidence_max_new_tokens")
        if any(getattr(self, name) < 1 for name in positive) or min(self.max_questions or 1,
                                                                     self.reading_check_questions or 1) < 1:
            raise ConfigError(f"evaluation: {', '.join(positive)}, max_questions and reading_check_questions "
                              "must be positive")
        check_generator_options(self.options, self.backend, "evaluation.options", ("adapter", "dtype", "progress"))


@dataclasses.dataclass(frozen=True)
class DistractorConfig:
    """Tables 9-10: methods on distractor-setting sets (gold + distractor paragraphs), decoded and answered with the
    `evaluation` settings."""

    datasets: list[str] = dataclasses.field(
        metadata={"help": "the distractor-setting sets (Tables 9-10: 2WikiQA, MuSiQue)"})
    methods: list[EvaluationMethod] = dataclasses.field(metadata={"help": "rows of repro.registry.METHODS"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split evaluated"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions of each set (None: all)"})

    def __post_init__(self):
        if not self.datasets or not self.methods or len(set(self.methods)) != len(self.methods):
            raise ConfigError("distractor: need datasets and distinct methods")


@dataclasses.dataclass(frozen=True)
class NoiseRobustnessConfig:
    """Figure 5: methods on the questions of `noise.datasets` with each of `noise.counts` irrelevant passages added,
    decoded and answered with the `evaluation` settings."""

    methods: list[EvaluationMethod] = dataclasses.field(
        metadata={"help": "rows of repro.registry.METHODS (Figure 5: Full, EviOmni)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions (the same at every noise level)"})

    def __post_init__(self):
        if not self.methods or len(set(self.methods)) != len(self.methods):
            raise ConfigError("noise_robustness: need distinct methods")


AnswerKey = typing.Literal["rationale", "evidence", "full"]


@dataclasses.dataclass(frozen=True)
class LengthTuningConfig:
    """τ and γ chosen on the dev set (App. A.2, #21): one short GRPO run per (τ, γ) of the grid, each scored by
    `train`'s dev selection; the stage reports the best pair and leaves `rewards.tau` / `rewards.gamma` to the
    profile (repro.train.length_tuning, D150)."""

    tau: list[float] = dataclasses.field(metadata={"help": "the paper's grid: [0.1, 0.2, 0.5, 1.0]"})
    gamma: list[float] = dataclasses.field(metadata={"help": "the paper's grid: [0.1, 0.3, 0.5, 0.8, 1.0]"})
    max_steps: int = dataclasses.field(metadata={"help": "optimizer steps per run"})
    metric: SelectionMetric | None = dataclasses.field(default=None, metadata={"help": "None: train.selection_metric"})

    def __post_init__(self):
        if not self.tau or not self.gamma or len(set(self.tau)) != len(self.tau) or len(set(self.gamma)) != len(
                self.gamma):
            raise ConfigError("length_tuning: tau and gamma need distinct values")
        if min(self.tau) <= 0 or min(self.gamma) < 0 or self.max_steps < 1:
            raise ConfigError("length_tuning: need tau > 0, gamma >= 0 and max_steps >= 1")


@dataclasses.dataclass(frozen=True)
class EvidenceConfig:
    """Issue #31's CPU evidence experiment (docs/cpu-evidence.md). Its gate (repro.train.evidence_gate): greedy o_e
    from a sentence holding a golden answer against one holding none, on `gate_questions` training questions; it
    passes when the F1 contrast is at least `gate_min_contrast` and its 95% interval excludes 0 (decided before the
    run). Then, if it passed (repro.train.evidence_seeds): one GRPO run of the profile's `train` recipe per GRPO seed
    of `seeds` (`train.seed`), from the one warm-up, each scored against the starting policy on `heldout_questions`
    answerable held-out dev questions (repro.train.heldout)."""

    gate_questions: int = dataclasses.field(
        default=64, metadata={"help": "answerable training questions of the gate (issue #31, D191)"})
    gate_min_contrast: float = dataclasses.field(
        default=0.05, metadata={"help": "the F1(o_e) contrast below which the gate stops step 2"})
    seeds: list[int] = dataclasses.field(
        default_factory=lambda: [0, 1, 2], metadata={"help": "GRPO seeds of step 2 (D192)"})
    heldout_questions: int = dataclasses.field(
        default=200, metadata={"help": "held-out answerable questions every policy is scored on"})
    max_steps: int | None = dataclasses.field(
        default=None, metadata={"help": "GRPO steps per seed (None: train.max_steps)"})

    def __post_init__(self):
        if self.gate_questions < 2 or not 0 < self.gate_min_contrast <= 1:
            raise ConfigError("evidence: need gate_questions >= 2 and 0 < gate_min_contrast <= 1")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or self.heldout_questions < 2:
            raise ConfigError("evidence: need distinct seeds (at least one) and heldout_questions >= 2")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("evidence.max_steps: a positive number of GRPO steps per seed (or null)")


@dataclasses.dataclass(frozen=True)
class AblationConfig:
    """Table 3: one GRPO run per answer subset (`rewards.answer_subset`), each evaluated like Table 2's EviOmni
    column with the profile's `evaluation` settings (repro.evaluation.ablation, D43)."""

    subsets: list[tuple[AnswerKey, ...]] = dataclasses.field(
        metadata={"help": "Table 3's rows: the answers averaged into R^ans"})
    datasets: list[str] = dataclasses.field(metadata={"help": "the sets each run is evaluated on"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split evaluated"})
    max_steps: int | None = dataclasses.field(
        default=None, metadata={"help": "optimizer steps per run (None: train.max_steps)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N test questions of each set (None: all)"})

    def __post_init__(self):
        keys = [frozenset(s) for s in self.subsets]
        if not keys or not self.datasets or any(len(k) != len(s) or not k for k, s in zip(keys, self.subsets)) \
                or len(set(keys)) != len(keys):
            raise ConfigError("ablation: need datasets and distinct non-empty subsets of distinct answer names")


@dataclasses.dataclass(frozen=True)
class DesignRow:
    """A row of the reward-design study: the main run with `rewards.design` and, when given, `train.kl_estimator`
    replaced (D159)."""

    design: RewardDesignName = dataclasses.field(metadata={"help": "a row of repro.registry.REWARD_DESIGNS"})
    kl_estimator: KLEstimator | None = dataclasses.field(
        default=None, metadata={"help": "None: the profile's train.kl_estimator"})

    @property
    def name(self) -> str:
        """The row's name in tables and run directories: the design, and the estimator when given (eviomni_k2)."""
        return self.design + (f"_{self.kl_estimator}" if self.kl_estimator else "")


@dataclasses.dataclass(frozen=True)
class RewardDesignsConfig:
    """The reward-design study (issue #18): one GRPO run per row, the profile's run with `rewards.design` (and, for a
    row such as eviomni_k2, `train.kl_estimator`) replaced, each evaluated like Table 2's EviOmni column and compared
    with the row `eviomni` (repro.evaluation.reward_designs, D158-D161)."""

    designs: list[DesignRow] = dataclasses.field(
        metadata={"help": "rows: {design: a rewards.design, kl_estimator: a train.kl_estimator or omitted} (D159)"})
    datasets: list[str] = dataclasses.field(metadata={"help": "test sets each extractor is evaluated on"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split evaluated"})
    max_steps: int | None = dataclasses.field(
        default=None, metadata={"help": "optimizer steps per run (None: train.max_steps)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of N questions of each set (None: all; >= 2 for the tests)"})

    def __post_init__(self):
        if not self.designs or not self.datasets or len({row.name for row in self.designs}) != len(self.designs):
            raise ConfigError("reward_designs: need datasets and distinct design rows")
        if self.max_steps is not None and self.max_steps < 1 or self.max_questions is not None \
                and self.max_questions < 2:
            raise ConfigError("reward_designs: need max_steps >= 1 and max_questions >= 2 (a paired test), or null")


@dataclasses.dataclass(frozen=True)
class LatencyConfig:
    """Table 4: seconds per query of evidence extraction, model load excluded (§4.5: batch 64, 768 new tokens)."""

    datasets: list[str] = dataclasses.field(metadata={"help": "the sets timed (Table 4)"})
    methods: list[EvaluationMethod] = dataclasses.field(metadata={"help": "rows of repro.registry.METHODS"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split the timed questions come from"})
    queries: int = dataclasses.field(
        default=64, metadata={"help": "a seeded subset of N questions, timed in batches of `batch_size`"})
    batch_size: int = dataclasses.field(default=64, metadata={"help": "questions per timed batch"})
    max_new_tokens: int = dataclasses.field(default=768, metadata={"help": "the refiner's output tokens"})
    warmup_batches: int = dataclasses.field(default=1, metadata={"help": "untimed batches first"})
    repetitions: int = dataclasses.field(default=3, metadata={"help": "the median is reported"})
    backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers", metadata={"help": "the generation engine timed"})
    options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "engine kwargs (vLLM: memory, lengths)"})

    def __post_init__(self):
        if not self.datasets or not self.methods:
            raise ConfigError("latency: need datasets and methods")
        if min(self.queries, self.batch_size, self.max_new_tokens, self.repetitions) < 1 or self.warmup_batches < 0:
            raise ConfigError("latency: queries, batch_size, max_new_tokens, repetitions >= 1, warmup_batches >= 0")
        check_generator_options(self.options, self.backend, "latency.options", ("adapter", "dtype", "progress"))


# The agentic study's conditions: the agent alone (Search-R1's prompt), with the extractor (Algorithm 2), and the
# same agent prompted zero-shot with Eval-RAR's App. A.1 template (issue #18, D155).
AgenticCondition = typing.Literal["without", "with", "eval_rar"]


@dataclasses.dataclass(frozen=True)
class AgenticConfig:
    """Search-R1 with and without the evidence extractor (§4.7-4.8, Algorithm 2, Tables 5-6; repro.agentic), and
    the same agent prompted with Eval-RAR's template. The paper gives the agents, E5 over wiki-18, 4 actions and 500
    sampled items per dataset; the rest follows Search-R1's evaluation settings or is ours (docs/decisions.md)."""

    datasets: list[str] = dataclasses.field(
        metadata={"help": "data.datasets entries (Table 5's columns); the agent always retrieves from the corpus"})
    conditions: list[AgenticCondition] = dataclasses.field(
        default_factory=lambda: ["without", "with", "eval_rar"],
        metadata={"help": "without the extractor, with it, and with Eval-RAR's prompt"})
    evaluate_step: typing.Literal["in_turn", "separate"] = dataclasses.field(
        default="in_turn", metadata={"help": "where eval_rar's <evaluate> is written (D155)"})
    split: str = dataclasses.field(
        default="test",
        metadata={"help": "the paper's \"test or development set\" (HotpotQA/2Wiki/MuSiQue map test -> dev)"})
    n_items: int | None = dataclasses.field(
        default=500, metadata={"help": "items sampled per dataset with `seed` (None: all)"})
    seed: int = dataclasses.field(default=0, metadata={"help": "the draw of the items"})
    max_actions: int = dataclasses.field(
        default=4, metadata={"help": "§4.7; Search-R1's max_turns, followed by one final step without search"})
    topk: int = dataclasses.field(
        default=3, metadata={"help": "passages per search: Search-R1's default; the paper does not state it (#39)"})
    max_new_tokens: int = dataclasses.field(
        default=500, metadata={"help": "agent tokens per turn (Search-R1's max_response_length)"})
    max_obs_tokens: int = dataclasses.field(
        default=500, metadata={"help": "observation tokens kept per turn (Search-R1's max_obs_length)"})
    extractor: str | None = dataclasses.field(
        default=None,
        metadata={"help": "null: models.released_extractor if set, else models.extractor; or a checkpoint dir"})
    extractor_max_new_tokens: int = dataclasses.field(
        default=768, metadata={"help": "the extractor's reasoning + evidence, stopped at </extract>"})
    backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers", metadata={"help": "the engine of the agents and the extractor"})
    batch_size: int = dataclasses.field(
        default=8, metadata={"help": "prompts per forward batch (transformers backend)"})
    agent_options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "extra make_generator kwargs"})
    extractor_options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "e.g. vLLM memory share"})
    search_url: str | None = dataclasses.field(
        default=None,
        metadata={"help": "a Search-R1-compatible POST /retrieve URL; null: retrieval.agentic in process"})

    def __post_init__(self):
        positive = ("max_actions", "topk", "max_new_tokens", "max_obs_tokens", "extractor_max_new_tokens", "batch_size")
        if not self.datasets or any(getattr(self, name) < 1 for name in positive) or (self.n_items or 1) < 1:
            raise ConfigError(f"agentic: need datasets, and {', '.join(positive)} and n_items >= 1")
        if not self.conditions or len(set(self.conditions)) != len(self.conditions):
            raise ConfigError(f"agentic.conditions: need one or more distinct conditions, got {self.conditions}")
        check_generator_options(self.agent_options, self.backend, "agentic.agent_options")
        check_generator_options(self.extractor_options, self.backend, "agentic.extractor_options")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArSFTConfig(LaunchedLoRAConfig):
    """The two LoRA SFT runs of the answer-recall study (repro.ar_study): rank 16 and 3 epochs as in §2.2, the rest
    ours (D83)."""

    section: typing.ClassVar[str] = "ar_study.sft"
    lora_rank: int = dataclasses.field(default=16, metadata={"help": "LoRA's rank"})
    lora_alpha: int = dataclasses.field(default=32, metadata={"help": "LoRA's alpha"})
    learning_rate: float = dataclasses.field(default=1e-4, metadata={"help": "AdamW's learning rate"})
    epochs: float = dataclasses.field(default=3.0, metadata={"help": "passes over the examples"})
    max_length: int = dataclasses.field(default=4096, metadata={"help": "tokens per example; longer ones are dropped"})


@dataclasses.dataclass(frozen=True)
class ArTeacherConfig:
    """§2.2's teacher: Table 14 responses for `questions` training questions, the incorrect ones filtered out
    (D77-D79). The paper: DeepSeek-R1 on 1K NQ-train questions, about 620 kept."""

    model: str | None = dataclasses.field(
        metadata={"help": "the served name (openai), a local dir / hub id / embedded:<name>; None for heuristic"})
    backend: typing.Literal["transformers", "vllm", "openai", "heuristic"] = dataclasses.field(
        default="openai",
        metadata={"help": "the teacher's engine (openai: an API; heuristic: no model, mechanics only)"})
    options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "make_generator kwargs (base_url, ...)"})
    dataset: str = dataclasses.field(default="nq", metadata={"help": "a data.datasets entry"})
    split: str = dataclasses.field(default="train", metadata={"help": "the split the teacher answers"})
    questions: int | None = dataclasses.field(default=1000, metadata={"help": "a seeded subset (None: all)"})
    require_answer_in_passages: bool = dataclasses.field(
        default=False, metadata={"help": "draw only questions whose passages hold an answer (has_answer)"})
    samples: int = dataclasses.field(
        default=1, metadata={"help": "tries per question; the first correct one is kept (D78)"})
    do_sample: bool = dataclasses.field(default=True, metadata={"help": "sample the teacher's responses"})
    temperature: float = dataclasses.field(default=0.6, metadata={"help": "the teacher's sampling temperature"})
    top_p: float = dataclasses.field(default=0.95, metadata={"help": "the teacher's nucleus sampling"})
    max_new_tokens: int = dataclasses.field(default=8192, metadata={"help": "tokens per teacher response"})
    scaffold: list[int] | None = dataclasses.field(
        default=None,
        metadata={"help": "tokens of the reason, extract, answer parts when the tags are prefilled (D78)"})
    batch_size: int = dataclasses.field(
        default=8, metadata={"help": "prompts per forward batch (transformers backend)"})
    chunk_size: int = dataclasses.field(default=64, metadata={"help": "questions per resumable chunk"})
    correct_if: typing.Literal["answer_recall", "em"] = dataclasses.field(
        default="answer_recall", metadata={"help": "D77"})

    def __post_init__(self):
        if self.backend != "heuristic" and not self.model:
            raise ConfigError(f"ar_study.teacher: backend {self.backend} needs a model")
        if min(self.samples, self.max_new_tokens, self.batch_size, self.chunk_size) < 1 or (self.questions or 1) < 1:
            raise ConfigError("ar_study.teacher: samples, max_new_tokens, batch_size, chunk_size, questions >= 1")
        if self.samples > 1 and not self.do_sample:
            raise ConfigError("ar_study.teacher: several samples per question need do_sample: true")
        if self.scaffold is not None and (len(self.scaffold) != 3 or min(self.scaffold) < 1
                                          or self.backend not in ("transformers", "vllm")):
            raise ConfigError("ar_study.teacher.scaffold: three positive token budgets, and a local backend "
                              "(transformers or vllm) whose chat template can be prefilled")
        check_generator_options(self.options, self.backend, "ar_study.teacher.options")


@dataclasses.dataclass(frozen=True)
class ArRecallConfig:
    """§2.2's test: answer recall of each variant's evidence (and rationale) on an in-distribution and an
    out-of-distribution set, without the questions whose passages lack the answer, evidence capped (D80-D82)."""

    in_distribution: str = dataclasses.field(metadata={"help": "data.datasets entry in Table 1's NQ row"})
    out_of_distribution: str = dataclasses.field(metadata={"help": "data.datasets entry in Table 1's HotpotQA row"})
    split: str = dataclasses.field(
        default="test", metadata={"help": "HotpotQA: test -> dev through data.datasets splits"})
    exclusion: typing.Literal["answer_recall", "has_answer"] = dataclasses.field(
        default="answer_recall", metadata={"help": "D80"})
    exclude_yes_no: bool = dataclasses.field(
        default=True, metadata={"help": "yes/no answers are no spans: \"no\" is a substring of \"not\" (D80)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "a seeded subset of the kept questions of each set (None: all)"})
    max_new_tokens: int = dataclasses.field(default=1024, metadata={"help": "rationale + evidence of one response"})
    prefill_first_tag: bool = dataclasses.field(
        default=True, metadata={"help": "open the assistant turn with the variant's first tag (D86)"})
    evidence_cap: int = dataclasses.field(
        default=100, metadata={"help": "§2.2: \"the maximum length of the extracted evidence is set to 100\" (D81)"})
    cap_unit: typing.Literal["tokens", "words"] = dataclasses.field(
        default="tokens", metadata={"help": "the unit of the evidence cap"})
    cap_rationale: bool = dataclasses.field(default=False, metadata={"help": "D82"})
    backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers", metadata={"help": "the engine of the recall runs"})
    options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "make_generator kwargs (dtype: models')"})
    batch_size: int = dataclasses.field(default=8, metadata={"help": "prompts per generation batch"})
    chunk_size: int = dataclasses.field(default=64, metadata={"help": "questions per resumable chunk"})

    def __post_init__(self):
        if min(self.max_new_tokens, self.evidence_cap, self.batch_size, self.chunk_size) < 1 or (
                self.max_questions or 1) < 1:
            raise ConfigError("ar_study.evaluation: max_new_tokens, evidence_cap, batch_size, chunk_size, "
                              "max_questions >= 1")
        check_generator_options(self.options, self.backend, "ar_study.evaluation.options", ("adapter", "progress"))


@dataclasses.dataclass(frozen=True)
class ArStudyConfig:
    """The answer-recall study of §2.2 (Table 1, Figure 2; repro.ar_study): teacher synthesis, two LoRA SFT
    variants of `student` (rational: <reason>+<extract> targets; vanilla: <extract> only), answer recall."""

    teacher: ArTeacherConfig = dataclasses.field(
        metadata={"help": "the teacher that writes the rational and vanilla targets"})
    student: str = dataclasses.field(
        metadata={"help": "the base model both variants fine-tune (the paper: Qwen2.5-1.5B-Instruct)"})
    sft: ArSFTConfig = dataclasses.field(metadata={"help": "the LoRA runs of the two variants"})
    evaluation: ArRecallConfig = dataclasses.field(metadata={"help": "the answer-recall runs"})


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    """External assets that `python -m repro.remote fetch --profile P` downloads (repro.remote, D115-D118):
    each hub repo at the commit the lock file records, resolved from its main branch when it enters the lock."""

    lock: str = dataclasses.field(
        default="fetch.lock.yaml",
        metadata={"help": "the committed lock file: repo -> commit, each file's size and sha256"})
    hub: str | None = dataclasses.field(
        default=None,
        metadata={"help": "None: the Hugging Face hub; or a directory laid out like it (a mirror; --from overrides)"})
    prebuilt_index: str | None = dataclasses.field(
        default=None, metadata={"help": "retriever whose index is Search-R1's e5 Flat index (part_aa + part_ab)"})


# The top-level `eviomni` key of params.yaml: which EviOmni extractor the evaluation stages read, named by the
# directory under data/<profile>/ that dvc.yaml makes them depend on (D132).
TRAINED_EVIOMNI = "train/eviomni"  # the dev-selected checkpoint of the profile's GRPO run (stage train_eviomni)
RELEASED_EVIOMNI = "released_extractor"  # models.released_extractor, no training (stage released_extractor)
EVIOMNI_SOURCES = (TRAINED_EVIOMNI, RELEASED_EVIOMNI)
# The studies whose method lists `eviomni: released_extractor` rewrites: Tables 2, 4, 9-10 and Figure 5.
EVIOMNI_STUDIES = ("evaluation", "latency", "distractor", "noise_robustness")


@dataclasses.dataclass(frozen=True)
class ReleasedCheckConfig:
    """The check of the authors' checkpoints before a study uses them (repro.evaluation.released, D179): Table 14 on
    seeded questions, decoded as the `evaluation` section decodes `eviomni_released`; format rate, evidence length and
    CR against Table 2's EviOmni CR. Below a floor the released_extractor stage refuses; a null floor only reports."""

    dataset: str = dataclasses.field(metadata={"help": "data.datasets entry the questions come from (the paper: nq)"})
    split: str = dataclasses.field(
        default="dev", metadata={"help": "the split the released checkpoints are checked on"})
    questions: int = dataclasses.field(default=100, metadata={"help": "a seeded subset of the split"})
    format_check: typing.Literal["strict", "lenient"] = dataclasses.field(
        default="lenient", metadata={"help": "the repro.tags check the format rate counts (D147)"})
    min_format_rate: float | None = dataclasses.field(
        default=None, metadata={"help": "refuse below this share of well-formatted outputs (null: report only)"})
    cr_factor: float | None = dataclasses.field(
        default=None, metadata={"help": "refuse a CR outside [paper / f, paper x f] (null: report only)"})
    paper_sizes: dict[str, typing.Literal["1.5B", "7B"]] = dataclasses.field(
        default_factory=dict, metadata={"help": "checkpoint reference -> the Table 2 size whose EviOmni CR it meets"})

    def __post_init__(self):
        if self.questions < 1 or self.min_format_rate is not None and not 0 < self.min_format_rate <= 1 \
                or self.cr_factor is not None and self.cr_factor <= 1:
            raise ConfigError("released_check: need questions >= 1, 0 < min_format_rate <= 1 and cr_factor > 1 "
                              "(or null floors)")


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str = dataclasses.field(metadata={"help": "the profile's key in params.yaml (set by load_profile)"})
    description: str = dataclasses.field(metadata={"help": "one line on what the profile is for"})
    seed: int = dataclasses.field(metadata={"help": "seeds every draw the profile makes (splits, subsets, warm-up)"})
    models: ModelsConfig = dataclasses.field(metadata={"help": "the models of every stage"})
    rewards: RewardsConfig = dataclasses.field(
        default_factory=RewardsConfig, metadata={"help": "defaults = the paper + D16"})
    data: DataConfig | None = dataclasses.field(
        default=None, metadata={"help": "None only in minimal test profiles; the data stage requires it"})
    retrieval: RetrievalConfig | None = dataclasses.field(default=None, metadata={"help": "the retrievers"})
    noise: NoiseConfig | None = dataclasses.field(default=None, metadata={"help": "the noisy contexts of Figure 5"})
    train: TrainConfig | None = dataclasses.field(
        default=None, metadata={"help": "GRPO training of the extractor (repro.train)"})
    qa_generator: QAGeneratorConfig | None = dataclasses.field(
        default=None, metadata={"help": "LoRA QA generator (repro.train.sft)"})
    filco: FilCoConfig | None = dataclasses.field(
        default=None, metadata={"help": "FilCo's trained filter (repro.baselines.filco)"})
    seer: SEERConfig | None = dataclasses.field(
        default=None, metadata={"help": "SEER's self-aligned extractor (repro.baselines.seer)"})
    evaluation: EvaluationConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 2 (repro.evaluation)"})
    released_check: ReleasedCheckConfig | None = dataclasses.field(
        default=None, metadata={"help": "before the released checkpoints are used"})
    latency: LatencyConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 4 (repro.evaluation.latency)"})
    ablation: AblationConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 3 (repro.evaluation.ablation; None: not run, \"not requested\")"})
    reward_designs: RewardDesignsConfig | None = dataclasses.field(
        default=None, metadata={"help": "issue #18 (repro.evaluation.reward_designs; None: not run)"})
    length_tuning: LengthTuningConfig | None = dataclasses.field(
        default=None, metadata={"help": "τ, γ on a dev grid (repro.train.length_tuning; None: not run)"})
    evidence: EvidenceConfig | None = dataclasses.field(
        default=None, metadata={"help": "issue #31's experiment (repro.train.evidence_gate; None: not run)"})
    distractor: DistractorConfig | None = dataclasses.field(
        default=None, metadata={"help": "Tables 9-10 (repro.evaluation.study)"})
    noise_robustness: NoiseRobustnessConfig | None = dataclasses.field(
        default=None, metadata={"help": "Figure 5 (repro.evaluation.study)"})
    baselines: BaselinesConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 2's VAR baselines (repro.baselines)"})
    agentic: AgenticConfig | None = dataclasses.field(default=None, metadata={"help": "Tables 5-6 (repro.agentic)"})
    ar_study: ArStudyConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 1, Figure 2 (repro.ar_study)"})
    fetch: FetchConfig | None = dataclasses.field(
        default=None, metadata={"help": "hub assets at locked commits (repro.remote; paper profiles)"})
    eviomni: str = dataclasses.field(
        default=TRAINED_EVIOMNI,
        metadata={"help": "params.yaml's top-level `eviomni` (set by load_profile, not per profile)"})


def is_main_run(cfg: Profile, answer_subset: typing.Sequence[str]) -> bool:
    """Whether Table 3's run of `answer_subset` is the main GRPO run (D165): the same answers in R^ans, as a set
    (Eq. 5 averages them, D19), and the same step budget (`ablation.max_steps` null or `train.max_steps`); every
    other setting of the two runs is the profile's. The ablation then reuses the main run's extractor."""
    ab = cfg.ablation
    return (ab is not None and frozenset(answer_subset) == frozenset(cfg.rewards.answer_subset)
            and ab.max_steps in (None, cfg.train.max_steps))


def is_main_design_run(cfg: Profile, row: DesignRow) -> bool:
    """Whether the reward-design study's run of `row` is the main GRPO run (D170, as D165 for Table 3): the row names
    the profile's `rewards.design` and its `train.kl_estimator` (or none), at the main run's step budget
    (`reward_designs.max_steps` null or `train.max_steps`). The study then reuses the main run's extractor."""
    rd = cfg.reward_designs
    if rd is None:
        return False
    return (row.design == cfg.rewards.design and row.kl_estimator in (None, cfg.train.kl_estimator)
            and rd.max_steps in (None, cfg.train.max_steps))


def with_overrides(cfg: Profile, overrides: typing.Mapping[str, Any]) -> Profile:
    """A variant of `cfg`, the one way a study derives a run from the profile (Table 3's answer subsets, the
    reward-design rows, the τ/γ grid, the evidence seeds): each dotted key of `overrides` ("train.max_steps") set to
    its value, checked against the field's type as params.yaml's values are."""
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        settings, where = getattr(cfg, section, None), f"profiles.{cfg.name}.{key}"
        if not dataclasses.is_dataclass(settings) or name not in {f.name for f in dataclasses.fields(settings)}:
            raise ConfigError(f"{where}: not a setting of the profile")
        checked = _check_value(list(value) if isinstance(value, tuple) else value,
                               typing.get_type_hints(type(settings))[name], where)
        cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(settings, **{name: checked})})
    return cfg


def with_released_eviomni(cfg: Profile, where: str) -> Profile:
    """`cfg` under `eviomni: released_extractor`: the studies evaluate models.released_extractor in place of the
    trained extractor, i.e. method `eviomni` becomes `eviomni_released` in every list of EVIOMNI_STUDIES (once, where
    the list names both). None of them then reads the GRPO run (D132); Table 3 trains, and may reuse it (D165)."""
    if cfg.models.released_extractor is None:
        raise ConfigError(f"{where}.models.released_extractor: null, but params.yaml's top-level `eviomni` is "
                          f"'{RELEASED_EVIOMNI}'; name the released checkpoint or set `eviomni: {TRAINED_EVIOMNI}`")
    sections = {}
    for section in EVIOMNI_STUDIES:
        settings = getattr(cfg, section)
        if settings is not None:
            methods = ["eviomni_released" if m == "eviomni" else m for m in settings.methods]
            sections[section] = dataclasses.replace(settings, methods=list(dict.fromkeys(methods)))
    return dataclasses.replace(cfg, eviomni=RELEASED_EVIOMNI, **sections)


def _is_optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _check_value(value: Any, tp: Any, where: str) -> Any:
    """Validate (and lightly coerce: int -> float) one value against a type hint."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if _is_optional(tp):
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _check_value(value, inner, where)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{where}: {value!r} is not one of {list(typing.get_args(tp))}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_check_value(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        _, val_tp = typing.get_args(tp) or (Any, Any)
        return {k: _check_value(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool) or not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
    return value


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            try:
                kwargs[name] = _check_value(data[name], hints[name], f"{where}.{name}")
            except ConfigError as err:  # the field's own error gets its help; a nested field's has its own
                raise ConfigError(f"{err}{field_help(f)}" if str(err).startswith(f"{where}.{name}:") else str(err)) \
                    from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key '{name}'{field_help(f)}")
    return cls(**kwargs)


def field_help(f: dataclasses.Field) -> str:
    """" (<the field's help>)" for an error message, or "" for a field without one."""
    return f" ({f.metadata['help']})" if "help" in f.metadata else ""


def _check_unique_keys(node: yaml.Node, where: str, path: str = "") -> None:
    """ConfigError for a key given twice in one mapping (PyYAML would keep the last one silently)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be overridden; that is no duplicate
                continue
            line = key.start_mark.line + 1
            if key.value in seen:
                raise ConfigError(f"{where}:{line}: {path}{key.value}: duplicate key (first given on line "
                                  f"{seen[key.value]})")
            seen[key.value] = line
            _check_unique_keys(value, where, f"{path}{key.value}.")
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, where, f"{path.rstrip('.')}[{i}].")


def _check_finite(value: Any, where: str, path: str = "") -> None:
    """ConfigError for a NaN or an infinity (`.nan`, `.inf`) anywhere in the parameters."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {path.rstrip('.')}: {value} is not allowed (NaN and infinities are rejected)")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, where, f"{path}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, where, f"{path.rstrip('.')}[{i}].")


def read_params(params_path: str | Path = PARAMS_FILE) -> dict:
    """params.yaml as a dict; a duplicate key, a NaN or an infinity is a ConfigError naming its key path (D107)."""
    loader = yaml.SafeLoader(Path(params_path).read_text(encoding="utf-8"))
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_unique_keys(node, str(params_path))
        params = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    _check_finite(params, str(params_path))
    if not isinstance(params, dict) or not isinstance(params.get("profiles"), dict):
        raise ConfigError(f"{params_path}: expected a mapping with a 'profiles' section")
    return params


def profile_names(params_path: str | Path = PARAMS_FILE) -> list[str]:
    return list(read_params(params_path)["profiles"])


def walk(value, path: str) -> Iterator[tuple[str, object]]:
    """(key path, value) of `value` and of every section, mapping, list item and leaf under it, dataclasses read as
    mappings: `walk(cfg.train, "train")` yields ("train", {...}), ("train.dataset", "nq"), ... in field order."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


def load_profile(name: str | None = None, params_path: str | Path = PARAMS_FILE) -> Profile:
    """Load profile `name` (default: the top-level `profile` key) and validate it against the schema."""
    params = read_params(params_path)
    name = name or params.get("profile")
    if not name:
        raise ConfigError(f"{params_path}: no profile given and no top-level 'profile' key")
    profiles = params["profiles"]
    if name not in profiles:
        raise ConfigError(f"{params_path}: unknown profile '{name}'; defined: {sorted(profiles)}")
    where = f"{params_path}: profiles.{name}"
    if isinstance(profiles[name], dict) and "eviomni" in profiles[name]:
        raise ConfigError(f"{where}.eviomni: the EviOmni switch is the top-level `eviomni` key, not a profile key")
    eviomni = _check_value(params.get("eviomni", TRAINED_EVIOMNI), typing.Literal[EVIOMNI_SOURCES],
                           f"{params_path}: eviomni")
    cfg = _build(Profile, {"name": name, **profiles[name]}, where)
    _check_method_settings(cfg, where)
    return with_released_eviomni(cfg, where) if eviomni == RELEASED_EVIOMNI else cfg


def _check_method_settings(cfg: Profile, where: str) -> None:
    """Each method a study lists has the settings its registry row reads (`repro.registry.missing_settings`)."""
    for section in EVIOMNI_STUDIES:
        listed = getattr(cfg, section)
        for key in listed.methods if listed is not None else []:
            if missing := missing_settings(cfg, METHODS[key]):
                raise ConfigError(f"{where}.{section}.methods: {key} reads {missing}, which is missing or null")
