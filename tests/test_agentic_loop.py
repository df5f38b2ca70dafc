"""The agent loop (Search-R1 protocol + Algorithm 2, and Eval-RAR's protocol). A scripted policy decides the agent's
turns, for control flow only; retrieval (BM25 over a small corpus) and the extractor (the ci model, the tiny random
Llama) are real and wrapped in spies that record their calls."""

import pytest
from transformers import AutoTokenizer

from repro.agentic.actions import (ACTION_STOPS, INVALID_ACTION_MESSAGE, eval_rar_protocol, format_documents,
                                   information_block)
from repro.agentic.extractor import EvidenceExtractor, compose_query
from repro.agentic.loop import AgentSettings, agent_prompt, run_agent
from repro.agentic.search import LocalSearch
from repro.agentic.trajectory import Trajectory, compression
from repro.data.corpus import PassageStore, make_contents
from repro.formulas.prompts import chat_messages, eval_rar_prompt, render_chat
from repro.generation import Generator
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import write_jsonl
from repro.retrieval.bm25 import BM25Retriever

PAGES = {
    "Teide National Park": "Teide National Park is a national park located in Tenerife in the Canary Islands.",
    "Garajonay National Park": "Garajonay National Park is located on the island of La Gomera, Canary Islands.",
    "Britney Spears": "Britney Spears was born in McComb, Mississippi, and launched a perfume brand.",
    "Curious (fragrance)": "Curious is a women's fragrance by Britney Spears for Elizabeth Arden.",
    "Mona Lisa": "The Mona Lisa is a portrait painting by Leonardo da Vinci kept in the Louvre.",
}
TEIDE = {"id": "teide", "question": "Where is Teide National Park?", "golden_answers": ["Tenerife"]}
CURIOUS = {"id": "curious", "question": "Curious is a fragrance by a singer born in what city?",
           "golden_answers": ["McComb, Mississippi"]}
MONA = {"id": "mona", "question": "Who painted the Mona Lisa?", "golden_answers": ["Leonardo da Vinci"]}


class ScriptedPolicy(Generator):
    """Answers each item's turns from a script (found by its question in the prompt); records every call."""

    def __init__(self, script: dict[str, list[str]]):
        self.script, self.calls, self.stops, self.turn = script, [], [], dict.fromkeys(script, 0)

    def _generate(self, prompts, params):
        self.calls.append(list(prompts))
        self.stops.append(params.stop)
        responses = []
        for prompt in prompts:
            question = next(q for q in self.script if q in prompt)
            responses.append(self.script[question][self.turn[question]])
            self.turn[question] += 1
        return responses


class SpyGenerator(Generator):
    def __init__(self, inner: Generator):
        self.inner, self.calls = inner, []

    def _generate(self, prompts, params):
        self.calls.append(list(prompts))
        return self.inner.generate(prompts, params)


class SpySearch:
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, queries, topk):
        self.calls.append((list(queries), topk))
        return self.inner.search(queries, topk)


