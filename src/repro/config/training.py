"""GRPO and the LoRA runs (`train`, `qa_generator`, `filco`, `seer`)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.models import check_generator_options
from repro.config.rewards import KLEstimator
from repro.config.schema import ConfigError


# dev metrics that select a checkpoint (train.selection_metric) or a (τ, γ) pair (length_tuning.metric)
SelectionMetric = typing.Literal["f1_evidence", "em_evidence", "f1_full", "em_full", "f1_rationale", "em_rationale",
                                 "reward_final"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoRASFTConfig:
    """A LoRA adapter and the HF Trainer settings that fit it (repro.train.lora.runner); shared by the QA generator and
    the trained baselines (FilCo's filter, SEER's extractor)."""

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
    """A LoRA SFT of the policy on rollouts in the exact format before GRPO (repro.train.grpo.warmup, D90): a stand-in
    for the instruction following of the paper's 1.5B/7B models, which the 135M CPU model lacks. The adapter is merged.
    `targets`: format_only (a seeded random sentence, blind to the golden answers; D141) or string_inclusion (the
    sentence holding a golden answer and that answer: the supervision GRPO should learn; D142). `answers`, for
    format_only: the base model's own greedy answer after the target's extract (D189) or a span of the sentence
    (D141). `adapter`: a warm-up adapter recorded by another run, merged instead of fitting one (a control arm's
    start on another CPU, D246)."""

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
    adapter: str | None = dataclasses.field(
        default=None, metadata={"help": "a recorded warm-up adapter directory (adapter_config.json, "
                                        "adapter_model.safetensors) merged instead of fitting one; None: fit (D246)"})


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
