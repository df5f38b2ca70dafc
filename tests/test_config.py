"""Every profile in params.yaml validates against the schema; bad profiles fail with the key's path."""

import dataclasses
import importlib
import inspect
import textwrap

import pytest
import yaml

from repro.config import (
    GENERATOR_OPTIONS,
    ConfigError,
    DesignRow,
    Profile,
    _build,
    is_main_design_run,
    load_profile,
    profile_names,
    read_params,
)
from repro.registry import REWARD_DESIGNS
from repro.reporting.stats import mcnemar_sample_size

PAPER_PROFILES = ["paper-1p5b", "paper-7b"]


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_validates(name):
    cfg = load_profile(name)
    assert isinstance(cfg, Profile) and cfg.name == name


def test_profiles_of_the_design_exist_and_tiny_is_default():
    assert {"ci", "tiny", *PAPER_PROFILES} <= set(profile_names())
    assert load_profile().name == "tiny"


@pytest.mark.parametrize("name,size", [("paper-1p5b", "1.5B"), ("paper-7b", "7B")])
def test_paper_profiles_name_the_papers_models(name, size):
    models = load_profile(name).models
    assert models.extractor == models.generator == f"Qwen/Qwen2.5-{size}-Instruct"
    assert models.released_extractor == f"HIT-TMG/EviOmni-nq_train-{size}"
    assert models.agents == [
        "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3",
        "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3",
    ]


def test_embedded_profiles_need_no_hub():
    for name in ("ci", "tiny"):
        models = load_profile(name).models
        assert all(ref.startswith("embedded:") for ref in [models.extractor, models.generator, *models.agents])
        baselines = load_profile(name).baselines
        refs = [baselines.selective_context.model, baselines.selective_context.phrase_parser,
                baselines.llmlingua2.standin, baselines.llmlingua2.tiktoken, baselines.recomp.model]
        assert all(ref.startswith("embedded:") for ref in refs) and baselines.llmlingua2.model is None


def _params(tmp_path, body: str):
    path = tmp_path / "params.yaml"
    path.write_text(textwrap.dedent(body))
    return path


VALID = """
profile: p
profiles:
  p:
    description: d
    seed: 0
    models: {extractor: a, generator: b, agents: [c]%s}
"""


def test_unknown_key_is_rejected_with_its_path(tmp_path):
    path = _params(tmp_path, VALID % ", temprature: 0.7")
    with pytest.raises(ConfigError, match=r"profiles\.p\.models: unknown key\(s\) \['temprature'\]"):
        load_profile(params_path=path)


def test_wrong_type_is_rejected(tmp_path):
    path = _params(tmp_path, VALID % ", dtype: fp8")
    with pytest.raises(ConfigError, match=r"profiles\.p\.models\.dtype: 'fp8' is not one of"):
        load_profile(params_path=path)
    path = _params(tmp_path, VALID.replace("seed: 0", "seed: zero") % "")
    with pytest.raises(ConfigError, match=r"profiles\.p\.seed: expected int, got str"):
        load_profile(params_path=path)


def test_missing_key_and_unknown_profile(tmp_path):
    path = _params(tmp_path, VALID.replace("    seed: 0\n", "") % "")
    with pytest.raises(ConfigError, match="missing required key 'seed'"):
        load_profile(params_path=path)
    path = _params(tmp_path, VALID % "")
    assert load_profile(params_path=path).models.agents == ["c"]
    with pytest.raises(ConfigError, match=r"unknown profile 'q'; defined: \['p'\]"):
        load_profile("q", params_path=path)


def test_a_key_given_twice_is_rejected_with_its_path_and_lines(tmp_path):
    path = _params(tmp_path, VALID.replace("    seed: 0\n", "    seed: 0\n    seed: 1\n") % "")
    with pytest.raises(ConfigError, match=r"params.yaml:7: profiles\.p\.seed: duplicate key \(first given on line 6\)"):
        load_profile(params_path=path)
    path = _params(tmp_path, VALID % ", generator: d")
    with pytest.raises(ConfigError, match=r"profiles\.p\.models\.generator: duplicate key"):
        load_profile(params_path=path)


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "+.Inf"])
def test_nan_and_infinities_are_rejected_with_their_path(tmp_path, value):
    path = _params(tmp_path, VALID % f", other: [{{x: 1.0}}, {{x: {value}}}]")
    with pytest.raises(ConfigError, match=r"profiles\.p\.models\.other\[1\]\.x: -?(nan|inf) is not allowed"):
        load_profile(params_path=path)


