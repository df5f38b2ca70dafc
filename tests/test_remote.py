"""`python -m repro.ops.remote fetch`: the plan, resolution into the lock file, exact fetches from it, --update, verify,
resume, the .bin -> safetensors conversion and the prebuilt index, against a local directory laid out like the hub
(no network)."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
import yaml

from repro import assets
from repro.assets import AssetError, resolve
from repro.config import RELEASED_EVIOMNI, load_profile
from repro.ops import remote

REV = "0123456789abcdef0123456789abcdef01234567"
REV2 = "89abcdef0123456789abcdef0123456789abcdef"
MODEL = "org/tiny-model"
WEIGHTS = bytes(range(256)) * 40
PROFILE_YAML = f"""
profile: p
profiles:
  p:
    description: fetch test
    seed: 0
    models: {{extractor: {MODEL}, generator: {MODEL}, agents: []}}
    data:
      corpus: {{source: data/external/wiki-18.jsonl, format: passages}}
      datasets:
        - {{name: nq, label: NQ, format: flashrag, setting: open, source: RUC-NLPIR/FlashRAG_datasets,
           splits: {{train: train, test: test}}}}
      split_fractions: {{train: 0.5, dev: 0.1, test: 0.4}}
    fetch: {{}}
"""
PASSAGES = [{"id": str(i), "contents": f'"Title {i}"\npassage {i}'} for i in range(5)]
LOCK = Path("fetch.lock.yaml")


def hub_file(root: Path, repo: str, path: str, data: bytes, dataset: bool = False, rev: str = REV) -> None:
    """One file of `repo` at commit `rev` in a hub-like directory, whose main branch then points at `rev`."""
    base = root / ("datasets" if dataset else "") / repo
    target = base / "resolve" / rev / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / "main").write_text(rev)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A project directory with a one-profile params.yaml and a hub-like directory beside it."""
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(PROFILE_YAML)
    hub = tmp_path / "hub"
    hub_file(hub, MODEL, "config.json", b'{"model_type": "llama"}')
    hub_file(hub, MODEL, "model.safetensors", WEIGHTS)
    hub_file(hub, MODEL, "pytorch_model.bin", b"the same weights as a pickle")  # not fetched beside safetensors
    hub_file(hub, MODEL, "README.md", b"not a model file")
    for split in ("train", "test", "dev"):
        hub_file(hub, "RUC-NLPIR/FlashRAG_datasets", f"nq/{split}.jsonl", f'{{"id": "{split}"}}\n'.encode(), True)
    corpus = "".join(json.dumps(p) + "\n" for p in PASSAGES).encode()
    hub_file(hub, "PeterJinGo/wiki-18-corpus", "wiki-18.jsonl.gz", gzip.compress(corpus), True)
    return hub


class CountingHub(remote.LocalHub):
    """A LocalHub that logs each download and can fail after `fail_after` bytes of the file `fail_on`."""

    chunk = 1000

    def __init__(self, root, log, fail_on=None, fail_after=0):
        super().__init__(root)
        self.log, self.fail_on, self.fail_after, self.bytes = log, fail_on, fail_after, {}

    def read(self, source, offset):
        for block in super().read(source, offset):
            name = source.name
            self.bytes[name] = self.bytes.get(name, 0) + len(block)
            if name == self.fail_on and self.bytes[name] > self.fail_after:
                raise ConnectionError("connection reset")
            yield block

    def download(self, repo, repo_type, revision, path, dest):
        self.log.append(f"download {path}")
        super().download(repo, repo_type, revision, path, dest)


def downloads(log: list[str]) -> list[str]:
    return [line.removeprefix("download ") for line in log if line.startswith("download ")]


