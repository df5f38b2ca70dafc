"""Profiles resolve as DVC parameter paths; preflight names the key to change for assets, GPUs, API keys and context
lengths."""

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from repro.config import load_profile, profile_names
from repro.ops import preflight
from repro.ops.cuda_archs import DeviceCode
from repro.ops.preflight import Gpu

ROOT = Path(__file__).resolve().parents[1]
A100 = Gpu("A100-SXM4-80GB", 80 * 10**9)


def dvc_params_errors(tmp_path: Path, monkeypatch, profile: str, params: dict) -> list[str]:
    """What `dvc repro` checks first for every stage: each `params:` path of dvc.yaml, with `profile` selected,
    read from params.yaml (DVC's ParamsDependency.get_hash, as when a stage runs). The file holds `profile` alone of
    the profiles: DVC's lookup of each path (dpath) walks the whole file."""
    import dvc.dependency.param
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    repo_dir = tmp_path / profile.replace(".", "_")
    repo_dir.mkdir()
    params = {**params, "profile": profile, "profiles": {profile: params["profiles"][profile]}}
    (repo_dir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copy(ROOT / "dvc.yaml", repo_dir / "dvc.yaml")
    Repo.init(str(repo_dir), no_scm=True)
    errors, parsed = [], {}
    load_path = dvc.dependency.param.load_path  # DVC re-parses params.yaml for every dependency: parse it once

    def load_once(path, fs, **kwargs):
        if path not in parsed:
            parsed[path] = load_path(path, fs, **kwargs)
        return parsed[path]

    monkeypatch.setattr(dvc.dependency.param, "load_path", load_once)
    with Repo(str(repo_dir)) as repo:
        for stage in repo.index.stages:
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    try:
                        dep.get_hash()
                    except Exception as err:  # MissingParamsError and friends: collected, then asserted empty
                        errors.append(f"{stage.name}: {err}")
    return errors


@pytest.mark.parametrize("profile", profile_names(ROOT / "params.yaml"))
def test_every_profile_resolves_as_dvc_parameter_paths(tmp_path, monkeypatch, profile):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert dvc_params_errors(tmp_path, monkeypatch, profile, params) == []


def test_a_dotted_profile_name_is_what_dvc_cannot_resolve(tmp_path, monkeypatch):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["profiles"]["paper-1.5b"] = params["profiles"]["paper-1p5b"]
    errors = dvc_params_errors(tmp_path, monkeypatch, "paper-1.5b", params)
    assert errors and "profiles.paper-1.5b.models" in errors[0] and "missing from 'params.yaml'" in errors[0]


# --- context lengths ---


def contexts_row(row_id: str, question: str, texts: list[str]) -> dict:
    """A contexts row (the data stage's format) whose passages hold `texts`."""
    return {"id": row_id, "question": question, "golden_answers": ["x"],
            "passages": [{"id": f"{row_id}-{i}", "contents": f'"Title {i}"\n{text}'} for i, text in enumerate(texts)]}


def table14_tokens(tokenizer, row: dict, assistant_prefix: str = "") -> int:
    """Tokens of Table 14 over a row's passages as the extractor's engine reads it: chat template, no extra BOS."""
    from repro.formulas.prompts import extraction_messages, format_passages, render_chat

    text = render_chat(tokenizer, extraction_messages(row["question"], format_passages(row["passages"])),
                       assistant_prefix)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def with_models(cfg, model_dir, **sections):
    """`cfg` with every model the context checks tokenize with = `model_dir`, and `sections` replaced."""
    models = dataclasses.replace(cfg.models, extractor=str(model_dir), generator=str(model_dir),
                                 agents=[str(model_dir)])
    return dataclasses.replace(cfg, models=models, **sections)


def test_the_longest_prompt_is_found_by_words_then_tokenized(tiny_llama_dir, monkeypatch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    wordy = contexts_row("wordy", "Who?", ["the cat sat on the mat " * 20])  # 120 words of one token each
    dense = contexts_row("dense", "Who?", ["Xqzvj-8841 Wbqpk_7720 " * 40])  # 80 words of many tokens each
    short = contexts_row("short", "Who?", ["a cat"])
    assert preflight._words(wordy) > preflight._words(dense) and table14_tokens(tok, dense) > table14_tokens(tok, wordy)
    prompt = preflight.Prompt("Table 14", preflight._extraction, (("evidence_max_new_tokens", 768),))
    rows = [short, wordy, dense]
    assert preflight.longest_prompt(rows, prompt, tok) == (table14_tokens(tok, dense), dense)
    monkeypatch.setattr(preflight, "TOKENIZED_ROWS", 1)  # only the wordiest row is tokenized: the rule's blind spot
    assert preflight.longest_prompt(rows, prompt, tok) == (table14_tokens(tok, wordy), wordy)


def test_distractor_paragraphs_beyond_the_engines_max_model_len_name_the_key(tiny_llama_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.io import write_jsonl

    cfg = load_profile("ci")
    ev = dataclasses.replace(cfg.evaluation, backend="vllm", options={"max_model_len": 4096},
                             evidence_max_new_tokens=768)
    cfg = with_models(cfg, tiny_llama_dir, evaluation=ev)
    monkeypatch.chdir(tmp_path)
    assert preflight.longest_contexts(cfg, "distractor_setting") == []  # before the data stage: nothing to measure
    paragraphs = [f"Paragraph {i} tells of the river {i} and the town that stood on its bank for a century."
                  for i in range(20)]  # MuSiQue's 20 paragraphs per question
    rows = [contexts_row("musique-like", "Which town stood on the river?", paragraphs),
            contexts_row("short", "Which town?", paragraphs[:2])]
    write_jsonl(layout.contexts_path(cfg, "fanoutqa-distractor", "test"), rows)
    prompt = table14_tokens(AutoTokenizer.from_pretrained(tiny_llama_dir), rows[0])
    (context,) = preflight.longest_contexts(cfg, "distractor_setting")
    key = "params.yaml: profiles.ci.evaluation.options.max_model_len"
    assert context == preflight.Context(
        key, 4096, "the longest distractor_setting context, Table 14 on fanoutqa-distractor test (row musique-like)",
        (("prompt", prompt),), (("evidence_max_new_tokens", 768),))
    assert preflight.longest_contexts(cfg, "main_comparison") == []  # scoped to the stage: Table 2's sets not written

    def errors(limit: int) -> list[str]:
        options = {"max_model_len": limit}
        return preflight.context_errors(dataclasses.replace(cfg, evaluation=dataclasses.replace(ev, options=options)),
                                        "distractor_setting")

    need, what = prompt + 768, "tokens of the longest distractor_setting context, Table 14 on fanoutqa-distractor test"
    assert errors(need) == []
    assert errors(need - 1) == [f"{key}: {need - 1} < {need} {what} (row musique-like): prompt {prompt} + "
                                f"evidence_max_new_tokens 768; vLLM cuts the output at the limit; set it to at least "
                                f"{need}"]
    assert errors(prompt) == [f"{key}: {prompt} < {need} {what} (row musique-like): prompt {prompt} + "
                              f"evidence_max_new_tokens 768; vLLM refuses such a prompt and fails its whole batch; "
                              f"set it to at least {need}"]


def test_grpo_holds_the_o_r_context_prompt_rationale_and_answer(tiny_llama_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.io import write_jsonl

    cfg = load_profile("ci")
    train = dataclasses.replace(cfg.train, use_vllm=True, vllm_max_model_length=2048, max_completion_length=768,
                                max_answer_length=32)
    cfg = with_models(cfg, tiny_llama_dir, train=train)
    monkeypatch.chdir(tmp_path)
    rows = [contexts_row("a", "Capital of France?", ["Paris is the capital of France."] * 5)]
    write_jsonl(layout.contexts_path(cfg, cfg.train.dataset, "train"), rows)
    prompt = table14_tokens(AutoTokenizer.from_pretrained(tiny_llama_dir), rows[0])
    for stage in ("train_eviomni", "reward_designs", None):  # every GRPO stage, and the whole pipeline
        assert preflight.longest_contexts(cfg, stage) == [preflight.Context(
            "params.yaml: profiles.ci.train.vllm_max_model_length", 2048,
            "the longest o_r context, Table 14 on fanoutqa train (row a)",
            (("prompt", prompt), ("max_completion_length", 768)), (("max_answer_length", 32),))]
    assert preflight.longest_contexts(cfg, "main_comparison") == []


def test_the_agent_holds_every_turn_and_the_extractor_a_search(tiny_llama_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.io import write_jsonl
    from repro.formulas.prompts import chat_messages, eval_rar_prompt, render_chat

    cfg = load_profile("ci")  # 4 actions, 8 new tokens per turn, observations cut to 64 tokens, top-3 per search
    agentic = dataclasses.replace(cfg.agentic, backend="vllm", agent_options={"max_model_len": 512},
                                  extractor_options={"max_model_len": 512})
    cfg = with_models(cfg, tiny_llama_dir, agentic=agentic)
    monkeypatch.chdir(tmp_path)
    long_question = "Which of the two rivers that meet at the old town is the longer one, and by how much?"
    row = contexts_row("q1", long_question, [f"River {i} runs for {i} hundred miles." for i in range(5)])
    for dataset in ("fanoutqa", "ovos-describe"):
        write_jsonl(layout.qa_path(cfg.name, dataset, "test"),
                    [{k: row[k] for k in ("id", "question", "golden_answers")}] if dataset == "fanoutqa" else
                    [{"id": "q2", "question": "Why?", "golden_answers": ["x"]}])
        write_jsonl(layout.contexts_path(cfg, dataset, "test"), [row])
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    eval_rar = len(tok(render_chat(tok, chat_messages(eval_rar_prompt(long_question), system=None)),
                       add_special_tokens=False)["input_ids"])  # Eval-RAR's prompt is longer than Search-R1's
    searched = table14_tokens(tok, {**row, "passages": row["passages"][:3]})
    root = "params.yaml: profiles.ci.agentic"
    assert preflight.longest_contexts(cfg, "agentic_search_r1") == [
        preflight.Context(f"{root}.agent_options.max_model_len", 512,
                          "the agent's longest context, Eval-RAR's prompt on fanoutqa test (row q1)",
                          (("prompt", eval_rar), ("max_actions x max_new_tokens", 32),
                           ("max_actions x max_obs_tokens", 256)), (("max_new_tokens", 8),)),
        preflight.Context(f"{root}.extractor_options.max_model_len", 512,
                          "the agentic extractor's longest context, Table 14 on fanoutqa test (row q1)",
                          (("prompt", searched), ("the agent's reasoning and query, max_new_tokens", 8)),
                          (("extractor_max_new_tokens", 8),))]


def test_the_ar_study_measures_a_local_teacher_and_the_prefilled_students(tiny_llama_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.io import write_jsonl

    cfg = load_profile("ci")
    ar = cfg.ar_study
    teacher = dataclasses.replace(ar.teacher, model=str(tiny_llama_dir), backend="vllm",
                                  options={"max_model_len": 1024}, max_new_tokens=512)
    evaluation = dataclasses.replace(ar.evaluation, backend="vllm", options={"max_model_len": 1024})
    cfg = dataclasses.replace(cfg, ar_study=dataclasses.replace(ar, teacher=teacher, evaluation=evaluation,
                                                                student=str(tiny_llama_dir)))
    monkeypatch.chdir(tmp_path)
    rows = {split: [contexts_row(f"{split}-{i}", "Who?", ["Ann wrote it."] * (i + 1)) for i in range(3)]
            for split in ("train", "test")}
    write_jsonl(layout.contexts_path(cfg, "ovos-describe", "train"), rows["train"])
    write_jsonl(layout.contexts_path(cfg, "ovos-describe", "test"), rows["test"])
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    root = "params.yaml: profiles.ci.ar_study"
    assert preflight.longest_contexts(cfg, "ar_study_teacher") == [preflight.Context(
        f"{root}.teacher.options.max_model_len", 1024,
        "the teacher's longest context, Table 14 on ovos-describe train (row train-2)",
        (("prompt", table14_tokens(tok, rows["train"][2])),), (("max_new_tokens", 512),))]
    prefilled = max(table14_tokens(tok, rows["test"][2], tag) for tag in ("<reason>", "<extract>"))
    (student,) = preflight.longest_contexts(cfg, "ar_study")  # fanoutqa-distractor (out of distribution) not written
    assert student.key == f"{root}.evaluation.options.max_model_len" and student.given == (("prompt", prefilled),)
    assert student.generated == (("max_new_tokens", 8),) and "ovos-describe test (row test-2)" in student.what
    api = dataclasses.replace(teacher, backend="openai", model="deepseek-reasoner", options={"base_url": "http://x"})
    assert preflight.longest_contexts(dataclasses.replace(cfg, ar_study=dataclasses.replace(
        cfg.ar_study, teacher=api)), "ar_study_teacher") == []  # an API's context is the API's


def test_table_14_bounds_every_prompted_method_and_every_method_is_classified(tiny_llama_dir):
    """The stated rule behind PROMPTED_METHODS: over the same passages, Table 14 is the longest prompt of them."""
    import typing

    from transformers import AutoTokenizer

    from repro.baselines.filco import filter_context, filter_prompt
    from repro.baselines.seer import seer_prompt
    from repro.config import EvaluationMethod
    from repro.formulas.prompts import chat_messages, cot_prompt, passages_document, render_chat

    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    row = contexts_row("r", "Who wrote Hamlet?", ["Hamlet is a tragedy by William Shakespeare."] * 5)

    def tokens(prompt: str) -> int:
        return len(tok(render_chat(tok, chat_messages(prompt)), add_special_tokens=False)["input_ids"])

    others = [cot_prompt(row["question"], passages_document(row)), filter_prompt(row["question"], filter_context(row)),
              seer_prompt(row["question"], passages_document(row))]
    assert table14_tokens(tok, row) > max(map(tokens, others))
    classified = {"zero", *preflight.PROMPTED_METHODS, *preflight.PASSAGE_QA_METHODS}
    assert classified == set(typing.get_args(EvaluationMethod))


def test_the_methods_each_prompt_bounds_are_read_from_the_method_rows():
    """The methods whose refiners send Table 14, and those whose evidence the QA generator reads with the passages'
    length, as the rows say (a new row needs no edit here)."""
    assert {"cot", "prompted_extractor", "eviomni", "eviomni_released", "filco", "seer"} <= set(
        preflight.PROMPTED_METHODS)
    assert {"full", "selective_context", "llmlingua2", "llmlingua2_standin", "recomp"} <= set(
        preflight.PASSAGE_QA_METHODS)
    assert not set(preflight.PROMPTED_METHODS) & set(preflight.PASSAGE_QA_METHODS) and "zero" not in {
        *preflight.PROMPTED_METHODS, *preflight.PASSAGE_QA_METHODS}


def test_cpu_profiles_measure_nothing_and_read_no_file(monkeypatch):
    def refuse(*args):
        raise AssertionError("a profile without a max_model_len had its prompts measured")

    monkeypatch.setattr(preflight.Measure, "tokenizer", refuse)
    monkeypatch.setattr(preflight.Measure, "rows", refuse)
    assert preflight.longest_contexts(load_profile("tiny")) == preflight.longest_contexts(load_profile("ci")) == []


# --- API keys ---


def test_an_api_teacher_without_its_key_names_the_variable_the_stage_and_the_local_teacher():
    cfg = load_profile("paper-1p5b")
    error = ("params.yaml: profiles.paper-1p5b.ar_study.teacher.options.api_key_env: $DEEPSEEK_API_KEY is unset or "
             "empty, and stage ar_study_teacher sends deepseek-reasoner's requests to https://api.deepseek.com/v1 with "
             "it; export DEEPSEEK_API_KEY, or use the local vLLM teacher: the `# local:` lines under ar_study.teacher "
             "in params.yaml (D140)")
    for environ in ({}, {"DEEPSEEK_API_KEY": " "}):
        assert preflight.api_key_errors(cfg, None, environ) == preflight.api_key_errors(
            cfg, "ar_study_teacher", environ) == [error]
        assert preflight.api_key_errors(cfg, "main_comparison", environ) == []  # another stage sends nothing
    assert preflight.api_key_errors(cfg, "ar_study_teacher", {"DEEPSEEK_API_KEY": "sk-1"}) == []
    teacher = cfg.ar_study.teacher
    for changes in ({"options": {**teacher.options, "api_key": "sk-1"}},  # a key in the options themselves
                    {"model": "m", "backend": "vllm", "options": {"max_model_len": 12288}}):  # a local teacher
        changed = dataclasses.replace(cfg.ar_study, teacher=dataclasses.replace(teacher, **changes))
        assert preflight.api_key_errors(dataclasses.replace(cfg, ar_study=changed), "ar_study_teacher", {}) == []


# --- GPUs ---


def test_cpu_profiles_ask_nothing_of_the_gpus_and_do_not_look(monkeypatch):
    def look():  # imports torch: seconds of every stage's preflight on a CPU
        raise AssertionError("a CPU profile's preflight counted the GPUs")

    monkeypatch.setattr(preflight, "visible_gpus", look)
    monkeypatch.setattr(preflight, "gpu_device_files", lambda: False)  # no GPU driver: ci's two processes use the CPU
    assert preflight.gpu_errors(load_profile("tiny")) == preflight.gpu_errors(load_profile("ci")) == []


def lora_launchers(cfg, launcher: str):
    """`cfg` with every LoRA run (the QA generator, FilCo, SEER, the AR study's students) launched by `launcher`."""
    cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(getattr(cfg, section), accelerate_config=launcher)
                                      for section in ("qa_generator", "filco", "seer")})
    return dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, sft=dataclasses.replace(
        cfg.ar_study.sft, accelerate_config=launcher)))


def test_every_launcher_needs_a_gpu_per_process_where_gpus_are_visible(monkeypatch):
    from repro.config import launchers

    ci = lora_launchers(load_profile("ci"), "configs/accelerate/cpu-2proc.yaml")  # two processes: DDP, or gloo on CPUs
    keys = [key for key, path in launchers.launchers(ci).items() if path == "configs/accelerate/cpu-2proc.yaml"]
    sections = {key.removeprefix("params.yaml: profiles.ci.").removesuffix(".accelerate_config") for key in keys}
    assert sections >= {"qa_generator", "filco", "seer", "ar_study.sft"}
    assert preflight.gpu_errors(ci, [A100]) == [
        f"{key}: configs/accelerate/cpu-2proc.yaml launches 2 processes, 1 GPU(s) visible; set num_processes there"
        for key in keys]
    assert preflight.gpu_errors(ci, [A100] * 2) == preflight.gpu_errors(ci, []) == []  # or two CPU processes
    monkeypatch.setattr(preflight, "visible_gpus", lambda: [A100])
    monkeypatch.setattr(preflight, "gpu_device_files", lambda: True)  # a driver: the GPUs are counted
    monkeypatch.setattr(preflight, "cuda_stack", stack)  # with the pinned CUDA stack's driver and code
    assert len(preflight.gpu_errors(ci)) == len(keys)
    deepspeed = dataclasses.replace(ci, qa_generator=dataclasses.replace(
        ci.qa_generator, accelerate_config="configs/accelerate/zero2-1gpu.yaml"))
    assert preflight.gpu_errors(deepspeed, []) == [  # DeepSpeed runs on GPUs only
        "params.yaml: profiles.ci.qa_generator.accelerate_config: this profile runs on GPUs and none is visible "
        "(CUDA_VISIBLE_DEVICES, drivers)"]
    cpu = lora_launchers(ci, "configs/accelerate/cpu-1proc.yaml")
    monkeypatch.setattr(preflight, "visible_gpus", lambda: pytest.fail("use_cpu launchers counted the GPUs"))
    assert preflight.gpu_errors(cpu) == []


def test_grpos_colocated_vllm_tensor_parallel_size_divides_its_processes():
    cfg = load_profile("paper-1p5b")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, vllm_tensor_parallel_size=3))
    assert preflight.gpu_errors(cfg, [A100] * 8) == [
        "params.yaml: profiles.paper-1p5b.train.vllm_tensor_parallel_size: 3 does not divide the 8 processes of "
        "configs/accelerate/zero2.yaml (TRL's colocated vLLM needs it to)"]