def test_backend_options_are_checked_against_the_backend_at_load_time(tmp_path):
    params = read_params()
    agentic = params["profiles"]["ci"]["agentic"]
    agentic["agent_options"] = {"gpu_memory_utilisation": 0.5}
    with pytest.raises(ConfigError, match=r"agentic\.agent_options: unknown option\(s\) \['gpu_memory_utilisation'\] "
                                          r"for backend transformers; allowed: "
                                          r"\['adapter', 'dtype', 'attn_implementation', 'device'\]"):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")
    agentic["agent_options"] = {"progress": False}
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['progress'\]"):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")


@pytest.mark.parametrize("key, value, message", [
    ("conditions", ["without", "eval-rar"], r"agentic\.conditions\[1\]: 'eval-rar' is not one of \['without', 'with', "
                                            r"'eval_rar'\]"),
    ("conditions", ["eval_rar", "eval_rar"], r"agentic\.conditions: need one or more distinct conditions"),
    ("conditions", [], r"agentic\.conditions: need one or more distinct conditions"),
    ("evaluate_step", "after_turn", r"agentic\.evaluate_step: 'after_turn' is not one of \['in_turn', 'separate'\]"),
])
def test_agentic_conditions_are_validated_with_their_key(key, value, message):
    params = read_params()
    params["profiles"]["ci"]["agentic"][key] = value
    with pytest.raises(ConfigError, match=message):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")


@pytest.mark.parametrize("keys, message", [
    ({"rollout_model": "copy"}, r"train\.rollout_model: 'copy' is not one of \['policy', 'merged_copy'\]"),
    ({"rollout_model": "merged_copy", "use_vllm": True}, r"train\.rollout_model: merged_copy generates through "
                                                         r"transformers; with use_vllm"),
])
def test_the_rollout_model_is_validated_with_its_key(keys, message):
    params = read_params()
    params["profiles"]["ci"]["train"].update(keys)
    with pytest.raises(ConfigError, match=message):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")
    assert {load_profile(name).train.rollout_model for name in profile_names()} <= {"policy", "merged_copy"}


def test_cpu_study_is_tiny_with_its_time_moved_to_grpo_steps_and_table_2_questions():
    tiny, study = load_profile("tiny"), load_profile("cpu-study")
    for section in ("models", "rewards", "data", "retrieval", "noise", "filco", "seer", "baselines",
                    "ablation", "distractor", "noise_robustness", "ar_study"):
        assert getattr(study, section) == getattr(tiny, section), section
    assert study.reward_designs is None  # cpu-rewards measures the study (D158)
    # the QA generator of the reported run (docs/cpu-study.md), before tiny's was cut (D173)
    assert study.qa_generator == dataclasses.replace(tiny.qa_generator, max_steps=24)
    assert study.latency == dataclasses.replace(tiny.latency, repetitions=2)  # tiny's was cut too (D174)
    # the held-out engine: the reported run's transformers, fixed when tiny moved to vLLM (D171)
    changed = {"max_steps", "save_steps", "dev_max_questions", "heldout_questions", "heldout_backend", "heldout_options"}
    assert {k: v for k, v in vars(study.train).items() if k not in changed} == \
        {k: v for k, v in vars(tiny.train).items() if k not in changed}
    assert study.train.max_steps >= 3 * tiny.train.max_steps
    assert {"full", "recomp", "filco", "eviomni"} <= set(study.evaluation.methods)
    # tiny's Table 2 (16 OVOS-describe questions): EviOmni and Full disagreed on EM on 1 of 16 (D157)
    assert study.evaluation.max_questions >= mcnemar_sample_size(1 / 16, 0.05) == 194


ISSUE_18_ROWS = ["eviomni", "eviomni_eqr", "evinote", "eval_rar", "arena", "eviomni_k2"]  # the issue's six runs


@pytest.mark.parametrize("change, message", [
    ({"designs": [{"design": "arena4"}]}, r"designs\[0\]\.design: 'arena4' is not one of"),
    ({"designs": [{"design": "eviomni"}, {"design": "eviomni"}]}, r"reward_designs: need datasets and distinct"),
    ({"designs": [{"design": "arena", "kl_estimator": "k4"}]}, r"designs\[0\]\.kl_estimator: 'k4' is not one of"),
    ({"designs": ["eviomni"]}, r"profiles\.ci\.reward_designs\.designs\[0\]: expected a mapping"),
    ({"designs": []}, r"reward_designs: need datasets and distinct design rows"),
    ({"datasets": []}, r"reward_designs: need datasets and distinct design rows"),
    ({"max_questions": 1}, r"max_steps >= 1 and max_questions >= 2 \(a paired test\)"),
    ({"max_steps": 0}, r"max_steps >= 1 and max_questions >= 2"),
    ({"design": ["eviomni"]}, r"profiles\.ci\.reward_designs: unknown key\(s\) \['design'\]"),
])
def test_reward_design_rows_are_validated(change, message):
    params = read_params()
    params["profiles"]["ci"]["reward_designs"].update(change)
    with pytest.raises(ConfigError, match=message):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")