def test_fetch_resolves_main_prints_first_then_downloads_locks_and_records(workdir):
    cfg, log = load_profile("p"), []
    manifest = remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    total = next(i for i, line in enumerate(log) if line.startswith("total "))
    assert total < next(i for i, line in enumerate(log) if line.startswith("download"))  # the plan comes first
    assert f"{MODEL}@{REV} (new)  2 file(s)  10.3 KB  -> data/external/hub/{MODEL}" in log[:total]
    assert "    model.safetensors  10.2 KB" in log[:total]
    text = LOCK.read_text()
    assert text.startswith("# Written by `python -m repro.ops.remote fetch` (repro.ops.remote); "
                           "committed with the repository")
    lock = yaml.safe_load(text)["repos"]
    assert set(lock) == {MODEL, "RUC-NLPIR/FlashRAG_datasets", "PeterJinGo/wiki-18-corpus"}
    assert lock[MODEL]["commit"] == REV and lock[MODEL]["type"] == "model"
    assert lock[MODEL]["files"] == {"config.json": {"size": 23, "sha256": remote.sha256_file(workdir / MODEL / "resolve"
                                                                                             / REV / "config.json")},
                                    "model.safetensors": {"size": 10240, "sha256": remote.sha256_file(
                                        workdir / MODEL / "resolve" / REV / "model.safetensors")}}  # no README, no .bin
    assert sorted(lock["RUC-NLPIR/FlashRAG_datasets"]["files"]) == ["nq/test.jsonl", "nq/train.jsonl"]
    assert manifest[MODEL]["revision"] == REV and manifest[MODEL]["files"] == lock[MODEL]["files"]
    assert [json.loads(line) for line in remote.WIKI18.read_text().splitlines()] == PASSAGES
    assert json.loads(remote.MANIFEST.read_text()) == manifest
    # every loader now reads the locked copies through resolve
    assert resolve(MODEL, "p") == str(Path("data/external/hub") / MODEL)
    assert Path(resolve("RUC-NLPIR/FlashRAG_datasets", "p"), "nq", "test.jsonl").read_text() == '{"id": "test"}\n'


def move_main(hub: Path) -> None:
    """A new commit on the model's main branch: other weights under another name."""
    hub_file(hub, MODEL, "config.json", b'{"model_type": "llama", "new": true}', rev=REV2)
    hub_file(hub, MODEL, "model-00001-of-00001.safetensors", WEIGHTS[::-1], rev=REV2)


def test_a_second_fetch_is_exact_from_the_lock_and_downloads_nothing(workdir):
    cfg, log = load_profile("p"), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    locked = LOCK.read_text()
    move_main(workdir)  # the hub moved on; the lock did not
    log.clear()
    manifest = remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert downloads(log) == [] and not any("gunzip" in line for line in log)
    assert f"{MODEL}@{REV} (locked)  2 file(s)  10.3 KB  -> data/external/hub/{MODEL}" in log
    assert LOCK.read_text() == locked and manifest[MODEL]["revision"] == REV


def test_update_moves_the_lock_to_mains_current_commit(workdir):
    cfg, log = load_profile("p"), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    move_main(workdir)
    hub_file(workdir, "RUC-NLPIR/FlashRAG_datasets", "nq/test.jsonl", b'{"id": "test2"}\n', True, rev=REV2)
    hub_file(workdir, "RUC-NLPIR/FlashRAG_datasets", "nq/train.jsonl", b'{"id": "train2"}\n', True, rev=REV2)
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), update=[MODEL], log=log.append)  # this repo only
    assert sorted(downloads(log)) == ["config.json", "model-00001-of-00001.safetensors"]
    assert f"{MODEL}@{REV2} (moved from {REV[:12]})  2 file(s)  10.3 KB  -> data/external/hub/{MODEL}" in log
    lock = remote.read_lock(LOCK)
    assert lock[MODEL]["commit"] == REV2 and sorted(lock[MODEL]["files"]) == ["config.json",
                                                                              "model-00001-of-00001.safetensors"]
    assert lock["RUC-NLPIR/FlashRAG_datasets"]["commit"] == REV
    local = Path(resolve(MODEL, "p"))
    assert sorted(p.name for p in local.iterdir()) == ["config.json", "model-00001-of-00001.safetensors"]  # REV's gone
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), update=[], log=log.append)  # every repo of the plan
    assert sorted(downloads(log)) == ["nq/test.jsonl", "nq/train.jsonl"]
    assert any(line.startswith(f"{MODEL}@{REV2} (main unchanged)") for line in log)
    assert remote.read_lock(LOCK)["RUC-NLPIR/FlashRAG_datasets"]["commit"] == REV2
    with pytest.raises(AssetError, match=r"--update: \['org/other'\] not in profile p's plan"):
        remote.fetch(cfg, CountingHub(workdir, log), update=["org/other"], log=log.append)


