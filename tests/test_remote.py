"""`python -m repro.remote fetch`: plan, pinned revisions, verify, resume, DPR conversion and the prebuilt index,
against a local directory laid out like the hub (no network)."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from repro import remote
from repro.assets import AssetError, resolve
from repro.config import load_profile

REV = "0123456789abcdef0123456789abcdef01234567"
MODEL = "org/tiny-model"
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
    fetch:
      revisions: {{{MODEL}: {REV}, RUC-NLPIR/FlashRAG_datasets: {REV}, PeterJinGo/wiki-18-corpus: {REV}}}
"""
PASSAGES = [{"id": str(i), "contents": f'"Title {i}"\npassage {i}'} for i in range(5)]


def hub_file(root: Path, repo: str, path: str, data: bytes, dataset: bool = False) -> None:
    target = root / ("datasets" if dataset else "") / repo / "resolve" / REV / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A project directory with a one-profile params.yaml and a hub-like directory beside it."""
    monkeypatch.chdir(tmp_path)
    Path("params.yaml").write_text(PROFILE_YAML)
    hub = tmp_path / "hub"
    hub_file(hub, MODEL, "config.json", b'{"model_type": "llama"}')
    hub_file(hub, MODEL, "model.safetensors", bytes(range(256)) * 40)
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


def test_fetch_prints_sizes_first_then_downloads_verifies_and_records(workdir):
    cfg, log = load_profile("p"), []
    manifest = remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    first_download = next(i for i, line in enumerate(log) if line.startswith("download"))
    total = next(i for i, line in enumerate(log) if line.startswith("total "))
    assert any("10.3 KB" in line for line in log[:total]) and total < first_download  # the model's 10,263 bytes
    model = manifest[MODEL]
    assert model["revision"] == REV and sorted(model["files"]) == ["config.json", "model.safetensors"]  # no README
    for path, rec in model["files"].items():
        assert rec["sha256"] == remote.sha256_file(Path(model["dir"]) / path)
    assert sorted(manifest["RUC-NLPIR/FlashRAG_datasets"]["files"]) == ["nq/test.jsonl", "nq/train.jsonl"]
    assert [json.loads(line) for line in remote.WIKI18.read_text().splitlines()] == PASSAGES
    assert json.loads(remote.MANIFEST.read_text()) == manifest
    # every loader now reads the pinned copies through resolve
    assert resolve(MODEL, "p") == str(Path("data/external/hub") / MODEL)
    assert Path(resolve("RUC-NLPIR/FlashRAG_datasets", "p"), "nq", "test.jsonl").read_text() == '{"id": "test"}\n'


def test_a_second_fetch_downloads_nothing_and_keeps_the_corpus(workdir):
    cfg, log = load_profile("p"), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert not [line for line in log if line.startswith("download") or "gunzip" in line]


def test_an_interrupted_download_resumes_where_it_stopped(workdir):
    cfg, log = load_profile("p"), []
    broken = CountingHub(workdir, log, fail_on="model.safetensors", fail_after=3000)
    with pytest.raises(ConnectionError):
        remote.fetch(cfg, broken, log=log.append)
    partial = Path("data/external/hub", MODEL, "model.safetensors.incomplete")
    assert partial.stat().st_size == 3000  # three 1000-byte blocks written; the fourth read failed
    assert not Path("data/external/hub", MODEL, "model.safetensors").exists()  # never a truncated file in place
    log.clear()
    retry = CountingHub(workdir, log)
    manifest = remote.fetch(cfg, retry, log=log.append)
    assert retry.bytes["model.safetensors"] == 10240 - 3000  # only the rest was read
    assert "download config.json" not in log  # finished files are verified, not downloaded again
    path = Path("data/external/hub", MODEL, "model.safetensors")
    assert path.read_bytes() == bytes(range(256)) * 40
    assert manifest[MODEL]["files"]["model.safetensors"]["sha256"] == remote.sha256_file(path)


def test_a_corrupted_file_is_downloaded_again(workdir):
    cfg, log = load_profile("p"), []
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    path = Path("data/external/hub", MODEL, "model.safetensors")
    path.write_bytes(b"x" * path.stat().st_size)  # same size, other bytes
    log.clear()
    remote.fetch(cfg, CountingHub(workdir, log), log=log.append)
    assert [line for line in log if line.startswith("download")] == ["download model.safetensors"]
    assert any("does not match the manifest" in line for line in log)
    assert path.read_bytes() == bytes(range(256)) * 40


def test_a_download_that_differs_from_a_known_digest_is_deleted_and_refused(workdir, monkeypatch):
    monkeypatch.setitem(remote.REMOTE, MODEL, remote.Remote(MODEL, sha256=(("config.json", "0" * 64),)))
    with pytest.raises(AssetError, match=r"org/tiny-model@0123.*/config.json: sha256 \w+ does not match"):
        remote.fetch(load_profile("p"), CountingHub(workdir, []), log=lambda _: None)
    assert not Path("data/external/hub", MODEL, "config.json").exists()


def test_a_placeholder_revision_fails_with_the_key_to_set():
    with pytest.raises(AssetError, match=r"^params\.yaml: profiles\.paper-1p5b\.fetch\.revisions\.[\w/.-]+: "
                                         r"'PIN-ME' is a placeholder; set it to a commit from https://hugg"):
        remote.plan(load_profile("paper-1p5b"))


def test_the_paper_plan_pins_every_hub_asset_the_profile_names():
    cfg = load_profile("paper-1p5b")
    cfg = dataclasses.replace(cfg, fetch=dataclasses.replace(cfg.fetch, revisions={
        repo: REV for repo in cfg.fetch.revisions}))
    items = {item.remote.repo: item for item in remote.plan(cfg)}
    assert "Qwen/Qwen2.5-1.5B-Instruct" in items and "Qwen/Qwen2.5-7B-Instruct" not in items
    assert {"HIT-TMG/EviOmni-nq_train-1.5B", "HIT-TMG/EviOmni-nq_train-7B", "intfloat/e5-base-v2",
            "PeterJinGo/wiki-18-corpus", "PeterJinGo/wiki-18-e5-index"} <= set(items)
    assert items["facebook/dpr-ctx_encoder-single-nq-base"].remote.build is remote.bin_to_safetensors
    flashrag = items["RUC-NLPIR/FlashRAG_datasets"].files
    assert "nq/train.jsonl" in flashrag and "hotpotqa/dev.jsonl" in flashrag and "hotpotqa/test.jsonl" not in flashrag
    assert all(item.revision == REV for item in items.values())
    assert set(remote.hub_models(load_profile("paper-7b"))) <= set(cfg.fetch.revisions)  # one table, both sizes


def test_fetch_from_the_hub_under_hf_hub_offline_names_the_override(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(AssetError, match="HF_HUB_OFFLINE=1 .*HF_HUB_OFFLINE=0 python -m repro.remote fetch"):
        remote.HfHub()


def test_the_fetch_command_reads_a_local_hub_directory(workdir, capsys):
    remote.main(["fetch", "--profile", "p", "--from", str(workdir), "--dry-run"])
    out = capsys.readouterr().out
    assert f"{MODEL}@{REV[:12]}  2 file(s)" in out and not Path("data/external").exists()
    remote.main(["fetch", "--profile", "p", "--from", str(workdir)])
    assert remote.read_manifest()[MODEL]["revision"] == REV


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
    hub_file(workdir, repo, "config.json", config.to_json_string().encode())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"w{i}" for i in range(27)]]
    hub_file(workdir, repo, "vocab.txt", "\n".join(vocab).encode())
    hub_file(workdir, repo, "tokenizer_config.json", b'{"do_lower_case": true}')
    Path("params.yaml").write_text(PROFILE_YAML.replace(f"extractor: {MODEL}", f"extractor: {repo}").replace(
        "revisions: {", f"revisions: {{{repo}: {REV}, "))
    manifest = remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)
    converted = Path(resolve(repo, "p")) / "model.safetensors"
    assert manifest[repo]["built"] == {str(converted): remote.sha256_file(converted)}
    _, model = load_encoder_model(resolve(repo, "p"))  # use_safetensors=True, as every loader here
    ids = torch.tensor([[2, 7, 9, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).pooler_output, original(ids).pooler_output)


def test_the_prebuilt_e5_index_is_joined_and_reused_by_the_data_stage(workdir):
    import faiss
    import numpy as np

    from repro.data.corpus import PassageStore
    from repro.retrieval.cache import stale_reason
    from repro.retrieval.run import RetrievalSession

    index = faiss.IndexFlatIP(8)
    index.add(np.random.default_rng(0).random((len(PASSAGES), 8), dtype=np.float32))
    blob = faiss.serialize_index(index).tobytes()
    hub_file(workdir, "PeterJinGo/wiki-18-e5-index", "part_aa", blob[:100], True)
    hub_file(workdir, "PeterJinGo/wiki-18-e5-index", "part_ab", blob[100:], True)
    hub_file(workdir, "intfloat/e5-base-v2", "config.json", b'{"model_type": "bert"}')
    hub_file(workdir, "intfloat/e5-base-v2", "model.safetensors", b"weights")
    retrieval = """
    retrieval:
      topk: 3
      retrievers:
        e5: {method: dense, query_encoder: intfloat/e5-base-v2, query_prefix: "query: ", passage_prefix: "passage: "}
      default: e5
      agentic: e5
      evaluate: [e5]
