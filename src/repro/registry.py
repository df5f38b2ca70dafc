"""One row per extension point, as data: the methods a study can evaluate (Table 2's columns), the reward designs
GRPO can train with (EviOmni's Eq. 5 and the neighbours' designs, issue #18) and the pipeline's stages (`STAGES`, one
per dvc.yaml stage).

Everything else that knows a method reads its row: the `EvaluationMethod` values a profile may list
(`repro.config`), the refiner a study builds (`repro.evaluation.methods.build_refiner` imports `build`), the settings a
profile must hold for it (checked when the profile loads), the price the cost model gives it (`repro.ops.costs`) and the
paper's name the claims ledger reads it under (`repro.reporting.ledger`). Adding a baseline is its module (a refiner and
a `build(key, cfg, pool, params)` function), a row here, its settings class in `repro.config` with a field where the
row's `settings` points, and its values in params.yaml; one with weights of its own names the stage that writes them
(`stages`), and `python -m repro.ops.pipeline_deps` checks that every stage evaluating a method list (`METHOD_LISTS`)
depends on it. Nothing here imports the code it names: `tests/test_registry.py` resolves every row and checks that its
builder sits in a layer `repro.evaluation.methods` may import.

A reward design's row names its score function in `repro.formulas.rewards` (the paper's formulas), the inputs it reads
(`INPUTS`: the rollout's columns and the objects the trainer passes) and the `rewards.*` settings it reads beyond the
paper's: the `rewards.design` values a profile may set, the dataset columns GRPO must carry and the inputs the reward
function checks all come from it. Adding a design is its score function in `repro.formulas.rewards`, a row here, and any
new setting in `RewardsConfig`.

A stage's row names its module (`repro.stages.<name>`), its notebook, the profile section that switches it off, its
function in the cost model, its preflight checks, where the ledger reads its paired tests or verdict, and its DVC
metrics and plots: the cost model's stages, the preflight's checks, the ledger's studies and `METHOD_LISTS` are read
from it, and `tests/test_registry.py` holds dvc.yaml, `src/repro/stages/` and the rows in agreement.
"""

from __future__ import annotations

import dataclasses

GROUPS = {"WR": "without refinement", "VAR": "vanilla refinement", "RAR": "rational refinement"}
COSTS = {  # how the cost model prices a method's refinement, beside the QA generator's answer every method pays
    "answer": "no refinement model (none, or a rule on the passages): the answer only",
    "compressor": "an encoder scores every passage on one GPU; the model is the `model_field` of its settings",
    "llm": "the extractor model decodes the evidence on the engine replicas (with an adapter: one engine shared)",
    "llm_own_engine": "a full checkpoint of its own decodes the evidence: an engine of its own",
}


@dataclasses.dataclass(frozen=True)
class Method:
    """A method of the evaluation studies (Tables 2, 4, 9-10, Figure 5)."""

    key: str  # what params.yaml lists under evaluation.methods, latency.methods, ...
    label: str  # its column in our tables
    group: str  # GROUPS: WR, VAR or RAR
    paper_method: str | None  # its name in data/paper and the claims (None: not in the paper)
    build: str  # "module:function" returning its refiner, called as function(key, cfg, pool, params)
    cost: str  # COSTS
    settings: str | None = None  # the profile section it reads (dotted, e.g. "baselines.recomp"); None: none
    model_field: str | None = None  # the field of `settings` that names a compressor's model
    tagged: bool = False  # a rational extractor: evidence read from `<extract>`, else the untagged output (D9)
    stages: tuple[str, ...] = ()  # the dvc.yaml stages whose outputs its refiner reads (its weights, its adapter)
    adapter: bool = False  # its refiner serves a LoRA adapter on models.extractor: that engine reserves LoRA slots
    # the prompt over the passages that bounds its engines' contexts (repro.ops.preflight): "table14" for a refinement
    # template an engine decodes (Table 14's is the longest), "passages_qa" for Table 11 over the passages or a
    # compression of them; None: no passages
    prompt: str | None = None


