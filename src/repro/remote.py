"""External assets of the paper profiles: downloaded at pinned revisions, verified, recorded.

    python -m repro.remote fetch --profile paper-1p5b [--dry-run] [--from DIR]

`needs(cfg)` lists what the profile names: every hub model it refers to (`models`, `retrieval`, `baselines`,
`agentic`, `ar_study`, `seer`), the FlashRAG split files of its datasets, the wiki-18 corpus when
`data.corpus.source` is `data/external/wiki-18.jsonl` (whole, also for a `max_passages` slice), and Search-R1's e5
Flat index when `fetch.prebuilt_index` names a retriever; `plan(cfg)` pins each at the commit `fetch.revisions`
gives its repo (the command lists every unpinned one at once). Each comes from a row of `REMOTE` (or the generic
model row). `fetch` prints the sizes first, then downloads what is missing, checks each
file's sha256 against the hub's LFS digest or a digest in `REMOTE`, re-downloads a file whose bytes no longer
match the manifest, runs the row's builder (gunzip, .bin -> safetensors, part_aa + part_ab), and writes
`data/external/manifest.json`: per asset the repo, revision, and each file's size and sha256.

Everything lands under `data/external/`; hub repos in `data/external/hub/<repo id>/`, where
`repro.assets.resolve` finds them, so every loader reads the pinned files without a `revision=` of its own.
The hub is behind the small `Hub` interface: `HfHub` (huggingface_hub, which resumes interrupted downloads
itself) or `LocalHub`, a directory laid out like the hub's URLs (`<repo>/resolve/<rev>/<file>`, datasets under
`datasets/`), for mirrors, air-gapped nodes and the tests.
"""

from __future__ import annotations

import argparse

import dataclasses
import gzip
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from repro.assets import ASSET_SECTIONS, EXTERNAL_DIR, AssetError, _strings, fetched_dir, is_hub_id, sha256_file
from repro.config import Profile, load_profile
from repro.io import atomic_dir, atomic_path, write_json

MANIFEST = EXTERNAL_DIR / "manifest.json"
WIKI18 = EXTERNAL_DIR / "wiki-18.jsonl"
E5_INDEX = EXTERNAL_DIR / "wiki-18-e5" / "e5_Flat.index"
PLACEHOLDER = "PIN-ME"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Sections whose strings may name a hub model (FlashRAG and the corpus are planned from `data`).
MODEL_SECTIONS = (*ASSET_SECTIONS, "agentic", "ar_study", "seer")
MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja", "tokenizer*", "vocab*")


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    sha256: str | None  # the hub's LFS digest; None for small git-stored files


class Hub(Protocol):
    def files(self, repo: str, repo_type: str, revision: str) -> dict[str, RemoteFile]: ...

    def download(self, repo: str, repo_type: str, revision: str, path: str, dest: Path) -> None:
        """Write the complete file to `dest` (never a partial one)."""


# --- builders: turn downloaded files into what the pipeline reads ---------------------------------------


def gunzip_corpus(local: Path, files: list[str]) -> dict[str, str]:
    """wiki-18.jsonl.gz -> data/external/wiki-18.jsonl, the corpus path the paper profiles name."""
    with gzip.open(local / files[0], "rb") as src, atomic_path(WIKI18) as tmp, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 24)
    return {str(WIKI18): sha256_file(WIKI18)}


def join_index_parts(local: Path, files: list[str]) -> dict[str, str]:
    """Search-R1's e5 Flat index ships split as part_aa + part_ab; joined in order they are e5_Flat.index."""
    with atomic_path(E5_INDEX) as tmp, open(tmp, "wb") as out:
        for name in sorted(files):
            with open(local / name, "rb") as part:
                shutil.copyfileobj(part, out, 1 << 24)
    return {str(E5_INDEX): sha256_file(E5_INDEX)}


def bin_to_safetensors(local: Path, files: list[str]) -> dict[str, str]:
    """DPR's encoders ship only pytorch_model.bin; every loader here uses use_safetensors=True (D116). Load the
    pickle once with weights_only=True (tensors only, no code) and write model.safetensors beside it."""
    import torch
    from safetensors.torch import save_file

    out = local / "model.safetensors"
    state = torch.load(local / "pytorch_model.bin", map_location="cpu", weights_only=True)
    tensors = {k: v.contiguous().clone() for k, v in state.items()}  # no shared storage in safetensors
    with atomic_path(out) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    return {str(out): sha256_file(out)}


@dataclasses.dataclass(frozen=True)
class Remote:
    """One kind of external asset: where it lives on the hub, which files, and what to build from them."""

    repo: str
    repo_type: str = "model"
    files: tuple[str, ...] = MODEL_FILES  # names or glob patterns over the repo's file list
    sha256: tuple[tuple[str, str], ...] = ()  # (file, digest) known in advance, beyond the hub's LFS digests
    build: Callable[[Path, list[str]], dict[str, str]] | None = None
    description: str = ""