def test_an_interrupted_download_resumes_where_it_stopped(workdir):
    cfg, log = load_profile("p"), []
    broken = CountingHub(workdir, log, fail_on="model.safetensors", fail_after=3000)
    with pytest.raises(ConnectionError):
        remote.fetch(cfg, broken, log=log.append)
    partial = Path("data/external/hub", MODEL, "model.safetensors.incomplete")
    assert partial.stat().st_size == 3000  # three 1000-byte blocks written; the fourth read failed
    assert not Path("data/external/hub", MODEL, "model.safetensors").exists()  # never a truncated file in place
    assert remote.read_lock(LOCK)[MODEL]["commit"] == REV and list(remote.read_lock(LOCK)[MODEL]["files"]) == [
        "config.json"]  # the commit and the finished file are locked: the retry fetches the same commit
    move_main(workdir)
    log.clear()
    retry = CountingHub(workdir, log)
    manifest = remote.fetch(cfg, retry, log=log.append)
    assert retry.bytes["model.safetensors"] == 10240 - 3000  # only the rest was read
    assert "download config.json" not in log  # finished files are verified, not downloaded again
    path = Path("data/external/hub", MODEL, "model.safetensors")
    assert path.read_bytes() == WEIGHTS
    assert manifest[MODEL]["files"]["model.safetensors"]["sha256"] == remote.sha256_file(path)
    assert remote.read_lock(LOCK)[MODEL]["files"]["model.safetensors"]["sha256"] == remote.sha256_file(path)


def test_a_corrupted_file_is_downloaded_again(workdir):
    cfg, log = load_profile("p"), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    path = Path("data/external/hub", MODEL, "model.safetensors")
    path.write_bytes(b"x" * path.stat().st_size)  # same size, other bytes
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert downloads(log) == ["model.safetensors"]
    assert any("does not match fetch.lock.yaml" in line for line in log)
    assert path.read_bytes() == WEIGHTS


def test_a_download_that_differs_from_the_lock_is_refused_naming_file_and_digests(workdir):
    remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    locked = remote.read_lock(LOCK)[MODEL]["files"]["config.json"]["sha256"]
    source = workdir / MODEL / "resolve" / REV / "config.json"
    source.write_bytes(b'{"model_type": "LLAMA"}')  # the mirror's bytes changed under the locked commit
    Path("data/external/hub", MODEL, "config.json").unlink()
    with pytest.raises(AssetError) as refused:
        remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    assert str(refused.value).startswith(f"{MODEL}@{REV}/config.json: the download's sha256 "
                                         f"{remote.sha256_file(source)} does not match {locked} (fetch.lock.yaml)")
    assert not Path("data/external/hub", MODEL, "config.json").exists()
    source.write_bytes(b'{"model_type": "llama", "x": 1}')  # another size: refused from the listing, before downloading
    with pytest.raises(AssetError, match=rf"{MODEL}@{REV}/config.json: the hub lists 31 bytes, sha256 None; "
                                         rf"fetch.lock.yaml records 23 bytes, sha256 {locked}"):
        remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)


def test_a_lock_entry_without_files_is_fetched_at_its_commit_and_completed(workdir):
    """As the DPR entries migrated from params.yaml: a commit known, its files not yet recorded."""
    move_main(workdir)
    remote.write_lock(LOCK, {MODEL: {"type": "model", "commit": REV, "files": {}}})
    remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    lock = remote.read_lock(LOCK)
    assert lock[MODEL]["commit"] == REV and sorted(lock[MODEL]["files"]) == ["config.json", "model.safetensors"]
    assert Path(resolve(MODEL, "p"), "model.safetensors").read_bytes() == WEIGHTS
    entry = f"{MODEL}:\n    type: model\n    commit: "
    LOCK.write_text(LOCK.read_text().replace(entry + REV, entry + "PIN-ME"))  # a hand edit gone wrong
    with pytest.raises(AssetError, match=rf"^fetch.lock.yaml: repos.{MODEL}.commit: 'PIN-ME' is not a 40-hex commit"):
        remote.read_lock(LOCK)