def test_a_vllm_backend_asks_for_gpus_only_from_vllms_cuda_build(monkeypatch):
    tiny = load_profile("tiny")
    options = {"enforce_eager": True, "max_model_len": 2048, "kv_cache_memory_bytes": 2**31}
    tiny = dataclasses.replace(tiny, evaluation=dataclasses.replace(tiny.evaluation, backend="vllm", options=options))
    monkeypatch.setattr(preflight, "vllm_is_cpu_build", lambda: False)
    (error,) = preflight.gpu_errors(tiny, [])
    assert error.startswith("params.yaml: profiles.tiny.evaluation.backend: this profile runs on GPUs")
    monkeypatch.setattr(preflight, "vllm_is_cpu_build", lambda: True)
    assert preflight.gpu_errors(tiny, []) == []


def test_a_paper_profile_without_gpus_fails_in_one_line():
    (error,) = preflight.gpu_errors(load_profile("paper-1p5b"), [])
    assert error.startswith("params.yaml: profiles.paper-1p5b.train.accelerate_config: this profile runs on GPUs")


def test_too_few_gpus_name_every_launchers_process_count_and_the_tensor_parallel_size():
    errors = preflight.gpu_errors(load_profile("paper-1p5b"), [A100] * 2)
    root = "params.yaml: profiles.paper-1p5b"
    assert errors == [
        f"{root}.train.accelerate_config: configs/accelerate/zero2.yaml launches 8 processes, 2 GPU(s) visible; set "
        "num_processes there",
        *(f"{root}.{section}.accelerate_config: configs/accelerate/ddp.yaml launches 8 processes, 2 GPU(s) visible; "
          "set num_processes there" for section in ("qa_generator", "filco", "seer", "ar_study.sft")),
        f"{root}.agentic.agent_options.tensor_parallel_size: 4 > 2 visible GPU(s)"]
    assert preflight.gpu_errors(load_profile("paper-1p5b"), [A100] * 8) == []  # weights not local: no memory check


