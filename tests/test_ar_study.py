"""The answer-recall study of §2.2: teacher filtering, the two SFT sets, the exclusion rule, the evidence cap,
Figure 2's overlap categories and Table 1's McNemar test; then the whole study on the ci profile in a scratch
directory (heuristic teacher, the tiny random Llama as student)."""

import dataclasses
import json
import re

import pandas as pd
import pytest
import yaml
from transformers import AutoTokenizer

from repro import assets
from repro.config import ConfigError, load_profile
from repro.data import layout
from repro.evaluation.records import read_records
from repro.formulas.prompts import evidence_extraction_prompt, format_passages, render_chat
from repro.formulas.tags import is_well_formatted
from repro.generation import GenerationParams, Generator
from repro.generation import pool as pool_module
from repro.generation.openai_client import HTTPGenerationError
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import write_jsonl
from repro.ops import preflight, remote
from repro.reporting import stats
from repro.reporting.paper import load_paper_tables
from repro.studies.ar_study.paths import VARIANTS, adapter_dir
from repro.studies.ar_study.recall import (
    AR_FIELDS,
    ar_record,
    VariantExtractor,
    cap_length,
    follows_format,
    is_yes_no,
    passages_hold_answer,
    run_recall,
)
from repro.studies.ar_study.tables import discordant_cases, mcnemar_table, overlap_categories, overlap_table, table1
from repro.studies.ar_study.targets import sft_set, variant_target
from repro.studies.ar_study.teacher import (
    TAG_STRINGS,
    Teacher,
    make_record,
    synthesize,
    teacher_pool,
    scaffolded_responses,
    string_inclusion_response,
    extraction_messages,
    teacher_verdict,
    verdict_counts,
)
from repro.studies.ar_study.train import run_teacher, train_variants

from conftest import ROOT
from test_generation_vllm import fake_vllm  # noqa: F401 (fixture)

ROW = {"id": "q1", "question": "Where was Ada born?", "golden_answers": ["London", "City of London"],
       "passages": [{"id": "1", "contents": '"Ada Lovelace"\nAda Lovelace was a mathematician. She was born in London.',
                     "score": 1.0},
                    {"id": "2", "contents": '"Charles Babbage"\nBabbage designed engines.', "score": 0.5}]}
GOOD = ("<reason>Passage 1 says where she was born.</reason><extract>Ada was born in London.</extract>"
        "<answer>London</answer>")


@pytest.mark.parametrize("output,verdict", [
    (GOOD, "kept"),
    ("<think>She was born in Paris? <reason>x</reason></think>" + GOOD, "kept"),  # R1's thinking is dropped
    ("<reason>x</reason><extract>Ada was born in London.</extract><answer>Paris</answer>", "wrong_answer"),
    ("<extract>Ada was born in London.</extract><answer>London</answer>", "no_reason"),
    ("<reason>x</reason> Ada was born in London. <answer>London</answer>", "no_extract"),
    ("<reason>x</reason><extract></extract><answer>London</answer>", "no_extract"),
    ("<reason>x</reason><extract>Ada was born in London.</extract> London", "no_answer"),
    ("<reason>x</reason><extract>in London</extract><answer>in the city of London, England</answer>", "kept"),
    ("<reason>x</reason><extract>London<reason></extract><answer>London</answer>", "malformed"),
    ("<reason>x</reason><extract>London</extract><answer>London</reason></answer>", "malformed"),
])
def test_teacher_verdicts(output, verdict):
    assert teacher_verdict(output, ROW["golden_answers"]) == verdict


def test_exact_match_filter_is_stricter_than_answer_recall():
    output = "<reason>x</reason><extract>in London</extract><answer>in London, England</answer>"
    assert teacher_verdict(output, ["London"], "answer_recall") == "kept"
    assert teacher_verdict(output, ["London"], "em") == "wrong_answer"
    assert teacher_verdict(GOOD, ["London"], "em") == "kept"


