"""External assets of the paper profiles: resolved on the hub, locked, downloaded, verified, recorded.

    python -m repro.ops.remote fetch --profile paper-1p5b [--from DIR] [--update [REPO ...]] [--dry-run]

`needs(cfg)` lists what the profile's enabled stages read from the hub: the models `references(cfg)` finds (the
Search-R1 agents only with `agentic`, the NLI model only where R_EQR is computed, and so on: see there), the FlashRAG
split files of its datasets, the wiki-18 corpus when `data.corpus.source` is `data/external/wiki-18.jsonl` (whole,
also for a `max_passages` slice), and Search-R1's e5 Flat index when `fetch.prebuilt_index` names a retriever.

The lock file (`fetch.lock`, default `fetch.lock.yaml` at the repository root, committed) holds every repo at one
commit whatever the profile, with the size and sha256 of each file fetched from it, as DVC's `rev_lock` and pip's
lock files do. A repo in the lock is fetched exactly at its commit and each file must match its locked sha256; a
repo not in it is resolved to the current commit of its `main` branch and added; `--update` re-resolves (every repo
of the plan, or the ones named) and moves the lock on. An entry with a commit and no files (as written by hand) is
completed by the next fetch, which records what it downloads. `fetch` prints each repo, commit, file and size
first, then downloads what is missing (the hub's LFS sha256, where it gives one, is checked too), writes the lock
after each file, runs the builders (gunzip, pytorch_model.bin -> model.safetensors, part_aa + part_ab) and records
the local copies in `data/external/manifest.json` (not committed: what this machine holds).

Everything lands under `data/external/`; hub repos in `data/external/hub/<repo id>/`, where `repro.assets.resolve`
finds them, so every loader reads the locked files without a `revision=` of its own. The hub is behind the small
`Hub` interface: `HfHub` (huggingface_hub, which resumes interrupted downloads itself) or `LocalHub`, a directory
laid out like the hub (`fetch.hub`, or `--from DIR`), for mirrors, air-gapped nodes, the rehearsal and the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import yaml

from repro.assets import EXTERNAL_DIR, AssetError, fetched_dir, is_hub_id, references, sha256_file
from repro.config import RELEASED_EVIOMNI, FetchConfig, Profile, RetrieverConfig, load_profile, walk
from repro.io import atomic_dir, atomic_path, read_json_object, write_json, write_text
from repro.registry import METHOD_LISTS, REWARD_DESIGNS

MANIFEST = EXTERNAL_DIR / "manifest.json"
WIKI18 = EXTERNAL_DIR / "wiki-18.jsonl"
E5_INDEX = EXTERNAL_DIR / "wiki-18-e5" / "e5_Flat.index"
BRANCH = "main"  # the branch a repo is resolved from when it enters the lock or is updated
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Sections whose strings may name a hub model (FlashRAG and the corpus are planned from `data`).
MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja", "tokenizer*", "vocab*")
BIN_WEIGHTS = "pytorch_model.bin"  # taken (and converted) only from a model repo without safetensors
LOCK_VERSION = 1
LOCK_HEADER = """\
# Written by `python -m repro.ops.remote fetch` (repro.ops.remote); committed with the repository, as pip's and DVC's
# locks. Every hub repo a profile fetches, at one commit whatever the profile, with the size and sha256 of each file
# fetched from it. fetch downloads exactly these commits and refuses a file whose sha256 differs. A repo not listed
# is resolved from its main branch and added; `fetch --update [REPO ...]` moves repos to main's current commit. An
# entry with a commit and no files is completed by the next fetch, which records the files it downloads.
"""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None  # the hub's LFS digest; None for small git-stored files (and in a LocalHub)


class Hub(Protocol):
    def commit(self, repo: str, repo_type: str, branch: str) -> str:
        """The 40-hex commit `branch` points at now."""

    def files(self, repo: str, repo_type: str, revision: str) -> dict[str, RemoteFile]: ...

    def download(self, repo: str, repo_type: str, revision: str, path: str, dest: Path) -> None:
        """Write the complete file to `dest` (never a partial one)."""


# --- builders: turn downloaded files into what the pipeline reads ---------------------------------------


def gunzip_corpus(local: Path, files: Mapping[str, dict]) -> dict[str, str]:
    """wiki-18.jsonl.gz -> data/external/wiki-18.jsonl, the corpus path the paper profiles name."""
    with gzip.open(local / next(iter(files)), "rb") as src, atomic_path(WIKI18) as tmp, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 24)
    return {str(WIKI18): sha256_file(WIKI18)}


def join_index_parts(local: Path, files: Mapping[str, dict]) -> dict[str, str]:
    """Search-R1's e5 Flat index ships split as part_aa + part_ab; joined in order they are e5_Flat.index. The join
    is verified before the fetch removes the parts (`Remote.removes_inputs`): read back once, each part's byte range
    of the joined file hashes to the digest the part was fetched with."""
    names = sorted(files)
    with atomic_path(E5_INDEX) as tmp, open(tmp, "wb") as out:
        for name in names:
            with open(local / name, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 24)
    whole, parts = sha256_ranges(E5_INDEX, [files[name]["size"] for name in names])
    wrong = [name for name, digest in zip(names, parts) if digest != files[name]["sha256"]]
    if wrong:
        E5_INDEX.unlink()
        raise AssetError(f"{E5_INDEX}: the joined file's bytes of {wrong} differ from the fetched parts (sha256); it "
                         f"was deleted and the parts kept: check the disk, then fetch again")
    return {str(E5_INDEX): whole}


def sha256_ranges(path: Path, sizes: list[int]) -> tuple[str, list[str]]:
    """The sha256 of the whole file and of its consecutive byte ranges of `sizes`, in one read."""
    whole, parts = hashlib.sha256(), []
    with open(path, "rb") as f:
        for size in sizes:
            part = hashlib.sha256()
            while size > 0:
                block = f.read(min(1 << 24, size))
                if not block:
                    break
                whole.update(block)
                part.update(block)
                size -= len(block)
            parts.append(part.hexdigest())
        for block in iter(lambda: f.read(1 << 24), b""):
            whole.update(block)
    return whole.hexdigest(), parts


def bin_to_safetensors(local: Path, files: Iterable[str]) -> dict[str, str]:
    """Every loader here uses safetensors only (D109, D116), and some repos ship only pytorch_model.bin (DPR, RECOMP,
    the DeBERTa MNLI model). Each pytorch_model.bin of `files`, at the root or in a sub-folder (a sentence-transformers
    module such as 2_Dense/), is loaded once with weights_only=True (tensors only, no code) and written as
    model.safetensors beside it, the name transformers and sentence-transformers read first."""
    import torch
    from safetensors.torch import save_file

    built = {}
    for name in files:
        if Path(name).name != BIN_WEIGHTS:
            continue
        out = (local / name).with_name("model.safetensors")
        state = torch.load(local / name, map_location="cpu", weights_only=True)
        tensors = {k: v.contiguous().clone() for k, v in state.items()}  # no shared storage in safetensors
        with atomic_path(out) as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt"})
        built[str(out)] = sha256_file(out)
    return built


@dataclasses.dataclass(frozen=True)
class Remote:
    """One kind of external asset: where it lives on the hub, which files, and what to build from them."""

    repo: str
    repo_type: str = "model"
    files: tuple[str, ...] = MODEL_FILES  # names or glob patterns over the repo's file list
    build: Callable[[Path, Mapping[str, dict]], dict[str, str]] | None = None  # (dir, {file: {size, sha256}})
    description: str = ""
    removes_inputs: bool = False  # the fetched files are removed after a build (their digests stay in the lock)

    def builder(self, files: list[str]) -> Callable[[Path, Mapping[str, dict]], dict[str, str]] | None:
        """The row's builder; for a model repo fetched as pytorch_model.bin, the conversion to safetensors."""
        return self.build or (bin_to_safetensors if any(Path(f).name == BIN_WEIGHTS for f in files) else None)