H200 = Gpu("NVIDIA H200", 141 * 10**9, 90)
TORCH_2_13 = DeviceCode(frozenset({75, 80, 86, 89, 90, 100, 103, 120, 121}), frozenset())  # its libtorch_cuda.so
VLLM_0_31 = DeviceCode(frozenset({75, 80, 86, 89, 90, 100, 120}), frozenset({80, 89, 90}))


def stack(driver: str | None = "580.95.05", cuda: str | None = "13.0", torch_code=TORCH_2_13, vllm_code=VLLM_0_31):
    return preflight.CudaStack("2.13.0", cuda, driver, torch_code, vllm_code)


def test_the_pinned_stack_on_hopper_passes_and_reports_its_versions_and_each_gpus_code():
    cfg = load_profile("paper-1p5b")
    assert preflight.gpu_errors(cfg, [H200] * 8, stack()) == []
    lines = preflight.stack_report([H200], stack())
    assert lines[0].startswith("torch 2.13.0, CUDA 13.0, NVIDIA driver 580.95.05")
    assert lines[1] == "GPU 0: NVIDIA H200, 141 GB, sm_90: code in torch yes, vLLM yes"


def test_a_driver_below_cudas_floor_a_missing_one_and_a_build_without_the_gpus_code_fail_naming_each():
    cfg = load_profile("paper-1p5b")
    (old,) = preflight.gpu_errors(cfg, [H200] * 8, stack(driver="550.54.15"))
    assert old.startswith("NVIDIA driver 550.54.15 is older than 580, the oldest that runs CUDA 13.0")
    (missing,) = preflight.gpu_errors(cfg, [H200] * 8, stack(driver=None))
    assert missing.startswith("no NVIDIA driver answers (nvidia-smi)") and "needs 580 or newer" in missing
    ampere_only = DeviceCode(frozenset({70, 80}), frozenset())  # faiss-gpu-cu12 1.13.2's code (D214)
    errors = preflight.gpu_errors(cfg, [H200] * 8, stack(torch_code=ampere_only))
    assert errors[0] == ("GPU 0 (NVIDIA H200, sm_90): the installed torch has no code for it "
                         "(SASS sm_70 sm_80; PTX none)")
    assert len(errors) == 8 and preflight.gpu_errors(cfg, [A100] * 8, stack(torch_code=ampere_only)) == []


