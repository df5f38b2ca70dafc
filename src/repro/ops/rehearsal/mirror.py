"""A local hub MIRROR for the rehearsal: every repo the paper profiles name, as seeded tiny random models and small
data sets written in each real repo's architecture and file layout (issue #30, deliverable 4).

    python -m repro.ops.rehearsal mirror DIR [--seed 0]

Layout (the one `repro.ops.remote.LocalHub` reads, agreed with the fetch code): `DIR/<repo>/resolve/<commit>/<file>` for
models, `DIR/datasets/<repo>/resolve/<commit>/<file>` for datasets, and `DIR/[datasets/]<repo>/refs/main`, a text file
holding the 40-hex commit; the commit is the sha1 of the repo's file list with each file's sha256, so two builds from
one seed are byte-identical, commits included. `DIR/mirror.json` lists every repo, commit and file digest.

What each repo holds, as the hub holds it (sizes apart):
- Qwen2 causal LMs (`Qwen2ForCausalLM`, bf16 safetensors, one file or the real repo's shard count with
  `model.safetensors.index.json`): config.json and generation_config.json with the real keys and values, a byte-level
  BPE trained on the mirror's text with Qwen2.5's 22 added tokens (ids after the BPE vocabulary, as 151643+ are after
  Qwen's) in tokenizer.json, vocab.json and merges.txt, and tokenizer_config.json with Qwen2.5's chat template
  (`templates.py`). DeepSeek-R1-Distill-Qwen-32B has the distill's own added tokens, template, `LlamaTokenizerFast`
  config and 8 shards named `-of-000008`. The fine-tuned checkpoints (EviOmni, Search-R1) carry the files transformers'
  `save_pretrained` writes beside them (added_tokens.json, special_tokens_map.json).
- DPR question/context encoders and DeBERTa-v2 MNLI: `pytorch_model.bin` ONLY (`torch.save` of the state dict, as the
  hub files are); RECOMP's compressor: sentence-transformers layout with `pytorch_model.bin` only.
- e5-base-v2 and all-MiniLM-L6-v2 (sentence-transformers layout), GPT-2, LLMLingua-2 (XLM-R token classifier with a
  sentencepiece model): safetensors (and `pytorch_model.bin` where the hub repo also has one).
- RUC-NLPIR/FlashRAG_datasets `<name>/<split>.jsonl` for the five sets with the fields FlashRAG ships;
  PeterJinGo/wiki-18-corpus `wiki-18.jsonl.gz` in Search-R1's format; PeterJinGo/wiki-18-e5-index `part_aa` +
  `part_ab`, a FAISS Flat inner-product index over that corpus encoded with the mirror's e5 model as Search-R1 encodes
  ("passage: " + contents, mean pooling, L2 norm) through this project's own encoder (`repro.retrieval.dense`), cut in
  two byte ranges.
Left out: the formats no loader here reads (tf_model.h5, flax, rust, onnx, openvino) and git's `.gitattributes`.

This module assembles the repos and lays them out; its siblings build them: `content` (the passages, the questions and
FlashRAG's rows), `tokenizers` (trained on that text), `weights` (seeded random models and their weight files), `repos`
(each model repo's files, and the e5 index), `files` (bytes, digests, seeds, commits, READMEs) and `templates` (the
chat templates).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from repro.io import atomic_dir, read_json_object, write_json
from repro.ops.rehearsal.content import QUESTIONS, build_content, flashrag_rows
from repro.ops.rehearsal.files import Files, commit_of, jsonl_bytes, readme, sha256
from repro.ops.rehearsal.repos import (CAUSAL_LMS, causal_lm_repo, deberta_mnli_repo, dpr_repo, e5_index, e5_repo,
                                       gpt2_repo, llmlingua2_repo, minilm_repo, recomp_repo)
from repro.ops.rehearsal.tokenizers import train_tokenizers

MANIFEST = "mirror.json"


def _gzip(data: bytes, name: str) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=out, mtime=0) as f:
        f.write(data)
    return out.getvalue()


@dataclasses.dataclass(frozen=True)
class Repo:
    repo: str
    repo_type: str  # model | dataset
    files: Files

    @property
    def commit(self) -> str:
        return commit_of(self.files)

    def base(self, root: Path) -> Path:
        return root / ("datasets" if self.repo_type == "dataset" else "") / self.repo


def build_repos(seed: int = 0, log: Callable[[str], None] = print) -> list[Repo]:
    """Every repo of the mirror, in memory."""
    content = build_content(seed)
    log(f"corpus: {len(content.passages)} passages of {len(content.page_passages)} pages; "
        f"{sum(len(q) for q in content.splits.values())} questions")
    toks = train_tokenizers(content.texts())
    repos = [Repo(spec.repo, "model", causal_lm_repo(spec, toks, seed)) for spec in CAUSAL_LMS]
    e5 = e5_repo(toks, seed)
    repos += [
        Repo("facebook/dpr-question_encoder-single-nq-base", "model",
             dpr_repo("facebook/dpr-question_encoder-single-nq-base", "DPRQuestionEncoder", toks, seed)),
        Repo("facebook/dpr-ctx_encoder-single-nq-base", "model",
             dpr_repo("facebook/dpr-ctx_encoder-single-nq-base", "DPRContextEncoder", toks, seed)),
        Repo("intfloat/e5-base-v2", "model", e5),
        Repo("sentence-transformers/all-MiniLM-L6-v2", "model", minilm_repo(toks, seed)),
        Repo("openai-community/gpt2", "model", gpt2_repo(toks, seed)),
        Repo("microsoft/llmlingua-2-xlm-roberta-large-meetingbank", "model", llmlingua2_repo(toks, seed)),
        Repo("microsoft/deberta-v2-xlarge-mnli", "model", deberta_mnli_repo(toks, seed)),
        Repo("fangyuan/nq_extractive_compressor", "model", recomp_repo(toks, seed)),
    ]
    log("models built; encoding the corpus for the e5 index")
    flashrag = {f"{name}/{split}.jsonl": jsonl_bytes(flashrag_rows(content, name, split, seed))
                for name, split in QUESTIONS}
    index = e5_index(e5, content.passages)
    half = -(-len(index) // 2)  # `split -n 2`: two byte ranges, the first one the larger
    dataset_readme = "FlashRAG's split files <name>/<split>.jsonl"
    repos += [
        Repo("RUC-NLPIR/FlashRAG_datasets", "dataset", {"README.md": readme("RUC-NLPIR/FlashRAG_datasets", seed,
                                                                            dataset_readme), **flashrag}),
        Repo("PeterJinGo/wiki-18-corpus", "dataset",
             {"README.md": readme("PeterJinGo/wiki-18-corpus", seed, "wiki-18 in 100-word passages"),
              "wiki-18.jsonl.gz": _gzip(jsonl_bytes(content.passages), "wiki-18.jsonl")}),
        Repo("PeterJinGo/wiki-18-e5-index", "dataset",
             {"README.md": readme("PeterJinGo/wiki-18-e5-index", seed, "Search-R1's e5 Flat index of wiki-18"),
              "part_aa": index[:half], "part_ab": index[half:]}),
    ]
    return repos


def builder_digest() -> str:
    """sha256 of the code that builds the mirror: a mirror built by other code is built again."""
    here = Path(__file__).parent
    builder = ("mirror.py", "files.py", "content.py", "tokenizers.py", "weights.py", "repos.py", "templates.py")
    return sha256(b"".join((here / name).read_bytes() for name in builder))


def manifest(repos: list[Repo], seed: int) -> dict:
    return {"seed": seed, "builder": builder_digest(),
            "repos": {r.repo: {"repo_type": r.repo_type, "commit": r.commit,
                               "files": {p: {"size": len(d), "sha256": sha256(d)} for p, d in sorted(r.files.items())}}
                      for r in repos}}


def write_mirror(root: Path, repos: list[Repo], seed: int) -> None:
    """Lay `repos` out like the hub's URLs under `root` (which must not exist yet), atomically."""
    with atomic_dir(root) as tmp:
        for repo in repos:
            base = repo.base(tmp)
            for path, data in repo.files.items():
                target = base / "resolve" / repo.commit / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (base / "refs").mkdir(parents=True)
            (base / "refs" / "main").write_text(repo.commit)
        write_json(tmp / MANIFEST, manifest(repos, seed))


