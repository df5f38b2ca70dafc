"""One row per extension point, as data: the methods a study can evaluate (Table 2's columns) and the reward designs
GRPO can train with (EviOmni's Eq. 5 and the neighbours' designs, issue #18).

Everything else that knows a method reads its row: the `EvaluationMethod` values a profile may list
(`repro.config`), the refiner a study builds (`repro.evaluation.methods.build_refiner` imports `build`), the settings a
profile must hold for it (checked when the profile loads), the price the cost model gives it (`repro.costs`) and the
paper's name the claims ledger reads it under (`repro.ledger`). Adding a baseline is its module (a refiner and a
`build(key, cfg, pool, params)` function), a row here, its settings class in `repro.config` with a field where the
row's `settings` points, and its values in params.yaml; one with weights of its own names the stage that writes them
(`stages`), and `python -m repro.pipeline_deps` checks that every stage evaluating a method list (`METHOD_LISTS`)
depends on it. Nothing here imports the code it names: `tests/test_registry.py` resolves every row and checks that its
builder sits in a layer `repro.evaluation.methods` may import.

A reward design's row names its score function in `repro.rewards` (the paper's formulas), the inputs it reads
(`INPUTS`: the rollout's columns and the objects the trainer passes) and the `rewards.*` settings it reads beyond the
paper's: the `rewards.design` values a profile may set, the dataset columns GRPO must carry and the inputs the reward
function checks all come from it. Adding a design is its score function in `repro.rewards`, a row here, and any new
setting in `RewardsConfig`.
"""

from __future__ import annotations

import dataclasses

GROUPS = {"WR": "without refinement", "VAR": "vanilla refinement", "RAR": "rational refinement"}
COSTS = {  # how the cost model prices a method's refinement, beside the QA generator's answer every method pays
    "answer": "no refinement: the answer only",
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


METHODS: dict[str, Method] = {m.key: m for m in [
    Method("zero", "Zero", "WR", "Zero", "repro.evaluation.methods:closed_book", "answer"),
    Method("full", "Full", "WR", "Full", "repro.evaluation.methods:full_passages", "answer"),
    Method("selective_context", "SeleCtx", "VAR", "SeleCtx", "repro.baselines.selective_context:build",
           "compressor", "baselines.selective_context", "model", stages=("assets",)),
    Method("llmlingua2", "LLMLingua-2", "VAR", "LLMLingua-2", "repro.baselines.llmlingua2:build", "compressor",
           "baselines.llmlingua2", "model", stages=("assets",)),
    Method("llmlingua2_standin", "LLMLingua-2 (untrained stand-in)", "VAR", "LLMLingua-2",  # an UNTRAINED head
           "repro.baselines.llmlingua2:build", "compressor", "baselines.llmlingua2", "standin", stages=("assets",)),
    Method("recomp", "RECOMP", "VAR", "RECOMP", "repro.baselines.recomp:build", "compressor", "baselines.recomp",
           "model", stages=("assets",)),
    Method("cot", "CoT", "RAR", "CoT", "repro.evaluation.methods:prompted_refiner", "llm", stages=("assets",)),
    Method("prompted_extractor", "Prompted extraction", "RAR", None,  # Table 14 on the untrained extractor
           "repro.evaluation.methods:prompted_refiner", "llm", tagged=True, stages=("assets",)),
    Method("eviomni", "EviOmni", "RAR", "EviOmni", "repro.evaluation.methods:prompted_refiner", "llm_own_engine",
           tagged=True, stages=("train_eviomni",)),
    Method("eviomni_released", "EviOmni (released)", "RAR", "EviOmni", "repro.evaluation.methods:prompted_refiner",
           "llm_own_engine", "models.released_extractor", tagged=True, stages=("released_extractor",)),
    Method("filco", "FilCo", "VAR", "FilCo", "repro.baselines.filco:build", "llm", "filco", stages=("filco_train",)),
    Method("seer", "SEER", "VAR", "SEER", "repro.baselines.seer:build", "llm", "seer", stages=("seer_train",)),
]}
# The profile sections that list methods (Tables 2, 4, 9-10, Figure 5) and the dvc.yaml stage that evaluates each
# list: the stage depends on an output of every method's `stages` (checked by `python -m repro.pipeline_deps`), and
# `eviomni: released_extractor` rewrites these lists.
METHOD_LISTS = {"evaluation": "main_comparison", "latency": "latency", "distractor": "distractor_setting",
                "noise_robustness": "noise_robustness"}


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


@dataclasses.dataclass(frozen=True)
class RewardDesign:
    """A reward for GRPO: `repro.rewards.<score>(response, golden_answers, cfg, **inputs)` with exactly the inputs of
    `requires` (keys of INPUTS)."""

    name: str  # the value of params.yaml's rewards.design
    score: str  # its function in repro.rewards
    requires: tuple[str, ...]
    knobs: tuple[str, ...]  # the rewards.* settings it reads beyond the paper's
    source: str  # where the paper (or its neighbour) defines it

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
                 "EviOmni (seed 000) Eq. 5: λ1·R^ans + λ2·R^len + λ3·R^fmt"),
    RewardDesign("eviomni_eqr", "eviomni_eqr_design",
                 ("o_r", "o_e", "passages_length", "tokenizer", "question", "nli"), ("nli_model",),
                 "EviOmni Eq. 5 + EviNote-RAG's R_EQR of the evidence (digest §5.2.1)"),
    RewardDesign("evinote", "evinote_design", ("question", "nli"), ("evinote_reading", "nli_model"),
                 "EviNote-RAG (seed 002) Eq. 4-5"),
    RewardDesign("eval_rar", "eval_rar_design", (), (), "Eval-RAR (seed 003) Eq. 2-5"),
    RewardDesign("arena", "arena_design", ("gold_passages",), ("arena_accuracy",), "ARENA (seed 004) §3.2"),
]}
KL_ESTIMATORS = ("k3", "k2")  # TRL's k3, ARENA's k2 (D130): train.kl_estimator, and a reward-design row's
