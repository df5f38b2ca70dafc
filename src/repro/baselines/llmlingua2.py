"""LLMLingua-2 (Pan, Wu, Jiang, Xia, Luo, Zhang, Lin, Rühle, Yang, Lin, Zhao, Qiu, Zhang, 2024, "LLMLingua-2:
Data Distillation for Efficient and Faithful Task-Agnostic Prompt Compression", Findings of ACL) through the
`llmlingua` package: a token classifier (XLM-RoBERTa-large trained on GPT-4-distilled MeetingBank labels,
microsoft/llmlingua-2-xlm-roberta-large-meetingbank) gives every word a keep probability, and the words above
the (1 - rate) percentile of each 512-token chunk are kept, in order.

    refiner = LLMLingua2(model_dir, model_id, settings, tiktoken_file)
    refiner.refine(rows)          # one Refinement per contexts row

Each passage line of the Full document (D1) is one context of `compress_prompt_llmlingua2` (token-level
filter only); the compressed lines are joined by newlines. Lines of several rows go through one call, which
gives the same result as one call per row because llmlingua thresholds every chunk on its own.

Offline: llmlingua counts GPT-3.5 tokens with tiktoken's cl100k_base, which tiktoken downloads;
`seed_tiktoken_cache` puts the packaged vocabulary where tiktoken looks first. No LLMLingua-2 weights ship
offline: `repro.assets.build_llmlingua2_standin` makes the embedded default's stand-in (MiniLM with an untrained head),
whose column is labelled "LLMLingua-2 (untrained stand-in)". Choices: docs/decisions.md D61-D63.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from repro.assets import resolve
from repro.config import LLMLingua2Config, Profile
from repro.evaluation.refiners import Refinement, Refiner
from repro.formulas.prompts import passages_document
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.io import atomic_path, model_fingerprint
from repro.registry import METHODS

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
# llmlingua merges sub-word tokens into words by the model *name*: it must contain one of these.
WORD_MERGING_NAMES = ("bert-base-multilingual-cased", "xlm-roberta-large")


def tiktoken_cache_dir() -> Path:
    """Where tiktoken reads its download cache (`tiktoken.load.read_file_cached`): TIKTOKEN_CACHE_DIR, else
    DATA_GYM_CACHE_DIR, else data-gym-cache in the temporary directory."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            if not os.environ[variable]:
                raise ValueError(f"{variable} is empty, which turns tiktoken's cache off: llmlingua would download "
                                 f"cl100k_base; unset it or name a directory")
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_tiktoken_cache(vocabulary: str | os.PathLike) -> Path:
    """Copy cl100k_base.tiktoken where tiktoken looks for its download (atomically: processes may seed at once), so
    `tiktoken.encoding_for_model("gpt-3.5-turbo")` needs no network."""
    target = tiktoken_cache_dir() / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    if not target.exists():
        with atomic_path(target) as tmp:
            shutil.copyfile(vocabulary, tmp)
    return target


def check_model_name(model: str) -> None:
    if not any(name in model for name in WORD_MERGING_NAMES):
        raise ValueError(f"{model}: llmlingua merges tokens into words only for models whose name contains one "
                         f"of {list(WORD_MERGING_NAMES)}; rename the directory accordingly")


class LLMLingua2(Refiner):
    """LLMLingua-2 over the passage lines of each row's Full document."""

    def __init__(self, model: str, model_id: str, settings: LLMLingua2Config, tiktoken_file: str,
                 device: str | None = None):
        import torch
        from llmlingua import PromptCompressor

        check_model_name(model)
        seed_tiktoken_cache(tiktoken_file)
        self.model_id, self.settings = model_id, settings
        self.compressor = PromptCompressor(
            model_name=model, use_llmlingua2=True,
            device_map=device or ("cuda" if torch.cuda.is_available() else "cpu"),
            model_config={"trust_remote_code": False, "use_safetensors": True},
            llmlingua2_config={"max_batch_size": settings.batch_size})

    def compress(self, documents: Sequence[str]) -> list[str]:
        """Each document's lines compressed by the token classifier, lines kept apart."""
        lines = [[line for line in doc.split("\n") if line.strip()] for doc in documents]
        flat = [line for doc in lines for line in doc]
        if not flat:
            return ["" for _ in documents]
        result = self.compressor.compress_prompt_llmlingua2(
            flat, rate=self.settings.rate, force_tokens=list(self.settings.force_tokens),
            use_context_level_filter=False)
        compressed, used = [], 0
        for doc in lines:
            kept = [c.strip() for c in result["compressed_prompt_list"][used : used + len(doc)]]
            compressed.append("\n".join(c for c in kept if c))
            used += len(doc)
        return compressed

    def refine(self, rows: Sequence[dict]) -> list[Refinement]:
        return [Refinement(text) for text in self.compress([passages_document(row) for row in rows])]

    def config(self) -> dict:
        settings = dataclasses.asdict(self.settings)
        for unused in ("model", "standin", "tiktoken", "batch_size"):
            settings.pop(unused)
        return {"refiner": "llmlingua2", "model": self.model_id, "token_level_only": True, **settings}


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> LLMLingua2:
    """The registry's builder (repro.registry): the checkpoint its row's `model_field` names (`model`, or the
    untrained `standin`) under baselines.llmlingua2."""
    settings = cfg.baselines.llmlingua2
    model = resolve(getattr(settings, METHODS[key].model_field), cfg.name)
    return LLMLingua2(model, model_fingerprint(model), settings, resolve(settings.tiktoken, cfg.name))