def up_to_date(root: Path, seed: int) -> bool:
    """Whether `root` is a mirror this code built from `seed`, every file present with its recorded size."""
    try:
        recorded = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if recorded.get("seed") != seed or recorded.get("builder") != builder_digest():
        return False
    for repo, entry in recorded["repos"].items():
        base = root / ("datasets" if entry["repo_type"] == "dataset" else "") / repo
        ref = base / "refs" / "main"
        if not ref.is_file() or ref.read_text() != entry["commit"]:
            return False
        for path, info in entry["files"].items():
            file = base / "resolve" / entry["commit"] / path
            if not file.is_file() or file.stat().st_size != info["size"]:
                return False
    return True


def build_mirror(root: str | Path, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Build the mirror under `root` unless an up-to-date one is there (an older mirror is replaced, any other
    non-empty directory refused); its manifest."""
    root = Path(root)
    if up_to_date(root, seed):
        log(f"{root}: up to date (seed {seed})")
    else:
        if (root / MANIFEST).is_file():
            log(f"{root}: built by other code or from another seed; building it again")
            shutil.rmtree(root)
        elif root.exists() and any(root.iterdir()):
            raise FileExistsError(f"{root}: not empty and not a mirror (no {MANIFEST}); name a new directory")
        elif root.exists():
            root.rmdir()
        repos = build_repos(seed, log)
        write_mirror(root, repos, seed)
    return read_json_object(root / MANIFEST)
