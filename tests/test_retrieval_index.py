"""FAISS indexes against brute-force scoring on real MiniLM embeddings, and BM25 via bm25s."""

import numpy as np
import pytest

from repro.assets import MINILM_WEIGHTS, OVOS_SUMMARIES
from repro.data.corpus import PassageStore, ovos_pages, page_passages, split_contents, write_corpus
from repro.retrieval import faiss_index
from repro.retrieval.bm25 import BM25Retriever
from repro.config import RetrieverConfig
from repro.retrieval.dense import DenseRetriever
from repro.retrieval.encoders import TextEncoder

QUERIES = ["Who painted the Mona Lisa?", "When did World War II end?", "What is the capital of France?",
           "Which planet is the largest in the Solar System?"]
TITLES = ["Mona Lisa", "World War II", "Paris", "Jupiter"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pages = ovos_pages(OVOS_SUMMARIES.locate())
    keep = TITLES + [t for t in list(pages)[:20] if t not in TITLES]
    path = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    write_corpus(path, page_passages({t: pages[t] for t in keep}, 100))
    return PassageStore(path)


@pytest.fixture(scope="module")
def embeddings(store):
    encoder = TextEncoder(str(MINILM_WEIGHTS.locate().parent), pooling="mean", normalize=True)
    passages = encoder.encode([p["contents"] for p in store], progress=False)
    return passages, encoder.encode(QUERIES, progress=False)


def test_flat_index_top5_equals_brute_force_top5(embeddings):
    passages, queries = embeddings
    index = faiss_index.new_index(passages.shape[1])
    index.add(passages)
    scores, rows = faiss_index.search(index, queries, 5)
    brute = queries @ passages.T
    expected = np.argsort(-brute, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(rows, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(brute, expected, axis=1), atol=1e-5)


def test_dense_top5_holds_the_right_page(store, embeddings):
    passages, queries = embeddings
    index = faiss_index.new_index(passages.shape[1])
    index.add(passages)
    _, rows = faiss_index.search(index, queries, 5)
    found = [{split_contents(store[int(r)]["contents"])[0] for r in hits} for hits in rows]
    assert all(title in titles for title, titles in zip(TITLES, found))


@pytest.mark.parametrize("factory, params", [("HNSW16", {"efSearch": 64}), ("IVF4,Flat", {"nprobe": 4})])
def test_approximate_indexes_build_search_and_round_trip(tmp_path, embeddings, factory, params):
    passages, queries = embeddings
    index = faiss_index.new_index(passages.shape[1], factory)
    if not index.is_trained:
        index.train(passages)
    index.add(passages)
    faiss_index.set_search_parameters(index, params)
    scores, rows = faiss_index.search(index, queries, 5)
    exact = np.argsort(-(queries @ passages.T), axis=1)[:, :5]
    assert (rows[:, 0] == exact[:, 0]).all()  # small corpus, exhaustive settings: same best passage
    faiss_index.save_index(index, tmp_path / "index.faiss")
    loaded = faiss_index.load_index(tmp_path / "index.faiss")
    faiss_index.set_search_parameters(loaded, params)
    np.testing.assert_array_equal(faiss_index.search(loaded, queries, 5)[1], rows)


def test_an_index_built_on_two_devices_holds_one_devices_vectors_in_corpus_order(store, embeddings):
    minilm = str(MINILM_WEIGHTS.locate().parent)
    cfg = RetrieverConfig(method="dense", query_encoder=minilm, batch_size=8, encode_block=20)  # 3 blocks
    one = DenseRetriever(cfg, minilm)
    assert one.passage_encoder is one.query_encoder  # one device (the CPU here): one model, as before
    two = DenseRetriever(cfg, minilm, passage_devices=["cpu", "cpu"])
    assert two.passage_encoder.devices == ["cpu", "cpu"] and two.query_encoder.devices == ["cpu"]
    index = two.build_index(store, progress=False)
    vectors = index.reconstruct_n(0, index.ntotal)
    np.testing.assert_array_equal(vectors, one.build_index(store, progress=False).reconstruct_n(0, index.ntotal))
    np.testing.assert_allclose(vectors, embeddings[0], atol=1e-5)  # in corpus order (other batches: rounding)


def test_no_gpu_leaves_the_index_on_the_cpu(embeddings):
    index = faiss_index.new_index(embeddings[0].shape[1])
    assert faiss_index.gpu_count() == 0 and faiss_index.to_gpus(index) is index


@pytest.mark.parametrize("devices", [["cpu"], ["cpu", "cpu", "cpu"]])
def test_the_sharded_search_the_gpus_run_returns_faiss_exact_top_k(embeddings, devices, monkeypatch):
    """The GPU path's code on CPU tensors: shards over three devices, score blocks of a few rows (tiles crossing the
    shards' bounds) and k beyond the corpus give FAISS's rows, scores and padding."""
    passages, queries = embeddings
    index = faiss_index.new_index(passages.shape[1])
    index.add(passages)
    monkeypatch.setattr(faiss_index, "TILE_BYTES", 4 * len(queries) * 7)  # 7 rows a block
    for k in (5, len(passages) + 3):
        expected = faiss_index.search(index, queries, k)
        scores, rows = faiss_index.search(faiss_index.FlatShards(index, devices), queries, k)
        np.testing.assert_array_equal(rows, expected[1])
        np.testing.assert_allclose(scores, expected[0], rtol=1e-5, atol=1e-6)


def test_fp16_shards_rank_as_faiss_gpus_float16_does_and_a_mapped_index_is_searched_unread(embeddings, tmp_path):
    passages, queries = embeddings
    index = faiss_index.new_index(passages.shape[1])
    index.add(passages)
    faiss_index.save_index(index, tmp_path / "flat.index")
    mapped = faiss_index.load_index(tmp_path / "flat.index", mmap=True)
    scores, rows = faiss_index.search(faiss_index.FlatShards(mapped, ["cpu", "cpu"], fp16=True), queries, 5)
    expected = faiss_index.search(index, queries, 5)
    np.testing.assert_array_equal(rows[:, 0], expected[1][:, 0])
    np.testing.assert_allclose(scores, expected[0], atol=2e-3)  # fp16 vectors, fp32 sums


def test_bm25_finds_the_page_and_survives_save_and_load(tmp_path, store):
    bm25 = BM25Retriever.build(store, progress=False)
    scores, rows = bm25.search(QUERIES[:1], 3)
    assert split_contents(store[int(rows[0, 0])]["contents"])[0] == "Mona Lisa"
    assert scores[0, 0] >= scores[0, 1] >= scores[0, 2]
    bm25.save(tmp_path / "bm25")
    np.testing.assert_array_equal(BM25Retriever.load(tmp_path / "bm25").search(QUERIES[:1], 3)[1], rows)


def test_bm25_as_lucene_a_query_without_terms_matches_nothing_and_k_beyond_the_corpus_pads(store):
    bm25 = BM25Retriever.build(store, progress=False)
    scores, rows = bm25.search(["", "the of and", QUERIES[0]], len(store) + 2)
    assert rows.shape == scores.shape == (3, len(store) + 2)
    assert (rows[:2] == -1).all() and (scores[:2] == 0).all()
    assert sorted(rows[2, :len(store)]) == list(range(len(store))) and (rows[2, len(store):] == -1).all()
