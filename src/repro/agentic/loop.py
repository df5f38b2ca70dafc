"""The Search-R1 agent loop, with or without the evidence extractor (Algorithm 2), batched across items.

At each step every unfinished trajectory generates one turn (one `generate` call for all of them); the turn
is cut after its action. A search runs one retrieval call for all searching items of the step and, with the
extractor, one extraction call on their context-aware queries; the agent then sees the documents, or the
evidence in their place, between `<information>` tags (truncated to `max_obs_tokens` tokens as in Search-R1).
An answer ends the trajectory; anything else gets the invalid-action message. After `max_actions` steps an
unfinished trajectory gets one final step in which a search is not run (Search-R1's last rollout with
`do_search=False`); it ends there, answered or not.

The protocol (`repro.agentic.actions.AgentProtocol`) sets the agent's prompt: Search-R1's, or Eval-RAR's, whose
`<evaluate>` block after each search is either part of the next turn (nothing else changes) or, "separate", one
more generation call for all items that searched in the step, right after their observations, stopped at
`</evaluate>` and appended to the context (Eval-RAR's Algorithm 1, lines 17-18); it is not parsed for an action
and does not count as one (D155, D156).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tqdm.auto import tqdm

from repro.agentic.actions import (ACTION_STOPS, EVALUATION_STOP, INVALID_ACTION_MESSAGE, SEARCH_R1, AgentProtocol,
                                   cut_evaluation, cut_response, format_documents, information_block, parse_action,
                                   step_reasoning)
from repro.agentic.extractor import EvidenceExtractor, compose_query
from repro.agentic.search import Search
from repro.agentic.trajectory import Trajectory, Turn
from repro.formulas.prompts import chat_messages, render_chat
from repro.generation import GenerationParams, Generator


@dataclasses.dataclass(frozen=True)
class AgentSettings:
    max_actions: int = 4  # §4.7 "the maximum number of actions"; Search-R1's max_turns
    topk: int = 3  # passages per search (Search-R1's default)
    max_new_tokens: int = 500  # agent tokens per turn (Search-R1's max_response_length)
    max_obs_tokens: int = 500  # observation tokens kept (Search-R1's max_obs_length)
    batch_size: int = 8  # prompts per forward batch (transformers backend)

    def __post_init__(self):
        bad = [f.name for f in dataclasses.fields(self) if getattr(self, f.name) < 1]
        if bad:
            raise ValueError(f"agent settings must be >= 1: {bad}")


def agent_prompt(tokenizer, question: str, protocol: AgentProtocol = SEARCH_R1) -> str:
    """The protocol's template (Search-R1's by default) as the single user turn of the agent's chat template, with
    the template's own default system message (as Search-R1 trains and infers: no system message is passed)."""
    return render_chat(tokenizer, chat_messages(protocol.prompt(question), system=None))


def truncate_tokens(tokenizer, text: str, max_tokens: int) -> str:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= max_tokens else tokenizer.decode(ids[:max_tokens])


def run_agent(items: Sequence[dict], agent: Generator, tokenizer, search: Search, settings: AgentSettings,
              extractor: EvidenceExtractor | None = None, progress: bool = True,
              desc: str = "agent steps", protocol: AgentProtocol = SEARCH_R1) -> list[Trajectory]:
    """Trajectories of `items` (QA rows: id, question, golden_answers), in input order. `tokenizer` is the
    agent's (chat template and observation truncation)."""
    trajectories = [Trajectory(str(item["id"]), item["question"], list(item["golden_answers"]),
                               agent_prompt(tokenizer, item["question"], protocol)) for item in items]
    params = GenerationParams(max_new_tokens=settings.max_new_tokens, stop=ACTION_STOPS, include_stop=True,
                              batch_size=settings.batch_size)
    evaluation_params = dataclasses.replace(params, stop=(EVALUATION_STOP,))
    steps = tqdm(range(settings.max_actions + 1), desc=desc, unit="step", disable=not progress)
    for step in steps:
        active = [t for t in trajectories if not t.done]
        if not active:
            break
        final = step == settings.max_actions
        responses = agent.generate([t.context for t in active], params)
        turns = [_turn(cut_response(r), final) for r in responses]
        searching = [(t, turn) for t, turn in zip(active, turns) if turn.action == "search" and not final]
        _search(searching, search, settings.topk, extractor)
        for trajectory, turn in zip(active, turns):
            if not final and turn.observation:
                turn.observation = truncate_tokens(tokenizer, turn.observation, settings.max_obs_tokens)
            trajectory.turns.append(turn)
            trajectory.done = final or turn.action == "answer"
        if protocol.evaluation == "separate" and searching:
            evaluations = agent.generate([t.context for t, _ in searching], evaluation_params)
            for (_, turn), evaluation in zip(searching, evaluations):
                turn.evaluation = cut_evaluation(evaluation)
        steps.set_postfix(active=len(active), searches=len(searching))
    return trajectories


def _turn(response: str, final: bool) -> Turn:
    action = parse_action(response)
    observation = INVALID_ACTION_MESSAGE if action.kind is None and not final else ""
    return Turn(response=response, action=action.kind, content=action.content, observation=observation, final=final)


def _search(searching: list[tuple[Trajectory, Turn]], search: Search, topk: int,
            extractor: EvidenceExtractor | None) -> None:
    """Retrieve for every searching turn of a step (one call), extract (one call), and set the observations."""
    if not searching:
        return
    hits = search.search([turn.content for _, turn in searching], topk)
    if len(hits) != len(searching):
        raise RuntimeError(f"the search returned {len(hits)} result lists for {len(searching)} queries")
    for (_, turn), documents in zip(searching, hits):
        turn.documents = documents
        turn.observation = information_block(format_documents(documents))
    if extractor is None:
        return
    queries = [compose_query(t.question, step_reasoning(turn.response), turn.content) for t, turn in searching]
    for (_, turn), extraction in zip(searching, extractor.extract(queries, hits)):
        turn.query, turn.extraction, turn.evidence = extraction.query, extraction.output, extraction.evidence
        turn.observation = information_block(extraction.evidence)