METHODS: dict[str, Method] = {m.key: m for m in [
    Method("zero", "Zero", "WR", "Zero", "repro.evaluation.methods:closed_book", "answer"),
    Method("full", "Full", "WR", "Full", "repro.evaluation.methods:full_passages", "answer", prompt="passages_qa"),
    Method("lead_sentence", "Lead sentence", "VAR", None,  # passage 1's first sentence: the extractors' floor (D209)
           "repro.baselines.lead_sentence:build", "answer", prompt="passages_qa"),
    Method("selective_context", "SeleCtx", "VAR", "SeleCtx", "repro.baselines.selective_context:build",
           "compressor", "baselines.selective_context", "model", stages=("assets",), prompt="passages_qa"),
    Method("llmlingua2", "LLMLingua-2", "VAR", "LLMLingua-2", "repro.baselines.llmlingua2:build", "compressor",
           "baselines.llmlingua2", "model", stages=("assets",), prompt="passages_qa"),
    Method("llmlingua2_standin", "LLMLingua-2 (untrained stand-in)", "VAR", "LLMLingua-2",  # an UNTRAINED head
           "repro.baselines.llmlingua2:build", "compressor", "baselines.llmlingua2", "standin", stages=("assets",),
           prompt="passages_qa"),
    Method("recomp", "RECOMP", "VAR", "RECOMP", "repro.baselines.recomp:build", "compressor", "baselines.recomp",
           "model", stages=("assets",), prompt="passages_qa"),
    Method("cot", "CoT", "RAR", "CoT", "repro.evaluation.methods:prompted_refiner", "llm", stages=("assets",),
           prompt="table14"),
    Method("prompted_extractor", "Prompted extraction", "RAR", None,  # Table 14 on the untrained extractor
           "repro.evaluation.methods:prompted_refiner", "llm", tagged=True, stages=("assets",), prompt="table14"),
    Method("eviomni", "EviOmni", "RAR", "EviOmni", "repro.evaluation.methods:prompted_refiner", "llm_own_engine",
           tagged=True, stages=("train_eviomni",), prompt="table14"),
    Method("eviomni_released", "EviOmni (released)", "RAR", "EviOmni", "repro.evaluation.methods:prompted_refiner",
           "llm_own_engine", "models.released_extractor", tagged=True, stages=("released_extractor",),
           prompt="table14"),
    Method("filco", "FilCo", "VAR", "FilCo", "repro.baselines.filco:build", "llm", "filco", stages=("filco_train",),
           adapter=True, prompt="table14"),
    Method("seer", "SEER", "VAR", "SEER", "repro.baselines.seer:build", "llm", "seer", stages=("seer_train",),
           adapter=True, prompt="table14"),
]}


def settings_of(profile, method: Method):
    """The value at the method's `settings` path of a profile, attribute by attribute; None where a section on the
    way is null (and for a method that reads no settings)."""
    if not method.settings:
        return None
    value = profile
    for name in method.settings.split("."):
        value = getattr(value, name, None)
        if value is None:
            return None
    return value


def missing_settings(profile, method: Method) -> str | None:
    """The settings key a profile lacks for `method` (its section, or its compressor's model field), or None."""
    settings = settings_of(profile, method)
    if method.settings and settings is None:
        return method.settings
    if method.model_field and getattr(settings, method.model_field) is None:
        return f"{method.settings}.{method.model_field}"
    return None


INPUTS = {  # what a reward design may read, and where the trainer gets it
    "o_r": "masked answer", "o_e": "masked answer",  # Eq. 4's answers, generated when a design reads one
    "passages_length": "column", "question": "column", "gold_passages": "column",  # the GRPO dataset's columns
    "tokenizer": "object", "nli": "object",  # passed by the trainer (the NLI model only to designs that read it)
}
MAY_BE_NONE = ("o_r", "o_e", "tokenizer")  # None outside the answer subset, and when lengths are counted in words


EQ5_SCORE = "eviomni_design"  # the paper's own reward, Eq. 5


