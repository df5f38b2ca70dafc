"""Corpus, QA sets, retrieval, noisy contexts and fetched assets (`data`, `retrieval`, `noise`, `fetch`)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.schema import ConfigError


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """The retrieval corpus (App. A.3: the Dec-2018 Wikipedia dump in 100-word passages)."""

    source: str = dataclasses.field(
        metadata={"help": "embedded:ovos-wiki, or a passages jsonl such as data/external/wiki-18.jsonl"})
    format: typing.Literal["ovos-summaries", "passages"] = dataclasses.field(
        metadata={"help": "pages to chunk, or ready {\"id\",\"contents\"} passages"})
    chunk_words: int = dataclasses.field(default=100, metadata={"help": "passage length in words when chunking pages"})
    max_pages: int | None = dataclasses.field(
        default=None, metadata={"help": "keep the first N pages plus every evidence page of an embedded question (ci)"})
    max_passages: int | None = dataclasses.field(
        default=None, metadata={"help": "the first N passages of a passages file, in file order (gpu-smoke; D135)"})

    def __post_init__(self):
        if self.max_passages is not None and (self.max_passages < 1 or self.format != "passages"):
            raise ConfigError(f"data.corpus.max_passages: {self.max_passages} needs format 'passages' and a value >= 1")


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """One QA dataset and the splits the studies use."""

    name: str = dataclasses.field(metadata={"help": "directory name under data/<profile>/qa/"})
    label: str = dataclasses.field(metadata={"help": "name in tables (NQ, TQA, HotpotQA, ...)"})
    format: typing.Literal["fanoutqa", "ovos-describe", "flashrag", "musique", "wiki-multihop"] = dataclasses.field(
        metadata={"help": "the source's layout, read by repro.data.loaders"})
    setting: typing.Literal["open", "distractor"] = dataclasses.field(
        metadata={"help": "retrieve from the corpus, or use the shipped paragraphs"})
    source: str = dataclasses.field(
        metadata={"help": "embedded:fanoutqa-dev, a local directory / file, or a hub dataset repo (FlashRAG)"})
    splits: dict[str, str] = dataclasses.field(
        metadata={"help": "our split -> the source's split or file (HotpotQA: test -> dev)"})
    question_types: list[str] | None = dataclasses.field(
        default=None, metadata={"help": "only these metadata.type count in retrieval quality (bridge)"})
    max_questions: int | None = dataclasses.field(
        default=None, metadata={"help": "first N questions of each split (ci)"})


@dataclasses.dataclass(frozen=True)
class DataConfig:
    corpus: CorpusConfig = dataclasses.field(metadata={"help": "the retrieval corpus"})
    datasets: list[DatasetConfig] = dataclasses.field(metadata={"help": "the QA sets, each with its source and splits"})
    split_fractions: dict[str, float] = dataclasses.field(
        metadata={"help": "hashed train/dev/test split of the embedded sets"})
    distractor_paragraphs: int = dataclasses.field(
        default=10, metadata={"help": "paragraphs per built distractor-setting question (gold + distractors)"})
    min_distractors: int = dataclasses.field(
        default=8, metadata={"help": "App. A.3: \"two gold paragraphs and 8-9 distractor paragraphs\""})

    def __post_init__(self):
        names = [d.name for d in self.datasets]
        if len(set(names)) != len(names):
            raise ConfigError(f"data.datasets: duplicate names in {names}")


@dataclasses.dataclass(frozen=True)
class RetrieverConfig:
    """A dense retriever (any transformers encoder + FAISS) or BM25."""

    method: typing.Literal["dense", "bm25"] = dataclasses.field(
        metadata={"help": "dense (an encoder and a FAISS index) or bm25 (bm25s)"})
    query_encoder: str | None = dataclasses.field(
        default=None, metadata={"help": "model dir, hub id or embedded:<name>"})
    passage_encoder: str | None = dataclasses.field(
        default=None, metadata={"help": "DPR's context encoder; None = the query encoder (E5, MiniLM)"})
    pooling: typing.Literal["cls", "mean", "pooler"] = dataclasses.field(
        default="mean", metadata={"help": "DPR: pooler; E5/MiniLM: mean"})
    query_prefix: str = dataclasses.field(default="", metadata={"help": "E5: \"query: \""})
    passage_prefix: str = dataclasses.field(default="", metadata={"help": "E5: \"passage: \""})
    passage_input: typing.Literal["contents", "title_text_pair"] = dataclasses.field(
        default="contents", metadata={"help": "DPR: (title, text) pair"})
    normalize: bool = dataclasses.field(
        default=True, metadata={"help": "L2-normalise embeddings (E5, MiniLM); DPR uses raw inner products"})
    query_max_length: int = dataclasses.field(default=64, metadata={"help": "query tokens the encoder reads"})
    passage_max_length: int = dataclasses.field(default=256, metadata={"help": "passage tokens the encoder reads"})
    batch_size: int = dataclasses.field(default=64, metadata={"help": "texts per encoder batch"})
    dtype: typing.Literal["float32", "bfloat16", "float16"] = dataclasses.field(
        default="float32", metadata={"help": "the encoder's weights"})
    index: str = dataclasses.field(
        default="Flat", metadata={"help": "FAISS index_factory string: Flat (exact), IVF4096,Flat, HNSW32, ..."})
    gpu_fp16: bool = dataclasses.field(
        default=False, metadata={"help": "the index sharded over the GPUs in fp16 (Search-R1's E5 server); false: "
                                         "fp32, exact inner products (the paper's DPR through Tevatron)"})
    search_params: dict[str, int] = dataclasses.field(default_factory=dict, metadata={"help": "e.g. nprobe, efSearch"})
    encode_block: int = dataclasses.field(
        default=100_000, metadata={"help": "passages encoded and added to the index per block"})
    k1: float = dataclasses.field(
        default=0.9, metadata={"help": "BM25 parameters (Pyserini's defaults for Wikipedia passages)"})
    b: float = dataclasses.field(
        default=0.4, metadata={"help": "BM25's b (bm25s; Lucene's default 0.75, Pyserini's 0.4)"})

    def __post_init__(self):
        if self.method == "dense" and not self.query_encoder:
            raise ConfigError("retrieval: a dense retriever needs a query_encoder")


@dataclasses.dataclass(frozen=True)
class RetrievalConfig:
    topk: int = dataclasses.field(metadata={"help": "passages per question (the paper: 5)"})
    retrievers: dict[str, RetrieverConfig] = dataclasses.field(
        metadata={"help": "name -> retriever; `default` and `agentic` name the ones the studies read"})
    default: str = dataclasses.field(
        metadata={"help": "retriever whose top-k feed the traditional-RAG studies (the paper: DPR)"})
    agentic: str = dataclasses.field(metadata={"help": "retriever of the Search-R1 study (the paper: E5)"})
    evaluate: list[str] = dataclasses.field(
        metadata={"help": "retrievers run on every open-domain split and reported in Table 8"})

    def __post_init__(self):
        for name in [self.default, self.agentic, *self.evaluate]:
            if name not in self.retrievers:
                raise ConfigError(f"retrieval: unknown retriever '{name}'; defined: {sorted(self.retrievers)}")
        if self.default not in self.evaluate:
            raise ConfigError(f"retrieval.evaluate must include the default retriever '{self.default}'")


@dataclasses.dataclass(frozen=True)
class NoiseConfig:
    """Irrelevant passages added per question for the robustness study (Figure 5)."""

    counts: list[int] = dataclasses.field(metadata={"help": "the paper: 0, 2, 4, 6, 8"})
    position: typing.Literal["append", "prepend", "random"] = dataclasses.field(
        default="append", metadata={"help": "where the irrelevant passages go among the top-k (Figure 5)"})
    seed: int = dataclasses.field(default=0, metadata={"help": "the draw of the irrelevant passages"})
    datasets: list[str] = dataclasses.field(
        default_factory=list, metadata={"help": "open-domain datasets to build noisy sets for"})
    split: str = dataclasses.field(default="test", metadata={"help": "the split the noisy contexts are built for"})


@dataclasses.dataclass(frozen=True)
class FetchConfig:
    """External assets that `python -m repro.ops.remote fetch --profile P` downloads (repro.ops.remote, D115-D118):
    each hub repo at the commit the lock file records, resolved from its main branch when it enters the lock."""

    lock: str = dataclasses.field(
        default="fetch.lock.yaml",
        metadata={"help": "the committed lock file: repo -> commit, each file's size and sha256"})
    hub: str | None = dataclasses.field(
        default=None,
        metadata={"help": "None: the Hugging Face hub; or a directory laid out like it (a mirror; --from overrides)"})
    prebuilt_index: str | None = dataclasses.field(
        default=None, metadata={"help": "retriever whose index is Search-R1's e5 Flat index (part_aa + part_ab)"})