def test_the_command_reads_fetch_hub_or_from_and_a_dry_run_writes_nothing(workdir, capsys):
    Path("params.yaml").write_text(PROFILE_YAML.replace("fetch: {}", "fetch: {hub: hub, lock: locks/assets.yaml}"))
    remote.main(["fetch", "--profile", "p", "--dry-run"])
    out = capsys.readouterr().out
    assert f"{MODEL}@{REV} (new)  2 file(s)" in out and "    nq/train.jsonl  16 B" in out
    assert not Path("data/external").exists() and not Path("locks").exists()
    remote.main(["fetch", "--profile", "p", "--from", str(workdir)])  # --from overrides fetch.hub
    assert remote.read_lock(Path("locks/assets.yaml"))[MODEL]["commit"] == REV and not LOCK.exists()


def test_fetch_from_the_hub_under_hf_hub_offline_names_the_override(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AssetError, match="HF_HUB_OFFLINE=1 .*HF_HUB_OFFLINE=0 python -m repro.ops.remote fetch"):
        remote.HfHub()


def test_the_hf_hub_resolves_main_and_lists_lfs_digests_through_huggingface_hubs_api(monkeypatch):
    """The hub cannot be reached here: a stand-in for HfApi answers with huggingface_hub's own types."""
    from huggingface_hub.hf_api import DatasetInfo, RepoFile, RepoFolder

    class Api:
        def repo_info(self, repo_id, *, revision=None, repo_type=None):
            assert (repo_id, revision, repo_type) == ("org/data", "main", "dataset")
            return DatasetInfo(id=repo_id, sha=REV)

        def list_repo_tree(self, repo_id, *, recursive=False, revision=None, repo_type=None):
            assert recursive and revision == REV
            return [RepoFolder(type="directory", path="nq", oid="1"),
                    RepoFile(type="file", path="nq/train.jsonl", size=9, oid="2",
                             lfs={"size": 9, "oid": "f" * 64, "pointerSize": 130}),
                    RepoFile(type="file", path="README.md", size=3, oid="3")]

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    hub = remote.HfHub()
    hub.api = Api()
    assert hub.commit("org/data", "dataset", remote.BRANCH) == REV
    assert hub.files("org/data", "dataset", REV) == {"nq/train.jsonl": remote.RemoteFile("nq/train.jsonl", 9, "f" * 64),
                                                     "README.md": remote.RemoteFile("README.md", 3, None)}


