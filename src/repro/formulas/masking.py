"""Knowledge-token masking (§3.1, Eq. 4): the three input contexts that answer a sampled response.

    o_r = M_G(· | q, P, r, X)      the evidence e is masked           -> quality of the rationale
    o_e = M_G(· | q, X, X, e)      the passages P and rationale r are masked -> quality of the evidence
    o_f = M_G(· | q, P, r, e)      the full context

Masking is *hard*: masked spans are taken out of the input text and each context is prefilled from scratch,
so no hidden state has seen them. Each context is the extraction prompt (Table 14) as the user turn, followed
by an assistant turn that already holds the (masked) response and opens the answer (D7):

    user:      Table 14 with Question: q and Passages: P        (P masked for o_e)
    assistant: <reason>r</reason><extract>e</extract><answer>   (r masked for o_e, e masked for o_r)

What a masked span becomes is `mask_mode` (D6): "empty_tags" removes the content and keeps its tags and the
"Passages:" label (default); "drop" removes tags/label too; "placeholder" puts MASK_PLACEHOLDER in its place.
The instruction text is never changed.

The other reading of #14 (`prompt="table11"`, `rewards.masked_answer_prompt`, D148): each context is Table 11's QA
prompt, whose `{document}` holds the parts Eq. 4 leaves visible (P and r for o_r, e for o_e), and the model answers
after "Answer:" with nothing prefilled; o_e is then exactly the QA generator's input at inference, M_G(q, e).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from repro.formulas import prompts

MaskMode = Literal["empty_tags", "drop", "placeholder"]
MASK_MODES: tuple[str, ...] = ("empty_tags", "drop", "placeholder")
AnswerPrompt = Literal["table14", "table11"]
ANSWER_PROMPTS: tuple[str, ...] = ("table14", "table11")
MASK_PLACEHOLDER = "[masked]"
TARGETS = ("rationale", "evidence", "full")  # o_r, o_e, o_f; the same order as repro.formulas.rewards.ANSWER_KEYS

_MASKED_SPANS = {  # target -> spans hidden from it
    "rationale": frozenset({"evidence"}),
    "evidence": frozenset({"passages", "rationale"}),
    "full": frozenset(),
}


@dataclasses.dataclass(frozen=True)
class AnswerContext:
    """One input context of Eq. 4: chat turns plus the assistant's prefilled opening."""

    target: str  # "rationale" (o_r), "evidence" (o_e) or "full" (o_f)
    messages: tuple[dict[str, str], ...]  # system (optional) and user turns
    assistant_prefix: str  # the assistant turn so far; the model continues it

    def as_messages(self) -> list[dict[str, str]]:
        """Turns with the prefix as a final assistant message (for `continue_final_message=True` engines)."""
        return [*self.messages, {"role": "assistant", "content": self.assistant_prefix}]

    def render(self, tokenizer) -> str:
        """The exact text to prefill: chat template with generation prompt, then the assistant prefix."""
        return prompts.render_chat(tokenizer, self.messages, self.assistant_prefix)

    def token_ids(self, tokenizer) -> list[int]:
        """Token ids of `render` (the template already holds the special tokens, so none are added)."""
        return list(tokenizer.encode(self.render(tokenizer), add_special_tokens=False))


def _check_mode(mode: str) -> None:
    if mode not in MASK_MODES:
        raise ValueError(f"mask_mode must be one of {list(MASK_MODES)}, got {mode!r}")


def _tagged(tag: str, content: str, masked: bool, mode: MaskMode) -> str:
    if not masked:
        return f"<{tag}>{content}</{tag}>"
    if mode == "drop":
        return ""
    return f"<{tag}>{MASK_PLACEHOLDER if mode == 'placeholder' else ''}</{tag}>"


def assistant_prefix(
    rationale: str, evidence: str, target: str, mode: MaskMode = "empty_tags", prefill_answer_tag: bool = True
) -> str:
    """The assistant turn of the context for `target`: rationale and evidence in their tags, the masked ones
    replaced according to `mode`, then `<answer>` when `prefill_answer_tag`."""
    _check_mode(mode)
    hidden = _MASKED_SPANS[_check_target(target)]
    text = _tagged("reason", rationale, "rationale" in hidden, mode) + _tagged(
        "extract", evidence, "evidence" in hidden, mode
    )
    return text + ("<answer>" if prefill_answer_tag else "")


def _check_target(target: str) -> str:
    if target not in _MASKED_SPANS:
        raise ValueError(f"target must be one of {list(TARGETS)}, got {target!r}")
    return target


def user_prompt(question: str, passages: str, target: str, mode: MaskMode = "empty_tags") -> str:
    """The Table 14 prompt for `target`, its passages masked according to `mode` when `target` is o_e."""
    _check_mode(mode)
    if "passages" not in _MASKED_SPANS[_check_target(target)]:
        return prompts.evidence_extraction_prompt(question, passages)
    if mode == "placeholder":
        return prompts.evidence_extraction_prompt(question, MASK_PLACEHOLDER)
    text = prompts.evidence_extraction_prompt(question, "")
    return text.removesuffix("\nPassages: ") if mode == "drop" else text.rstrip(" ")


def qa_document(passages: str, rationale: str, evidence: str, target: str) -> str:
    """Table 11's `{document}` for `target` (D148): the parts of (P, r, e) that Eq. 4 leaves visible to it, in that
    order, one per line; an empty part is left out."""
    hidden = _MASKED_SPANS[_check_target(target)]
    parts = {"passages": passages, "rationale": rationale, "evidence": evidence}
    return "\n".join(text for span, text in parts.items() if span not in hidden and text)


def knowledge_masked_contexts(
    question: str,
    passages: str | Sequence[prompts.Passage],
    rationale: str,
    evidence: str,
    mode: MaskMode = "empty_tags",
    prefill_answer_tag: bool = True,
    system: str | None = prompts.DEFAULT_SYSTEM_PROMPT,
    prompt: AnswerPrompt = "table14",
) -> dict[str, AnswerContext]:
    """The three contexts of Eq. 4 for one sampled response (q, P, r, e), keyed "rationale" (o_r),
    "evidence" (o_e) and "full" (o_f). `passages` is the formatted passages string or the passages
    themselves (formatted with repro.formulas.prompts.format_passages); `rationale` and `evidence` are the texts
    inside <reason> and <extract> (see repro.formulas.tags). `prompt="table11"` builds Table 11's QA prompt over
    `qa_document` instead, with nothing prefilled; `mode` and `prefill_answer_tag` then have no effect (D148)."""
    if not isinstance(rationale, str) or not isinstance(evidence, str):
        raise TypeError("rationale and evidence must be strings (use '' for an empty span)")
    _check_mode(mode)
    formatted = passages if isinstance(passages, str) else prompts.format_passages(passages)
    if prompt == "table11":
        return {target: AnswerContext(target, tuple(prompts.chat_messages(prompts.rag_qa_prompt(
            question, qa_document(formatted, rationale, evidence, target)), system)), "") for target in TARGETS}
    if prompt != "table14":
        raise ValueError(f"prompt must be one of {list(ANSWER_PROMPTS)}, got {prompt!r}")
    return {
        target: AnswerContext(
            target=target,
            messages=tuple(prompts.chat_messages(user_prompt(question, formatted, target, mode), system)),
            assistant_prefix=assistant_prefix(rationale, evidence, target, mode, prefill_answer_tag),
        )
        for target in TARGETS
    }