def test_the_first_kept_sample_is_used_and_counted_once():
    bad = GOOD.replace("<answer>London", "<answer>Paris")
    record = make_record(ROW, [bad, GOOD, GOOD], "answer_recall")
    assert record["verdicts"] == ["wrong_answer", "kept", "kept"] and record["kept_sample"] == 1
    assert record["rationale"] == "Passage 1 says where she was born."
    assert record["evidence"] == "Ada was born in London." and record["answer"] == "London"
    none_kept = make_record({**ROW, "id": "q2"}, [bad], "answer_recall")
    assert none_kept["kept_sample"] is None and none_kept["evidence"] is None
    counts = verdict_counts([record, none_kept])
    assert counts == {"questions": 2, "responses": 4, "kept": 2, "no_reason": 0, "no_extract": 0, "no_answer": 0,
                      "malformed": 0, "wrong_answer": 2, "questions_kept": 1}


def test_string_inclusion_teacher_quotes_the_answer_sentence():
    response = string_inclusion_response(ROW)
    assert is_well_formatted(response) and teacher_verdict(response, ROW["golden_answers"]) == "kept"
    assert "<extract>She was born in London.</extract><answer>London</answer>" in response
    missing = string_inclusion_response({**ROW, "golden_answers": ["Paris"]})
    assert teacher_verdict(missing, ["Paris"]) == "no_extract"


def test_sft_sets_share_the_prompt_and_differ_in_the_target():
    records = [make_record(ROW, [GOOD], "answer_recall"),
               make_record({**ROW, "id": "q2"}, ["no tags at all"], "answer_recall")]
    rational, vanilla = sft_set([ROW, {**ROW, "id": "q2"}], records, "rational"), sft_set([ROW], records, "vanilla")
    assert [e["id"] for e in rational] == [e["id"] for e in vanilla] == ["q1"]  # only the kept record
    assert rational[0]["prompt"] == vanilla[0]["prompt"] == extraction_messages(ROW)
    assert rational[0]["prompt"][-1]["content"] == evidence_extraction_prompt(ROW["question"],
                                                                              format_passages(ROW["passages"]))
    target_m, target_n = rational[0]["completion"][0]["content"], vanilla[0]["completion"][0]["content"]
    assert target_m == "<reason>Passage 1 says where she was born.</reason><extract>Ada was born in London.</extract>"
    assert target_n == "<extract>Ada was born in London.</extract>"
    assert "<reason>" not in target_n and "<answer>" not in target_m + target_n
    assert follows_format(target_m, "rational") and follows_format(target_n, "vanilla")
    assert not follows_format(target_m, "vanilla") and not follows_format(target_n, "rational")
    with pytest.raises(ValueError, match="unknown variant"):
        variant_target("r", "e", "both")


def test_exclusion_rule():
    assert passages_hold_answer(ROW) and passages_hold_answer(ROW, "has_answer")
    in_title_only = {**ROW, "golden_answers": ["Charles Babbage"]}
    assert passages_hold_answer(in_title_only, "answer_recall")  # the extractor reads titles too
    assert not passages_hold_answer(in_title_only, "has_answer")  # DPR's has_answer: passage texts only
    number = {**ROW, "golden_answers": ["2"]}
    assert not passages_hold_answer(number)  # "Passage 2" labels are not part of the passages
    assert not passages_hold_answer({**ROW, "golden_answers": ["Paris"]})
    with pytest.raises(ValueError, match="exclusion"):
        passages_hold_answer(ROW, "bm25")
    assert is_yes_no({"golden_answers": ["No"]}) and is_yes_no({"golden_answers": ["yes", "Yes."]})
    assert not is_yes_no({"golden_answers": ["no", "Norway"]})


