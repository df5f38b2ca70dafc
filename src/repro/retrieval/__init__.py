"""Retrieval layer: dense (any transformers encoder + FAISS) and BM25 retrievers over a passage corpus,
an on-disk result cache keyed by (retriever, corpus, split), and the retrieval-quality metrics of Table 8.

- `encoders`     batched text encoding with CLS / mean / pooler pooling and E5-style prefixes
- `faiss_index`  FAISS index construction (flat inner product, IVF, HNSW), GPU sharding, save/load
- `dense`        dense retriever: encoder(s) + FAISS index over a `PassageStore`
- `bm25`         BM25 retriever via `bm25s`
- `cache`        manifests that tie an artefact to the exact inputs that produced it
- `run`          open (build or load) a named retriever and retrieve a QA split with caching
- `quality`      Recall@k / NDCG@k with "passage contains a golden answer" as the positive
"""