DPR_FILES = ("config.json", "pytorch_model.bin", "tokenizer*.json", "vocab.txt")
REMOTE: dict[str, Remote] = {r.repo: r for r in [
    Remote("PeterJinGo/wiki-18-corpus", "dataset", ("wiki-18.jsonl.gz",), build=gunzip_corpus,
           description="wiki-18: 21,015,324 100-word passages of the Dec-2018 dump (Search-R1/FlashRAG), ~14 GB"),
    Remote("PeterJinGo/wiki-18-e5-index", "dataset", ("part_aa", "part_ab"), build=join_index_parts,
           description="Search-R1's e5-base-v2 Flat index over wiki-18, ~65 GB"),
    Remote("RUC-NLPIR/FlashRAG_datasets", "dataset", (), description="FlashRAG split files <name>/<split>.jsonl"),
    Remote("facebook/dpr-question_encoder-single-nq-base", files=DPR_FILES, build=bin_to_safetensors,
           description="DPR NQ question encoder (.bin on the hub; converted locally, D116)"),
    Remote("facebook/dpr-ctx_encoder-single-nq-base", files=DPR_FILES, build=bin_to_safetensors,
           description="DPR NQ passage encoder (.bin on the hub; converted locally, D116)"),
]}


@dataclasses.dataclass
class Item:
    """One asset of a profile's plan: a repo at a revision and the files wanted from it."""

    remote: Remote
    revision: str
    files: tuple[str, ...]  # names or patterns (FlashRAG: exact split files)

    @property
    def local(self) -> Path:
        return fetched_dir(self.remote.repo)


def revision_of(cfg: Profile, repo: str) -> str:
    """The pinned commit of `repo`, or a one-line error naming the key to set."""
    key = f"params.yaml: profiles.{cfg.name}.fetch.revisions.{repo}"
    revisions = cfg.fetch.revisions if cfg.fetch else {}
    if repo not in revisions:
        raise AssetError(f"{key}: missing; add the 40-hex commit to fetch it at")
    rev = revisions[repo]
    if not COMMIT.match(rev):
        what = "is a placeholder" if rev.startswith(PLACEHOLDER) else "is not a 40-hex commit hash"
        kind = "datasets/" if repo in REMOTE and REMOTE[repo].repo_type == "dataset" else ""
        raise AssetError(f"{key}: '{rev}' {what}; set it to a commit from "
                         f"https://huggingface.co/{kind}{repo}/commits/main")
    return rev


def hub_models(cfg: Profile) -> list[str]:
    """Hub model ids the profile refers to (not embedded, not local paths), in a stable order."""
    refs = {s for section in MODEL_SECTIONS for s in _strings(getattr(cfg, section, None)) if is_hub_id(s)}
    datasets = {d.source for d in cfg.data.datasets} if cfg.data else set()
    return sorted(refs - datasets)


def needs(cfg: Profile) -> list[tuple[Remote, tuple[str, ...]]]:
    """Everything the profile names that comes from the hub: (row, files wanted), revisions not yet resolved. A
    `data.corpus.max_passages` slice of wiki-18 needs the whole corpus file (the data stage cuts it; D135)."""
    wanted = [(REMOTE.get(repo, Remote(repo)), REMOTE.get(repo, Remote(repo)).files) for repo in hub_models(cfg)]
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


def unpinned(cfg: Profile) -> list[str]:
    """One line per repo the profile needs whose `fetch.revisions` entry is missing or not a commit hash."""
    errors = []
    for row, _ in needs(cfg):
        try:
            revision_of(cfg, row.repo)
        except AssetError as err:
            errors.append(str(err))
    return errors


def plan(cfg: Profile) -> list[Item]:
    """Everything the profile names that comes from the hub, each at its pinned revision."""
    return [Item(row, revision_of(cfg, row.repo), files) for row, files in needs(cfg)]


def _select(listing: dict[str, RemoteFile], patterns: tuple[str, ...], item: Item) -> list[RemoteFile]:
    chosen = [f for path, f in sorted(listing.items()) if any(Path(path).match(p) for p in patterns)]
    missing = [p for p in patterns if not any(Path(f.path).match(p) for f in chosen) and "*" not in p]
    if missing:
        raise AssetError(f"{item.remote.repo}@{item.revision}: no file {missing} in the repo")
    if item.remote.repo_type == "model" and item.remote.build is None and not any(
            f.path.endswith(".safetensors") for f in chosen):
        raise AssetError(f"{item.remote.repo}@{item.revision}: no safetensors weights at this revision; pin one "
                         f"that has them, or give the repo a REMOTE row with bin_to_safetensors as DPR's (D116)")
    return chosen


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def read_manifest() -> dict:
    """What `fetch` recorded so far: repo -> {repo_type, revision, dir, files: {path: {size, sha256}}, built}."""
    return json.loads(MANIFEST.read_text(encoding="utf-8")) if MANIFEST.exists() else {}


