"""The answer-recall study (`ar_study`; §2.2, Table 1)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.models import check_generator_options
from repro.config.schema import ConfigError
from repro.config.training import LaunchedLoRAConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class ArSFTConfig(LaunchedLoRAConfig):
    """The two LoRA SFT runs of the answer-recall study (repro.studies.ar_study): rank 16 and 3 epochs as in §2.2, the
    rest ours (D83)."""

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
    """The answer-recall study of §2.2 (Table 1, Figure 2; repro.studies.ar_study): teacher synthesis, two LoRA SFT
    variants of `student` (rational: <reason>+<extract> targets; vanilla: <extract> only), answer recall."""

    teacher: ArTeacherConfig = dataclasses.field(
        metadata={"help": "the teacher that writes the rational and vanilla targets"})
    student: str = dataclasses.field(
        metadata={"help": "the base model both variants fine-tune (the paper: Qwen2.5-1.5B-Instruct)"})
    sft: ArSFTConfig = dataclasses.field(metadata={"help": "the LoRA runs of the two variants"})
    evaluation: ArRecallConfig = dataclasses.field(metadata={"help": "the answer-recall runs"})
