"""Search-R1's text protocol (PeterGriffinJin/Search-R1, `search_r1/llm_agent/generation.py` and
`verl/utils/reward_score/qa_em.py`): how a turn is cut and read, what is appended after it, and which answer
is scored.

A turn is cut after the first `</search>` (else the first `</answer>`); its action is the first
`<search>…</search>` or `<answer>…</answer>`. A search is answered by `\\n\\n<information>…</information>\\n\\n`
holding `Doc i(Title: t) text` lines; anything else gets the fixed invalid-action message.

Eval-RAR (seed 003) keeps this protocol and adds an `<evaluate>…</evaluate>` block after each search (its
Algorithm 1 and App. A.1 prompt). `AgentProtocol` names what differs between the two: the prompt, and where the
evaluation is written (D155): at the start of the next turn, whose stops stay `</search>` / `</answer>`
("in_turn"), or by a generation of its own that stops at `</evaluate>` ("separate", Algorithm 1 as printed).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from repro.formulas.prompts import eval_rar_prompt, search_r1_prompt

ACTION_STOPS = ("</search>", "</answer>")
INVALID_ACTION_MESSAGE = (
    "\nMy previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)

_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_EVALUATE = re.compile(r"<evaluate>(.*?)</evaluate>", re.DOTALL)
EVALUATION_STOP = "</evaluate>"  # ends Algorithm 1's evaluation step y_en = <evaluate> e_n </evaluate> ("separate")
EvaluationStep = Literal["in_turn", "separate"]


@dataclasses.dataclass(frozen=True)
class AgentProtocol:
    """What the agent is told (`prompt`: question → the user turn) and whether an `<evaluate>` block follows each
    search, and how (`evaluation`: None, "in_turn" or "separate"). Turns are cut, parsed and answered alike."""

    name: str
    prompt: Callable[[str], str]
    evaluation: EvaluationStep | None = None


SEARCH_R1 = AgentProtocol("search_r1", search_r1_prompt)


def eval_rar_protocol(evaluation: EvaluationStep = "in_turn") -> AgentProtocol:
    """Eval-RAR's App. A.1 prompt with its evaluation step written `evaluation` ("in_turn" or "separate")."""
    if evaluation not in ("in_turn", "separate"):
        raise ValueError(f"evaluation must be 'in_turn' or 'separate', got {evaluation!r}")
    return AgentProtocol("eval_rar", eval_rar_prompt, evaluation)


@dataclasses.dataclass(frozen=True)
class Action:
    """A parsed turn: `kind` is None for an invalid action (no tag pair, or a blank sub-query)."""

    kind: Literal["search", "answer"] | None
    content: str = ""


def cut_response(text: str) -> str:
    """The turn as Search-R1 keeps it: up to the first `</search>` if there is one, else up to the first
    `</answer>`, else all of it (a backend that ignores stop strings then behaves like one that honours them)."""
    for stop in ACTION_STOPS:
        if stop in text:
            return text.split(stop, 1)[0] + stop
    return text


def parse_action(response: str) -> Action:
    """The first `<search>…</search>` or `<answer>…</answer>` of a turn (contents stripped). A search with a
    blank query is invalid: there is nothing to retrieve."""
    match = _ACTION.search(response)
    if match is None:
        return Action(None)
    kind, content = match.group(1), match.group(2).strip()
    if kind == "search" and not content:
        return Action(None)
    return Action(kind, content)


def step_reasoning(response: str) -> str:
    """y_t of Algorithm 2: the `<think>` contents of the turn before its action (joined by newlines), or,
    when the agent wrote no `<think>`, the free text before the action tag."""
    match = _ACTION.search(response)
    before = response[: match.start()] if match else response
    spans = [s.strip() for s in _THINK.findall(before)]
    if spans:
        return "\n".join(s for s in spans if s)
    return re.sub(r"</?think>", " ", before).strip()


def passage_title_text(document: Mapping[str, str]) -> tuple[str, str]:
    """Search-R1's split of `contents`: the first line is the title (quotes kept), the rest the text."""
    title, _, text = str(document["contents"]).partition("\n")
    return title, text


def format_documents(documents: Sequence[Mapping[str, str]]) -> str:
    """`Doc i(Title: t) text` per retrieved passage, one per line, as Search-R1's `_passages2string`."""
    lines = []
    for i, document in enumerate(documents, start=1):
        title, text = passage_title_text(document)
        lines.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(lines)


def information_block(text: str) -> str:
    """The observation appended after a search: the retrieved documents (or, with the extractor, the
    evidence that replaces them) between `<information>` tags."""
    return f"\n\n<information>{text.strip()}</information>\n\n"


def final_answer(completion: str) -> str | None:
    """The scored answer: the content of the last complete `<answer>…</answer>` in the agent's own text,
    stripped; None when there is none. Search-R1 scores prompt + completion and so needs two matches (its
    prompt's example `<answer> Beijing </answer>` is the first); scoring the completion alone needs one."""
    answers = _ANSWER.findall(completion)
    return answers[-1].strip() if answers else None


def cut_evaluation(text: str) -> str:
    """A separate evaluation step as kept: up to the first `</evaluate>` if there is one, else all of it."""
    return text.split(EVALUATION_STOP, 1)[0] + EVALUATION_STOP if EVALUATION_STOP in text else text


def evaluation_blocks(completion: str) -> list[str]:
    """S_eval(y) of Eval-RAR Eq. 3: the contents of the complete `<evaluate>…</evaluate>` blocks of the agent's own
    text, in order, stripped."""
    return [block.strip() for block in _EVALUATE.findall(completion)]


def evaluation_text(completion: str) -> str:
    """y_eval of Eq. 3: the evaluation blocks concatenated, one per line (the words of two blocks are not glued)."""
    return "\n".join(evaluation_blocks(completion))