def test_dpr_weights_shipped_as_bin_are_converted_to_safetensors_that_load(workdir):
    import torch
    from transformers import DPRConfig, DPRQuestionEncoder

    from repro.retrieval.encoders import load_encoder_model

    repo = "facebook/dpr-question_encoder-single-nq-base"
    torch.manual_seed(0)
    config = DPRConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=32, architectures=["DPRQuestionEncoder"])
    original = DPRQuestionEncoder(config).eval()
    weights = workdir / "dpr.bin"
    torch.save(original.state_dict(), weights)
    hub_file(workdir, repo, "pytorch_model.bin", weights.read_bytes())
    hub_file(workdir, repo, "tf_model.h5", b"TensorFlow weights: never fetched")
    hub_file(workdir, repo, "config.json", config.to_json_string().encode())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"w{i}" for i in range(27)]]
    hub_file(workdir, repo, "vocab.txt", "\n".join(vocab).encode())
    hub_file(workdir, repo, "tokenizer_config.json", b'{"do_lower_case": true}')
    Path("params.yaml").write_text(PROFILE_YAML.replace(f"extractor: {MODEL}", f"extractor: {repo}"))
    manifest = remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    converted = Path(resolve(repo, "p")) / "model.safetensors"
    assert manifest[repo]["built"] == {str(converted): remote.sha256_file(converted)}
    assert sorted(remote.read_lock(LOCK)[repo]["files"]) == ["config.json", "pytorch_model.bin",
                                                             "tokenizer_config.json", "vocab.txt"]
    _, model = load_encoder_model(resolve(repo, "p"))  # use_safetensors=True, as every loader here
    ids = torch.tensor([[2, 7, 9, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).pooler_output, original(ids).pooler_output)


def test_a_bin_only_sentence_transformers_repo_is_converted_in_every_module(workdir, tmp_path):
    """RECOMP's layout (modules.json, 1_Pooling/, pytorch_model.bin), with a 2_Dense/ module whose weights are a
    pytorch_model.bin too: every one becomes a model.safetensors beside it, and the encoder loads from those alone."""
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from repro.baselines.recomp import load_encoder

    repo = "fangyuan/nq_extractive_compressor"
    torch.manual_seed(0)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "wrote", "it", "paris"]))
    bert = tmp_path / "bert"
    BertModel(BertConfig(vocab_size=9, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16)).save_pretrained(bert)
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(bert)
    parts = [modules.Transformer(str(bert)), modules.Pooling(8, "mean"), modules.Dense(8, 4)]
    original = SentenceTransformer(modules=parts, device="cpu")
    saved = tmp_path / "saved"
    original.save(str(saved))
    for weights in saved.rglob("model.safetensors"):  # as the hub holds RECOMP: pickles only
        torch.save(load_file(weights), weights.with_name("pytorch_model.bin"))
        weights.unlink()
    bins = sorted(str(p.relative_to(saved)) for p in saved.rglob("pytorch_model.bin"))
    assert bins == ["2_Dense/pytorch_model.bin", "pytorch_model.bin"]
    for path in saved.rglob("*"):
        if path.is_file():
            hub_file(workdir, repo, str(path.relative_to(saved)), path.read_bytes())
    Path("params.yaml").write_text(PROFILE_YAML.replace(f"extractor: {MODEL}", f"extractor: {repo}"))
    manifest = remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    local = Path(resolve(repo, "p"))
    assert sorted(manifest[repo]["built"]) == [str(local / "2_Dense" / "model.safetensors"),
                                               str(local / "model.safetensors")]
    for name in bins:
        (local / name).unlink()  # the encoder must load from the converted files alone
    loaded = load_encoder(str(local), device="cpu")
    texts = ["who wrote it", "paris"]
    assert torch.allclose(loaded.encode(texts, convert_to_tensor=True), original.encode(texts, convert_to_tensor=True))


E5_RETRIEVAL = """
    retrieval:
      topk: 3
      retrievers:
        e5: {method: dense, query_encoder: intfloat/e5-base-v2, query_prefix: "query: ", passage_prefix: "passage: "}
      default: e5
      agentic: e5
      evaluate: [e5]
"""


def e5_hub(workdir: Path, change=None) -> "object":
    """The hub's e5 repo holding a real encoder (the embedded MiniLM under e5's name) and Search-R1's index of the
    corpus encoded by it, split in two parts; `change(index)` alters the index before it is split."""
    import faiss

    from repro.assets import MINILM_WEIGHTS
    from repro.config import RetrieverConfig
    from repro.retrieval.dense import DenseRetriever

    minilm = MINILM_WEIGHTS.locate().parent
    for file in minilm.rglob("*"):
        if file.is_file():
            hub_file(workdir, "intfloat/e5-base-v2", str(file.relative_to(minilm)), file.read_bytes())
    cfg = RetrieverConfig(method="dense", query_encoder=str(minilm), passage_prefix="passage: ")
    retriever = DenseRetriever(cfg, str(minilm))
    index = faiss.IndexFlatIP(384)
    index.add(retriever.encode_passages([p["contents"] for p in PASSAGES], progress=False))
    index = change(index) if change else index
    blob = faiss.serialize_index(index).tobytes()
    hub_file(workdir, "PeterJinGo/wiki-18-e5-index", "part_aa", blob[:100], True)
    hub_file(workdir, "PeterJinGo/wiki-18-e5-index", "part_ab", blob[100:], True)
    text = PROFILE_YAML.replace("    fetch: {}\n", E5_RETRIEVAL + "    fetch: {prebuilt_index: e5}\n")
    Path("params.yaml").write_text(text)
    return load_profile("p")


