"""The method switches of issue 17 (D147-D150) and the two reports it asked for (D9's untagged evidence, D41's export
without a dev score): each switch's default is today's behaviour, each other reading is checked by hand."""

import dataclasses
import json
import math
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, settings
from transformers import AutoTokenizer, TrainerState

from conftest import ROOT, tagged_texts
from repro.config import ConfigError, LengthTuningConfig, RewardsConfig, load_profile, profile_names
from repro.data import layout
from repro.evaluation.records import RecordFile
from repro.evaluation.refiners import RationalExtractor
from repro.evaluation.runner import make_record
from repro.evaluation.tables import summarize, summarize_files, untagged_evidence
from repro.formulas import masking, prompts, rewards, tags
from repro.generation import GenerationParams, Generator
from repro.io import write_jsonl
from repro.ops.costs import model, report, stages
from repro.studies import length_tuning
from repro.studies.recall_check import recall_items
from repro.train.grpo.data import trainable_rows, training_rows
from repro.train.grpo.logs import TrainRun
from repro.train.grpo.rollout import answer_contexts, parse_rollout
from repro.train.grpo.rollout_reward import DesignReward, score_rollout
from repro.train.grpo.run import _export_selected, selected_step

QUESTION = "Who designed the Eiffel Tower?"
PASSAGES = prompts.format_passages([{"title": "Eiffel Tower", "text": "PASSAGE-FACT Gustave Eiffel's company."},
                                    {"title": "Paris", "text": "PASSAGE-OTHER capital of France."}])
RATIONALE, EVIDENCE = "REASON-TEXT passage 1 names the company", "EVIDENCE-TEXT Gustave Eiffel"
ROLLOUT = f"<reason>{RATIONALE}</reason><extract>{EVIDENCE}</extract><answer>Gustave Eiffel</answer>"


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def test_every_profile_keeps_todays_readings_by_default():
    assert RewardsConfig().format_check == "strict" and RewardsConfig().masked_answer_prompt == "table14"
    for name in profile_names():
        cfg = load_profile(name)
        assert (cfg.rewards.format_check, cfg.rewards.masked_answer_prompt) == ("strict", "table14"), name
        assert cfg.length_tuning is None, name
        # issue #31's recipe (D192) switches these on `cpu-evidence` only, and on its placebo arm (issue #49, D237)
        recipe = (cfg.train.require_answer_in_passages, cfg.train.selection_metric is None, cfg.rewards.answer_subset)
        if name.startswith("cpu-evidence"):
            assert recipe == (True, True, ("evidence",))
        else:
            assert recipe == (False, False, ("rationale", "evidence", "full")), name


# D147: strict or lenient format check (#23) ----------------------------------------------------------------------

@pytest.mark.parametrize("response", [
    "Here is my analysis: <reason>r</reason><extract>e</extract><answer>a</answer>",  # a preamble
    "<reason>r</reason> So the evidence is: <extract>e</extract>\n<answer>a</answer>",  # text between two parts
    "<reason>r</reason><extract>e</extract><answer>a</answer> I hope this helps.",  # a remark after the answer
])
def test_lenient_check_tolerates_text_without_tags_around_the_parts(response):
    assert tags.is_well_formatted(response, check="lenient") and not tags.is_well_formatted(response)
    assert rewards.format_reward(response, "lenient") == 1.0 and rewards.format_reward(response) == 0.0


@pytest.mark.parametrize("response", [
    "<reason>r</reason><extract>e</extract>",  # no answer
    "<reason>r</reason><answer>a</answer><extract>e</extract>",  # order
    "<answer>x</answer> <reason>r</reason><extract>e</extract><answer>a</answer>",  # a tag outside the parts
    "<reason>r</reason><extract> </extract><answer>a</answer>",  # blank evidence: the trivial solution (D17)
    "<reason>r <reason>x</reason><extract>e</extract><answer>a</answer>",  # nested / repeated
    "<reason>r</reason><extract>e</extract><answer>a</answer><answer>b</answer>",
    "<reason>r<extract>e</extract><answer>a</answer>",  # unclosed reason
    "<reason>r</reason><extract>e</extract><answer>a",  # unclosed answer
])
def test_lenient_check_still_needs_each_tag_once_in_order_around_non_blank_text(response):
    assert not tags.is_well_formatted(response, check="lenient")