def test_length_cap_in_words_and_tokens(tiny_llama_dir):
    text = " ".join(f"w{i}" for i in range(150))
    assert cap_length(text, 100, "words") == " ".join(f"w{i}" for i in range(100))
    assert cap_length("short  text", 100, "words") == "short  text"
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) > 100
    capped = cap_length(text, 100, "tokens", tokenizer)
    assert tokenizer.encode(capped, add_special_tokens=False) == ids[:100] and text.startswith(capped)
    assert cap_length("short text", 100, "tokens", tokenizer) == "short text"
    with pytest.raises(ValueError, match="tokenizer"):
        cap_length(text, 100, "tokens")


def test_ar_record_scores_the_capped_evidence_and_the_whole_rationale():
    ev = load_profile("tiny").ar_study.evaluation
    ev = dataclasses.replace(ev, evidence_cap=5, cap_unit="words")
    filler = " ".join(["filler"] * 10)
    output = f"<reason>{filler} born in London</reason><extract>{filler} London</extract>"
    record = ar_record(ROW, output, "rational", "d", ev, tokenizer=None)
    assert record["ar_evidence"] == 0.0 and record["ar_rationale"] == 1.0  # "London" is past the 5-word cap
    assert record["evidence"] == "filler filler filler filler filler" and record["evidence_capped"]
    assert record["evidence_length_uncapped"] == 11 and record["evidence_length"] == 5 and record["well_formatted"]
    short = ar_record(ROW, "<extract>born in London</extract>", "vanilla", "d", ev, tokenizer=None)
    assert short["ar_evidence"] == 1.0 and short["ar_rationale"] is None and not short["evidence_capped"]
    capped_reason = ar_record(ROW, output, "rational", "d", dataclasses.replace(ev, cap_rationale=True), None)
    assert capped_reason["ar_rationale"] == 0.0


def test_overlap_categories_hand_computed():
    m = [1, 1, 0, 0, 1, 1, 0, 1]
    n = [1, 0, 1, 0, 0, 1, 0, 0]
    table = overlap_categories(m, n).set_index("category")
    assert table["count"].to_dict() == {"M∧N": 2, "M∧¬N": 3, "¬M∧N": 1, "¬M∧¬N": 2}
    assert table["percent"].to_dict() == {"M∧N": 25.0, "M∧¬N": 37.5, "¬M∧N": 12.5, "¬M∧¬N": 25.0}
    with pytest.raises(ValueError):
        overlap_categories([1, 0], [1])


def _records(variant: str, evidence_hits: list[int], rationale_hits: list[int] | None = None) -> list[dict]:
    return [{"id": f"q{i}", "question": "q", "golden_answers": ["a"], "variant": variant, "output": "",
             "rationale": "", "evidence": "", "ar_evidence": float(hit),
             "ar_rationale": None if rationale_hits is None else float(rationale_hits[i])}
            for i, hit in enumerate(evidence_hits)]


def test_table1_overlap_and_exact_mcnemar_from_record_files(tmp_path):
    m = [1] * 7 + [0] * 1 + [1] * 2  # rational evidence
    n = [0] * 7 + [1] * 1 + [1] * 2  # vanilla evidence: 7 items only M recalls, 1 only N recalls, 2 both
    rationale = [1] * 9 + [0]
    paths = {}
    for variant, hits in (("rational", m), ("vanilla", n)):
        paths[variant] = tmp_path / f"{variant}.jsonl"
        write_jsonl(paths[variant], _records(variant, hits, rationale if variant == "rational" else None))
    files = pd.DataFrame([{"dataset": "fanoutqa", "role": "in-distribution", "variant": v, "questions": 12,
                           "excluded": 2, "evaluated": 10, "path": str(p)} for v, p in paths.items()])
    table = table1(files, {"fanoutqa": "FanOutQA"}, load_paper_tables(1)).iloc[0]
    assert table["dataset"] == "FanOutQA" and table["n"] == 10 and table["excluded"] == 2
    assert table["Rational Evidence"] == 90.0 and table["Vanilla Evidence"] == 30.0 and table["Rationale"] == 90.0
    assert (table["M∧¬N"], table["¬M∧N"]) == (7, 1)
    assert table["McNemar p (exact)"] == pytest.approx(0.0703125)  # 2 · P(Bin(8, 1/2) ≤ 1) = 2 · 9/256
    assert table["paper dataset"] == "NQ" and table["paper Rational Evidence"] == 75.24
    tests = mcnemar_table(files).iloc[0]
    assert tests["effect (points)"] == pytest.approx(60.0) and tests["p_value"] == pytest.approx(
        stats.mcnemar_test(m, n).p_value)
    # 7 vs 1 of 10: Clopper-Pearson of 7/8 is [0.47349, 0.99684]; 8/10·(2θ − 1) in points: [−4.24, 79.49], p > 0.05
    assert [tests["ci_low (points)"], tests["ci_high (points)"]] == pytest.approx([-4.2415, 79.4944], abs=1e-3)
    overlap = overlap_table(files).set_index("category")
    assert overlap["count"].to_dict() == {"M∧N": 2, "M∧¬N": 7, "¬M∧N": 1, "¬M∧¬N": 0}
    assert overlap["paper_percent"].isna().all()  # the paper gives Figure 2 numbers for HotpotQA only