@pytest.fixture(scope="module")
def local_search(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "passages.jsonl"
    write_jsonl(path, [{"id": str(i), "contents": make_contents(t, x)} for i, (t, x) in enumerate(PAGES.items())])
    store = PassageStore(path)
    yield LocalSearch(BM25Retriever.build(store, progress=False), store)
    store.close()


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


@pytest.fixture(scope="module")
def ci_model(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", device="cpu", progress=False)


@pytest.fixture
def search(local_search):
    return SpySearch(local_search)


@pytest.fixture
def extractor_model(ci_model):
    return SpyGenerator(ci_model)


@pytest.fixture
def extractor(extractor_model):
    return EvidenceExtractor(extractor_model, max_new_tokens=8)


SETTINGS = AgentSettings(max_actions=4, topk=2, max_new_tokens=16, max_obs_tokens=500)


def run(script, items, tokenizer, search, extractor=None, settings=SETTINGS, **kwargs):
    policy = ScriptedPolicy(script)
    return policy, run_agent(items, policy, tokenizer, search, settings, extractor, progress=False, **kwargs)


def user_turn(messages):
    return next(m["content"] for m in messages if m["role"] == "user")


def test_search_makes_one_retrieval_and_one_extraction_with_the_composed_query(tokenizer, search, extractor,
                                                                               extractor_model):
    script = {TEIDE["question"]: ["<think> I need the park's location. </think>\n<search> Teide National Park "
                                  "</search>", "<think> Found it. </think>\n<answer> Tenerife </answer>"]}
    policy, (trajectory,) = run(script, [TEIDE], tokenizer, search, extractor)

    assert search.calls == [(["Teide National Park"], 2)]
    (prompts,) = extractor_model.calls
    (messages,) = prompts
    composed = compose_query(TEIDE["question"], "I need the park's location.", "Teide National Park")
    assert f"Question: {composed}\nPassages: Passage 1 (Title: Teide National Park): " in user_turn(messages)

    first = trajectory.turns[0]
    assert first.query == composed and first.documents[0]["contents"].startswith('"Teide National Park"')
    assert first.observation == information_block(first.evidence)  # the evidence replaces the documents
    assert "Doc 1(Title:" not in policy.calls[1][0]
    assert policy.calls[1][0] == trajectory.prompt + first.response + first.observation
    assert (trajectory.prediction, trajectory.em, trajectory.searches, trajectory.done) == ("Tenerife", 1.0, 1, True)


def test_without_the_extractor_the_agent_reads_the_documents(tokenizer, search, extractor_model):
    script = {TEIDE["question"]: ["<search> Teide National Park </search>", "<answer> Tenerife </answer>"]}
    policy, (trajectory,) = run(script, [TEIDE], tokenizer, search)
    first = trajectory.turns[0]
    assert first.observation == information_block(format_documents(first.documents))
    assert first.evidence is None and extractor_model.calls == []
    assert policy.calls[1][0].endswith('<information>Doc 1(Title: "Teide National Park") Teide National Park is a '
                                       'national park located in Tenerife in the Canary Islands.\n'
                                       'Doc 2(Title: "Garajonay National Park") Garajonay National Park is located '
                                       'on the island of La Gomera, Canary Islands.</information>\n\n')


def test_an_answer_ends_the_loop(tokenizer, search, extractor, extractor_model):
    policy, (trajectory,) = run({MONA["question"]: ["<think> I know this. </think><answer> Leonardo da Vinci "
                                                    "</answer>"]}, [MONA], tokenizer, search, extractor)
    assert len(policy.calls) == 1 and len(trajectory.turns) == 1 and trajectory.done
    assert search.calls == [] and extractor_model.calls == []
    assert (trajectory.prediction, trajectory.em, trajectory.searches) == ("Leonardo da Vinci", 1.0, 0)


def test_four_actions_is_the_cap(tokenizer, search, extractor, extractor_model):
    searches = [f"<think> step {i} </think><search> Britney Spears birthplace {i} </search>" for i in range(6)]
    policy, (trajectory,) = run({CURIOUS["question"]: searches}, [CURIOUS], tokenizer, search, extractor)
    assert len(search.calls) == 4 and len(extractor_model.calls) == 4
    assert len(policy.calls) == 5  # four actions, then the final step
    final = trajectory.turns[-1]
    assert final.final and final.action == "search" and not final.searched and final.observation == ""
    assert (trajectory.searches, trajectory.prediction, trajectory.em, trajectory.done) == (4, None, 0.0, True)


def test_the_final_step_can_still_answer(tokenizer, search):
    script = {CURIOUS["question"]: ["<search> Curious fragrance </search>"] * 4 + ["<answer> McComb, Mississippi "
                                                                                   "</answer>"]}
    _, (trajectory,) = run(script, [CURIOUS], tokenizer, search)
    assert (trajectory.searches, trajectory.prediction, trajectory.em) == (4, "McComb, Mississippi", 1.0)


def test_an_invalid_action_gets_the_invalid_action_message(tokenizer, search):
    script = {MONA["question"]: ["I think it is Leonardo.", "<answer> Leonardo da Vinci </answer>"]}
    policy, (trajectory,) = run(script, [MONA], tokenizer, search)
    first = trajectory.turns[0]
    assert first.action is None and first.observation == INVALID_ACTION_MESSAGE
    assert policy.calls[1][0] == trajectory.prompt + "I think it is Leonardo." + INVALID_ACTION_MESSAGE
    assert trajectory.em == 1.0 and search.calls == []


def test_turns_are_batched_across_items(tokenizer, search, extractor, extractor_model):
    script = {
        TEIDE["question"]: ["<search> Teide National Park </search>", "<answer> Tenerife </answer>"],
        CURIOUS["question"]: ["<search> Curious fragrance </search>", "<search> Britney Spears born </search>",
                              "<answer> McComb, Mississippi </answer>"],
        MONA["question"]: ["<answer> Leonardo da Vinci </answer>"],
    }
    policy, trajectories = run(script, [TEIDE, CURIOUS, MONA], tokenizer, search, extractor)
    assert [len(call) for call in policy.calls] == [3, 2, 1]  # every unfinished item generates together
    assert search.calls == [(["Teide National Park", "Curious fragrance"], 2), (["Britney Spears born"], 2)]
    assert [len(call) for call in extractor_model.calls] == [2, 1]
    assert [t.id for t in trajectories] == ["teide", "curious", "mona"]
    assert [t.searches for t in trajectories] == [1, 2, 0] and all(t.em == 1.0 for t in trajectories)


def test_only_the_completion_is_scored(tokenizer, search):
    # The prompt's own example holds "<answer> Beijing </answer>"; Search-R1 needs two matches because it scores
    # prompt + completion, a completion-only scorer must neither need nor count it.
    beijing = {"id": "b", "question": "What is the capital of China?", "golden_answers": ["Beijing"]}
    assert "<answer> Beijing </answer>" in agent_prompt(tokenizer, beijing["question"])
    _, (silent,) = run({beijing["question"]: ["I do not know."] * 5}, [beijing], tokenizer, search)
    assert (silent.prediction, silent.em) == (None, 0.0)
    _, (answered,) = run({beijing["question"]: ["<answer> Beijing </answer>"]}, [beijing], tokenizer, search)
    assert answered.em == 1.0


def test_observations_are_truncated_to_max_obs_tokens(tokenizer, search):
    settings = AgentSettings(max_actions=4, topk=3, max_new_tokens=16, max_obs_tokens=12)
    script = {TEIDE["question"]: ["<search> national park Canary Islands </search>", "<answer> Tenerife </answer>"]}
    _, (trajectory,) = run(script, [TEIDE], tokenizer, search, settings=settings)
    observation = trajectory.turns[0].observation
    assert observation.startswith("\n\n<information>Doc 1(Title:")
    assert len(tokenizer(observation, add_special_tokens=False)["input_ids"]) <= 12


def test_records_round_trip_and_compression_counts_every_search(tokenizer, search, extractor):
    script = {CURIOUS["question"]: ["<search> Curious fragrance </search>", "<search> Britney Spears born </search>",
                                    "<answer> McComb </answer>"]}
    _, (trajectory,) = run(script, [CURIOUS], tokenizer, search, extractor)
    assert Trajectory.from_record(trajectory.to_record()) == trajectory

    def words(text):
        return len(text.split())

    retrieved = sum(words(format_documents(t.documents)) for t in trajectory.turns[:2])
    evidence = sum(words(t.evidence) for t in trajectory.turns[:2])
    assert compression(trajectory, words) == (retrieved, evidence)
    _, (plain,) = run(script, [CURIOUS], tokenizer, search)
    with pytest.raises(ValueError, match="without the extractor"):
        compression(plain, words)


def test_a_real_policy_runs_to_the_end(tokenizer, search, ci_model, extractor):
    settings = AgentSettings(max_actions=2, max_new_tokens=4)
    trajectories = run_agent([TEIDE, MONA], ci_model, tokenizer, search, settings, extractor, progress=False)
    assert all(t.done and 1 <= len(t.turns) <= 3 for t in trajectories)
    assert all(t.turns[-1].final or t.turns[-1].action == "answer" for t in trajectories)


def test_eval_rar_writes_its_evaluation_at_the_start_of_the_next_turn(tokenizer, search):
    protocol = eval_rar_protocol("in_turn")
    script = {CURIOUS["question"]: [
        "<think> I need the singer first. </think>\n<search> Curious fragrance </search>",
        "<evaluate> Curious is a fragrance by Britney Spears; her birthplace is missing. </evaluate>\n"
        "<search> Britney Spears born </search>",
        "<evaluate> Doc 1 says Britney Spears was born in McComb, Mississippi. </evaluate>\n"
        "<answer> McComb, Mississippi </answer>"]}
    policy, (trajectory,) = run(script, [CURIOUS], tokenizer, search, protocol=protocol)

    assert trajectory.prompt == render_chat(tokenizer, chat_messages(eval_rar_prompt(CURIOUS["question"]), system=None))
    assert "Provide your evaluation using <evaluate> and </evaluate>." in trajectory.prompt
    assert policy.stops == [ACTION_STOPS] * 3  # no call of its own, and </evaluate> does not end a turn
    assert search.calls == [(["Curious fragrance"], 2), (["Britney Spears born"], 2)]
    first, second, third = trajectory.turns
    assert second.response == script[CURIOUS["question"]][1]  # the block stays in the trajectory
    assert policy.calls[2][0] == trajectory.prompt + first.response + first.observation + second.response + \
        second.observation
    assert trajectory.evaluations == ["Curious is a fragrance by Britney Spears; her birthplace is missing.",
                                      "Doc 1 says Britney Spears was born in McComb, Mississippi."]
    assert (trajectory.searches, trajectory.evaluated_searches, trajectory.evaluation_recall, trajectory.em) == \
        (2, 2, 1.0, 1.0)
    record = trajectory.to_record()
    assert all("evaluation" not in turn for turn in record["turns"])  # the same record format as Search-R1's
    assert Trajectory.from_record(record) == trajectory


def test_eval_rars_separate_evaluation_step_follows_each_observation(tokenizer, search):
    script = {CURIOUS["question"]: [
        "<think> I need the singer first. </think>\n<search> Curious fragrance </search>",
        "<evaluate> The singer is Britney Spears. </evaluate>\n<search> never run </search>",  # evaluation step
        "\n<search> Britney Spears born </search>",
        "<evaluate> She was born in McComb, Mississippi. </evaluate>",  # evaluation step
        "<answer> McComb </answer>"]}
    policy, (trajectory,) = run(script, [CURIOUS], tokenizer, search, protocol=eval_rar_protocol("separate"))

    assert policy.stops == [ACTION_STOPS, ("</evaluate>",), ACTION_STOPS, ("</evaluate>",), ACTION_STOPS]
    first, second, third = trajectory.turns
    assert policy.calls[1][0] == trajectory.prompt + first.response + first.observation  # right after the documents
    assert first.evaluation == "<evaluate> The singer is Britney Spears. </evaluate>"  # cut at its closing tag
    assert policy.calls[2][0] == trajectory.prompt + first.response + first.observation + first.evaluation
    assert search.calls == [(["Curious fragrance"], 2), (["Britney Spears born"], 2)]  # an evaluation is no action
    assert third.evaluation is None and (trajectory.searches, len(trajectory.turns)) == (2, 3)
    assert trajectory.evaluations == ["The singer is Britney Spears.", "She was born in McComb, Mississippi."]
    assert trajectory.evaluated_searches == 2
    # a wrong answer whose evaluations name the golden one: Eval-RAR's r_eval case (Eq. 4-5)
    assert (trajectory.prediction, trajectory.em, trajectory.evaluation_recall) == ("McComb", 0.0, 1.0)
    assert Trajectory.from_record(trajectory.to_record()) == trajectory


def test_a_search_without_an_evaluation_after_it_is_counted(tokenizer, search):
    script = {TEIDE["question"]: ["<search> Teide National Park </search>", "<answer> Tenerife </answer>"]}
    _, (trajectory,) = run(script, [TEIDE], tokenizer, search, protocol=eval_rar_protocol())
    assert (trajectory.searches, trajectory.evaluated_searches, trajectory.evaluations) == (1, 0, [])
    assert (trajectory.em, trajectory.evaluation_recall) == (1.0, 0.0)