def test_lenient_check_of_the_inference_form_and_an_unknown_check():
    assert tags.is_well_formatted("Sure. <reason>r</reason> then <extract>e</extract>", False, "lenient")
    assert not tags.is_well_formatted("<reason>r</reason><extract>e</extract><answer>a</answer>", False, "lenient")
    with pytest.raises(ValueError, match="format check must be one of"):
        tags.is_well_formatted(ROLLOUT, check="loose")


@settings(max_examples=300, deadline=None)
@given(text=tagged_texts())
def test_what_the_strict_check_accepts_the_lenient_one_accepts(text):
    for with_answer in (True, False):
        if tags.is_well_formatted(text, with_answer):
            assert tags.is_well_formatted(text, with_answer, "lenient")


def test_the_switch_sets_r_fmt_in_the_training_reward_and_its_log(tokenizer):
    preamble = "Let me look. " + ROLLOUT
    strict, lenient = RewardsConfig(), RewardsConfig(format_check="lenient")
    a = score_rollout(preamble, "Gustave Eiffel", "Gustave Eiffel", ["Gustave Eiffel"], 200, strict, tokenizer)
    b = score_rollout(preamble, "Gustave Eiffel", "Gustave Eiffel", ["Gustave Eiffel"], 200, lenient, tokenizer)
    assert (a.format, b.format) == (0.0, 1.0)
    assert b.final - a.final == pytest.approx(0.1)  # λ3 · (1 − 0): nothing else changes
    assert (a.f1, a.len_reason, a.len_extract) == (b.f1, b.len_reason, b.len_extract)
    for cfg, expected in ((strict, 0.0), (lenient, 1.0)):
        logged = {}
        DesignReward(dataclasses.replace(cfg, design="eval_rar"), tokenizer)(
            [preamble], golden_answers=[["Gustave Eiffel"]], passages_length=[200], o_r=[None], o_e=[None],
            log_metric=logged.__setitem__)
        assert logged["eviomni/reward_format"] == expected  # also logged under a neighbour's design


def test_the_held_out_checks_format_rate_follows_the_switch():
    row = {"id": "q1", "question": QUESTION, "golden_answers": ["Gustave Eiffel"],
           "passages": [{"contents": "Eiffel Tower\nIt was built by the company of Gustave Eiffel."}]}
    rollouts = ["Sure: " + ROLLOUT, ROLLOUT]
    rows = [row, {**row, "id": "q2"}]
    assert recall_items(rows, rollouts, 0)["well_formatted"].tolist() == [False, True]
    assert recall_items(rows, rollouts, 0, "lenient")["well_formatted"].tolist() == [True, True]


# D148: o_r / o_e on Table 11's prompt (#14) --------------------------------------------------------------------------

def test_table11_contexts_hold_what_eq4_leaves_visible_as_table11s_document(tokenizer):
    cfg = RewardsConfig(masked_answer_prompt="table11")
    o_r, o_e = answer_contexts(QUESTION, PASSAGES, parse_rollout(ROLLOUT), ("rationale", "evidence"), cfg)
    # o_e is exactly the QA generator's input at inference, M_G(q, e) of Algorithm 1
    assert list(o_e.messages) == prompts.qa_messages(QUESTION, EVIDENCE) and o_e.assistant_prefix == ""
    # o_r: Table 11 over the passages and then the rationale (P stays visible, #15); the evidence is absent
    assert list(o_r.messages) == prompts.chat_messages(prompts.rag_qa_prompt(QUESTION, f"{PASSAGES}\n{RATIONALE}"))
    assert "EVIDENCE-TEXT" not in o_r.render(tokenizer) and "PASSAGE-FACT" not in o_e.render(tokenizer)
    # the token ids are those of the chat template over these messages, with nothing prefilled
    expected = tokenizer.apply_chat_template(prompts.qa_messages(QUESTION, EVIDENCE), tokenize=False,
                                             add_generation_prompt=True)
    assert o_e.render(tokenizer) == expected
    assert o_e.token_ids(tokenizer) == tokenizer.encode(expected, add_special_tokens=False)