"""
    text = PROFILE_YAML.replace("    fetch:\n", retrieval + "    fetch:\n      prebuilt_index: e5\n").replace(
        "revisions: {", f"revisions: {{intfloat/e5-base-v2: {REV}, PeterJinGo/wiki-18-e5-index: {REV}, ")
    Path("params.yaml").write_text(text)
    cfg = load_profile("p")
    remote.fetch(cfg, remote.LocalHub(workdir), log=lambda _: None)
    out = remote.import_prebuilt_index(cfg, log=lambda _: None)
    assert faiss.read_index(str(out / "faiss.index")).ntotal == len(PASSAGES)
    store = PassageStore(remote.WIKI18)
    session = RetrievalSession(cfg, store, remote.sha256_file(remote.WIKI18), progress=False)
    assert stale_reason(out, session.key("e5")) is None  # the data stage takes it as built
    store.close()
    assert remote.import_prebuilt_index(cfg, log=lambda _: None) == out  # a second call keeps it


def test_a_model_without_safetensors_weights_is_refused(workdir):
    (workdir / MODEL / "resolve" / REV / "model.safetensors").rename(workdir / MODEL / "resolve" / REV / "model.bin")
    with pytest.raises(AssetError, match=r"org/tiny-model@0123\w+: no safetensors weights at this revision"):
        remote.fetch(load_profile("p"), remote.LocalHub(workdir), log=lambda _: None)


def test_preflight_finds_every_fetched_asset(workdir):
    from repro.preflight import asset_errors

    cfg = load_profile("p")
    assert len(asset_errors(cfg)) == 3  # model, FlashRAG splits, corpus: none fetched yet
    remote.fetch(cfg, remote.LocalHub(workdir), log=lambda _: None)
    assert asset_errors(cfg) == []
