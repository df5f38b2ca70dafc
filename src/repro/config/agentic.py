"""The agentic study (`agentic`; Tables 5-6)."""

from __future__ import annotations

import dataclasses
import typing

from repro.config.models import check_generator_options
from repro.config.schema import ConfigError


# The agentic study's conditions: the agent alone (Search-R1's prompt), with the extractor (Algorithm 2), and the
# same agent prompted zero-shot with Eval-RAR's App. A.1 template (issue #18, D155).
AgenticCondition = typing.Literal["without", "with", "eval_rar"]


@dataclasses.dataclass(frozen=True)
class AgenticConfig:
    """Search-R1 with and without the evidence extractor (§4.7-4.8, Algorithm 2, Tables 5-6; repro.agentic), and
    the same agent prompted with Eval-RAR's template. The paper gives the agents, E5 over wiki-18, 4 actions and 500
    sampled items per dataset; the rest follows Search-R1's evaluation settings or is ours (docs/decisions.md)."""

    datasets: list[str] = dataclasses.field(
        metadata={"help": "data.datasets entries (Table 5's columns); the agent always retrieves from the corpus"})
    conditions: list[AgenticCondition] = dataclasses.field(
        default_factory=lambda: ["without", "with", "eval_rar"],
        metadata={"help": "without the extractor, with it, and with Eval-RAR's prompt"})
    evaluate_step: typing.Literal["in_turn", "separate"] = dataclasses.field(
        default="in_turn", metadata={"help": "where eval_rar's <evaluate> is written (D155)"})
    split: str = dataclasses.field(
        default="test",
        metadata={"help": "the paper's \"test or development set\" (HotpotQA/2Wiki/MuSiQue map test -> dev)"})
    n_items: int | None = dataclasses.field(
        default=500, metadata={"help": "items sampled per dataset with `seed` (None: all)"})
    seed: int = dataclasses.field(default=0, metadata={"help": "the draw of the items"})
    max_actions: int = dataclasses.field(
        default=4, metadata={"help": "§4.7; Search-R1's max_turns, followed by one final step without search"})
    topk: int = dataclasses.field(
        default=3, metadata={"help": "passages per search: Search-R1's default; the paper does not state it (#39)"})
    max_new_tokens: int = dataclasses.field(
        default=500, metadata={"help": "agent tokens per turn (Search-R1's max_response_length)"})
    max_obs_tokens: int = dataclasses.field(
        default=500, metadata={"help": "observation tokens kept per turn (Search-R1's max_obs_length)"})
    extractor: str | None = dataclasses.field(
        default=None,
        metadata={"help": "null: models.released_extractor if set, else models.extractor; or a checkpoint dir"})
    extractor_max_new_tokens: int = dataclasses.field(
        default=768, metadata={"help": "the extractor's reasoning + evidence, stopped at </extract>"})
    backend: typing.Literal["transformers", "vllm"] = dataclasses.field(
        default="transformers", metadata={"help": "the engine of the agents and the extractor"})
    batch_size: int = dataclasses.field(
        default=8, metadata={"help": "prompts per forward batch (transformers backend)"})
    agent_options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "extra make_generator kwargs"})
    extractor_options: dict[str, typing.Any] = dataclasses.field(
        default_factory=dict, metadata={"help": "e.g. vLLM memory share"})
    search_url: str | None = dataclasses.field(
        default=None,
        metadata={"help": "a Search-R1-compatible POST /retrieve URL; null: retrieval.agentic in process"})

    def __post_init__(self):
        positive = ("max_actions", "topk", "max_new_tokens", "max_obs_tokens", "extractor_max_new_tokens", "batch_size")
        if not self.datasets or any(getattr(self, name) < 1 for name in positive) or (self.n_items or 1) < 1:
            raise ConfigError(f"agentic: need datasets, and {', '.join(positive)} and n_items >= 1")
        if not self.conditions or len(set(self.conditions)) != len(self.conditions):
            raise ConfigError(f"agentic.conditions: need one or more distinct conditions, got {self.conditions}")
        check_generator_options(self.agent_options, self.backend, "agentic.agent_options")
        check_generator_options(self.extractor_options, self.backend, "agentic.extractor_options")
