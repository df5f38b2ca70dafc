"""A profile: its sections, how it loads, and the variants studies derive from it."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

from repro.config.agentic import AgenticConfig
from repro.config.ar_study import ArStudyConfig
from repro.config.data import DataConfig, FetchConfig, NoiseConfig, RetrievalConfig
from repro.config.models import ModelsConfig
from repro.config.rewards import RewardsConfig
from repro.config.schema import _build, _check_value, ConfigError, PARAMS_FILE, read_params
from repro.config.studies import (
    AblationConfig, BaselinesConfig, DesignRow, DistractorConfig, EvaluationConfig, EvidenceConfig, EVIOMNI_SOURCES,
    LatencyConfig, LengthTuningConfig, NoiseRobustnessConfig, RELEASED_EVIOMNI, ReleasedCheckConfig,
    RewardDesignsConfig, TRAINED_EVIOMNI,
)
from repro.config.training import FilCoConfig, QAGeneratorConfig, SEERConfig, TrainConfig
from repro.registry import METHOD_LISTS, METHODS, missing_settings


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
        default=None, metadata={"help": "LoRA QA generator (repro.stages.qa_generator)"})
    filco: FilCoConfig | None = dataclasses.field(
        default=None, metadata={"help": "FilCo's trained filter (repro.baselines.filco)"})
    seer: SEERConfig | None = dataclasses.field(
        default=None, metadata={"help": "SEER's self-aligned extractor (repro.baselines.seer)"})
    evaluation: EvaluationConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 2 (repro.evaluation)"})
    released_check: ReleasedCheckConfig | None = dataclasses.field(
        default=None, metadata={"help": "before the released checkpoints are used"})
    latency: LatencyConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 4 (repro.studies.latency)"})
    ablation: AblationConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 3 (repro.studies.ablation; None: not run, \"not requested\")"})
    reward_designs: RewardDesignsConfig | None = dataclasses.field(
        default=None, metadata={"help": "issue #18 (repro.studies.reward_designs; None: not run)"})
    length_tuning: LengthTuningConfig | None = dataclasses.field(
        default=None, metadata={"help": "τ, γ on a dev grid (repro.studies.length_tuning; None: not run)"})
    evidence: EvidenceConfig | None = dataclasses.field(
        default=None, metadata={"help": "issue #31's experiment (repro.studies.evidence_gate; None: not run)"})
    distractor: DistractorConfig | None = dataclasses.field(
        default=None, metadata={"help": "Tables 9-10 (repro.studies.comparison)"})
    noise_robustness: NoiseRobustnessConfig | None = dataclasses.field(
        default=None, metadata={"help": "Figure 5 (repro.studies.comparison)"})
    baselines: BaselinesConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 2's VAR baselines (repro.baselines)"})
    agentic: AgenticConfig | None = dataclasses.field(default=None, metadata={"help": "Tables 5-6 (repro.agentic)"})
    ar_study: ArStudyConfig | None = dataclasses.field(
        default=None, metadata={"help": "Table 1, Figure 2 (repro.studies.ar_study)"})
    fetch: FetchConfig | None = dataclasses.field(
        default=None, metadata={"help": "hub assets at locked commits (repro.ops.remote; paper profiles)"})
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
    trained extractor, i.e. method `eviomni` becomes `eviomni_released` in every list of METHOD_LISTS (once, where
    the list names both). None of them then reads the GRPO run (D132); Table 3 trains, and may reuse it (D165)."""
    if cfg.models.released_extractor is None:
        raise ConfigError(f"{where}.models.released_extractor: null, but params.yaml's top-level `eviomni` is "
                          f"'{RELEASED_EVIOMNI}'; name the released checkpoint or set `eviomni: {TRAINED_EVIOMNI}`")
    sections = {}
    for section in METHOD_LISTS:
        settings = getattr(cfg, section)
        if settings is not None:
            methods = ["eviomni_released" if m == "eviomni" else m for m in settings.methods]
            sections[section] = dataclasses.replace(settings, methods=list(dict.fromkeys(methods)))
    return dataclasses.replace(cfg, eviomni=RELEASED_EVIOMNI, **sections)


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
    for section in METHOD_LISTS:
        listed = getattr(cfg, section)
        for key in listed.methods if listed is not None else []:
            if missing := missing_settings(cfg, METHODS[key]):
                raise ConfigError(f"{where}.{section}.methods: {key} reads {missing}, which is missing or null")
