"""One item's run through the agent loop, turn by turn, and what is measured on it.

A trajectory's context is the rendered prompt followed by each turn's response and observation, exactly
the text the agent continues at its next turn. Its records (`to_record` / `from_record`) are the per-item
trajectory files of the study and the input of the case viewer.

Measures:
- prediction: the last `<answer>` of the agent's own text (`repro.agentic.actions.final_answer`); EM is 0
  without one.
- searches: retrievals actually made (at most max_actions; a search written in the final step is not run).
- compression (with the extractor): L(retrieved) / L(evidence) summed over the trajectory's searches, where
  L(retrieved) is the length of the `Doc i(Title: t) text` block the agent would have seen without the
  extractor and L(evidence) the length of the evidence it saw instead (see `compression`).
- Eval-RAR's evaluation (D155, D156): the `<evaluate>` blocks stay in the agent's own text (in a turn's response,
  or in its `evaluation` when written by a separate step); `evaluations` are their contents (Eq. 3's S_eval),
  `evaluated_searches` the searches followed by one, `evaluation_recall` whether a golden answer is contained in
  y_eval (AR, the indicator of Eq. 4).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from repro.agentic.actions import evaluation_blocks, evaluation_text, final_answer, format_documents
from repro.formulas.metrics import answer_recall, exact_match


@dataclasses.dataclass
class Turn:
    response: str  # the agent's text of this turn, cut after its action
    action: str | None  # "search", "answer" or None (invalid)
    content: str = ""  # the sub-query or the answer
    observation: str = ""  # appended after the response: <information>…</information> or the invalid-action message
    documents: list[dict] | None = None  # retrieved passages {"id", "contents", "score"} (searches that ran)
    query: str | None = None  # q_c given to the extractor
    extraction: str | None = None  # the extractor's output (rationale + evidence)
    evidence: str | None = None  # y_e, shown to the agent instead of the documents
    final: bool = False  # the extra step after max_actions, where a search is not run
    evaluation: str | None = None  # Eval-RAR's `<evaluate>` step after the observation, when generated separately

    @property
    def searched(self) -> bool:
        return self.documents is not None


@dataclasses.dataclass
class Trajectory:
    id: str
    question: str
    golden_answers: list[str]
    prompt: str  # the rendered chat prompt the agent starts from
    turns: list[Turn] = dataclasses.field(default_factory=list)
    done: bool = False

    @property
    def context(self) -> str:
        return self.prompt + "".join(t.response + t.observation + (t.evaluation or "") for t in self.turns)

    @property
    def completion(self) -> str:
        """The agent's own text: its responses and separate evaluations, without the prompt and the observations."""
        return "".join(t.response + (t.evaluation or "") for t in self.turns)

    @property
    def prediction(self) -> str | None:
        return final_answer(self.completion)

    @property
    def em(self) -> float:
        prediction = self.prediction
        return 0.0 if prediction is None else exact_match(prediction, self.golden_answers)

    @property
    def searches(self) -> int:
        return sum(t.searched for t in self.turns)

    @property
    def evaluations(self) -> list[str]:
        return evaluation_blocks(self.completion)

    @property
    def evaluated_searches(self) -> int:
        """Searches after whose observation the agent's next text (a separate evaluation, then the next turn's
        response) holds a complete `<evaluate>` block."""
        following = [(t.evaluation or "") + (self.turns[i + 1].response if i + 1 < len(self.turns) else "")
                     for i, t in enumerate(self.turns) if t.searched]
        return sum(bool(evaluation_blocks(text)) for text in following)

    @property
    def evaluation_recall(self) -> float:
        return answer_recall(evaluation_text(self.completion), self.golden_answers)

    def to_record(self) -> dict:
        """The per-item record; a turn's `evaluation` is written only when there is one, so the records of the
        conditions without an evaluation step are as they were."""
        turns = [{k: v for k, v in dataclasses.asdict(t).items() if k != "evaluation" or v is not None}
                 for t in self.turns]
        return {"id": self.id, "question": self.question, "golden_answers": self.golden_answers,
                "prediction": self.prediction, "em": self.em, "searches": self.searches, "done": self.done,
                "prompt": self.prompt, "turns": turns}

    @classmethod
    def from_record(cls, record: dict) -> Trajectory:
        return cls(id=record["id"], question=record["question"], golden_answers=record["golden_answers"],
                   prompt=record["prompt"], turns=[Turn(**t) for t in record["turns"]], done=record["done"])


def compression(trajectory: Trajectory, length: Callable[[str], int]) -> tuple[int, int] | None:
    """(Σ L(retrieved), Σ L(evidence)) over the searches of a trajectory run with the extractor, or None if
    it made no search (no retrieved content to compress). `length` counts tokens or words (D13)."""
    searched = [t for t in trajectory.turns if t.searched]
    if not searched:
        return None
    if any(t.evidence is None for t in searched):
        raise ValueError(f"trajectory {trajectory.id} searched without the extractor: its CR is 1 by definition")
    return (sum(length(format_documents(t.documents)) for t in searched),
            sum(length(t.evidence) for t in searched))