@pytest.mark.slow
def test_the_prebuilt_e5_index_is_joined_verified_mapped_and_reused_by_the_data_stage(workdir, monkeypatch):
    import faiss

    from repro.data.corpus import PassageStore
    from repro.retrieval.cache import stale_reason
    from repro.retrieval.run import RetrievalSession

    cfg, log = e5_hub(workdir), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    parts = remote.fetched_dir("PeterJinGo/wiki-18-e5-index")
    assert not (parts / "part_aa").exists() and not (parts / "part_ab").exists()  # removed after the verified join
    assert sorted(yaml.safe_load(LOCK.read_text())["repos"]["PeterJinGo/wiki-18-e5-index"]["files"]) == [
        "part_aa", "part_ab"]  # their digests stay locked
    flags_read = []
    monkeypatch.setattr(faiss, "read_index", lambda path, flags=0, real=faiss.read_index: flags_read.append(flags)
                        or real(path, flags))
    out = remote.import_prebuilt_index(cfg, log=lambda _: None)
    assert flags_read == [faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY]  # mapped, not read into memory
    assert faiss.read_index(str(out / "faiss.index")).ntotal == len(PASSAGES)
    store = PassageStore(remote.WIKI18)
    session = RetrievalSession(cfg, store, remote.sha256_file(remote.WIKI18), progress=False)
    assert stale_reason(out, session.key("e5")) is None  # the data stage takes it as built
    store.close()
    assert remote.import_prebuilt_index(cfg, log=lambda _: None) == out  # a second call keeps it
    log.clear()
    hashed = []
    monkeypatch.setattr(remote, "sha256_file", lambda path, real=remote.sha256_file: hashed.append(Path(path).name)
                        or real(path))
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert downloads(log) == [] and "e5_Flat.index" not in hashed and "wiki-18.jsonl" not in hashed
    remote.E5_INDEX.write_bytes(b"damaged")  # a changed build is noticed: the parts come again and are joined
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert downloads(log) == ["part_aa", "part_ab"] and remote.E5_INDEX.stat().st_size > 100


@pytest.mark.slow
def test_a_profile_that_cuts_the_corpus_imports_the_rows_of_its_first_passages(workdir):
    import faiss

    from repro.data.corpus import PassageStore, file_fingerprint, first_passages, write_corpus
    from repro.retrieval.cache import stale_reason
    from repro.retrieval.prepare import corpus_path
    from repro.retrieval.run import RetrievalSession

    cfg = e5_hub(workdir)
    Path("params.yaml").write_text(Path("params.yaml").read_text().replace(
        "format: passages}", "format: passages, max_passages: 3}"))
    cfg = load_profile("p")
    remote.fetch(cfg, remote.LocalHub(workdir), log=lambda _: None)
    out = remote.import_prebuilt_index(cfg, log=lambda _: None)
    whole = faiss.read_index(str(remote.E5_INDEX))
    part = faiss.read_index(str(out / "faiss.index"))
    assert part.ntotal == 3 and (part.reconstruct_n(0, 3) == whole.reconstruct_n(0, 3)).all()
    cut = corpus_path(cfg)  # what the data stage's build_corpus writes for max_passages (test_gpu_smoke)
    write_corpus(cut, first_passages(remote.WIKI18, 3))
    store = PassageStore(cut)
    assert stale_reason(out, RetrievalSession(cfg, store, file_fingerprint(cut), progress=False).key("e5")) is None
    store.close()


def swap_rows(index):
    import faiss

    vectors = index.reconstruct_n(0, index.ntotal)
    swapped = faiss.IndexFlatIP(index.d)
    swapped.add(vectors[[1, 0, *range(2, index.ntotal)]])
    return swapped