REMOTE: dict[str, Remote] = {r.repo: r for r in [
    Remote("PeterJinGo/wiki-18-corpus", "dataset", ("wiki-18.jsonl.gz",), build=gunzip_corpus,
           description="wiki-18: 21,015,324 100-word passages of the Dec-2018 dump (Search-R1/FlashRAG), ~14 GB"),
    Remote("PeterJinGo/wiki-18-e5-index", "dataset", ("part_aa", "part_ab"), build=join_index_parts,
           description="Search-R1's e5-base-v2 Flat index over wiki-18, ~65 GB", removes_inputs=True),
    Remote("RUC-NLPIR/FlashRAG_datasets", "dataset", (), description="FlashRAG split files <name>/<split>.jsonl"),
]}


# --- the plan: what the profile's enabled stages read ---------------------------------------------------


def needs(cfg: Profile) -> list[tuple[Remote, tuple[str, ...]]]:
    """Everything the profile's enabled stages read from the hub: (row, files wanted: names or patterns). A
    `data.corpus.max_passages` slice of wiki-18 needs the whole corpus file (the data stage cuts it; D135)."""
    wanted = [(REMOTE.get(repo, Remote(repo)), REMOTE.get(repo, Remote(repo)).files) for repo in references(cfg)]
    if cfg.data:
        by_repo: dict[str, set[str]] = {}
        for d in cfg.data.datasets:
            if d.format == "flashrag" and is_hub_id(d.source):
                by_repo.setdefault(d.source, set()).update(f"{d.name}/{s}.jsonl" for s in set(d.splits.values()))
        for repo, files in sorted(by_repo.items()):
            wanted.append((REMOTE.get(repo, Remote(repo, "dataset")), tuple(sorted(files))))
        if Path(cfg.data.corpus.source) == WIKI18:
            wanted.append((REMOTE["PeterJinGo/wiki-18-corpus"], REMOTE["PeterJinGo/wiki-18-corpus"].files))
    if cfg.fetch and cfg.fetch.prebuilt_index:
        wanted.append((REMOTE["PeterJinGo/wiki-18-e5-index"], REMOTE["PeterJinGo/wiki-18-e5-index"].files))
    return wanted