def test_an_engines_replicas_need_their_tensor_parallel_gpus_each():
    cfg = load_profile("paper-1p5b")
    agentic = dataclasses.replace(cfg.agentic, agent_options={**cfg.agentic.agent_options, "data_parallel": 3})
    key = "params.yaml: profiles.paper-1p5b.agentic.agent_options"
    assert preflight.gpu_errors(dataclasses.replace(cfg, agentic=agentic), [A100] * 8) == [
        f"{key}.data_parallel: 3 replicas x tensor_parallel_size 4 need 12 GPUs, 8 visible"]
    auto = {**cfg.agentic.agent_options, "data_parallel": "auto"}  # as many as fit: 2 replicas of 4 GPUs
    assert preflight.gpu_errors(dataclasses.replace(cfg, agentic=dataclasses.replace(agentic, agent_options=auto)),
                                [A100] * 8) == []


def test_a_memory_share_too_small_for_the_weights_names_the_key(tmp_path, monkeypatch):
    cfg = load_profile("paper-7b")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "configs", "configs")
    weights = Path("data/external/hub/Qwen/Qwen2.5-7B-Instruct/model-00001-of-00001.safetensors")
    weights.parent.mkdir(parents=True)
    with open(weights, "wb") as f:  # sparse: 15.2 GB of bf16 weights, no disk used
        f.truncate(15_230_000_000)
    errors = preflight.gpu_errors(cfg, [Gpu("A100-SXM4-40GB", 40 * 10**9)] * 8)
    assert errors == [f"params.yaml: profiles.paper-7b.{key}.gpu_memory_utilization: 0.3 of 40 GB holds 12.0 GB "
                      "< 15.2 GB of weights per GPU of Qwen/Qwen2.5-7B-Instruct"
                      for key in ("train.vllm", "evaluation.options", "latency.options")]
    assert preflight.gpu_errors(cfg, [A100] * 8) == []


