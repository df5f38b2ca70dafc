"""Batched text encoding with any transformers encoder.

One class covers the paper's and the embedded encoders:
- DPR (`facebook/dpr-question_encoder-single-nq-base` / `...ctx_encoder...`): pooling "pooler" (DPR's
  pooler output is the [CLS] vector), passages encoded as the (title, text) pair, no normalisation;
- E5 (`intfloat/e5-base-v2`): prefixes "query: " / "passage: ", mean pooling, L2 normalisation;
- sentence-transformers models (all-MiniLM-L6-v2): mean pooling, L2 normalisation.
Weights are loaded as safetensors only and never with remote code.

An encoder given several devices (`all_devices()`: every visible GPU, for the corpus) holds one copy of the model
on each and deals its batches out to them, one thread per device; the batches are those one device would encode,
so the vectors are one device's, in input order.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from tqdm.auto import tqdm

POOLINGS = ("cls", "mean", "pooler")


def all_devices() -> list[str]:
    """Every GPU this process sees, or the CPU."""
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]


def load_encoder_model(ref: str, dtype: str = "float32"):
    """Tokenizer and model for an encoder directory or hub id. DPR checkpoints share one model_type for
    both towers, so their class comes from `config.architectures` (AutoModel would load a context
    encoder's weights into a question-encoder class and silently drop them)."""
    import transformers
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(ref)
    cls = AutoModel
    if config.model_type == "dpr":
        cls = getattr(transformers, (config.architectures or ["DPRQuestionEncoder"])[0])
    model = cls.from_pretrained(ref, use_safetensors=True, dtype=getattr(torch, dtype))
    return AutoTokenizer.from_pretrained(ref), model.eval()


class TextEncoder:
    """Encode texts (or (title, text) pairs) into float32 vectors, `batch_size` at a time.
    `prefix` and `max_length` are per call, so one model serves queries and passages (E5, MiniLM).

    Texts are encoded in order of length to minimise padding and returned in input order. `devices` (default: one
    GPU, or the CPU) each get a copy of the model, and the batches are dealt out to them in turn (module docstring).
    """

    def __init__(self, ref: str, pooling: str, normalize: bool = True, batch_size: int = 64, dtype: str = "float32",
                 devices: Sequence[str] | None = None):
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")
        self.tokenizer, self.model = load_encoder_model(ref, dtype)
        self.devices = list(devices or all_devices()[:1])
        # copies made on the CPU, before the first moves; a fast tokenizer is not to be shared between threads
        copies = [(copy.deepcopy(self.tokenizer), copy.deepcopy(self.model).to(d)) for d in self.devices[1:]]
        self.replicas = [(self.tokenizer, self.model.to(self.devices[0])), *copies]
        self.pooling, self.normalize, self.batch_size = pooling, normalize, batch_size

    @torch.inference_mode()
    def _encode_batch(self, batch: list, prefix: str, max_length: int, replica: int = 0) -> np.ndarray:
        tokenizer, model = self.replicas[replica]
        if isinstance(batch[0], tuple):
            first, second = zip(*batch)
            inputs = tokenizer([prefix + t for t in first], list(second), padding=True, truncation=True,
                               max_length=max_length, return_tensors="pt")
        else:
            inputs = tokenizer([prefix + t for t in batch], padding=True, truncation=True,
                               max_length=max_length, return_tensors="pt")
        inputs = inputs.to(self.devices[replica])
        out = model(**inputs)
        if self.pooling == "pooler":
            vectors = out.pooler_output
        elif self.pooling == "cls":
            vectors = out.last_hidden_state[:, 0]
        else:
            mask = inputs["attention_mask"].unsqueeze(-1).to(out.last_hidden_state.dtype)
            vectors = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors.float().cpu().numpy()

    def encode(self, texts: list[str] | list[tuple[str, str]], prefix: str = "", max_length: int = 256,
               progress: bool = True, desc: str = "encode") -> np.ndarray:
        """Vectors of `texts` (strings, or (first, second) pairs encoded as one sequence pair), each
        prefixed with `prefix` and truncated to `max_length` tokens."""
        if not texts:
            raise ValueError("nothing to encode")
        order = np.argsort([-len("".join(t)) if isinstance(t, tuple) else -len(t) for t in texts], kind="stable")
        batches = [order[start:start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        with tqdm(total=len(texts), desc=desc, unit="text", disable=not progress) as bar:

            def encode_share(replica: int) -> list[np.ndarray]:
                """Batches replica, replica + R, ... on the replica's device (R replicas)."""
                vectors = []
                for idx in batches[replica::len(self.replicas)]:
                    vectors.append(self._encode_batch([texts[i] for i in idx], prefix, max_length, replica))
                    bar.update(len(idx))
                return vectors

            if len(self.replicas) == 1:
                shares = [encode_share(0)]
            else:
                with ThreadPoolExecutor(len(self.replicas)) as threads:
                    shares = list(threads.map(encode_share, range(len(self.replicas))))
            chunks = [shares[b % len(shares)][b // len(shares)] for b in range(len(batches))]
            out = np.empty((len(texts), chunks[0].shape[1]), dtype=np.float32)
            out[order] = np.concatenate(chunks)
        return out