def test_the_reward_design_study_runs_the_issues_six_designs_where_it_measures():
    assert [row.name for row in load_profile("cpu-rewards").reward_designs.designs] == ISSUE_18_ROWS
    for name in PAPER_PROFILES:  # opt-in: six more GRPO runs on Table 3's budget (D158)
        assert load_profile(name).reward_designs is None, name
    assert load_profile("gpu-smoke").reward_designs is None  # the half-hour smoke has no room (D158)
    tiny = load_profile("tiny").reward_designs  # mechanics only, within tiny's 45 minutes (D177)
    assert ([row.name for row in tiny.designs], tiny.max_steps, tiny.max_questions) == (["eviomni", "arena_k2"], 1, 4)
    ci = load_profile("ci").reward_designs
    assert ci.designs[0] == DesignRow("eviomni")  # the reference of the paired tests
    assert is_main_design_run(load_profile("ci"), ci.designs[0])  # the ci pipeline reuses the main run for it (D170)
    designs = [REWARD_DESIGNS[row.design] for row in ci.designs]  # ci's runs cover every path of the trainer's designs
    assert {d.masked_answers for d in designs} == {True, False} and any("nli" in d.requires for d in designs)
    assert any(d.columns == ("gold_passages",) for d in designs) and DesignRow("arena", "k2") in ci.designs


def test_cpu_rewards_is_tiny_with_its_time_moved_to_the_reward_design_study():
    tiny, study = load_profile("tiny"), load_profile("cpu-rewards")
    for section in ("models", "rewards", "data", "retrieval", "noise", "train", "qa_generator", "filco", "seer",
                    "baselines", "latency", "length_tuning", "ablation", "distractor", "noise_robustness", "ar_study"):
        assert getattr(study, section) == getattr(tiny, section), section
    assert dataclasses.replace(study.evaluation, batch_size=tiny.evaluation.batch_size) == tiny.evaluation
    rows = study.reward_designs
    assert rows.max_steps is None and study.train.max_steps == tiny.train.max_steps  # the main run's step budget
    assert rows.datasets == [tiny.train.dataset]
    assert rows.max_questions >= mcnemar_sample_size(1 / 16, 0.05) == 194  # 5 EM points at tiny's discordance


def test_every_profile_but_tiny_runs_the_eval_rar_condition_on_its_agentic_items():
    for name in profile_names():
        agentic = load_profile(name).agentic
        if agentic is not None:  # tiny leaves it out to hold its 45-minute budget (D155)
            expected = ["without", "with"] if name == "tiny" else ["without", "with", "eval_rar"]
            assert agentic.conditions == expected and agentic.evaluate_step == "in_turn", name


@pytest.mark.parametrize("backend, module, cls", [
    ("transformers", "repro.generation.transformers_backend", "TransformersGenerator"),
    ("vllm", "repro.generation.vllm_backend", "VLLMGenerator"),
    ("openai", "repro.generation.openai_client", "OpenAIClientGenerator"),
])
def test_known_options_are_the_backend_constructors_keywords(backend, module, cls):
    signature = inspect.signature(getattr(importlib.import_module(module), cls))
    keywords = [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert list(GENERATOR_OPTIONS[backend]) == keywords


def test_an_error_names_the_key_and_prints_the_fields_help(tmp_path):
    params = read_params()
    params["profiles"]["ci"]["rewards"]["tau"] = "high"
    del params["profiles"]["ci"]["models"]["generator"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"profiles\.ci\.models: missing required key 'generator' \(the LoRA QA "
                                          r"generator's base model"):
        load_profile("ci", path)
    params["profiles"]["ci"]["models"]["generator"] = "embedded:smollm2"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"profiles\.ci\.rewards\.tau: expected float, got str \('high'\) \(τ of "
                                          r"Eq\. 10"):
        load_profile("ci", path)


def test_every_setting_has_its_help_in_metadata():
    from repro import config

    missing = [f"{name}.{f.name}" for name, cls in vars(config).items()
               if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == config.__name__
               for f in dataclasses.fields(cls) if not f.metadata.get("help")]
    assert missing == []