def _select(listing: dict[str, RemoteFile], row: Remote, patterns: tuple[str, ...], commit: str
            ) -> list[RemoteFile]:
    """The files of `listing` the patterns name; a model repo without safetensors also gives its pytorch_model.bin
    files (converted after the download, D116)."""
    chosen = [f for path, f in sorted(listing.items()) if any(Path(path).match(p) for p in patterns)]
    missing = [p for p in patterns if not any(Path(f.path).match(p) for f in chosen) and "*" not in p]
    if missing:
        raise AssetError(f"{row.repo}@{commit}: no file {missing} in the repo")
    if row.repo_type == "model" and row.build is None and not any(f.path.endswith(".safetensors") for f in chosen):
        pickles = [f for path, f in sorted(listing.items()) if Path(path).name == BIN_WEIGHTS]
        if not pickles:
            raise AssetError(f"{row.repo}@{commit}: neither safetensors weights nor a {BIN_WEIGHTS} at this commit")
        chosen += pickles
    return chosen


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


# --- the lock file and the manifest ---------------------------------------------------------------------


def lock_path(cfg: Profile) -> Path:
    return Path((cfg.fetch or FetchConfig()).lock)


def read_lock(path: Path) -> dict[str, dict]:
    """repo -> {type, commit, files: {path: {size, sha256}}} of the lock file at `path` ({} if there is none)."""
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise AssetError(f"{path}: {err}") from None
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION or not isinstance(data.get("repos"), dict):
        raise AssetError(f"{path}: expected `version: {LOCK_VERSION}` and a `repos` mapping (written by "
                         f"`python -m repro.ops.remote fetch`)")
    repos = {}
    for repo, entry in data["repos"].items():
        key = f"{path}: repos.{repo}"
        if not isinstance(entry, dict) or entry.get("type") not in ("model", "dataset"):
            raise AssetError(f"{key}.type: expected model or dataset")
        if not COMMIT.match(str(entry.get("commit"))):
            raise AssetError(f"{key}.commit: '{entry.get('commit')}' is not a 40-hex commit hash")
        files = entry.get("files") or {}
        if not isinstance(files, dict):
            raise AssetError(f"{key}.files: expected a mapping of file -> {{size, sha256}}")
        for name, rec in files.items():
            if not (isinstance(rec, dict) and isinstance(rec.get("size"), int)
                    and re.fullmatch(r"[0-9a-f]{64}", str(rec.get("sha256")))):
                raise AssetError(f"{key}.files.{name}: expected {{size: <bytes>, sha256: <64 hex>}}")
        repos[repo] = {"type": entry["type"], "commit": entry["commit"], "files": dict(files)}
    return repos