# --- assets ---


def test_unfetched_assets_are_listed_with_their_key_and_the_fetch_command(tmp_path, monkeypatch):
    from repro.ops import remote

    cfg = load_profile("paper-1p5b")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    remote.write_lock(Path("fetch.lock.yaml"), {"Qwen/Qwen2.5-1.5B-Instruct": {"type": "model", "commit": "a" * 40,
                                                                                "files": {}}})
    errors = preflight.asset_errors(cfg)
    fetch = "run `HF_HUB_OFFLINE=0 python -m repro.ops.remote fetch --profile paper-1p5b`"
    assert f"params.yaml: profiles.paper-1p5b.models.extractor: 'Qwen/Qwen2.5-1.5B-Instruct' is not fetched at " \
           f"aaaaaaaaaaaa (fetch.lock.yaml); {fetch}" in errors
    assert f"params.yaml: profiles.paper-1p5b.baselines.recomp.model: 'fangyuan/nq_extractive_compressor' is not " \
           f"fetched; {fetch}" in errors  # not in the lock yet
    assert not any("deberta" in e for e in errors)  # R_EQR is not computed: the NLI model is not needed
    assert "params.yaml: profiles.paper-1p5b.data.corpus.source: data/external/wiki-18.jsonl does not exist; run " \
           "`python -m repro.ops.remote fetch --profile paper-1p5b`" in errors
    assert any(e.startswith("params.yaml: profiles.paper-1p5b.data.datasets[nq].source: ['nq/dev.jsonl'") for e in errors)
    assert all("\n" not in e for e in errors) and len(errors) == len(set(errors))


