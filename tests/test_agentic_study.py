"""The study's aggregation (EM, searches, CR over turns, Eval-RAR's evaluations), Tables 5 and 6 beside the paper,
item sampling, the paired tests over every pair of conditions and the case viewer, on trajectories written out turn by
turn."""

import contextlib
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from statsmodels.stats.multitest import multipletests

from repro.agentic.actions import INVALID_ACTION_MESSAGE, eval_rar_protocol, format_documents, information_block
from repro.agentic.loop import agent_prompt
from repro.agentic.trajectory import Trajectory, Turn
from repro.config import ConfigError, load_profile
from repro.evaluation.records import read_records
from repro.generation import Generator
from repro.generation import pool as pool_module
from repro.io import write_jsonl
from repro.reporting import stats
from repro.studies import agentic as study
from repro.studies.agentic import (TRAJECTORY_FIELDS, _record, compare_conditions, condition_pairs, extractor_ref,
                                 model_label, paired_item_scores, run_study, sample_items, summarize, table5_layout,
                                 table6_layout, trajectory_path)
from repro.studies.agentic_cases import case_html, case_kind, cases_html, pair_trajectories, pick_cases

DOC = {"id": "1", "contents": '"Britney Spears"\nSpears was born in McComb, Mississippi, the second child.',
       "score": 1.0}


def search_turn(query: str, evidence: str | None) -> Turn:
    observation = information_block(evidence if evidence is not None else format_documents([DOC]))
    return Turn(response=f"<think> look up </think><search> {query} </search>", action="search", content=query,
                observation=observation, documents=[DOC], query=None if evidence is None else f"q\n{query}",
                extraction=None if evidence is None else f"<reason>r</reason><extract>{evidence}</extract>",
                evidence=evidence)


def answer_turn(answer: str) -> Turn:
    return Turn(response=f"<answer> {answer} </answer>", action="answer", content=answer)


def trajectory(item_id: str, turns: list[Turn], golden=("McComb, Mississippi",)) -> Trajectory:
    return Trajectory(item_id, f"question {item_id}?", list(golden), "<prompt>", turns, done=True)


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture
def runs():
    """Two items; without: 2 searches then right / 1 search then wrong; with: 1 search right / 2 searches right."""
    without = [trajectory("a", [search_turn("Curious", None), search_turn("Spears", None),
                                answer_turn("McComb, Mississippi")]),
               trajectory("b", [search_turn("Spears", None), answer_turn("Louisiana")])]
    with_ = [trajectory("a", [search_turn("Curious", "Spears was born in McComb."),
                              answer_turn("McComb, Mississippi")]),
             trajectory("b", [search_turn("Spears", "born in McComb"), search_turn("McComb", ""),
                              answer_turn("mccomb mississippi")])]
    return without, with_


def test_summary_counts_searches_and_accumulates_cr_over_turns(runs):
    without, with_ = runs
    plain = summarize([_record(t, None) for t in without])
    assert (plain["em"], plain["avg_searches"], plain["answered"]) == (50.0, 1.5, 1.0)
    assert np.isnan(plain["cr"]) and plain["cr_items"] == 0

    extracted = summarize([_record(t, words) for t in with_])
    retrieved = words(format_documents([DOC]))
    per_item = [retrieved / 5, 2 * retrieved / 3]  # item b: two searches, evidences of 3 and 0 words
    assert extracted["em"] == 100.0 and extracted["avg_searches"] == 1.5
    assert extracted["cr"] == pytest.approx(np.mean(per_item))
    assert extracted["cr_ratio_of_sums"] == pytest.approx(3 * retrieved / 8)
    assert (extracted["cr_items"], extracted["empty_evidence"]) == (2, 0)  # one empty turn, not an empty item