def test_table14_stays_the_default_reading_with_its_prefilled_answer_tag(tokenizer):
    o_e14, = answer_contexts(QUESTION, PASSAGES, parse_rollout(ROLLOUT), ("evidence",), RewardsConfig())
    o_e11, = answer_contexts(QUESTION, PASSAGES, parse_rollout(ROLLOUT), ("evidence",),
                             RewardsConfig(masked_answer_prompt="table11"))
    assert o_e14.messages[-1]["content"] == prompts.evidence_extraction_prompt(QUESTION, "").rstrip(" ")
    assert o_e14.assistant_prefix == f"<reason></reason><extract>{EVIDENCE}</extract><answer>"
    assert o_e14.render(tokenizer).endswith(f"{EVIDENCE}</extract><answer>")
    assert "Answer:" in o_e11.messages[-1]["content"] and "<answer>" not in o_e11.render(tokenizer)
    assert o_e14.token_ids(tokenizer) == tokenizer.encode(o_e14.render(tokenizer), add_special_tokens=False)
    assert o_e11.token_ids(tokenizer) != o_e14.token_ids(tokenizer)


def test_table11_ignores_the_mask_mode_and_leaves_out_empty_parts():
    built = {mode: masking.knowledge_masked_contexts(QUESTION, PASSAGES, "", EVIDENCE, mode, prompt="table11")
             for mode in masking.MASK_MODES}
    assert built["empty_tags"] == built["drop"] == built["placeholder"]
    assert masking.qa_document(PASSAGES, "", EVIDENCE, "rationale") == PASSAGES  # an empty rationale adds nothing
    assert masking.qa_document(PASSAGES, RATIONALE, EVIDENCE, "full") == f"{PASSAGES}\n{RATIONALE}\n{EVIDENCE}"
    with pytest.raises(ValueError, match="prompt must be one of"):
        masking.knowledge_masked_contexts(QUESTION, PASSAGES, RATIONALE, EVIDENCE, prompt="table12")


# D149: training questions whose top-k hold no golden answer (#3) -----------------------------------------------------

def contexts_row(i: int, text: str) -> dict:
    return {"id": f"q{i}", "question": f"Who founded Vell{i}?", "golden_answers": ["Anna Berg"], "metadata": {},
            "passages": [{"id": f"p{i}", "contents": f'"Vell{i}"\n{text}'}]}


ROWS = [contexts_row(0, "Vell was founded by Anna Berg."), contexts_row(1, "Vell lies on the river Tarn."),
        {**contexts_row(2, "A town."), "passages": [{"id": "t", "contents": '"Anna Berg"\nA town on a river.'}]},
        contexts_row(3, "Anna Berg founded it in 1801.")]


def test_questions_without_an_answer_in_their_passages_are_dropped_only_when_asked():
    kept, record = trainable_rows(ROWS, False)
    assert kept == ROWS and record == {"require_answer_in_passages": False, "questions": 4, "dropped": 0}
    kept, record = trainable_rows(ROWS, True)
    assert [r["id"] for r in kept] == ["q0", "q3"]  # q2's answer is only in a title, which does not count (D33)
    assert record == {"require_answer_in_passages": True, "questions": 4, "dropped": 2}


def test_training_rows_filter_before_the_first_n_and_report_the_count(tmp_path, monkeypatch, tokenizer):
    path = tmp_path / "train.jsonl"
    write_jsonl(path, ROWS)
    monkeypatch.setattr(layout, "contexts_path", lambda cfg, dataset, split: path)
    cfg = load_profile("ci")
    train = dataclasses.replace(cfg.train, require_answer_in_passages=True, max_train_questions=1)
    rows, record = training_rows(dataclasses.replace(cfg, train=train), tokenizer)
    assert [r["id"] for r in rows] == ["q0"] and record["dropped"] == 2
    rows, record = training_rows(cfg, tokenizer)
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"] and record["dropped"] == 0


# D41: the step exported when no dev score exists ----------------------------------------------------------------------

