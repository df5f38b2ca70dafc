"""The studies' sections: Table 2 and its baselines, Tables 3, 4, 9-10, Figure 5, the reward designs, the length
tuning, the evidence experiment and the released checkpoints' check."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.models import check_generator_options
from repro.config.rewards import KLEstimator, RewardDesignName
from repro.config.schema import ConfigError
from repro.config.training import SelectionMetric
from repro.registry import METHODS


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
    profile (repro.studies.length_tuning, D150)."""

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
    """Issue #31's CPU evidence experiment (docs/cpu-evidence.md). Its gate (repro.studies.evidence_gate): greedy o_e
    from a sentence holding a golden answer against one holding none, on `gate_questions` training questions; it
    passes when the F1 contrast is at least `gate_min_contrast` and its 95% interval excludes 0 (decided before the
    run). Then, if it passed (repro.studies.evidence_seeds): one GRPO run of the profile's `train` recipe per GRPO seed
    of `seeds` (`train.seed`), from the one warm-up, each scored against the starting policy on `heldout_questions`
    answerable held-out dev questions (repro.studies.heldout). With `recipe_profile` the profile is a control arm
    (issue #49's placebo, repro.studies.evidence_placebo): its seeds are paired with that profile's, whose start
    scores it reuses when `recipe_start` is "same_weights" (the default: the two warm-ups must be the same weights)
    and beside which it scores its own start when "rescored" (the recipe's record came from a CPU whose arithmetic
    gave other weights; docs/cpu-evidence.md, amendment of 2026-12-02 evening, D245)."""

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
    recipe_profile: str | None = dataclasses.field(
        default=None, metadata={"help": "a control arm's recipe (issue #49's placebo): the profile whose "
                                        "evidence_seeds run, in this clone, is paired seed by seed with this one's; "
                                        "None: none"})
    recipe_start: typing.Literal["same_weights", "rescored"] = dataclasses.field(
        default="same_weights", metadata={"help": "a control arm's start: 'same_weights' reuses the recipe's start "
                                                  "scores and refuses other weights; 'rescored' scores this arm's own "
                                                  "start and keeps the recipe's beside it (D245)"})

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
    column with the profile's `evaluation` settings (repro.studies.ablation, D43)."""

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
    with the row `eviomni` (repro.studies.reward_designs, D158-D161)."""

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


# The top-level `eviomni` key of params.yaml: which EviOmni extractor the evaluation stages read, named by the
# directory under data/<profile>/ that dvc.yaml makes them depend on (D132).
TRAINED_EVIOMNI = "train/eviomni"  # the dev-selected checkpoint of the profile's GRPO run (stage train_eviomni)
RELEASED_EVIOMNI = "released_extractor"  # models.released_extractor, no training (stage released_extractor)
EVIOMNI_SOURCES = (TRAINED_EVIOMNI, RELEASED_EVIOMNI)


@dataclasses.dataclass(frozen=True)
class ReleasedCheckConfig:
    """The check of the authors' checkpoints before a study uses them (repro.studies.released, D179): Table 14 on
    seeded questions, decoded as the `evaluation` section decodes `eviomni_released`; format rate, evidence length and
    CR against Table 2's EviOmni CR. Below a floor the released_extractor stage refuses; a null floor only reports."""

    dataset: str = dataclasses.field(metadata={"help": "data.datasets entry the questions come from (the paper: nq)"})
    split: str = dataclasses.field(
        default="dev", metadata={"help": "the split the released checkpoints are checked on"})
    questions: int = dataclasses.field(default=100, metadata={"help": "a seeded subset of the split"})
    format_check: typing.Literal["strict", "lenient"] = dataclasses.field(
        default="lenient", metadata={"help": "the repro.formulas.tags check the format rate counts (D147)"})
    min_format_rate: float | None = dataclasses.field(
        default=None, metadata={"help": "refuse below this share of well-formatted outputs (null: report only)"})
    cr_factor: float | None = dataclasses.field(
        default=None, metadata={"help": "refuse a CR outside [paper / f, paper x f] (null: report only)"})
    paper_sizes: dict[str, typing.Literal["1.5B", "7B"]] = dataclasses.field(
        default_factory=dict, metadata={"help": "checkpoint reference -> the Table 2 size whose EviOmni CR it meets"})
    stop: list[str] = dataclasses.field(
        default_factory=lambda: ["</extract>"],
        metadata={"help": "where the released checkpoints' generation stops, in the check and in every study (their "
                          "prompt and decoding are unpublished: D216)"})
    max_new_tokens: int | None = dataclasses.field(
        default=None, metadata={"help": "their evidence budget (null: evaluation.evidence_max_new_tokens)"})

    def __post_init__(self):
        if not self.stop or not all(self.stop) or (self.max_new_tokens is not None and self.max_new_tokens < 1):
            raise ConfigError("released_check: stop needs non-empty strings and max_new_tokens >= 1 (or null)")
        if self.questions < 1 or self.min_format_rate is not None and not 0 < self.min_format_rate <= 1 \
                or self.cr_factor is not None and self.cr_factor <= 1:
            raise ConfigError("released_check: need questions >= 1, 0 < min_format_rate <= 1 and cr_factor > 1 "
                              "(or null floors)")