def test_a_set_without_recallable_items_gives_an_empty_row(tmp_path):
    for variant in ("rational", "vanilla"):
        write_jsonl(tmp_path / f"{variant}.jsonl", [])
    files = pd.DataFrame([{"dataset": "d", "role": "out-of-distribution", "variant": v, "questions": 12,
                           "excluded": 12, "evaluated": 0, "path": str(tmp_path / f"{v}.jsonl")}
                          for v in ("rational", "vanilla")])
    row = table1(files).iloc[0]
    assert row["n"] == 0 and pd.isna(row["Rational Evidence"]) and pd.isna(row["McNemar p (exact)"])
    assert overlap_table(files).empty and mcnemar_table(files).empty


def test_local_teacher_returns_the_configured_samples_per_question(tiny_llama_dir):
    cfg = load_profile("tiny")
    teacher = dataclasses.replace(cfg.ar_study.teacher, model=str(tiny_llama_dir), samples=3, max_new_tokens=4,
                                  options={})
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, teacher=teacher))
    rows = [ROW, {**ROW, "id": "q2"}]
    with teacher_pool(teacher) as pool:
        outputs = Teacher(cfg, pool).respond(rows)
    assert [len(o) for o in outputs] == [3, 3] and all(isinstance(t, str) for o in outputs for t in o)
    with teacher_pool(teacher) as pool:
        assert Teacher(cfg, pool).respond(rows) == outputs  # seeded (per batch: transformers' sampling)


class Recording(Generator):
    """The real generator, with every call's prompts and params kept for inspection."""

    def __init__(self, inner: Generator):
        self.inner, self.calls = inner, []

    def _generate(self, prompts, params):
        self.calls.append((prompts, params))
        return self.inner.generate(prompts, params)


def test_scaffolded_teacher_prefills_the_tags_part_by_part(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    generator = Recording(TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False))
    params = GenerationParams(max_new_tokens=99, do_sample=True, n=2, seed=3)
    rows = [ROW, {**ROW, "id": "q2"}]
    responses = scaffolded_responses(generator, tokenizer, rows, params, [5, 4, 3])
    assert [len(r) for r in responses] == [2, 2]
    for response in (r for group in responses for r in group):
        assert response.startswith("<reason>") and response.endswith("</answer>")
        assert response.count("</reason><extract>") == 1 and response.count("</extract><answer>") == 1
    (first, p1), (second, p2), (third, p3) = generator.calls
    turn = render_chat(tokenizer, extraction_messages(ROW))
    assert first == [turn + "<reason>", render_chat(tokenizer, extraction_messages(rows[1])) + "<reason>"]
    assert (p1.n, p1.max_new_tokens, p1.stop) == (2, 5, TAG_STRINGS)
    assert len(second) == 4 and second[0].startswith(turn + "<reason>") and second[0].endswith("</reason><extract>")
    assert (p2.n, p2.max_new_tokens, p3.max_new_tokens, p3.stop) == (1, 4, 3, TAG_STRINGS)
    assert third[1].endswith("</extract><answer>") and third[1].startswith(second[1])