def write_lock(path: Path, repos: dict[str, dict]) -> None:
    """Write the lock atomically, repos and files in name order; an unchanged lock is not rewritten."""
    ordered = {repo: {**repos[repo], "files": dict(sorted(repos[repo]["files"].items()))} for repo in sorted(repos)}
    text = LOCK_HEADER + yaml.safe_dump({"version": LOCK_VERSION, "repos": ordered}, sort_keys=False,
                                        default_flow_style=None, width=200)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_text(path, text)


def read_manifest() -> dict:
    """What `fetch` put on this machine: repo -> {repo_type, revision, dir, files: {path: {size, sha256}}, built}."""
    return read_json_object(MANIFEST) if MANIFEST.exists() else {}


def _intact(path: Path, recorded: dict | None) -> bool:
    return path.is_file() and recorded is not None and path.stat().st_size == recorded["size"] and \
        sha256_file(path) == recorded["sha256"]


def _built_intact(record: dict) -> bool:
    """Whether every output of the record's build is there with its digest; a file whose modification time is the
    one recorded after its build is not read again (65 GB for the e5 index), as DVC trusts its state database."""
    built, times = record.get("built", {}), record.get("built_mtime_ns", {})
    return bool(built) and all(Path(out).is_file() and (times.get(out) == Path(out).stat().st_mtime_ns
                                                        or sha256_file(Path(out)) == digest)
                               for out, digest in built.items())


# --- fetch ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Pinned:
    """One asset of the plan at its commit: the lock entry it is fetched to and the files chosen at that commit."""

    remote: Remote
    entry: dict  # the lock entry: {type, commit, files}
    files: list[RemoteFile]
    state: str  # locked, new, moved from <commit>, main unchanged

    @property
    def local(self) -> Path:
        return fetched_dir(self.remote.repo)


def pin(cfg: Profile, hub: Hub, lock: dict[str, dict], update: Sequence[str] | None = None) -> list[Pinned]:
    """Each asset of the plan at its locked commit, or at `main`'s current one for a repo not in the lock or updated
    (`update`: None for none, empty for all, else repo ids); a file whose listing contradicts the lock is an error."""
    plan = needs(cfg)
    unknown = sorted(set(update or ()) - {row.repo for row, _ in plan})
    if unknown:
        raise AssetError(f"--update: {unknown} not in profile {cfg.name}'s plan ({sorted(r.repo for r, _ in plan)})")
    pinned = []
    for row, patterns in plan:
        entry, state = lock.get(row.repo), "locked"
        if entry is not None and entry["type"] != row.repo_type:
            raise AssetError(f"{lock_path(cfg)}: repos.{row.repo}.type: '{entry['type']}', but the profile reads a "
                             f"{row.repo_type} repo")
        if entry is None or (update is not None and (not update or row.repo in update)):
            commit = hub.commit(row.repo, row.repo_type, BRANCH)
            if entry is None:
                state = "new"
            else:
                state = "main unchanged" if commit == entry["commit"] else f"moved from {entry['commit'][:12]}"
            if entry is None or commit != entry["commit"]:
                entry = {"type": row.repo_type, "commit": commit, "files": {}}
        commit = entry["commit"]
        files = _select(hub.files(row.repo, row.repo_type, commit), row, patterns, commit)
        for f in files:
            locked = entry["files"].get(f.path)
            if locked and (f.size != locked["size"] or f.sha256 not in (None, locked["sha256"])):
                raise AssetError(f"{row.repo}@{commit}/{f.path}: the hub lists {f.size} bytes, sha256 {f.sha256}; "
                                 f"{lock_path(cfg)} records {locked['size']} bytes, sha256 {locked['sha256']}")
        pinned.append(Pinned(row, entry, files, state))
    return pinned