def test_unfetched_assets_fail_preflight_and_light_stages_are_not_checked():
    cfg = load_profile("paper-1p5b")
    with pytest.raises(preflight.PreflightError, match=r"models\.extractor: 'Qwen/Qwen2\.5-1\.5B-Instruct' is not "
                                                       r"fetched; run `HF_HUB_OFFLINE=0 python -m "
                                                       r"repro\.ops\.remote fetch"):
        preflight.require(cfg, "main_comparison")
    assert preflight.require(cfg, "length_rewards") is None  # reads only the rewards section: runs anywhere


def test_a_notebook_stage_stops_before_its_notebook_runs_when_preflight_fails(monkeypatch):
    from repro.ops import notebooks

    ran = []
    monkeypatch.setattr(notebooks, "run_notebook", lambda *args, **kwargs: ran.append(args))
    with pytest.raises(SystemExit, match=r"^error: profile paper-1p5b cannot run main_comparison here:\n"):
        notebooks.main(["main_comparison", "--profile", "paper-1p5b"])
    notebooks.main(["main_comparison", "--profile", "ci"])  # CPU profile, embedded assets: nothing to stop
    assert ran == [("main_comparison", "ci", {})]


def test_too_little_disk_names_what_to_free_and_the_key_that_switches_table_3_off(tmp_path, monkeypatch):
    """Free disk (stubbed) against the cost model's disk still to write (repro.ops.costs.disk_to_write), in a directory
    with the stages' outputs (dvc.yaml) and launchers (configs/) but no data/: every stage still to run."""
    from repro.ops import costs

    cfg, ci = load_profile("paper-1p5b"), load_profile("ci")
    shutil.copy(ROOT / "dvc.yaml", tmp_path)
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    need, left = costs.disk.disk_to_write(cfg)
    assert preflight.disk_errors(cfg, free=int(need) + 1) == []
    [error] = preflight.disk_errors(cfg, free=300 * 10**9)
    assert error.startswith(f"data/: 300 GB free, but by the estimate the stages still write about {need / 1e9:.0f} GB "
                            f"(ablation_answer_rewards {left['ablation_answer_rewards'] / 1e9:.0f}, fetch ")
    assert error.endswith(f"free {(need - 300e9) / 1e9:.0f} GB there, or set params.yaml: profiles.paper-1p5b.ablation: "
                          f"null ({left['ablation_answer_rewards'] / 1e9:.0f} GB less)")
    [error] = preflight.disk_errors(cfg, "train_eviomni", free=30 * 10**9)  # a stage: its own disk and its checkpoint
    assert "(train_eviomni 52, a checkpoint in flight 22 GB;" in error and "ablation" not in error
    assert preflight.disk_errors(cfg, "main_comparison", free=0) == []  # its records: not in the estimate
    assert preflight.disk_errors(ci, free=0) == []  # a profile the cost model does not estimate