def test_without_a_dev_score_the_last_step_is_exported_and_said(tmp_path, capsys):
    assert selected_step(TrainerState(global_step=8, best_metric=0.25, best_global_step=4), "f1_evidence") == (
        4, "best dev f1_evidence = 0.25")
    for missing in (None, math.nan):
        step, reason = selected_step(TrainerState(global_step=8, best_metric=missing, best_global_step=None),
                                     "f1_evidence")
        assert step == 8 and reason.startswith("last step: no dev f1_evidence was recorded")

    run = TrainRun(tmp_path / "run")
    (run.checkpoints / "checkpoint-8").mkdir(parents=True)
    (run.checkpoints / "checkpoint-8" / "config.json").write_text("{}")
    _export_selected(TrainerState(global_step=8, best_metric=None), run, "f1_evidence", "float32")
    selection = run.selection()
    assert selection["step"] == 8 and selection["value"] is None and selection["selected_by"].startswith("last step")
    assert (run.extractor / "config.json").exists()
    assert f"exported checkpoint-8 of 8 steps (last step: no dev f1_evidence" in capsys.readouterr().out


# D9: untagged extractor output used as evidence, counted in Table 2's summary ---------------------------------------

class Scripted(Generator):
    def __init__(self, outputs):
        self.outputs = outputs

    def _generate(self, prompts_, params):
        return list(self.outputs)


def test_untagged_evidence_is_counted_per_rational_extractor_file(tmp_path, tokenizer):
    outputs = ["<reason>r</reason><extract>Gustave Eiffel built it.</extract>",  # tagged
               "<reason>r</reason>Gustave Eiffel built it.",  # </reason> then untagged text: used as evidence
               "Gustave Eiffel built it.",  # no tag at all: the whole output is the evidence
               "<reason>a reasoning cut off by the token limit"]  # no evidence at all: counted as empty instead
    row = {"id": "q", "question": QUESTION, "golden_answers": ["Gustave Eiffel"],
           "passages": [{"id": "p", "contents": '"Eiffel Tower"\nBuilt by Gustave Eiffel.'}]}
    rows = [{**row, "id": f"q{i}"} for i in range(4)]
    refiner = RationalExtractor(Scripted(outputs), "scripted", GenerationParams(max_new_tokens=8))
    records = [make_record(r, ref, "Gustave Eiffel", tokenizer, 0.0, 0.0)
               for r, ref in zip(rows, refiner.refine(rows), strict=True)]
    assert [r["evidence"] for r in records] == ["Gustave Eiffel built it."] * 3 + [""]
    assert untagged_evidence(records) == 2
    row = summarize(records, tagged=True)
    assert (row["untagged evidence"], row["untagged evidence (%)"], row["empty evidence"]) == (2, 50.0, 1)
    assert math.isnan(summarize(records)["untagged evidence"])

    files = []
    for method in ("full", "prompted_extractor"):
        path = tmp_path / f"{method}.jsonl"
        RecordFile(path, {"method": method}).finish(records)
        files.append({"dataset": "set", "method": method, "path": str(path)})
    summary = summarize_files(pd.DataFrame(files)).set_index("method")
    assert math.isnan(summary.loc["Full", "untagged evidence"])  # Full's evidence is the passages: no tags to read
    assert summary.loc["Prompted extraction", "untagged evidence"] == 2


# D150: τ and γ on a dev grid, an optional stage (#21) --------------------------------------------------------------

def dev_rows(values: list, initial: float | None = 0.9) -> list[dict]:
    rows = [] if initial is None else [{"step": 0, "checkpoint": None, "f1_evidence": initial}]
    return rows + [{"step": 2 * (i + 1), "checkpoint": f"checkpoint-{2 * (i + 1)}", "f1_evidence": v}
                   for i, v in enumerate(values)]