def fetch(cfg: Profile, hub: Hub, update: Sequence[str] | None = None, dry_run: bool = False,
          log: Callable[[str], None] = print) -> dict:
    """Resolve, print, download, verify, lock and record every external asset of the profile; returns the manifest
    entries of its repos ({} for a dry run, which writes nothing)."""
    path = lock_path(cfg)
    lock = read_lock(path)
    pinned = pin(cfg, hub, lock, update)
    total = 0
    for p in pinned:
        size = sum(f.size for f in p.files)
        total += size
        log(f"{p.remote.repo}@{p.entry['commit']} ({p.state})  {len(p.files)} file(s)  {_human(size)}  -> {p.local}")
        for f in p.files:
            log(f"    {f.path}  {_human(f.size)}")
    log(f"total {_human(total)} (files already here and verified are not downloaded again)")
    if dry_run:
        return {}
    manifest = read_manifest()

    def save() -> None:
        write_json(MANIFEST, manifest)
        write_lock(path, lock)

    for p in pinned:
        lock[p.remote.repo] = p.entry  # saved before the first download: an interrupted fetch resumes at this commit
        _fetch_item(p, hub, manifest, path, save, log)
    return {p.remote.repo: manifest[p.remote.repo] for p in pinned}


def _fetch_item(p: Pinned, hub: Hub, manifest: dict, lock: Path, save: Callable[[], None],
                log: Callable[[str], None]) -> None:
    """Fetch one asset's files at its commit, each checked against the lock's sha256 (or the hub's LFS digest) and
    recorded in both after it is complete, so an interrupted run keeps every file that finished; then build."""
    repo, commit, locked = p.remote.repo, p.entry["commit"], p.entry["files"]
    here = manifest.get(repo, {})
    if here and here.get("revision") != commit:  # another commit's copies: remove what this one does not list
        wanted = {str(p.local / f.path) for f in p.files}
        stale = [str(p.local / name) for name in here["files"]] + list(here["built"])
        for old in [Path(s) for s in stale if s not in wanted] + list(p.local.rglob("*.incomplete")):
            if old.is_relative_to(p.local):
                old.unlink(missing_ok=True)
        here = {}
    previous = here.get("files", {})
    manifest[repo] = record = {"repo_type": p.remote.repo_type, "revision": commit, "dir": str(p.local),
                               "files": dict(previous), "built": here.get("built", {}),
                               "built_mtime_ns": here.get("built_mtime_ns", {})}
    save()
    for f in p.files:
        dest = p.local / f.path
        expected = locked[f.path]["sha256"] if f.path in locked else f.sha256
        known = {"size": f.size, "sha256": expected} if expected else previous.get(f.path)
        if previous.get(f.path, {}).get("removed") and not dest.exists() and _built_intact(record):
            continue  # consumed by a verified build whose outputs are intact
        if _intact(dest, known):
            recorded = dict(known)
        else:
            if dest.exists():
                log(f"{dest}: does not match {lock} or the manifest; downloading it again")
                dest.unlink()
            dest.parent.mkdir(parents=True, exist_ok=True)
            log(f"{repo}: {f.path} ({_human(f.size)})")
            hub.download(repo, p.remote.repo_type, commit, f.path, dest)
            digest = sha256_file(dest)
            if expected and digest != expected:
                dest.unlink()
                source = lock if f.path in locked else "the hub's LFS digest"
                raise AssetError(f"{repo}@{commit}/{f.path}: the download's sha256 {digest} does not match {expected} "
                                 f"({source}); the file was deleted. A commit's files never change: check the "
                                 f"source (a mirror?), or `--update {repo}` to lock main's current commit")
            recorded = {"size": dest.stat().st_size, "sha256": digest}
            record["built"] = {}  # a new input: build again
        record["files"][f.path] = locked[f.path] = recorded
        save()
    build = p.remote.builder([f.path for f in p.files])
    if build and not _built_intact(record):
        log(f"{repo}: {build.__name__}")
        record["built"] = build(p.local, {f.path: record["files"][f.path] for f in p.files})
        record["built_mtime_ns"] = {out: Path(out).stat().st_mtime_ns for out in record["built"]}
        if p.remote.removes_inputs:
            for f in p.files:
                (p.local / f.path).unlink()
                record["files"][f.path] = {**record["files"][f.path], "removed": True}
                log(f"{repo}: {f.path} removed after the verified build (its sha256 stays in {lock})")
    save()