def test_invalid_actions_and_unanswered_items_are_counted():
    never = trajectory("c", [Turn("hm", None, observation=INVALID_ACTION_MESSAGE)] * 4 + [Turn("hm", None, final=True)])
    summary = summarize([_record(never, words)])
    assert (summary["em"], summary["answered"], summary["invalid_per_item"], summary["avg_searches"]) == (0, 0, 5, 0)
    assert np.isnan(summary["cr"])  # no search, nothing to compress


def summary_frame(agent: str = "embedded:smollm2-135m-instruct", eval_rar: bool = False) -> pd.DataFrame:
    runs = [("without", "fanoutqa", 10.0, np.nan, 1.5), ("with", "fanoutqa", 20.0, 8.0, 1.25),
            ("without", "ovos-describe", 30.0, np.nan, 1.0), ("with", "ovos-describe", 50.0, 4.0, 0.5)]
    if eval_rar:
        runs += [("eval_rar", "fanoutqa", 40.0, np.nan, 2.0), ("eval_rar", "ovos-describe", 0.0, np.nan, 3.0)]
    rows = [{"agent": agent, "condition": c, "dataset": d, "em": em, "cr": cr, "avg_searches": s}
            for c, d, em, cr, s in runs]
    return pd.DataFrame(rows).assign(extractor="embedded:smollm2-135m-instruct")


def test_table5_layout_puts_the_paper_rows_beside_ours():
    table = table5_layout(summary_frame(), load_profile("tiny"))
    ours = table[table["source"] == "this run (tiny)"].set_index("model")
    assert list(ours.index) == ["smollm2-135m-instruct (embedded)",
                                "smollm2-135m-instruct (embedded) w/ smollm2-135m-instruct (embedded)"]
    plain, extracted = ours.iloc[0], ours.iloc[1]
    assert (plain["FanOutQA EM"], plain["FanOutQA CR"], plain["Average EM"], plain["Average CR"]) == \
        ("10.00", "1.00x", "20.00", "1.00x")
    assert (extracted["FanOutQA CR"], extracted["Average EM"], extracted["Average CR"]) == ("8.00x", "35.00", "6.00x")
    assert extracted["NQ EM"] == ""  # the paper's datasets are not ours on this profile
    paper = table[table["source"] == "paper"].set_index("model")
    assert list(paper.index) == ["Search-R1-7B", "Search-R1-7B w/ EviOmni", "Search-R1-32B", "Search-R1-32B w/ EviOmni"]
    assert (paper.loc["Search-R1-7B w/ EviOmni", "NQ EM"], paper.loc["Search-R1-7B w/ EviOmni", "Average CR"]) == \
        ("38.20", "9.08x")
    assert paper.loc["Search-R1-32B", "Average EM"] == "39.72"


def test_the_eval_rar_condition_is_a_row_of_tables_5_and_6_without_compression():
    table5 = table5_layout(summary_frame(eval_rar=True), load_profile("tiny")).set_index("model")
    row = table5.loc["smollm2-135m-instruct (embedded) + Eval-RAR prompt"]
    assert (row["FanOutQA EM"], row["FanOutQA CR"], row["Average EM"], row["Average CR"]) == \
        ("40.00", "1.00x", "20.00", "1.00x")  # it reads the documents: CR 1 by definition
    table6 = table6_layout(summary_frame(eval_rar=True), load_profile("tiny")).set_index("model")
    assert table6.loc["smollm2-135m-instruct (embedded) + Eval-RAR prompt", "OVOS-describe (generated)"] == "3.00"


def test_table6_layout_lists_average_searches():
    table = table6_layout(summary_frame(), load_profile("tiny")).set_index("model")
    assert table.loc["smollm2-135m-instruct (embedded)", "FanOutQA"] == "1.50"
    assert table.loc["Search-R1-7B w/ EviOmni", "MuSiQue"] == "1.98"
    assert "Average" not in " ".join(table.columns)