def test_light_stages_are_those_of_dvc_yaml_that_read_no_asset():
    stages = {"assets": {"cmd": "python -m repro.stages.assets materialize", "deps": ["src/repro/assets.py"]},
              "table": {"cmd": "python -m repro.ops.notebooks table --profile ${profile}", "deps": ["data/paper"]},
              "study": {"cmd": "python -m repro.ops.notebooks study --profile ${profile}",
                        "deps": [preflight.ASSETS_DEP]},
              "tool": {"cmd": "python -m repro.tool --profile ${profile}", "deps": ["data/${profile}/qa"]}}
    assert preflight.light_stages(stages) == {"table", "tool"}  # by the stage's name, as `require` is called
    assert {"significance_reported", "claims", "case_inspection"} <= preflight.light_stages()
    assert not {"data", "main_comparison", "agentic_search_r1"} & preflight.light_stages()


def test_the_preflight_runs_every_check_the_runbook_lists(monkeypatch):
    """docs/gpu.md says what the preflight checks; `check` (what `require` and the command line run) runs each."""
    listed = {"asset_errors": "assets against the lock", "gpu_errors": "against the visible GPUs",
              "disk_errors": "free disk", "api_key_errors": "API keys", "context_errors": "longest prompt"}
    runbook = " ".join((ROOT / "docs" / "gpu.md").read_text(encoding="utf-8").split())
    for name, words in listed.items():
        assert words in runbook, f"docs/gpu.md's preflight paragraph no longer says {words!r}"
        monkeypatch.setattr(preflight, name, lambda *args, name=name, **kwargs: [name])
    assert preflight.check(load_profile("paper-1p5b"), "train_eviomni") == list(listed)


def test_dvc_exp_run_set_param_rewrites_params_yaml_to_the_same_values(tmp_path):
    """`dvc exp run -S profile=P` (every command of the runbook and the README) makes DVC rewrite the whole of
    params.yaml through ruamel and OmegaConf. A flow mapping with a merge key (`{<<: *rewards, ...}`) came back with its
    merged values in flow style, `embedded:nli-untrained-minilm` unquoted, which no YAML parser reads: every `-S`
    failed (D218)."""
    from dvc.utils.hydra import apply_overrides
    from dvc.utils.serialize import load_yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    copy = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", copy)
    apply_overrides(copy, ["profile=released-1p5b", "eviomni=released_extractor"])
    assert load_yaml(copy) == {**params, "profile": "released-1p5b", "eviomni": "released_extractor"}  # as DVC reads it