@pytest.mark.parametrize("variant,prefill", [("rational", True), ("vanilla", True), ("vanilla", False)])
def test_variant_extraction_prefills_the_first_tag(tiny_llama_dir, variant, prefill):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    generator = Recording(TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False))
    ev = dataclasses.replace(load_profile("ci").ar_study.evaluation, prefill_first_tag=prefill, max_new_tokens=3)
    extractor = VariantExtractor(variant, lambda: generator, "model-id", tokenizer, ev)
    outputs = extractor.extract([ROW])
    ((prompts, params),) = generator.calls
    prefix = {"rational": "<reason>", "vanilla": "<extract>"}[variant] if prefill else ""
    assert prompts == [render_chat(tokenizer, extraction_messages(ROW), prefix) if prefill else extraction_messages(ROW)]
    assert outputs[0].startswith(prefix) and params.stop == ("</extract>",) and params.include_stop
    assert not params.do_sample and extractor.config()["prefix"] == prefix


def test_scaffold_needs_a_local_backend():
    cfg = load_profile("paper-1p5b").ar_study.teacher
    with pytest.raises(ConfigError, match="scaffold"):
        dataclasses.replace(cfg, scaffold=[8, 8, 8])
    with pytest.raises(ConfigError, match="scaffold"):
        dataclasses.replace(cfg, backend="transformers", scaffold=[8, 8])


def test_an_http_teacher_keeps_its_finished_requests_in_the_request_cache(tmp_path):
    cfg = load_profile("paper-1p5b")  # DeepSeek-R1 over the OpenAI API; here an address where nothing listens
    teacher = dataclasses.replace(cfg.ar_study.teacher, options={"base_url": "http://127.0.0.1:9/v1", "max_retries": 0})
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, teacher=teacher))
    with teacher_pool(teacher) as pool:
        http_teacher = Teacher(cfg, pool, request_cache=tmp_path / "requests.partial.jsonl")
        with pytest.raises(HTTPGenerationError, match="failed after 1 attempts"):
            http_teacher.respond([ROW])
    assert http_teacher._generator.cache_path == tmp_path / "requests.partial.jsonl"


def _write_contexts(cfg, dataset: str, split: str, rows: list[dict]) -> None:
    write_jsonl(layout.contexts_path(cfg, dataset, split), rows)