def test_grid_order_and_each_runs_best_checkpoint_score():
    assert length_tuning.grid([0.1, 0.5], [0.3, 0.8, 1.0]) == [(0.1, 0.3), (0.1, 0.8), (0.1, 1.0), (0.5, 0.3),
                                                                 (0.5, 0.8), (0.5, 1.0)]
    assert length_tuning.point_name(0.5, 1.0) == "tau=0.5-gamma=1"
    # the initial policy's 0.9 is not a checkpoint; NaN and null are skipped; equal values keep the first step
    assert length_tuning.best_dev_score(dev_rows([0.2, math.nan, None, 0.4, 0.4]), "f1_evidence") == (0.4, 8)
    assert length_tuning.best_dev_score(dev_rows([]), "f1_evidence") is None


def test_selection_takes_the_highest_score_and_the_first_of_equal_ones():
    results = [{"tau": 0.1, "gamma": 0.5, "value": 0.3}, {"tau": 0.2, "gamma": 0.5, "value": None},
               {"tau": 0.5, "gamma": 0.5, "value": 0.6}, {"tau": 1.0, "gamma": 0.5, "value": 0.6}]
    assert length_tuning.select(results)["tau"] == 0.5
    with pytest.raises(ValueError, match="no \\(tau, gamma\\) run has a dev score"):
        length_tuning.select([{"tau": 0.1, "gamma": 0.5, "value": None}])


def test_length_tuning_config_is_checked():
    assert LengthTuningConfig(tau=[0.1, 0.2], gamma=[0.5], max_steps=2).metric is None
    for bad in ({"tau": [0.1, 0.1], "gamma": [0.5]}, {"tau": [0.0], "gamma": [0.5]}, {"tau": [], "gamma": [0.5]},
                {"tau": [0.5], "gamma": [0.5], "max_steps": 0}):
        with pytest.raises(ConfigError, match="length_tuning"):
            LengthTuningConfig(**{"max_steps": 2, **bad})


def test_without_a_grid_the_stage_records_not_requested_and_trains_nothing(tmp_path):
    def never(*args, **kwargs):
        raise AssertionError("no grid, no training")

    record = length_tuning.tune_length_rewards(load_profile("ci"), tmp_path, train=never)
    assert record == {"requested": False} == json.loads((tmp_path / "selection.json").read_text())


def test_the_null_stage_loads_no_deep_learning_framework():
    code = ("import sys; import repro.studies.length_tuning; "
            "print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class FakeTraining:
    """Stands in for train_extractor: writes a run directory with a hand-made dev log, whose best score depends on
    (τ, γ) as the table says; records every call."""

    def __init__(self, scores: dict):
        self.scores, self.calls = scores, []

    def __call__(self, cfg, root):
        self.calls.append((cfg.rewards.tau, cfg.rewards.gamma, cfg.train.max_steps))
        run = TrainRun(root)
        (run.checkpoints / f"checkpoint-{cfg.train.max_steps}").mkdir(parents=True, exist_ok=True)
        run.extractor.mkdir(exist_ok=True)
        run.dev_log.write_text("".join(json.dumps(r) + "\n" for r in dev_rows(
            self.scores[cfg.rewards.tau, cfg.rewards.gamma])))
        return run


def test_the_stage_trains_each_pair_selects_the_best_and_reuses_finished_pairs(tmp_path, capsys):
    cfg = dataclasses.replace(load_profile("ci"), length_tuning=LengthTuningConfig(tau=[0.2, 1.0], gamma=[0.3, 0.8],
                                                                                 max_steps=2))
    fake = FakeTraining({(0.2, 0.3): [0.1, 0.3], (0.2, 0.8): [0.5, 0.2], (1.0, 0.3): [0.5], (1.0, 0.8): [None]})
    record = length_tuning.tune_length_rewards(cfg, tmp_path, train=fake)
    assert fake.calls == [(0.2, 0.3, 2), (0.2, 0.8, 2), (1.0, 0.3, 2), (1.0, 0.8, 2)]
    assert record["selected"] == {"tau": 0.2, "gamma": 0.8, "value": 0.5, "step": 2}  # 0.5 twice: the first pair
    assert [p["value"] for p in record["points"]] == [0.3, 0.5, 0.5, None]
    assert record["metric"] == "f1_evidence" and "profiles.ci.rewards.gamma=0.8" in record["apply"]
    assert json.loads((tmp_path / "selection.json").read_text()) == record
    pair = TrainRun(tmp_path / "tau=0.2-gamma=0.8")
    assert not pair.checkpoints.exists() and not pair.extractor.exists() and pair.dev_log.exists()
    assert "selected tau = 0.2, gamma = 0.8" in capsys.readouterr().out

    assert length_tuning.tune_length_rewards(cfg, tmp_path, train=fake) == record
    assert len(fake.calls) == 4  # every pair's result.json matched its key: nothing trained again
    by_reward = dataclasses.replace(cfg, length_tuning=dataclasses.replace(cfg.length_tuning, metric="reward_final"))
    with pytest.raises(ValueError, match="no \\(tau, gamma\\) run has a dev score"):  # no such column in the logs
        length_tuning.tune_length_rewards(by_reward, tmp_path, train=fake)
    assert len(fake.calls) == 4  # another metric reads the kept logs again: nothing trained
    longer = dataclasses.replace(cfg, length_tuning=dataclasses.replace(cfg.length_tuning, max_steps=3))
    length_tuning.tune_length_rewards(longer, tmp_path, train=fake)
    assert [c[2] for c in fake.calls[4:]] == [3, 3, 3, 3]  # another configuration: trained again


def test_the_stage_refuses_a_recipe_without_dev_selection(tmp_path):
    cfg = dataclasses.replace(load_profile("ci"), length_tuning=LengthTuningConfig(tau=[0.2], gamma=[0.3], max_steps=2))
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, selection_metric=None))  # D192
    with pytest.raises(ValueError, match="train.selection_metric is null"):
        length_tuning.tune_length_rewards(cfg, tmp_path, train=FakeTraining({}))


