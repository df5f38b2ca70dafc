"""Retrieval results and indexes are reused only for the same retriever configuration, corpus and split."""

import json
import re
import textwrap

import pytest

from repro.assets import MINILM_WEIGHTS, OVOS_SUMMARIES
from repro.config import load_profile
from repro.data import layout
from repro.data.corpus import PassageStore, file_fingerprint, ovos_pages, page_passages, write_corpus
from repro.data.qa import read_contexts
from repro.data.qa import write_qa
from repro.io import InputError
from repro.retrieval import faiss_index
from repro.retrieval.dense import DenseRetriever
from repro.retrieval.run import FAISS_FILE, RetrievalSession

QUESTIONS = [("q1", "Who painted the Mona Lisa?", ["Leonardo da Vinci"]),
             ("q2", "When did World War II end?", ["1945"]),
             ("q3", "What is the capital of France?", ["Paris"])]


def _params(k1: float) -> str:
    return textwrap.dedent(f"""\
        profile: t
        profiles:
          t:
            description: cache test
            seed: 0
            models: {{extractor: x, generator: x, agents: [x]}}
            data:
              corpus: {{source: data/t/corpus/passages.jsonl, format: passages}}
              datasets:
                - {{name: toy, label: Toy, format: flashrag, setting: open, source: unused, splits: {{test: test}}}}
              split_fractions: {{test: 1.0}}
            retrieval:
              topk: 5
              retrievers:
                minilm: {{method: dense, query_encoder: {MINILM_WEIGHTS.locate().parent}, pooling: mean}}
                bm25: {{method: bm25, k1: {k1}}}
              default: minilm
              agentic: minilm
              evaluate: [minilm, bm25]
            noise: {{counts: [0]}}
        """)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pages = ovos_pages(OVOS_SUMMARIES.locate())
    titles = ["Mona Lisa", "World War II", "Paris"] + list(pages)[:12]
    write_corpus("data/t/corpus/passages.jsonl", page_passages({t: pages[t] for t in titles}, 100))
    write_qa(layout.qa_path("t", "toy", "test"),
             [{"id": i, "question": q, "golden_answers": a, "metadata": {}} for i, q, a in QUESTIONS])
    (tmp_path / "params.yaml").write_text(_params(0.9))
    return tmp_path


def _session(params="params.yaml"):
    cfg = load_profile("t", params)
    path = "data/t/corpus/passages.jsonl"
    return RetrievalSession(cfg, PassageStore(path), file_fingerprint(path), progress=False)


def test_second_run_is_served_from_the_cache_without_loading_anything(workdir):
    path, status = _session().retrieve_split("bm25", "toy", "test")
    assert status == "computed (not built yet)"
    rows = read_contexts(path)
    assert [r["id"] for r in rows] == ["q1", "q2", "q3"]
    assert all(len(r["passages"]) == 5 for r in rows)
    assert all(r["passages"][0]["score"] >= r["passages"][-1]["score"] for r in rows)
    again = _session()
    assert again.retrieve_split("bm25", "toy", "test") == (path, "cached")
    assert again.opened == []


def test_another_corpus_or_configuration_is_never_reused(workdir):
    path, _ = _session().retrieve_split("bm25", "toy", "test")
    (workdir / "params.yaml").write_text(_params(1.2))
    assert _session().retrieve_split("bm25", "toy", "test")[1] == "computed (built from different retriever)"
    manifest = json.loads((workdir / "data/t/index/bm25/manifest.json").read_text())
    assert manifest["retriever"]["config"]["k1"] == 1.2  # the index was rebuilt too
    with open("data/t/corpus/passages.jsonl", "a") as f:
        f.write(json.dumps({"id": "extra", "contents": '"Extra"\nAn extra passage about Paris.'}) + "\n")
    assert _session().retrieve_split("bm25", "toy", "test")[1] == "computed (built from different corpus)"
    write_qa(layout.qa_path("t", "toy", "test"),
             [{"id": i, "question": q, "golden_answers": a, "metadata": {}} for i, q, a in QUESTIONS[:2]])
    session = _session()
    assert session.retrieve_split("bm25", "toy", "test")[1] == "computed (built from different qa)"
    assert len(read_contexts(path)) == 2


def test_dense_results_match_the_retriever_and_its_index_is_reused(workdir):
    session = _session()
    path, status = session.retrieve_split("minilm", "toy", "test")
    assert status.startswith("computed")
    scores, rows = session.retriever("minilm").search([q for _, q, _ in QUESTIONS], 5)
    stored = read_contexts(path)
    store = PassageStore("data/t/corpus/passages.jsonl")
    assert [[p["id"] for p in r["passages"]] for r in stored] == [[store[int(i)]["id"] for i in hits] for hits in rows]
    assert stored[0]["passages"][0]["contents"].startswith('"Mona Lisa"')
    fresh = _session()
    assert fresh.ensure_index("minilm") == "cached" and fresh.opened == []


def test_a_dense_index_is_saved_before_it_moves_to_the_gpus(workdir, monkeypatch):
    """A GPU that cannot search (a FAISS build without its kernels) fails at `to_gpus`: the encoded corpus is on disk
    by then, and the rerun loads it instead of encoding again. The move asks for fp32 unless the retriever says fp16."""
    asked = []

    def no_kernels(index, fp16):
        asked.append(fp16)
        raise RuntimeError("no kernel image is available for execution on the device")

    monkeypatch.setattr(faiss_index, "to_gpus", no_kernels)
    with pytest.raises(RuntimeError, match="no kernel image"):
        _session().retriever("minilm")
    assert asked == [False]  # the minilm retriever sets no gpu_fp16: exact fp32
    assert (workdir / "data/t/index/minilm" / FAISS_FILE).exists()
    monkeypatch.undo()
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(DenseRetriever, "build_index", lambda *a, **k: pytest.fail("the saved index was rebuilt"))
    assert _session().retriever("minilm").index.ntotal > 0



@pytest.mark.parametrize("damage", [lambda text: text[: len(text) // 2], lambda text: "[1, 2]"],
                         ids=["cut short", "not an object"])
def test_a_damaged_manifest_is_refused_naming_its_file(workdir, damage):
    results, _ = _session().retrieve_split("bm25", "toy", "test")
    index = workdir / "data/t/index/bm25/manifest.json"
    index.write_text(damage(index.read_text()))
    refused = r"(:\d+)?: (invalid JSON|expected a JSON object)"
    with pytest.raises(InputError, match=rf"^data/t/index/bm25/manifest\.json{refused}"):
        _session().ensure_index("bm25")
    manifest = results.with_suffix(".manifest.json")  # a result file's, beside it
    manifest.write_text(damage(manifest.read_text()))
    with pytest.raises(InputError, match=rf"^{re.escape(str(manifest))}{refused}"):
        _session().retrieve_split("bm25", "toy", "test")