@pytest.mark.slow
def test_the_study_runs_on_the_ci_profile_and_reruns_from_its_files(tmp_path, monkeypatch, tiny_llama_dir):
    cfg = load_profile("ci", ROOT / "params.yaml")
    launcher = str(ROOT / "configs/accelerate/cpu-1proc.yaml")  # ci's, by a path that holds in tmp_path
    one_process = dataclasses.replace(cfg.ar_study.sft, accelerate_config=launcher)
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, sft=one_process))
    monkeypatch.chdir(tmp_path)
    assets = tmp_path / "data" / "ci" / "assets"
    assets.mkdir(parents=True)
    (assets / "tiny-random-llama").symlink_to(tiny_llama_dir)
    ev = cfg.ar_study.evaluation
    train = [{**ROW, "id": f"t{i}", "question": f"Where was Ada {i} born?"} for i in range(8)]
    yes_no = {**ROW, "id": "yes-no", "golden_answers": ["no"], "passages": [
        {"id": "3", "contents": '"Ada Lovelace"\nAda was not born in Paris.', "score": 1.0}]}  # "no" in "not"
    test = [{**ROW, "id": f"e{i}"} for i in range(3)] + [yes_no, {**ROW, "id": "lacking", "golden_answers": ["Paris"]}]
    _write_contexts(cfg, cfg.ar_study.teacher.dataset, "train", train)
    _write_contexts(cfg, ev.in_distribution, ev.split, test)
    _write_contexts(cfg, ev.out_of_distribution, ev.split, test[-1:])  # nothing recallable

    run_teacher(cfg, progress=False)
    adapters = train_variants(cfg, progress=False)
    assert all((a / "adapter_model.safetensors").exists() for a in adapters.values())
    assert {json.loads((a.parent / "run_config.json").read_text())["processes"] for a in adapters.values()} == {1}
    files = run_recall(cfg, progress=False)
    assert files[["dataset", "variant", "questions", "excluded", "evaluated"]].values.tolist() == [
        ["ovos-describe", "rational", 5, 2, 3], ["fanoutqa-distractor", "rational", 1, 1, 0],
        ["ovos-describe", "vanilla", 5, 2, 3], ["fanoutqa-distractor", "vanilla", 1, 1, 0]]
    records = read_records(files["path"].iloc[0], AR_FIELDS)
    assert [r["id"] for r in records] == ["e0", "e1", "e2"] and all(r["ar_rationale"] is not None for r in records)
    assert table1(files)["n"].tolist() == [3, 0]

    monkeypatch.setattr(pool_module, "make_generator", lambda *a, **k: pytest.fail("finished records reload a model"))
    assert run_recall(cfg, progress=False).equals(files)


def with_teacher(cfg, **changes):
    teacher = dataclasses.replace(cfg.ar_study.teacher, **changes)
    return dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, teacher=teacher))


def local_teacher_lines() -> dict:
    """The `# local:` lines of the paper profiles' teacher in params.yaml: the documented local teacher (D140)."""
    return yaml.safe_load("\n".join(re.findall(r"^\s*# local: (.*)$", (ROOT / "params.yaml").read_text(), re.M)))


def test_the_documented_local_teacher_is_a_valid_switch_of_the_paper_profiles():
    local = local_teacher_lines()
    assert set(local) == {"model", "backend", "options"} and local["backend"] == "vllm"
    for name in ("paper-1p5b", "paper-7b"):
        cfg = load_profile(name)
        assert cfg.ar_study.teacher.backend == "openai"  # the default stays DeepSeek-R1 itself, over an API
        cfg = with_teacher(cfg, **local)  # validated: the options are VLLMGenerator arguments
        assert local["model"] in assets.references(cfg)  # fetched (and locked) with the profile's other assets
        key = f"params.yaml: profiles.{name}.ar_study.teacher.options"
        assert (key, [local["model"]], local["options"]) in preflight.engines(cfg)  # GPUs and memory checked


def recording_factory(monkeypatch) -> list:
    """Every generator the pools make, with its engine (kept: closing a vLLM generator drops its reference)."""
    made, make = [], pool_module.make_generator

    def recorded(*args, **kwargs):
        generator = make(*args, **kwargs)
        made.append((generator, getattr(generator, "llm", None)))
        return generator

    monkeypatch.setattr(pool_module, "make_generator", recorded)
    return made


def test_a_vllm_teacher_is_one_engine_with_its_options_ended_when_synthesis_returns(
        fake_vllm, tiny_llama_dir, tmp_path, monkeypatch):
    options = local_teacher_lines()["options"]
    cfg = with_teacher(load_profile("ci", ROOT / "params.yaml"), model=str(tiny_llama_dir), backend="vllm",
                       options=options)
    monkeypatch.chdir(tmp_path)
    _write_contexts(cfg, cfg.ar_study.teacher.dataset, "train", [{**ROW, "id": f"t{i}"} for i in range(3)])
    made = recording_factory(monkeypatch)
    records = synthesize(cfg, progress=False)
    ((generator, llm),) = made
    engine = {k: v for k, v in options.items() if k != "data_parallel"}  # replicas, not an engine argument (D6)
    assert {k: llm.engine_args[k] for k in engine} == engine
    assert not llm.engine_args["enable_lora"]  # a teacher takes no adapter: no LoRA slots
    assert len(llm.calls) == 1 and len(records) == 3  # one chunk, one batched call
    assert llm.llm_engine.engine_core.shutdowns == 1 and generator.llm is None  # ended before the LoRA runs