def _intact(path: Path, recorded: dict | None) -> bool:
    return path.is_file() and recorded is not None and path.stat().st_size == recorded["size"] and \
        sha256_file(path) == recorded["sha256"]


def fetch(cfg: Profile, hub: Hub, dry_run: bool = False, log: Callable[[str], None] = print) -> dict:
    """Download, verify and record every external asset of the profile; returns the manifest entries."""
    items = plan(cfg)
    listings = [(item, _select(hub.files(item.remote.repo, item.remote.repo_type, item.revision), item.files, item))
                for item in items]
    manifest = read_manifest()
    total = 0
    for item, files in listings:
        size = sum(f.size for f in files)
        total += size
        log(f"{item.remote.repo}@{item.revision[:12]}  {len(files)} file(s)  {_human(size)}  -> {item.local}")
    log(f"total {_human(total)} (files already verified are not downloaded again)")
    if dry_run:
        return {}
    for item, files in listings:
        _fetch_item(item, files, hub, manifest, log)
    return {item.remote.repo: manifest[item.remote.repo] for item, _ in listings}


def _fetch_item(item: Item, files: list[RemoteFile], hub: Hub, manifest: dict, log: Callable[[str], None]) -> None:
    """Fetch one asset's files and build what the pipeline reads; the manifest is written after each file, so an
    interrupted run keeps every file that finished."""
    repo = item.remote.repo
    entry = manifest.get(repo, {})
    if entry.get("revision") != item.revision:  # first fetch, or a new pin: nothing recorded counts
        entry = {}
    previous, known = entry.get("files", {}), dict(item.remote.sha256)
    manifest[repo] = entry = {"repo_type": item.remote.repo_type, "revision": item.revision, "dir": str(item.local),
                              "files": {}, "built": entry.get("built", {})}
    for f in files:
        dest = item.local / f.path
        if _intact(dest, previous.get(f.path)):
            entry["files"][f.path] = previous[f.path]
            continue
        if dest.exists():
            log(f"{dest}: does not match the manifest; downloading it again")
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        log(f"{repo}: {f.path} ({_human(f.size)})")
        hub.download(repo, item.remote.repo_type, item.revision, f.path, dest)
        digest, expected = sha256_file(dest), known.get(f.path) or f.sha256
        if expected and digest != expected:
            dest.unlink()
            raise AssetError(f"{repo}@{item.revision}/{f.path}: sha256 {digest} does not match the expected "
                             f"{expected}; the file was deleted, run fetch again")
        entry["files"][f.path] = {"size": dest.stat().st_size, "sha256": digest}
        entry["built"] = {}  # a new input: build again
        write_json(MANIFEST, manifest)
    built = entry["built"]
    if item.remote.build and not (built and all(Path(out).is_file() and sha256_file(Path(out)) == digest
                                                for out, digest in built.items())):
        log(f"{repo}: {item.remote.build.__name__}")
        entry["built"] = item.remote.build(item.local, [f.path for f in files])
    write_json(MANIFEST, manifest)


# --- hubs -----------------------------------------------------------------------------------------------


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on")