@dataclasses.dataclass(frozen=True)
class RewardDesign:
    """A reward for GRPO: `repro.formulas.rewards.<score>(response, golden_answers, cfg, **inputs)` with exactly the
    inputs of `requires` (keys of INPUTS), and `answer_metric=` the row's for a design with `eq5_terms`."""

    name: str  # the value of params.yaml's rewards.design
    score: str  # its function in repro.formulas.rewards
    requires: tuple[str, ...]
    knobs: tuple[str, ...]  # the rewards.* settings it reads beyond the paper's
    source: str  # where the paper (or its neighbour) defines it
    eq5_terms: bool = False  # its reward holds Eq. 5's R^final: scored with answer_metric, each term logged in training
    answer_metric: str = "f1"  # R^ans's metric in Eq. 5, a key of repro.formulas.metrics.ANSWER_METRICS
    # a placebo (issue #49): λ1·R^ans permuted within each GRPO group before the advantages
    # (repro.formulas.rewards.placebo_final_rewards)
    answer_permuted: bool = False

    @property
    def is_eq5(self) -> bool:
        """Whether its reward is Eq. 5's R^final itself (logged as `reward_final`, not again under its name)."""
        return self.score == EQ5_SCORE

    @property
    def masked_answers(self) -> bool:
        """Whether the trainer must generate o_r, o_e (Eq. 4) for this design."""
        return any(INPUTS[k] == "masked answer" for k in self.requires)

    @property
    def columns(self) -> tuple[str, ...]:
        """The GRPO dataset columns it reads."""
        return tuple(k for k in self.requires if INPUTS[k] == "column")


REWARD_DESIGNS: dict[str, RewardDesign] = {d.name: d for d in [
    RewardDesign("eviomni", "eviomni_design", ("o_r", "o_e", "passages_length", "tokenizer"), (),
                 "EviOmni (seed 000) Eq. 5: λ1·R^ans + λ2·R^len + λ3·R^fmt", eq5_terms=True),
    RewardDesign("eviomni_eqr", "eviomni_eqr_design",
                 ("o_r", "o_e", "passages_length", "tokenizer", "question", "nli"), ("nli_model",),
                 "EviOmni Eq. 5 + EviNote-RAG's R_EQR of the evidence (digest §5.2.1)", eq5_terms=True),
    RewardDesign("eviomni_placebo", "eviomni_design", ("o_r", "o_e", "passages_length", "tokenizer"), (),
                 "issue #49: Eq. 5 with λ1·R^ans permuted within each GRPO group (a placebo)", eq5_terms=True,
                 answer_permuted=True),
    RewardDesign("evinote", "evinote_design", ("question", "nli"), ("evinote_reading", "nli_model"),
                 "EviNote-RAG (seed 002) Eq. 4-5"),
    RewardDesign("eval_rar", "eval_rar_design", (), (), "Eval-RAR (seed 003) Eq. 2-5"),
    RewardDesign("arena", "arena_design", ("gold_passages",), ("arena_accuracy",), "ARENA (seed 004) §3.2"),
]}
KL_ESTIMATORS = ("k3", "k2")  # TRL's k3, ARENA's k2 (D130): train.kl_estimator, and a reward-design row's


@dataclasses.dataclass(frozen=True)
class Claims:
    """Where the ledger reads a study's paired tests (`repro.reporting.ledger`)."""

    table: str  # under results/<profile>/<notebook>/
    reader: str  # repro.reporting.ledger.READERS: puts the table in the paper's names
    records: str  # its per-item records, from the repository root ({profile} filled in)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A study that decides its own pre-registered question: the ledger reads its verdict directly."""

    file: str  # under results/<profile>/<notebook>/
    profile: str  # the profile that runs it
    report: str  # the report that describes it


@dataclasses.dataclass(frozen=True)
class Stage:
    """A dvc.yaml stage. Its module is `repro.stages.<name>`: a notebook stage's names what `notebooks/<notebook>.ipynb`
    calls and `python -m repro.ops.notebooks <name>` runs it; a command-line stage's is `python -m repro.stages.<name>`.
    Both run `repro.ops.preflight.require(cfg, name)` first."""

    name: str
    notebook: str | None = None  # None: a command-line stage; results/<profile>/<notebook>/ is a notebook stage's
    switch: str | None = None  # the profile section whose null leaves it nothing to do (no cost, no preflight)
    cost: str | None = None  # its function in repro.ops.costs; None: a light stage (a process start)
    checks: tuple[str, ...] = ()  # repro.ops.preflight.CONTEXT_CHECKS: its engines' longest prompts
    api: tuple[tuple[str, str], ...] = ()  # (API-backed generation section it sends requests of, the local alternative)
    methods: str | None = None  # the profile section listing the methods it evaluates (METHOD_LISTS)
    trains: bool = False  # trains a model (GRPO or LoRA)
    extra_runs: bool = False  # trains GRPO runs of its own (the cost model's totals come with and without them)
    gate: bool = False  # can refuse the run and trains nothing: DVC runs it before every stage that trains
    claims: Claims | None = None
    verdict: Verdict | None = None
    metrics: bool = False  # writes metrics/<name>.json, its headline line (dvc.yaml `metrics:`), and
    # metrics/full/<name>.json, its headline numbers (an `outs:`, D241)
    plots: tuple[str, ...] = ()  # its figures' data, plots/<plot>.csv (dvc.yaml `outs:` and top-level `plots:`)


