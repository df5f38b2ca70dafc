"""A rollout of the extractor and the contexts of the answers that score it (§3.1, Eq. 4).

A completion of the GRPO trainer is the whole rollout `<reason>r</reason><extract>e</extract><answer>o_f</answer>`
(D37, digest #12): o_f is the answer the policy writes after its own r and e, i.e. a sample from
M(· | q, P, r, e). Eq. 4 "prefills the input contexts from scratch after masking"; for the unmasked o_f context
nothing is masked, so a fresh prefill of q, P, r, e and the continuation of the rollout condition on the same
tokens, and under causal attention they give the same distribution. Only o_r and o_e need new contexts: those
of `repro.formulas.masking`, built here from the rationale and evidence the rollout contains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from repro.config import RewardsConfig
from repro.formulas import masking, tags

MASKED_TARGETS = ("rationale", "evidence")  # o_r and o_e; o_f comes from the rollout itself


@dataclasses.dataclass(frozen=True)
class Rollout:
    """The parts of one sampled completion, read leniently (D9); `answer` is o_f ("" if it wrote none)."""

    text: str
    rationale: str
    evidence: str
    answer: str
    well_formatted: bool


def parse_rollout(text: str) -> Rollout:
    parsed = tags.parse_response(text)
    return Rollout(text, parsed.rationale, parsed.evidence, parsed.answer or "", parsed.well_formatted)


def completion_text(completion) -> str:
    """The text of a TRL completion: a string, or the assistant message list of a conversational prompt."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def masked_targets(answer_subset: Sequence[str]) -> tuple[str, ...]:
    """The masked answers a reward with `answer_subset` needs (Table 3 trains on subsets), in Eq. 4's order."""
    return tuple(t for t in MASKED_TARGETS if t in answer_subset)


def answer_contexts(
    question: str, passages: str, rollout: Rollout, targets: Sequence[str], cfg: RewardsConfig
) -> list[masking.AnswerContext]:
    """The Eq. 4 contexts of `targets` (a subset of MASKED_TARGETS) for one rollout: Table 14 continued (D7) or
    Table 11's QA prompt (D148), as `cfg.masked_answer_prompt` says."""
    unknown = sorted(set(targets) - set(MASKED_TARGETS))
    if unknown:
        raise ValueError(f"only the masked answers {list(MASKED_TARGETS)} get new contexts, got {unknown}")
    contexts = masking.knowledge_masked_contexts(question, passages, rollout.rationale, rollout.evidence,
                                                 cfg.mask_mode, cfg.prefill_answer_tag,
                                                 prompt=cfg.masked_answer_prompt)
    return [contexts[t] for t in targets]