# --- hubs -----------------------------------------------------------------------------------------------


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


class HfHub:
    """The Hugging Face hub through huggingface_hub: a branch's commit (`repo_info`), listings with LFS digests,
    `hf_hub_download` at a commit into `data/external/hub/<repo>` (it resumes an interrupted file from its
    `.incomplete` copy)."""

    def __init__(self, profile: str = "P"):
        if offline():
            raise AssetError(f"HF_HUB_OFFLINE=1 (the Makefile's default) forbids reaching the hub; run "
                             f"`HF_HUB_OFFLINE=0 python -m repro.ops.remote fetch --profile {profile}` (or --from DIR)")
        from huggingface_hub import HfApi

        self.api = HfApi()

    def commit(self, repo: str, repo_type: str, branch: str) -> str:
        return self.api.repo_info(repo, repo_type=repo_type, revision=branch).sha

    def files(self, repo: str, repo_type: str, revision: str) -> dict[str, RemoteFile]:
        from huggingface_hub.hf_api import RepoFile

        tree = self.api.list_repo_tree(repo, revision=revision, repo_type=repo_type, recursive=True)
        return {f.path: RemoteFile(f.path, f.size, f.lfs.sha256 if f.lfs else None)
                for f in tree if isinstance(f, RepoFile)}

    def download(self, repo: str, repo_type: str, revision: str, path: str, dest: Path) -> None:
        from huggingface_hub import hf_hub_download

        root = dest.parents[len(Path(path).parts) - 1]
        hf_hub_download(repo, path, revision=revision, repo_type=repo_type, local_dir=root)


class LocalHub:
    """A directory laid out like the hub: `<root>/<repo>/resolve/<commit>/<file>` for models,
    `<root>/datasets/<repo>/resolve/<commit>/<file>` for datasets, and `<root>/[datasets/]<repo>/refs/<branch>` a text
    file holding the branch's 40-hex commit (as the hub's cache keeps refs). Its listing gives no sha256: hashing a
    mirror to list it would read every byte twice (65 GB for the e5 index); the download is hashed and checked
    against the lock instead, and the first fetch records it. A download goes to `<dest>.incomplete` first and
    resumes from it after an interruption, as huggingface_hub does."""

    chunk = 1 << 20

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def _repo(self, repo: str, repo_type: str) -> Path:
        return (self.root / "datasets" if repo_type == "dataset" else self.root) / repo

    def _dir(self, repo: str, repo_type: str, revision: str) -> Path:
        path = self._repo(repo, repo_type) / "resolve" / revision
        if not path.is_dir():
            raise AssetError(f"{path}: no such repo commit in the local hub {self.root}")
        return path

    def commit(self, repo: str, repo_type: str, branch: str) -> str:
        ref = self._repo(repo, repo_type) / "refs" / branch
        if not ref.is_file():
            raise AssetError(f"{ref}: no branch {branch} of {repo} in the local hub {self.root} (a text file holding "
                             f"the branch's 40-hex commit)")
        commit = ref.read_text(encoding="utf-8").strip()
        if not COMMIT.match(commit):
            raise AssetError(f"{ref}: '{commit}' is not a 40-hex commit hash")
        return commit

    def files(self, repo: str, repo_type: str, revision: str) -> dict[str, RemoteFile]:
        base = self._dir(repo, repo_type, revision)
        return {str(p.relative_to(base)): RemoteFile(str(p.relative_to(base)), p.stat().st_size, None)
                for p in sorted(base.rglob("*")) if p.is_file()}

    def read(self, source: Path, offset: int) -> Iterator[bytes]:
        with open(source, "rb") as f:
            f.seek(offset)
            yield from iter(lambda: f.read(self.chunk), b"")

    def download(self, repo: str, repo_type: str, revision: str, path: str, dest: Path) -> None:
        partial = dest.with_name(dest.name + ".incomplete")
        offset = partial.stat().st_size if partial.exists() else 0
        with open(partial, "ab") as out:
            for block in self.read(self._dir(repo, repo_type, revision) / path, offset):
                out.write(block)
        os.replace(partial, dest)


# --- the prebuilt index ---------------------------------------------------------------------------------


