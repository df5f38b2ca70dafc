"""Batched text encoding with any transformers encoder.

One class covers the paper's and the embedded encoders:
- DPR (`facebook/dpr-question_encoder-single-nq-base` / `...ctx_encoder...`): pooling "pooler" (DPR's
  pooler output is the [CLS] vector), passages encoded as the (title, text) pair, no normalisation;
- E5 (`intfloat/e5-base-v2`): prefixes "query: " / "passage: ", mean pooling, L2 normalisation;
- sentence-transformers models (all-MiniLM-L6-v2): mean pooling, L2 normalisation.
Weights are loaded as safetensors only and never with remote code.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm.auto import tqdm

POOLINGS = ("cls", "mean", "pooler")


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

    Texts are encoded in order of length to minimise padding and returned in input order.
    """

    def __init__(self, ref: str, pooling: str, normalize: bool = True, batch_size: int = 64, dtype: str = "float32",
                 device: str | None = None):
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")
        self.tokenizer, self.model = load_encoder_model(ref, dtype)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.pooling, self.normalize, self.batch_size = pooling, normalize, batch_size

    @torch.inference_mode()
    def _encode_batch(self, batch: list, prefix: str, max_length: int) -> np.ndarray:
        if isinstance(batch[0], tuple):
            first, second = zip(*batch)
            inputs = self.tokenizer([prefix + t for t in first], list(second), padding=True, truncation=True,
                                    max_length=max_length, return_tensors="pt")
        else:
            inputs = self.tokenizer([prefix + t for t in batch], padding=True, truncation=True,
                                    max_length=max_length, return_tensors="pt")
        inputs = inputs.to(self.device)
        out = self.model(**inputs)
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
        with tqdm(total=len(texts), desc=desc, unit="text", disable=not progress) as bar:
            chunks = []
            for start in range(0, len(texts), self.batch_size):
                idx = order[start:start + self.batch_size]
                chunks.append(self._encode_batch([texts[i] for i in idx], prefix, max_length))
                bar.update(len(idx))
            out = np.empty((len(texts), chunks[0].shape[1]), dtype=np.float32)
            out[order] = np.concatenate(chunks)
        return out