def test_extractor_defaults_and_labels():
    assert extractor_ref(load_profile("tiny")) == "embedded:smollm2-135m-instruct"
    assert extractor_ref(load_profile("paper-1p5b")) == "HIT-TMG/EviOmni-nq_train-7B"  # the paper's 7B extractor
    assert model_label("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3") == \
        "SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3"
    assert model_label("data/tiny/train/eviomni/extractor/") == "extractor"


def test_items_are_sampled_with_the_seed_in_file_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data" / "ci" / "qa" / "fanoutqa" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "golden_answers": ["a"]}) + "\n"
                            for i in range(20)))
    cfg = load_profile("ci", params_path=ROOT / "params.yaml")
    items = sample_items(cfg, "fanoutqa")
    assert len(items) == cfg.agentic.n_items < 20
    assert items == sample_items(cfg, "fanoutqa")
    positions = [int(item["id"][1:]) for item in items]
    assert positions == sorted(positions)


def test_case_kinds_and_picking(runs):
    without, with_ = runs
    pairs = pair_trajectories(without, with_)
    assert [case_kind(*pair) for pair in pairs] == ["early stop", "fixed"]
    assert [kind for kind, *_ in pick_cases(pairs, n=4)] == ["fixed", "early stop"]
    with pytest.raises(ValueError, match="different items"):
        pair_trajectories(without, with_[:1])


def test_case_view_shows_both_runs_side_by_side(runs):
    without, with_ = runs
    page = cases_html([("early stop", without[0], with_[0])], extractor_name="EviOmni")
    assert page.count("<tr><th>Step") == 3 and "without the extractor" in page and "with the extractor" in page
    assert "&lt;information w/ EviOmni&gt; Spears was born in McComb." in page
    assert "&lt;information&gt; Doc 1(Title: &quot;Britney Spears&quot;)" in page
    assert "Terminated early with the EviOmni: 1 search(es) instead of 2" in page
    assert "answer: McComb, Mississippi (correct); searches: 1" in page
    assert "Terminated early" not in case_html("fixed", without[1], with_[1])


def test_conditions_are_compared_on_the_same_items(tmp_path):
    """Six items: with the extractor, items 0-3 right (without: 0-1), one search fewer on each item."""
    agent = "embedded:smollm2-135m-instruct"
    without = [{"id": str(i), "em": int(i < 2), "searches": 2} for i in range(6)]
    with_ = [{"id": str(i), "em": int(i < 4), "searches": 1} for i in reversed(range(6))]  # another order
    for condition, records in (("without", without), ("with", with_)):
        write_jsonl(trajectory_path(tmp_path, agent, condition, "fanoutqa"), records)
    summary = pd.DataFrame([{"agent": agent, "dataset": "fanoutqa", "condition": c} for c in ("without", "with")])
    table = compare_conditions(summary, tmp_path, n_resamples=999)
    mcnemar = table[(table["metric"] == "em") & (table["test"] == "McNemar (exact)")].iloc[0]
    assert mcnemar["effect"] == pytest.approx(100 * 2 / 6)  # points, with − without
    assert mcnemar["p_value"] == pytest.approx(0.5)  # 2 discordant pairs, both one way: 2 * 0.5**2
    searches = table[table["metric"] == "searches"]
    assert set(searches["effect"]) == {-1.0} and (table["n"] == 6).all()
    assert (table["p_holm"] >= table["p_value"]).all()


def test_conditions_on_different_items_are_refused():
    with pytest.raises(ValueError, match="different items"):
        paired_item_scores([{"id": "a", "em": 1, "searches": 1}], [{"id": "b", "em": 1, "searches": 1}])


class AnsweringAgent(Generator):
    """Answers every prompt at once; raises once it has answered `fail_after` prompts (a kill mid-study)."""

    def __init__(self, tokenizer, fail_after: int | None = None):
        self.tokenizer, self.fail_after, self.prompts = tokenizer, fail_after, 0

    def _generate(self, prompts, params):
        if self.fail_after is not None and self.prompts >= self.fail_after:
            raise RuntimeError("killed")
        self.prompts += len(prompts)
        return ["<answer> Anna Berg </answer>"] * len(prompts)