def import_prebuilt_index(cfg: Profile, log: Callable[[str], None] = print) -> Path | None:
    """Install the joined e5 Flat index as retriever `fetch.prebuilt_index`'s index of this profile, with the
    manifest the data stage would have written, so the data stage reuses it instead of encoding the corpus.
    Search-R1 built it with e5-base-v2, "passage: " prefixes, mean pooling and L2 normalisation over wiki-18 in
    file order: the retriever's settings must be those (checked: `check_prebuilt_index`). A profile that cuts the
    corpus's first `max_passages` passages (gpu-smoke-2gpu) gets the index's first rows, the same passages."""
    name = cfg.fetch.prebuilt_index if cfg.fetch else None
    if not name:
        return None
    from repro.data import layout
    from repro.data.corpus import first_passages, write_corpus
    from repro.retrieval.cache import retriever_key, stale_reason
    from repro.retrieval.faiss_index import load_index, new_index, save_index
    from repro.retrieval.run import FAISS_FILE, encoder_refs

    key = f"params.yaml: profiles.{cfg.name}.fetch.prebuilt_index"
    rcfg = cfg.retrieval.retrievers.get(name) if cfg.retrieval else None
    if rcfg is None or rcfg.method != "dense" or rcfg.query_encoder != "intfloat/e5-base-v2" or rcfg.index != "Flat":
        raise AssetError(f"{key}: '{name}' must be a dense retriever with query_encoder intfloat/e5-base-v2 and "
                         f"index Flat (Search-R1's e5 Flat index)")
    if Path(cfg.data.corpus.source) != WIKI18:
        raise AssetError(f"{key}: the prebuilt index covers {WIKI18}, but the corpus is {cfg.data.corpus.source}; "
                         f"set prebuilt_index to null to encode the corpus instead")
    fetched = read_manifest()
    if not WIKI18.exists() or "PeterJinGo/wiki-18-e5-index" not in fetched:
        raise AssetError(f"{key}: fetch {WIKI18} and the e5 index first (`python -m repro.ops.remote fetch "
                         f"--profile {cfg.name}`)")
    sliced = cfg.data.corpus.max_passages
    # the data stage keys its index on the corpus file's sha256 (repro.data.corpus.file_fingerprint): wiki-18's, or
    # that of the first `max_passages` passages the data stage cuts from it (D135)
    if sliced is None:
        corpus = fetched.get("PeterJinGo/wiki-18-corpus", {}).get("built", {}).get(str(WIKI18)) or sha256_file(WIKI18)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            write_corpus(Path(scratch) / "passages.jsonl", first_passages(WIKI18, sliced))
            corpus = sha256_file(Path(scratch) / "passages.jsonl")
    out = layout.index_dir(cfg.name, name)
    manifest = {"retriever": retriever_key(rcfg, *encoder_refs(rcfg, cfg.name)), "corpus": corpus}
    if stale_reason(out, manifest) is None and (out / "imported.json").exists():
        return out  # imported before, from the same corpus and encoder
    index = load_index(E5_INDEX, mmap=True)  # the vectors mapped, not read: 65 GB
    check_prebuilt_index(index, rcfg, cfg.name)
    shutil.rmtree(out, ignore_errors=True)
    with atomic_dir(out) as tmp:
        if sliced is not None:  # the rows of the corpus's first passages, in their order
            part = new_index(index.d)
            part.add(index.reconstruct_n(0, sliced))
            save_index(part, tmp / FAISS_FILE)
        else:
            try:
                os.link(E5_INDEX, tmp / FAISS_FILE)  # 65 GB: a hard link where the file system allows it
            except OSError:
                shutil.copyfile(E5_INDEX, tmp / FAISS_FILE)
        write_json(tmp / "manifest.json", manifest)
        write_json(tmp / "imported.json", {"from": str(E5_INDEX), "repo": "PeterJinGo/wiki-18-e5-index",
                                           "revision": fetched["PeterJinGo/wiki-18-e5-index"]["revision"],
                                           "rows": sliced or index.ntotal})
    log(f"{out}: Search-R1's e5 Flat index ({sliced or index.ntotal} of its {index.ntotal} vectors) for retriever "
        f"'{name}'")
    return out