@pytest.mark.slow
@pytest.mark.parametrize("change, message", [
    (swap_rows, r"row 0 \(cosine 0\.\d+\), row 1 \(cosine 0\.\d+\) do not encode the passage on that line"),
    (lambda index: __import__("faiss").IndexFlatIP(index.d), r"0 vectors for 5 passages"),
    (lambda index: __import__("faiss").IndexFlatL2(index.d), r"metric 1, not inner product"),
    (lambda index: __import__("faiss").IndexFlatIP(768), r"768-dimensional vectors; intfloat/e5-base-v2 encodes 384"),
])
def test_an_index_of_another_order_size_metric_or_dimension_is_refused_naming_it(workdir, change, message):
    cfg = e5_hub(workdir, change)
    remote.fetch(cfg, remote.LocalHub(workdir), log=lambda _: None)
    with pytest.raises(AssetError, match=message):
        remote.import_prebuilt_index(cfg, log=lambda _: None)


def test_a_join_whose_bytes_differ_from_the_parts_is_deleted_and_the_parts_kept(workdir, monkeypatch):
    (workdir / "parts").mkdir()
    for name, data in (("part_aa", b"first "), ("part_ab", b"second")):
        (workdir / "parts" / name).write_bytes(data)
    files = {name: {"size": 6, "sha256": remote.hashlib.sha256(data).hexdigest()}
             for name, data in (("part_aa", b"first "), ("part_ab", b"second"))}
    assert remote.join_index_parts(workdir / "parts", files) == {
        str(remote.E5_INDEX): remote.hashlib.sha256(b"first second").hexdigest()}
    files["part_ab"]["sha256"] = remote.hashlib.sha256(b"other!").hexdigest()
    with pytest.raises(AssetError, match=r"e5_Flat.index: the joined file's bytes of \['part_ab'\] differ"):
        remote.join_index_parts(workdir / "parts", files)
    assert not remote.E5_INDEX.exists() and (workdir / "parts" / "part_ab").exists()


def test_a_model_with_neither_safetensors_nor_a_pytorch_model_bin_is_refused(workdir):
    base = workdir / MODEL / "resolve" / REV
    (base / "model.safetensors").rename(base / "model.bin")
    (base / "pytorch_model.bin").unlink()
    with pytest.raises(AssetError, match=rf"{MODEL}@{REV}: neither safetensors weights nor a pytorch_model.bin"):
        remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)


def test_preflight_finds_every_fetched_asset(workdir):
    from repro.ops.preflight import asset_errors

    cfg = load_profile("p")
    assert asset_errors(cfg) == [
        f"params.yaml: profiles.p.models.extractor: '{MODEL}' is not fetched; run `HF_HUB_OFFLINE=0 python -m "
        f"repro.ops.remote fetch --profile p`",
        "params.yaml: profiles.p.data.corpus.source: data/external/wiki-18.jsonl does not exist; run `python -m "
        "repro.ops.remote fetch --profile p`",
        "params.yaml: profiles.p.data.datasets[nq].source: ['nq/test.jsonl', 'nq/train.jsonl'] not fetched from "
        "RUC-NLPIR/FlashRAG_datasets; run `python -m repro.ops.remote fetch --profile p`"]
    remote.fetch(cfg, remote.LocalHub(workdir), log=lambda _: None)
    assert asset_errors(cfg) == []
    remote.write_lock(LOCK, {**remote.read_lock(LOCK), MODEL: {"type": "model", "commit": REV2, "files": {}}})
    assert asset_errors(cfg) == [f"params.yaml: profiles.p.models.extractor: '{MODEL}' is not fetched at "
                                 f"{REV2[:12]} (fetch.lock.yaml); run `HF_HUB_OFFLINE=0 python -m repro.ops.remote "
                                 f"fetch --profile p`"]


# --- the plan: only what the enabled stages read ---


def paper_plan(cfg) -> set[str]:
    return {row.repo for row, _ in remote.needs(cfg)}


