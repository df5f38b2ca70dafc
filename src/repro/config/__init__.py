"""Typed experiment profiles read from params.yaml.

params.yaml holds a top-level `profile` key (the profile `dvc repro` runs) and a `profiles` mapping. Every
profile is written out in full (YAML anchors share sections), so the keys DVC tracks for a stage,
`profiles.<profile>.<section>`, are exactly the values the stage reads. Each section is a dataclass: a
misspelt or unknown key fails loudly with its full path instead of being silently ignored.

    >>> cfg = load_profile("ci")          # or load_profile() for the selected one
    >>> cfg.retrieval.topk

The sections live in modules by topic (schema: how params.yaml is read and checked; models, rewards, data,
training, studies, agentic, ar_study; profile: the profile, its loading and the variants studies derive from
it); everything is imported from here.
"""

from repro.config.schema import _build, ConfigError, field_help, PARAMS_FILE, profile_names, read_params, walk
from repro.config.models import check_generator_options, GENERATOR_OPTIONS, ModelsConfig
from repro.config.rewards import KLEstimator, RewardDesignName, RewardsConfig
from repro.config.data import (
    CorpusConfig, DataConfig, DatasetConfig, FetchConfig, NoiseConfig, RetrievalConfig, RetrieverConfig,
)
from repro.config.training import (
    FilCoConfig, FormatWarmupConfig, LaunchedLoRAConfig, LoRASFTConfig, PolicyLoRAConfig, QAGeneratorConfig, SEERConfig,
    SelectionMetric, TrainConfig, WarmupAnswers, WarmupTargets,
)
from repro.config.studies import (
    AblationConfig, AnswerKey, BaselinesConfig, DesignRow, DistractorConfig, EvaluationConfig, EvaluationMethod,
    EvidenceConfig, EVIOMNI_SOURCES, LatencyConfig, LengthTuningConfig, LLMLingua2Config,
    NoiseRobustnessConfig, RecompConfig, RELEASED_EVIOMNI, ReleasedCheckConfig, RewardDesignsConfig,
    SelectiveContextConfig, TRAINED_EVIOMNI,
)
from repro.config.agentic import AgenticCondition, AgenticConfig
from repro.config.ar_study import ArRecallConfig, ArSFTConfig, ArStudyConfig, ArTeacherConfig
from repro.config.profile import (
    is_main_design_run, is_main_run, load_profile, Profile, with_overrides, with_released_eviomni,
)