CHECKED_ROWS = 8  # rows of the imported index re-encoded from their passages: the first, the last, six seeded
MIN_ROW_COSINE = 0.99  # Search-R1 encoded in fp16: a row of the right passage agrees to ~1e-3, another passage's not


def check_prebuilt_index(index, rcfg: RetrieverConfig, profile: str) -> None:
    """The imported index is the retriever's index of the corpus, or an AssetError naming what differs: inner-product
    metric, the encoder's dimension, one vector per passage of wiki-18, and CHECKED_ROWS rows that the retriever's
    encoder, prefix and pooling re-encode from the passages they should hold (row i = the corpus's line i)."""
    import faiss
    import numpy as np

    from repro.retrieval.dense import DenseRetriever
    from repro.retrieval.run import encoder_refs

    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise AssetError(f"{E5_INDEX}: metric {index.metric_type}, not inner product ({faiss.METRIC_INNER_PRODUCT})")
    retriever = DenseRetriever(rcfg, *encoder_refs(rcfg, profile))
    dim = retriever.query_encoder.model.config.hidden_size
    if index.d != dim:
        raise AssetError(f"{E5_INDEX}: {index.d}-dimensional vectors; {rcfg.query_encoder} encodes {dim}")
    rng = np.random.default_rng(0)
    rows = sorted({0, index.ntotal - 1, *rng.choice(index.ntotal, min(index.ntotal, CHECKED_ROWS - 2)).tolist()})
    contents, passages = {}, 0
    with open(WIKI18, "rb") as f:
        for line in f:
            if line.strip():
                if passages in rows:
                    contents[passages] = json.loads(line)["contents"]
                passages += 1
    if index.ntotal != passages:
        raise AssetError(f"{E5_INDEX}: {index.ntotal} vectors for {passages} passages in {WIKI18}")
    fresh = retriever.encode_passages([contents[r] for r in rows], progress=False)
    stored = np.stack([index.reconstruct(r) for r in rows])
    cosine = (fresh * stored).sum(1) / (np.linalg.norm(fresh, axis=1) * np.linalg.norm(stored, axis=1))
    wrong = [f"row {r} (cosine {c:.3f})" for r, c in zip(rows, cosine) if c < MIN_ROW_COSINE]
    if wrong:
        raise AssetError(f"{E5_INDEX}: {', '.join(wrong)} do not encode the passage on that line of {WIKI18} with "
                         f"{rcfg.query_encoder} (prefix {rcfg.passage_prefix!r}, {rcfg.pooling} pooling): another "
                         f"corpus order, encoder or setting")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fetch the external assets a profile's stages read at the commits of "
                                                 "the lock file, or list the known ones.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    f = sub.add_parser("fetch", help="download the hub assets the profile reads at their locked commits (a repo not "
                                     "in the lock: main's current commit, then locked); needs HF_HUB_OFFLINE=0 unless "
                                     "the source is a local directory")
    f.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    f.add_argument("--from", dest="source", metavar="DIR",
                   help="a local directory laid out like the hub (overrides the profile's fetch.hub)")
    f.add_argument("--update", nargs="*", metavar="REPO",
                   help="re-resolve these repos (none named: every repo of the plan) to main's current commit and "
                        "move the lock on")
    f.add_argument("--dry-run", action="store_true", help="print what would be fetched and its size, nothing else")
    args = parser.parse_args(argv)
    if args.command == "list":
        for row in REMOTE.values():  # fetched for the paper profiles (any other hub model: its weights)
            print(f"{row.repo_type}:{row.repo:52s} {row.description}")
        return
    try:
        cfg = load_profile(args.profile)
        if not needs(cfg):
            print(f"profile {cfg.name} names no external asset "
                  "(embedded ones: `python -m repro.stages.assets materialize`)")
            return
        source = args.source or (cfg.fetch.hub if cfg.fetch else None)
        fetch(cfg, LocalHub(source) if source else HfHub(cfg.name), args.update, args.dry_run)
        if not args.dry_run:
            import_prebuilt_index(cfg)
    except AssetError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    from repro.ops.remote import main as package_main  # raises repro.assets.AssetError, not a __main__ copy of it

    package_main()
