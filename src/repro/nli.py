"""An MNLI-style classifier as the entailment scorer of EviNote-RAG's R_EQR (seed 002 Eq. 4; D126).

The scorer is loaded once by whoever trains or evaluates and passed into the reward functions of repro.formulas.rewards,
which never load a model. EviNote-RAG's released code uses microsoft/deberta-v2-xlarge-mnli (labels contradiction,
neutral, entailment); the embedded default is `embedded:nli-untrained-minilm` (repro.assets), a MiniLM encoder
with an UNTRAINED 3-label head in the same label order: it runs this code path, its probabilities are noise.

    >>> nli = NLIScorer("microsoft/deberta-v2-xlarge-mnli")
    >>> nli(["Jupiter is the largest planet in the solar system."],
    ...     ['Jupiter is the answer to the question:"What is the largest planet in the solar system?"'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

NLI_LABELS = ("contradiction", "neutral", "entailment")  # MNLI order of deberta-*-mnli and of the stand-in


def entailment_index(id2label: Mapping[int, str]) -> int:
    """The class index whose label starts with "entail" (case-insensitive)."""
    found = [int(i) for i, label in id2label.items() if str(label).lower().startswith("entail")]
    if len(found) != 1:
        raise ValueError(f"expected exactly one entailment label in the NLI model's id2label, got {dict(id2label)}")
    return found[0]


class NLIScorer:
    """P(entailment | premise, hypothesis) of a sequence-classification model, in batches, without gradients."""

    def __init__(self, model_path: str, batch_size: int = 16, max_length: int = 512, device: str = "cpu"):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForSequenceClassification.from_pretrained(model_path).to(device).eval()
        self.entailment = entailment_index(self.model.config.id2label)
        self.batch_size, self.max_length, self.device = batch_size, max_length, device

    @torch.no_grad()
    def __call__(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[float]:
        if len(premises) != len(hypotheses):
            raise ValueError(f"{len(premises)} premises for {len(hypotheses)} hypotheses")
        scores: list[float] = []
        for start in range(0, len(premises), self.batch_size):
            batch = self.tokenizer(list(premises[start : start + self.batch_size]),
                                   list(hypotheses[start : start + self.batch_size]), padding=True,
                                   truncation=True, max_length=self.max_length, return_tensors="pt").to(self.device)
            probs = self.model(**batch).logits.float().softmax(dim=-1)[:, self.entailment]
            scores.extend(probs.tolist())
        return scores