def test_both_variants_are_lora_requests_on_one_engine_of_the_student(fake_vllm, tiny_llama_dir, tmp_path,
                                                                      monkeypatch):
    cfg = load_profile("ci", ROOT / "params.yaml")
    ev = dataclasses.replace(cfg.ar_study.evaluation, backend="vllm", options={"max_model_len": 1024})
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, student=str(tiny_llama_dir),
                                                                evaluation=ev))
    monkeypatch.chdir(tmp_path)
    for variant in VARIANTS:  # the stand-in engine reads no adapter weights
        adapter_dir(cfg.name, variant).mkdir(parents=True)
        (adapter_dir(cfg.name, variant) / "adapter_model.safetensors").write_bytes(b"")
    _write_contexts(cfg, ev.in_distribution, ev.split, [{**ROW, "id": f"e{i}"} for i in range(2)])
    _write_contexts(cfg, ev.out_of_distribution, ev.split, [{**ROW, "id": "o1"}])
    made = recording_factory(monkeypatch)
    files = run_recall(cfg, progress=False)
    ((_, llm),) = made  # one engine for the student
    adapters = [str(adapter_dir(cfg.name, variant)) for variant in VARIANTS]
    assert [call["lora_request"].lora_path for call in llm.calls] == [adapters[0]] * 2 + [adapters[1]] * 2
    assert llm.llm_engine.engine_core.shutdowns == 1 and files["evaluated"].tolist() == [2, 1, 2, 1]


@pytest.mark.vllm
@pytest.mark.slow
def test_a_local_teacher_on_vllms_engine_answers_as_on_transformers_and_ends_with_its_pool(tiny_llama_dir):
    import psutil

    cfg = load_profile("ci", ROOT / "params.yaml")  # greedy, one sample per question
    engine = {"dtype": "float32", "max_model_len": 1024, "enforce_eager": True, "kv_cache_memory_bytes": 2**30}
    on_vllm = with_teacher(cfg, model=str(tiny_llama_dir), backend="vllm", options=engine, max_new_tokens=16)
    rows = [ROW, {**ROW, "id": "q2", "question": "Who designed engines?"}]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with teacher_pool(on_vllm.ar_study.teacher) as pool:
        outputs = Teacher(on_vllm, pool).respond(rows)
        engine, _ = pool.get(str(tiny_llama_dir))
        assert pool.engines_alive == 1 and {p.pid for p in psutil.Process().children(recursive=True)} == before
    assert engine.llm is None  # the engine (in this process: D193) ended with the pool
    on_transformers = with_teacher(cfg, model=str(tiny_llama_dir), backend="transformers",
                                   options={"dtype": "float32"}, max_new_tokens=16)
    with teacher_pool(on_transformers.ar_study.teacher) as pool:
        assert Teacher(on_transformers, pool).respond(rows) == outputs


def test_discordant_cases_pick_the_category(tmp_path):
    for variant, hits in (("rational", [1, 0, 1]), ("vanilla", [0, 1, 1])):
        rationale = [0, 0, 0] if variant == "rational" else None
        write_jsonl(tmp_path / f"{variant}.jsonl", _records(variant, hits, rationale))
    files = pd.DataFrame([{"dataset": "d", "role": "in-distribution", "variant": v,
                           "path": str(tmp_path / f"{v}.jsonl")} for v in ("rational", "vanilla")])
    assert len(discordant_cases(files, "d", "M∧¬N")) == 1 and len(discordant_cases(files, "d", "M∧N")) == 1
    assert len(discordant_cases(files, "d", "¬M∧N")) == 1 and discordant_cases(files, "d", "¬M∧¬N").empty
