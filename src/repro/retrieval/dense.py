"""Dense retrieval: a query encoder, a passage encoder (the same model unless DPR) and a FAISS index.

The index is built by streaming the corpus in blocks of `encode_block` passages (encode, then add), so
memory holds the index and one block of embeddings, never all embeddings; an index type that needs
training (IVF) is trained on the first block. `build_index` returns it on the CPU, for the caller to save before
`use_index` moves it to the GPUs (a GPU that cannot search then loses no encoding). Passages are encoded on every
visible GPU (`encoders.all_devices`), queries on one.
"""

from __future__ import annotations

import faiss
import numpy as np

from repro.config import RetrieverConfig
from repro.data.corpus import PassageStore, split_contents
from repro.retrieval import faiss_index
from repro.retrieval.encoders import TextEncoder, all_devices


class DenseRetriever:
    def __init__(self, cfg: RetrieverConfig, query_model: str, passage_model: str | None = None,
                 passage_devices: list[str] | None = None):
        """`passage_devices`: where passages are encoded (default: every visible GPU, or the CPU)."""
        self.cfg = cfg
        self.query_encoder = TextEncoder(query_model, cfg.pooling, cfg.normalize, cfg.batch_size, cfg.dtype)
        self._query_model, self._passage_model = query_model, passage_model
        self._passage_devices = passage_devices
        self._passage_encoder: TextEncoder | None = None
        self.index: faiss.Index | None = None

    @property
    def passage_encoder(self) -> TextEncoder:
        """Loaded on first use; the query encoder itself when the model is the same and so are the devices."""
        if self._passage_encoder is None:
            cfg, devices = self.cfg, self._passage_devices or all_devices()
            if self._passage_model is None and list(devices) == self.query_encoder.devices:
                return self.query_encoder
            self._passage_encoder = TextEncoder(self._passage_model or self._query_model, cfg.pooling, cfg.normalize,
                                                cfg.batch_size, cfg.dtype, devices)
        return self._passage_encoder

    def encode_passages(self, contents: list[str], progress: bool = True, desc: str = "encode passages") -> np.ndarray:
        inputs = [split_contents(c) for c in contents] if self.cfg.passage_input == "title_text_pair" else contents
        return self.passage_encoder.encode(inputs, self.cfg.passage_prefix, self.cfg.passage_max_length,
                                           progress=progress, desc=desc)

    def encode_queries(self, queries: list[str], progress: bool = False) -> np.ndarray:
        return self.query_encoder.encode(queries, self.cfg.query_prefix, self.cfg.query_max_length,
                                         progress=progress, desc="encode queries")

    def build_index(self, store: PassageStore, progress: bool = True) -> faiss.Index:
        index = None
        blocks = -(-len(store) // self.cfg.encode_block)
        for i, block in enumerate(store.contents_batches(self.cfg.encode_block), start=1):
            vectors = self.encode_passages(block, progress, desc=f"encode passages {i}/{blocks}")
            if index is None:
                index = faiss_index.new_index(vectors.shape[1], self.cfg.index)
                if not index.is_trained:
                    index.train(vectors)
            index.add(vectors)
        return index

    def use_index(self, index: faiss.Index) -> None:
        self.index = faiss_index.to_gpus(index, self.cfg.gpu_fp16)
        faiss_index.set_search_parameters(self.index, self.cfg.search_params)

    def search(self, queries: list[str], k: int, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row numbers), each (n_queries, k), best first."""
        if self.index is None:
            raise RuntimeError("no index: call build_index or use_index first")
        return faiss_index.search(self.index, self.encode_queries(queries, progress), k)