class HfHub:
    """The Hugging Face hub through huggingface_hub: listings with LFS digests, `hf_hub_download` at a commit
    into `data/external/hub/<repo>` (it resumes an interrupted file from its `.incomplete` copy)."""

    def __init__(self, profile: str = "P"):
        if offline():
            raise AssetError(f"HF_HUB_OFFLINE=1 (the Makefile's default) forbids downloads; run "
                             f"`HF_HUB_OFFLINE=0 python -m repro.remote fetch --profile {profile}` (or --from DIR)")
        from huggingface_hub import HfApi

        self.api = HfApi()

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
    """A directory laid out like the hub's URLs: `<root>/<repo>/resolve/<rev>/<file>` for models,
    `<root>/datasets/<repo>/resolve/<rev>/<file>` for datasets. A download goes to `<dest>.incomplete` first and
    resumes from it after an interruption, as huggingface_hub does."""

    chunk = 1 << 20

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def _dir(self, repo: str, repo_type: str, revision: str) -> Path:
        base = self.root / "datasets" if repo_type == "dataset" else self.root
        path = base / repo / "resolve" / revision
        if not path.is_dir():
            raise AssetError(f"{path}: no such repo revision in the local hub {self.root}")
        return path

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
    file order: the retriever's settings must be those (checked: encoder, corpus, index size)."""
    name = cfg.fetch.prebuilt_index if cfg.fetch else None
    if not name:
        return None
    import faiss

    from repro.data import layout
    from repro.retrieval.cache import retriever_key, stale_reason
    from repro.retrieval.run import FAISS_FILE, encoder_refs

    key = f"params.yaml: profiles.{cfg.name}.fetch.prebuilt_index"
    rcfg = cfg.retrieval.retrievers.get(name) if cfg.retrieval else None
    if rcfg is None or rcfg.method != "dense" or rcfg.query_encoder != "intfloat/e5-base-v2" or rcfg.index != "Flat":
        raise AssetError(f"{key}: '{name}' must be a dense retriever with query_encoder intfloat/e5-base-v2 and "
                         f"index Flat (Search-R1's e5 Flat index)")
    if Path(cfg.data.corpus.source) != WIKI18 or cfg.data.corpus.max_passages is not None:
        raise AssetError(f"{key}: the prebuilt index covers all of {WIKI18}, but the corpus is "
                         f"{cfg.data.corpus.source} (max_passages: {cfg.data.corpus.max_passages}); set "
                         f"prebuilt_index to null to encode the corpus instead")
    fetched = read_manifest()
    if not WIKI18.exists() or "PeterJinGo/wiki-18-e5-index" not in fetched:
        raise AssetError(f"{key}: fetch {WIKI18} and the e5 index first (`python -m repro.remote fetch "
                         f"--profile {cfg.name}`)")
    # the data stage keys its index on the corpus file's sha256 (repro.data.corpus.file_fingerprint)
    corpus = fetched.get("PeterJinGo/wiki-18-corpus", {}).get("built", {}).get(str(WIKI18)) or sha256_file(WIKI18)
    out = layout.index_dir(cfg.name, name)
    manifest = {"retriever": retriever_key(rcfg, *encoder_refs(rcfg, cfg.name)), "corpus": corpus}
    if stale_reason(out, manifest) is None and (out / "imported.json").exists():
        return out  # imported before, from the same corpus and encoder
    index = faiss.read_index(str(E5_INDEX), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    with open(WIKI18, "rb") as f:
        passages = sum(1 for line in f if line.strip())
    if index.ntotal != passages:
        raise AssetError(f"{E5_INDEX}: {index.ntotal} vectors for {passages} passages in {WIKI18}")
    shutil.rmtree(out, ignore_errors=True)
    with atomic_dir(out) as tmp:
        try:
            os.link(E5_INDEX, tmp / FAISS_FILE)  # 65 GB: a hard link where the file system allows it
        except OSError:
            shutil.copyfile(E5_INDEX, tmp / FAISS_FILE)
        write_json(tmp / "manifest.json", manifest)
        write_json(tmp / "imported.json", {"from": str(E5_INDEX), "repo": "PeterJinGo/wiki-18-e5-index",
                                           "revision": fetched["PeterJinGo/wiki-18-e5-index"]["revision"]})
    log(f"{out}: Search-R1's e5 Flat index ({index.ntotal} vectors) for retriever '{name}'")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fetch the external assets a profile names (paper profiles) at "
                                                 "their pinned revisions, or list the known ones.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    f = sub.add_parser("fetch", help="download the hub assets the profile names at their pinned revisions; "
                                     "needs HF_HUB_OFFLINE=0 unless --from is given")
    f.add_argument("--profile", help="profile name from params.yaml (default: its `profile` key)")
    f.add_argument("--from", dest="source", metavar="DIR", help="a local directory laid out like the hub")
    f.add_argument("--dry-run", action="store_true", help="print what would be fetched and its size, nothing else")
    args = parser.parse_args(argv)
    if args.command == "list":
        for row in REMOTE.values():  # fetched for the paper profiles (any other hub model: its safetensors)
            print(f"{row.repo_type}:{row.repo:52s} {row.description}")
        return
    try:
        cfg = load_profile(args.profile)
        if not needs(cfg):
            print(f"profile {cfg.name} names no external asset (embedded ones: `python -m repro.assets materialize`)")
            return
        if errors := unpinned(cfg):  # every key to set at once, not one per run
            if args.dry_run:  # what is needed, before the pins give its sizes
                for row, files in needs(cfg):
                    print(f"{row.repo_type}:{row.repo}  {' '.join(files)}")
            raise SystemExit("\n".join(f"error: {e}" for e in errors))
        fetch(cfg, LocalHub(args.source) if args.source else HfHub(cfg.name), args.dry_run)
        if not args.dry_run:
            import_prebuilt_index(cfg)
    except AssetError as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    from repro.remote import main as package_main  # raises repro.assets.AssetError, not a __main__ copy of it

    package_main()