TEACHER_ALTERNATIVE = "the local vLLM teacher: the `# local:` lines under ar_study.teacher in params.yaml (D140)"
PREDICTIONS = "data/{profile}/predictions/"
STAGES: dict[str, Stage] = {s.name: s for s in [  # in dvc.yaml's order (tests/test_registry.py holds the two equal)
    Stage("assets"),
    Stage("length_rewards", "length_rewards", plots=("figure7_length_rewards",)),
    Stage("significance_reported", "significance_reported"),
    Stage("data", "00_data", "data", "data_stage"),
    Stage("retrieval_quality", "01_retrieval_quality", metrics=True),
    Stage("released_extractor", None, "released_check", "released_stage", ("released",), gate=True),
    Stage("format_warmup", trains=True),  # on the CPU profiles: their format warm-up
    Stage("evidence_gate", "evidence_gate", "evidence"),
    Stage("evidence_seeds", "evidence_seeds", "evidence", trains=True,
          verdict=Verdict("verdict.json", "cpu-evidence", "docs/cpu-evidence.md")),
    Stage("train_eviomni", "train_eviomni", "train", "train_stage", ("grpo",), trains=True, metrics=True),
    Stage("length_tuning", None, "length_tuning", "length_tuning_stage", ("grpo",), trains=True),
    Stage("training_dynamics", "training_dynamics", metrics=True, plots=("figure4_training_dynamics",)),
    Stage("qa_generator", None, "qa_generator", "qa_generator_stage", trains=True),
    Stage("filco_train", None, "filco", "filco_stage", trains=True),
    Stage("seer_train", None, "seer", "seer_stage", trains=True),
    Stage("main_comparison", "main_comparison", "evaluation", "main_comparison_stage", ("main_comparison",),
          methods="evaluation", metrics=True,
          claims=Claims("significance.csv", "methods", PREDICTIONS + "main_comparison")),
    Stage("ablation_answer_rewards", "ablation_answer_rewards", "ablation", "ablation_stage", ("grpo", "ablation"),
          trains=True, extra_runs=True, metrics=True,
          claims=Claims("significance.csv", "subsets", PREDICTIONS + "ablation_answer_rewards")),
    Stage("reward_designs", "reward_designs", "reward_designs", "reward_designs_stage", ("grpo", "reward_designs"),
          trains=True, extra_runs=True, metrics=True),
    Stage("case_inspection", "case_inspection"),
    Stage("distractor_setting", "distractor_setting", "distractor", "distractor_stage", ("distractor",),
          methods="distractor", metrics=True,
          claims=Claims("significance.csv", "methods", PREDICTIONS + "distractor_setting")),
    Stage("noise_robustness", "noise_robustness", "noise_robustness", "noise_stage", ("noise",),
          methods="noise_robustness", metrics=True, plots=("figure5_noise_robustness",)),
    Stage("latency", "latency", "latency", "latency_stage", ("latency",), methods="latency", metrics=True),
    Stage("agentic_search_r1", "agentic_search_r1", "agentic", "agentic_stage", ("agent", "agentic_extractor"),
          metrics=True, claims=Claims("significance_conditions.csv", "conditions",
                                      "results/{profile}/agentic_search_r1/trajectories")),
    Stage("ar_study_teacher", None, "ar_study", "ar_teacher_stage", ("ar_teacher",),
          api=(("ar_study.teacher", TEACHER_ALTERNATIVE),)),
    Stage("ar_study_train", None, "ar_study", "ar_train_stage", trains=True),
    Stage("ar_study", "ar_study", "ar_study", "ar_stage", ("ar_student",), metrics=True,
          claims=Claims("mcnemar.csv", "recall", "data/{profile}/ar_study/predictions")),
    Stage("claims", "claims", metrics=True),
]}
# The profile sections that list methods (Tables 2, 4, 9-10, Figure 5) and the stage that evaluates each list: the stage
# depends on an output of every method's `stages` (checked by `python -m repro.ops.pipeline_deps`), and
# `eviomni: released_extractor` rewrites these lists.
METHOD_LISTS = {s.methods: s.name for s in STAGES.values() if s.methods}
