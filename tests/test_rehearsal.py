"""The rehearsal profile is paper-1p5b with its sizes cut, its hardware swapped for this CPU and its hub for a local
mirror, and nothing else (issue #30): every value that differs must match a pattern of ALLOWED, and every pattern
must still be needed."""

from fnmatch import fnmatchcase

import pytest
import yaml
from conftest import ROOT

SIZES = "a size: fewer questions, steps, samples or tokens"
CPU = "the hardware: GPU-only engine options and launchers have no CPU equivalent here"
ALLOWED = {
    "description": "text",
    # sizes
    "*.max_questions": SIZES, "*.max_train_questions": SIZES, "*.max_steps": SIZES, "*.save_steps": SIZES,
    "*.per_device_batch_size": SIZES, "*.gradient_accumulation_steps": SIZES, "*.steps_per_generation": SIZES,
    "*.batch_size": SIZES, "*.chunk_size": SIZES, "*.max_new_tokens": SIZES, "*max_new_tokens": SIZES,
    "*.max_obs_tokens": SIZES, "*.max_completion_length": SIZES, "*.max_answer_length": SIZES,
    "train.dev_max_questions": SIZES, "agentic.n_items": SIZES, "seer.num_samples": SIZES,
    "ar_study.teacher.questions": SIZES, "released_check.questions": SIZES, "ar_study.sft.epochs": SIZES, "latency.queries": SIZES,
    "latency.repetitions": SIZES, "latency.datasets*": SIZES, "noise.counts*": SIZES, "noise.datasets*": SIZES, "ablation.subsets*": SIZES, "ablation.datasets*": SIZES,
    # hardware
    "*accelerate_config": CPU + " (two gloo processes; DeepSpeed has no CPU build in this environment)",
    "*options.gpu_memory_utilization": CPU, "*options.tensor_parallel_size": CPU, "*options.data_parallel": CPU,
    # vLLM's CPU engines: a fixed KV cache (else each takes 0.9 of the RAM), no compilation, both cores to the worker
    "*options.kv_cache_memory_bytes": CPU, "*options.enforce_eager": CPU, "*options.cpu_reserved_cores": CPU,
    "train.use_vllm": CPU + ": vLLM's CPU build cannot load synced weights in colocate mode (D138)",
    # the hub and its stand-ins
    "fetch.lock": "the mirror's commits, not the hub's", "fetch.hub": "the local mirror",
    # random weights: what a model must have learned cannot be rehearsed
    "ar_study.teacher.model": "DeepSeek's paid API, and random weights never write a response the study keeps: ci's "
                              "String Inclusion teacher (D78)",
    "ar_study.teacher.backend": "as ar_study.teacher.model", "ar_study.teacher.options.*": "as ar_study.teacher.model",
    "retrieval.default": "random dense encoders retrieve at chance: BM25 gives the studies contexts that hold answers "
                         "(DPR's index is still built and scored)",
    "retrieval.evaluate*": "as retrieval.default: Table 8 scores BM25 too",
    "released_check.min_format_rate": "random weights fail every real floor: report only",
    "released_check.cr_factor": "random weights fail every real floor: report only",
    "reward_designs*": "opt-in on paper-1p5b; rehearsed here",
}
MISSING = object()


def flatten(value, path: str = "") -> dict[str, object]:
    """Every leaf of a parsed YAML value by dotted path (list items as [i])."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in flatten(item, f"{path}.{key}" if path else key).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in flatten(item, f"{path}[{i}]").items()}
    return {path: value}


def test_the_rehearsal_differs_from_paper_1p5b_only_where_allowed():
    profiles = yaml.safe_load((ROOT / "params.yaml").read_text())["profiles"]
    paper, rehearsal = flatten(profiles["paper-1p5b"]), flatten(profiles["rehearsal"])
    differing = sorted(k for k in paper.keys() | rehearsal.keys() if paper.get(k, MISSING) != rehearsal.get(k, MISSING))
    unexplained = [f"{k}: {paper.get(k, '(absent)')!r} -> {rehearsal.get(k, '(absent)')!r}" for k in differing
                   if not any(fnmatchcase(k, pattern) for pattern in ALLOWED)]
    assert not unexplained, "differences from paper-1p5b that ALLOWED does not explain:\n" + "\n".join(unexplained)
    unused = [p for p in ALLOWED if not any(fnmatchcase(k, p) for k in differing)]
    assert not unused, f"ALLOWED patterns that no difference needs any more: {unused}"


def test_flatten_names_every_leaf():
    assert flatten({"a": {"b": [1, {"c": 2}]}, "d": None}) == {"a.b[0]": 1, "a.b[1].c": 2, "d": None}


def test_the_scratch_copy_selects_the_rehearsal_and_a_failed_step_is_named(tmp_path):
    from repro.ops.rehearsal.run import Clock, RehearsalError, scratch_copy

    scratch_copy(tmp_path)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert params["profile"] == "rehearsal" and (tmp_path / "dvc.yaml").is_file() and (tmp_path / ".git").is_dir()
    assert not (tmp_path / ".venv").exists()  # ignored files stay behind
    clock = Clock(tmp_path)
    assert clock.run("echo", ["echo", "Running stage 'data':"]) == ["Running stage 'data':"]
    assert [stage for stage, _ in clock.stages] == ["data", None] and "min  data" in clock.summary()
    with pytest.raises(RehearsalError, match=r"^preflight: `false` exited with 1"):
        clock.run("preflight", ["false"])


def test_the_released_path_sets_the_rehearsal_as_released_1p5b_is_set_against_paper_1p5b(tmp_path):
    """docs/gpu.md's released path on the rehearsal's graph: released-1p5b's own values, the rehearsal's sizes and
    hardware; written as the rehearsal writes it and read back by the profile loader."""
    from repro.config import load_profile
    from repro.ops.rehearsal.run import RELEASED_KEPT, differences_applied, released_params

    base, changed, target = {"a": 1, "b": {"c": 2, "d": 3}}, {"a": 1, "b": {"c": 5, "d": 4}, "e": None}, {
        "a": 9, "b": {"c": 8, "d": 7, "f": 6}}
    assert differences_applied(base, changed, target) == {"a": 9, "b": {"c": 5, "d": 4, "f": 6}, "e": None}
    assert differences_applied(base, changed, target, ("b.c", "e")) == {"a": 9, "b": {"c": 8, "d": 4, "f": 6}}
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(released_params(params), sort_keys=False))
    before, after = load_profile("rehearsal", ROOT / "params.yaml"), load_profile("rehearsal", tmp_path / "params.yaml")
    assert yaml.safe_load((tmp_path / "params.yaml").read_text())["eviomni"] == "released_extractor"
    assert after.filco is None and after.seer is None and after.latency is None and after.ablation is None
    assert after.evaluation.methods == after.distractor.methods == ["zero", "full", "eviomni_released"]
    assert after.evaluation.max_questions == before.evaluation.max_questions  # the rehearsal's sizes stay
    assert after.released_check.stop == ["</extract>\n\n"] and after.released_check.questions == 2
    assert after.released_check.max_new_tokens == before.released_check.max_new_tokens  # a size: the rehearsal's
    assert (after.models, after.train, after.fetch) == (before.models, before.train, before.fetch)
    released = flatten(params["profiles"]["released-1p5b"])
    assert all(any(k == kept or k.startswith(f"{kept}.") for k in released) for kept in RELEASED_KEPT)