def chat_tokenizer():
    """A word-level tokenizer with a plain chat template: all the loop asks of the agent's tokenizer here."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]")
    tokenizer.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}<assistant>"
    return tokenizer


@pytest.fixture
def study_cfg(monkeypatch, tmp_path):
    """The ci profile's study on 10 items per dataset, chunks of 8 (batch size 1), with a scripted agent: the ci
    model's asset directory is an empty stand-in, and `agent_is` makes the study's pool hand out a given agent."""
    cfg = load_profile("ci", params_path=ROOT / "params.yaml")
    cfg = dataclasses.replace(cfg, agentic=dataclasses.replace(cfg.agentic, batch_size=1))
    items = [{"id": f"q{i}", "question": f"Who founded Vell{i}?", "golden_answers": ["Anna Berg"]} for i in range(10)]
    monkeypatch.setattr(study, "sample_items", lambda cfg, dataset: items)
    monkeypatch.setattr(study, "open_search", lambda cfg: contextlib.nullcontext(None))  # the agent never searches
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "ci" / "assets" / "tiny-random-llama").mkdir(parents=True)
    loads = []

    def agent_is(agent: Generator) -> None:
        monkeypatch.setattr(pool_module, "make_generator", lambda backend, model, **kw: loads.append(model) or agent)

    return cfg, chat_tokenizer(), agent_is, loads


def test_an_interrupted_study_resumes_with_the_unfinished_items_and_writes_what_a_whole_run_writes(study_cfg, tmp_path):
    cfg, tokenizer, agent_is, loads = study_cfg
    whole = AnsweringAgent(tokenizer)
    agent_is(whole)
    expected = run_study(cfg, tmp_path / "whole", progress=False)
    assert loads == ["data/ci/assets/tiny-random-llama"]  # the agent is the extractor here: loaded once

    killed = AnsweringAgent(tokenizer, fail_after=8)  # one chunk of the first file, then a kill
    agent_is(killed)
    with pytest.raises(RuntimeError, match="killed"):
        run_study(cfg, tmp_path / "resumed", progress=False)
    resumed = AnsweringAgent(tokenizer)
    agent_is(resumed)
    summary = run_study(cfg, tmp_path / "resumed", progress=False)

    files = len(cfg.agentic.conditions) * len(cfg.agentic.datasets)  # conditions x datasets of one agent
    assert resumed.prompts == whole.prompts - 8 == files * 10 - 8  # only the unfinished items ran again
    pd.testing.assert_frame_equal(summary, expected)
    for condition in cfg.agentic.conditions:
        for dataset in cfg.agentic.datasets:
            paths = [trajectory_path(tmp_path / run, cfg.models.agents[0], condition, dataset)
                     for run in ("whole", "resumed")]
            assert paths[0].read_bytes() == paths[1].read_bytes()

    again = AnsweringAgent(tokenizer, fail_after=0)
    agent_is(again)
    loads.clear()
    pd.testing.assert_frame_equal(run_study(cfg, tmp_path / "resumed", progress=False), expected)  # nothing reruns
    assert loads == []  # and nothing is loaded


class CountedAgent(AnsweringAgent):
    """An AnsweringAgent standing in for `model`, which records at each call the models loaded and not closed."""

    def __init__(self, tokenizer, model: str, alive: set, calls: list):
        super().__init__(tokenizer)
        self.model, self.alive, self.calls = model, alive, calls
        alive.add(model)

    def close(self) -> None:
        self.alive.discard(self.model)

    def _generate(self, prompts, params):
        self.calls.append((self.model, set(self.alive)))
        return super()._generate(prompts, params)


def test_each_agent_is_released_before_the_next_one_loads_and_the_extractor_is_loaded_once(
        study_cfg, tmp_path, monkeypatch):
    cfg, tokenizer, _, loads = study_cfg
    cfg = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, agents=["agent-a", "agent-b"]),
                              agentic=dataclasses.replace(cfg.agentic, extractor="extractor"))
    alive, calls = set(), []
    monkeypatch.setattr(pool_module, "make_generator", lambda backend, model, **kw:
                        loads.append(model) or CountedAgent(tokenizer, model, alive, calls))
    run_study(cfg, tmp_path / "out", progress=False)
    assert loads == ["agent-a", "extractor", "agent-b"] and alive == set()  # all ended with the study
    assert {agent for agent, _ in calls} == {"agent-a", "agent-b"}  # (the agents answer without searching)
    assert all(loaded <= {agent, "extractor"} for agent, loaded in calls)  # never two agents at once


def test_an_agent_that_is_the_extractor_needs_the_extractors_options():
    cfg = load_profile("tiny", params_path=ROOT / "params.yaml")
    assert extractor_ref(cfg) in cfg.models.agents
    cfg = dataclasses.replace(cfg, agentic=dataclasses.replace(cfg.agentic, agent_options={"dtype": "float32"}))
    with pytest.raises(ConfigError, match="both an agent and the extractor"):
        study.agentic_config(cfg)


def evaluate_turn(text: str, action: str, content: str) -> Turn:
    return Turn(response=f"<evaluate> {text} </evaluate>\n<{action}> {content} </{action}>", action=action,
                content=content)


def test_the_eval_rar_summary_counts_evaluated_searches_and_evaluation_recall():
    """Item a evaluates its one search and names the answer there, then answers wrongly (Eval-RAR's r_eval case);
    item b searches twice, evaluates only the second search (in the turn after it), names nothing, answers right."""
    records = [_record(trajectory("a", [search_turn("Spears", None),
                                        evaluate_turn("Doc 1: Spears was born in McComb, Mississippi.", "answer",
                                                      "Louisiana")]), None),
               _record(trajectory("b", [search_turn("Curious", None), search_turn("Spears", None),
                                        evaluate_turn("Doc 1 names a town of Mississippi.", "answer",
                                                      "McComb, Mississippi")]), None)]
    summary = summarize(records, evaluates=True)
    assert (summary["em"], summary["avg_searches"]) == (50.0, 1.5)
    assert summary["evaluated_searches"] == pytest.approx(2 / 3)  # a's search and b's second of 3 searches
    assert summary["evaluation_recall"] == 50.0  # only a's evaluation contains a golden answer
    assert np.isnan(summary["cr"])
    plain = summarize(records)
    assert np.isnan(plain["evaluated_searches"]) and np.isnan(plain["evaluation_recall"])


def write_runs(out_dir, agent: str, runs: dict[str, list[dict]], dataset: str = "fanoutqa") -> pd.DataFrame:
    for condition, records in runs.items():
        write_jsonl(trajectory_path(out_dir, agent, condition, dataset), records)
    return pd.DataFrame([{"agent": agent, "dataset": dataset, "condition": c} for c in runs])


def test_every_pair_of_three_conditions_is_tested_on_the_same_items_with_holm(tmp_path):
    """Six items. EM: without right on 0-1, with on 0-3, eval_rar on 0, 4, 5; searches 2, 1 and 3 per item."""
    agent = "embedded:smollm2-135m-instruct"
    eval_rar_right = {0, 4, 5}
    runs = {"without": [{"id": str(i), "em": int(i < 2), "searches": 2} for i in range(6)],
            "with": [{"id": str(i), "em": int(i < 4), "searches": 1} for i in range(6)],
            "eval_rar": [{"id": str(i), "em": int(i in eval_rar_right), "searches": 3} for i in reversed(range(6))]}
    table = compare_conditions(write_runs(tmp_path, agent, runs), tmp_path, n_resamples=999)

    pairs = list(dict.fromkeys(zip(table["baseline"], table["condition"])))
    assert pairs == [("without", "with"), ("without", "eval_rar"), ("with", "eval_rar")]
    assert len(table) == 3 * 4 and (table["n"] == 6).all()  # per pair: 2 tests on EM, 2 on searches
    by_pair = {(r.baseline, r.condition): r for r in table[table["test"] == "McNemar (exact)"].itertuples()}
    assert by_pair[("without", "with")].effect == pytest.approx(100 * 2 / 6)
    assert by_pair[("without", "with")].p_value == pytest.approx(0.5)  # 2 discordant items, both one way
    assert by_pair[("without", "eval_rar")].effect == pytest.approx(100 * 1 / 6)
    assert by_pair[("without", "eval_rar")].p_value == pytest.approx(1.0)  # discordant 1 vs 2
    assert by_pair[("with", "eval_rar")].effect == pytest.approx(-100 * 1 / 6)
    assert by_pair[("with", "eval_rar")].p_value == pytest.approx(1.0)  # discordant 3 vs 2
    assert (by_pair[("without", "with")].ci_low, by_pair[("without", "with")].ci_high) == pytest.approx(
        [100 * x for x in stats.mcnemar_exact_interval(2, 0, 6)])  # EM's interval is McNemar's, in points
    searches = table[table["test"] == "paired bootstrap"].set_index(["baseline", "condition"])
    assert set(searches["metric"]) == {"searches"}  # the bootstrap interval is only for the count
    assert searches.loc[("without", "eval_rar"), "effect"] == 1.0
    assert searches.loc[("with", "eval_rar"), "effect"] == 2.0
    expected = multipletests(table["p_value"], method="holm")[1]  # Holm across all pairs, metrics and tests
    np.testing.assert_allclose(table["p_holm"], expected)
    assert (table["p_holm"] >= table["p_value"]).all()


def test_the_pairs_follow_the_conditions_run():
    assert condition_pairs(["eval_rar", "without"]) == [("without", "eval_rar")]
    assert condition_pairs(["with"]) == []
    with pytest.raises(ValueError, match="nothing to compare"):
        compare_conditions(pd.DataFrame([{"agent": "a", "dataset": "d", "condition": "with"}]), ".")


def test_every_condition_runs_on_the_same_items_and_adding_one_reruns_only_it(study_cfg, tmp_path):
    cfg, tokenizer, agent_is, _ = study_cfg
    two = dataclasses.replace(cfg, agentic=dataclasses.replace(cfg.agentic, conditions=["without", "with"]))
    three = dataclasses.replace(cfg, agentic=dataclasses.replace(cfg.agentic, conditions=["without", "with",
                                                                                           "eval_rar"]))
    agent_is(AnsweringAgent(tokenizer))
    run_study(two, tmp_path / "out", progress=False)
    added = AnsweringAgent(tokenizer)
    agent_is(added)
    summary = run_study(three, tmp_path / "out", progress=False)

    datasets, agent = three.agentic.datasets, three.models.agents[0]
    assert added.prompts == 10 * len(datasets)  # the other two conditions' trajectories were reused
    assert list(summary["condition"]) == [c for c in ("without", "with", "eval_rar") for _ in datasets]
    for dataset in datasets:
        runs = {c: read_records(trajectory_path(tmp_path / "out", agent, c, dataset), TRAJECTORY_FIELDS)
                for c in three.agentic.conditions}
        assert len({tuple(r["id"] for r in records) for records in runs.values()}) == 1  # the same items
        for condition, records in runs.items():
            protocol = eval_rar_protocol() if condition == "eval_rar" else None
            expected = [agent_prompt(tokenizer, r["question"], *([protocol] if protocol else [])) for r in records]
            assert [r["prompt"] for r in records] == expected
    eval_rar = summary[summary["condition"] == "eval_rar"]
    assert (eval_rar["evaluation_recall"] == 0.0).all() and eval_rar["evaluated_searches"].isna().all()  # no search
    assert summary[summary["condition"] != "eval_rar"]["evaluation_recall"].isna().all()