def test_the_cost_estimate_counts_a_configured_grid():
    cfg = load_profile("paper-1p5b")
    assert "length_tuning" not in [e.stage for e in report.estimate(cfg)]
    tuned = dataclasses.replace(cfg, length_tuning=LengthTuningConfig(tau=[0.1, 0.5], gamma=[0.3, 0.5, 0.8],
                                                                      max_steps=10))
    (row,) = [e for e in report.estimate(tuned) if e.stage == "length_tuning"]
    run = stages.grpo_wall(tuned, model.OPTIMISTIC, 10)[0]
    assert row.wall[0] == pytest.approx(model.OPTIMISTIC.stage_start + 6 * run) and row.note.startswith("6 GRPO runs")


@pytest.mark.slow
def test_two_real_one_step_runs_of_the_ci_model(tmp_path, tiny_llama_dir, tokenizer):
    """The stage with repro.train.grpo.fit on the ci model (a random Llama): mechanics, not a tuning result."""
    from repro.train.grpo import fit
    from repro.train.grpo.data import extraction_rows

    cfg = load_profile("ci")
    train = dataclasses.replace(cfg.train, format_warmup=None, save_steps=1)
    cfg = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=str(tiny_llama_dir)), train=train,
                              length_tuning=LengthTuningConfig(tau=[0.1, 1.0], gamma=[0.5], max_steps=1))
    rows, record = trainable_rows(ROWS * 2, False)
    rows = extraction_rows([{**r, "id": f"{r['id']}-{i}"} for i, r in enumerate(rows)], tokenizer, "tokens")

    def train_pair(point_cfg, root):
        assert point_cfg.train.max_steps == 1  # length_tuning.max_steps, in the pair's profile
        return fit(point_cfg, TrainRun(root), rows[:4], rows[4:6], progress=False, train_questions=record)

    result = length_tuning.tune_length_rewards(cfg, tmp_path, train=train_pair)
    assert [(p["tau"], p["gamma"], p["step"]) for p in result["points"]] == [(0.1, 0.5, 1), (1.0, 0.5, 1)]
    assert all(isinstance(p["value"], float) for p in result["points"])
    assert result["selected"] == length_tuning.select(result["points"])
    for tau in (0.1, 1.0):
        run = TrainRun(tmp_path / f"tau={tau:g}-gamma=0.5")
        config = json.loads(run.config_file.read_text())
        assert config["rewards"]["tau"] == tau and config["train_questions"] == record
        assert not run.checkpoints.exists() and run.selection()["step"] == 1