def test_the_paper_plan_names_every_hub_asset_the_profile_reads():
    cfg = load_profile("paper-1p5b")
    plan = {row.repo: files for row, files in remote.needs(cfg)}
    assert "Qwen/Qwen2.5-1.5B-Instruct" in plan and "Qwen/Qwen2.5-7B-Instruct" not in plan
    assert {"HIT-TMG/EviOmni-nq_train-1.5B", "HIT-TMG/EviOmni-nq_train-7B", "intfloat/e5-base-v2",
            "facebook/dpr-ctx_encoder-single-nq-base", "fangyuan/nq_extractive_compressor",
            "PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3", "PeterJinGo/wiki-18-corpus",
            "PeterJinGo/wiki-18-e5-index"} <= set(plan)
    flashrag = plan["RUC-NLPIR/FlashRAG_datasets"]
    assert "nq/train.jsonl" in flashrag and "hotpotqa/dev.jsonl" in flashrag and "hotpotqa/test.jsonl" not in flashrag
    assert assets.references(cfg)["Qwen/Qwen2.5-1.5B-Instruct"] == "params.yaml: profiles.paper-1p5b.models.extractor"


def test_the_plan_has_no_nli_model_unless_r_eqr_is_computed():
    cfg, nli = load_profile("paper-1p5b"), "microsoft/deberta-v2-xlarge-mnli"
    assert cfg.reward_designs is None and cfg.rewards.design == "eviomni" and nli not in paper_plan(cfg)
    evinote = dataclasses.replace(cfg, rewards=dataclasses.replace(cfg.rewards, design="evinote"))
    assert nli in paper_plan(evinote)  # the GRPO runs compute R_EQR
    study = load_profile("cpu-rewards").reward_designs
    assert nli in paper_plan(dataclasses.replace(cfg, reward_designs=study))  # NLI support rate of every design


def test_the_plan_has_no_ar_study_teacher_unless_it_runs_locally():
    cfg, teacher = load_profile("paper-1p5b"), "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"
    assert cfg.ar_study.teacher.backend == "openai"
    served = dataclasses.replace(cfg.ar_study.teacher, model=teacher)  # e.g. a `vllm serve` behind the openai backend
    local = dataclasses.replace(served, backend="vllm", options={})
    plans = [paper_plan(dataclasses.replace(cfg, ar_study=dataclasses.replace(cfg.ar_study, teacher=t)))
             for t in (served, local)]
    assert teacher not in plans[0] and teacher in plans[1]


def test_the_plan_has_no_e5_index_unless_fetch_prebuilt_index():
    cfg = load_profile("paper-1p5b")
    assert "PeterJinGo/wiki-18-e5-index" in paper_plan(cfg)
    off = dataclasses.replace(cfg, fetch=dataclasses.replace(cfg.fetch, prebuilt_index=None))
    assert "PeterJinGo/wiki-18-e5-index" not in paper_plan(off)


def test_the_plan_has_no_released_extractor_unless_a_study_evaluates_it():
    cfg, released = load_profile("paper-1p5b"), "HIT-TMG/EviOmni-nq_train-1.5B"
    assert released in paper_plan(cfg)
    studies = {s: dataclasses.replace(getattr(cfg, s), methods=[m for m in getattr(cfg, s).methods
                                                                if m != "eviomni_released"])
               for s in ("evaluation", "latency", "distractor", "noise_robustness")}
    unused = dataclasses.replace(cfg, **studies)
    assert unused.agentic.extractor == "HIT-TMG/EviOmni-nq_train-7B" and released not in paper_plan(unused)
    assert "HIT-TMG/EviOmni-nq_train-7B" in paper_plan(unused)  # named by agentic.extractor itself
    assert released in paper_plan(dataclasses.replace(unused, eviomni=RELEASED_EVIOMNI))
    assert released in paper_plan(dataclasses.replace(unused, agentic=dataclasses.replace(cfg.agentic, extractor=None)))


def test_the_plan_has_no_agents_without_the_agentic_study():
    cfg = load_profile("paper-1p5b")
    agents = set(cfg.models.agents)
    assert agents <= paper_plan(cfg)
    assert not (agents | {"HIT-TMG/EviOmni-nq_train-7B"}) & paper_plan(dataclasses.replace(cfg, agentic=None))
