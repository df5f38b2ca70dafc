"""Unit tests of the EviOmni trainer's own pieces (no model): advantages, masked contexts, reward, logs."""

import collections
import dataclasses
import json
import math
import types
import typing

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer, TrainerControl, TrainerState
from trl import GRPOConfig

from repro.config import ConfigError, RewardsConfig, TrainConfig, load_profile, profile_names
from repro.data.answers import AnswerSentence, first_answer_sentence
from repro.data.sentences import passage_sentences, random_sentence
from repro.formulas import metrics, prompts, rewards, tags
from repro.io import InputError
from repro.registry import REWARD_DESIGNS
from repro.reporting import stats
from repro.studies.heldout import compare_policies, heldout_rows
from repro.studies.recall_check import compare_recall, recall_items
from repro.studies.training_dynamics import plot_training_dynamics, rolling_band
from repro.train.checkpoints import last_checkpoint
from repro.train.grpo.data import extraction_row
from repro.train.grpo.logs import StepLog, read_log, train_log_row
from repro.train.grpo.logs import TrainRun
from repro.train.grpo.rollout import answer_contexts, masked_targets, parse_rollout
from repro.train.grpo.rollout_reward import DesignReward, score_rollout
from repro.train.grpo.run import _prepare_run_dir, grpo_args
from repro.train.grpo.trainer import (
    KL_ESTIMATORS,
    ROLLOUT_MODELS,
    EviOmniTrainer,
    aggregate_like_trl,
    kl_estimate,
    std_clipped_advantages,
)
from repro.train.grpo.warmup import format_only_target, warmup_examples, warmup_target

QUESTION = "Who designed the Eiffel Tower?"
PASSAGES = prompts.format_passages([{"title": "Eiffel Tower", "text": "PASSAGE-FACT Gustave Eiffel's company."},
                                    {"title": "Paris", "text": "PASSAGE-OTHER capital of France."}])
ROLLOUT = ("<reason>REASON-TEXT passage 1 names the company</reason>"
           "<extract>EVIDENCE-TEXT Gustave Eiffel</extract><answer>Gustave Eiffel</answer>")


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_dir):
    return AutoTokenizer.from_pretrained(tiny_llama_dir)


def test_advantages_follow_eq7_per_group_with_population_std():
    normal = [0.0, 1.0, 0.0, 1.0]  # population std 0.5: advantages ±1
    clipped = [0.49, 0.51, 0.49, 0.51]  # the paper's example: std 0.01 < ε_std = 0.1, so ±0.01 / 0.1
    equal = [0.3, 0.3, 0.3, 0.3]  # zero spread: zero advantages
    advantages, clip_frac = std_clipped_advantages(torch.tensor(normal + clipped + equal), 4, 0.1)
    expected = [-1, 1, -1, 1] + [-0.1, 0.1, -0.1, 0.1] + [0, 0, 0, 0]
    torch.testing.assert_close(advantages, torch.tensor(expected, dtype=torch.float32))
    assert clip_frac == pytest.approx(2 / 3)  # the clipped and the all-equal group


def test_advantages_use_the_population_not_the_sample_std():
    values = np.array([0.2, 0.5, 0.9])
    advantages, clip_frac = std_clipped_advantages(torch.tensor(values), 3, 0.1)
    np.testing.assert_allclose(advantages.numpy(), (values - values.mean()) / values.std(ddof=0), rtol=1e-6)
    assert clip_frac == 0.0


def test_rollout_parts_and_o_f_is_the_rollout_answer():
    rollout = parse_rollout(ROLLOUT)
    assert rollout.rationale.startswith("REASON-TEXT") and rollout.evidence == "EVIDENCE-TEXT Gustave Eiffel"
    assert rollout.answer == "Gustave Eiffel" and rollout.well_formatted
    assert parse_rollout("<reason>only a rationale").answer == ""  # no <answer>: no o_f


def test_masked_contexts_hold_exactly_what_eq4_says(tokenizer):
    cfg = RewardsConfig()
    o_r, o_e = answer_contexts(QUESTION, PASSAGES, parse_rollout(ROLLOUT), ("rationale", "evidence"), cfg)
    text_r, text_e = o_r.render(tokenizer), o_e.render(tokenizer)
    # o_r = M(· | q, P, r, [e masked])
    assert QUESTION in text_r and "PASSAGE-FACT" in text_r and "PASSAGE-OTHER" in text_r
    assert "REASON-TEXT" in text_r and "EVIDENCE-TEXT" not in text_r
    assert text_r.endswith("</reason><extract></extract><answer>")
    # o_e = M(· | q, [P masked], [r masked], e)
    assert QUESTION in text_e and "EVIDENCE-TEXT" in text_e
    assert "PASSAGE-FACT" not in text_e and "PASSAGE-OTHER" not in text_e and "REASON-TEXT" not in text_e
    assert text_e.endswith("<reason></reason><extract>EVIDENCE-TEXT Gustave Eiffel</extract><answer>")
    # hard masking: each context is tokenised from its own text (prefilled from scratch)
    assert o_e.token_ids(tokenizer) == tokenizer.encode(text_e, add_special_tokens=False)


def test_only_the_masked_answers_of_the_subset_are_generated():
    assert masked_targets(("rationale", "evidence", "full")) == ("rationale", "evidence")
    assert masked_targets(("evidence", "full")) == ("evidence",)
    assert masked_targets(("full",)) == ()
    with pytest.raises(ValueError):
        answer_contexts(QUESTION, PASSAGES, parse_rollout(ROLLOUT), ("full",), RewardsConfig())


def test_reward_is_eq5_of_the_three_answers(tokenizer):
    cfg = RewardsConfig()
    score = score_rollout(ROLLOUT, "Gustave Eiffel</answer>", "Paris</answer>", ["Gustave Eiffel"], 200, cfg,
                          tokenizer)
    assert score.f1 == {"rationale": 1.0, "evidence": 0.0, "full": 1.0}
    assert score.format == 1.0 and score.em["full"] == 1.0
    r_len = rewards.rationale_length_reward(score.len_reason, score.len_extract, cfg.tau)
    e_len = rewards.evidence_length_reward(score.len_extract, 200, cfg.gamma, cfg.omega)
    assert score.final == pytest.approx(0.8 * 2 / 3 + 0.1 * (r_len + e_len) / 2 + 0.1)


def test_reward_function_of_a_subset_ignores_answers_it_did_not_generate(tokenizer):
    logged = {}
    reward = DesignReward(RewardsConfig(answer_subset=("full",)), tokenizer)
    completions = [[{"role": "assistant", "content": ROLLOUT}], [{"role": "assistant", "content": "no tags"}]]
    values = reward(completions, golden_answers=[["Gustave Eiffel"]] * 2, passages_length=[200, 200],
                    o_r=[None, None], o_e=[None, None], log_metric=logged.__setitem__)
    assert values[0] > values[1]
    assert math.isnan(logged["eviomni/f1_rationale"]) and logged["eviomni/f1_full"] == 0.5
    assert logged["eviomni/reward_format"] == 0.5


def test_train_log_rows_and_resume_truncation(tmp_path):
    logs = {"loss": 0.1, "kl": 0.02, "clip_ratio/region_mean": 0.0, "eviomni/reward_final": 0.4,
            "eviomni/f1_rationale": float("nan"), "completions/mean_length": 12.0, "epoch": 0.5}
    row = train_log_row(logs, step=3, wall_time=1.0)
    assert row["reward_final"] == 0.4 and row["clip_frac"] == 0.0 and row["completion_length"] == 12.0
    assert row["f1_rationale"] is None and row["step"] == 3
    log = StepLog(tmp_path / "train_log.jsonl")
    for step in (1, 2, 3):
        log.append({"step": step, "reward_final": step / 10})
    with open(log.path, "a") as f:
        f.write('{"step": 4, "rew')  # a line cut off by a kill
    assert [r["step"] for r in log.rows()] == [1, 2, 3]
    log.truncate(2)  # resuming from checkpoint-2
    assert [json.loads(line)["step"] for line in log.path.read_text().splitlines()] == [1, 2]
    assert read_log(log.path)["reward_final"].tolist() == [0.1, 0.2]


def test_a_damaged_log_row_is_an_error_naming_file_and_line_and_resume_keeps_the_rows_after_it(tmp_path):
    log = StepLog(tmp_path / "train_log.jsonl")
    for step in (1, 2, 3, 4):
        log.append({"step": step})
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text("".join(lines[:1] + ['{"step": 2, "lo\n'] + lines[2:]))
    with pytest.raises(InputError, match=r"train_log.jsonl:2: damaged row, invalid JSON"):
        read_log(log.path)
    with pytest.raises(InputError, match=r"train_log.jsonl:2: damaged row"):
        log.truncate(3)  # resuming from checkpoint-3
    assert log.path.read_text().count("\n") == 4  # nothing was rewritten
    log.path.write_text("".join(lines[:1] + ['[2]\n'] + lines[2:]))
    with pytest.raises(InputError, match=r"train_log.jsonl:2: field 'step': damaged row"):
        log.rows()


def test_a_checkpoint_cut_by_a_kill_while_saving_is_skipped_with_a_warning(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    for step in (2, 4, 6, 10):
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
    for step in (2, 4):
        TrainerState(global_step=step).save_to_json(str(checkpoints / f"checkpoint-{step}" / "trainer_state.json"))
    (checkpoints / "checkpoint-6" / "model.safetensors").write_bytes(b"")  # killed before trainer_state.json
    (checkpoints / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 1')  # killed while writing it
    with pytest.warns(UserWarning) as warned:
        assert last_checkpoint(checkpoints) == str(checkpoints / "checkpoint-4")  # by step, not by name
    assert [str(w.message).split(" is ")[0] for w in warned] == [str(checkpoints / f"checkpoint-{s}") for s in (10, 6)]
    assert "trainer_state.json damaged" in str(warned[0].message) and "missing" in str(warned[1].message)
    assert last_checkpoint(tmp_path / "none") is None


def test_a_run_directory_of_another_or_of_no_recorded_configuration_is_cleared(tmp_path):
    run = TrainRun(tmp_path / "run")
    (run.checkpoints / "checkpoint-2").mkdir(parents=True)  # left by a deletion cut by a kill: no run_config.json
    with pytest.warns(UserWarning, match="no run_config.json"):
        _prepare_run_dir(run, {"lr": 1}, is_main=True)
    assert not run.checkpoints.exists() and json.loads(run.config_file.read_text())["lr"] == 1
    (run.checkpoints / "checkpoint-2").mkdir(parents=True)
    _prepare_run_dir(run, {"lr": 1}, is_main=True)  # the same configuration: resumed
    assert (run.checkpoints / "checkpoint-2").is_dir()
    with pytest.warns(UserWarning, match="another configuration"):
        _prepare_run_dir(run, {"lr": 2}, is_main=True)
    assert not run.checkpoints.exists() and json.loads(run.config_file.read_text())["lr"] == 2


def test_profiles_carry_the_papers_grpo_settings_and_a_resumable_checkpoint_policy():
    for name in ("paper-1p5b", "paper-7b"):
        train = load_profile(name).train
        assert (train.learning_rate, train.beta, train.epsilon, train.epochs) == (1e-6, 0.01, 0.2, 1.0)
    assert all(load_profile(name).train is not None for name in profile_names())
    with pytest.raises(ConfigError, match="save_total_limit"):  # limit 1 would delete the last checkpoint
        TrainConfig(dataset="nq", save_total_limit=1)


def test_grpo_args_carry_the_vllm_settings_and_the_importance_sampling_switch(tmp_path):
    assert GRPOConfig.__dataclass_fields__["vllm_importance_sampling_correction"].default is True  # TRL's
    assert TrainConfig(dataset="nq").vllm_importance_sampling_correction is False  # Eq. 8 has none (D139)
    for name in ("paper-1p5b", "paper-7b"):
        cfg = load_profile(name)
        args = grpo_args(cfg, cfg.train, tmp_path)
        assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_importance_sampling_correction is False
        assert args.vllm_max_model_length == cfg.train.vllm_max_model_length and args.vllm_server_base_url is None
    server = dataclasses.replace(cfg.train, vllm_mode="server", vllm_server_base_url="http://127.0.0.1:8000",
                                 vllm_importance_sampling_correction=True)
    args = grpo_args(cfg, server, tmp_path)
    assert (args.vllm_mode, args.vllm_server_base_url) == ("server", "http://127.0.0.1:8000")
    assert args.vllm_importance_sampling_correction is True and args.vllm_importance_sampling_mode == "sequence_mask"


WARMUP_ROW = {"id": "q1", "question": "Who designed the Eiffel Tower?",
              "golden_answers": ["Gustave Eiffel", "Eiffel"],
              "passages": [{"contents": "Paris\nParis is the capital. Eiffel lived here."},  # title never counts
                           {"contents": "Eiffel Tower\nIt opened in 1889. The company of Gustave Eiffel built it! Tall."}]}


def test_the_first_sentence_holding_an_answer_is_found_in_passage_order():
    assert first_answer_sentence(WARMUP_ROW["passages"], WARMUP_ROW["golden_answers"]) == AnswerSentence(
        1, "Paris", "Eiffel lived here.", "Eiffel")
    assert first_answer_sentence(WARMUP_ROW["passages"][1:], WARMUP_ROW["golden_answers"]) == AnswerSentence(
        1, "Eiffel Tower", "The company of Gustave Eiffel built it!", "Gustave Eiffel")
    assert first_answer_sentence(WARMUP_ROW["passages"], ["Eiffel Tower"]) is None  # only in a title


def test_string_inclusion_targets_are_well_formatted_and_kept_behind_their_switch(tokenizer):
    row = {**WARMUP_ROW, "passages": WARMUP_ROW["passages"][1:]}
    target = warmup_target(row, "string_inclusion", seed=0)
    assert target == ("<reason>Passage 1 (Eiffel Tower) has the sentence that answers the question.</reason>\n"
                      "<extract>The company of Gustave Eiffel built it!</extract>\n<answer>Gustave Eiffel</answer>")
    assert tags.is_well_formatted(target)
    assert warmup_target({**row, "golden_answers": ["Paris"]}, "string_inclusion", seed=0) is None  # not in passage 2

    rows = [{**row, "id": f"q{i}"} for i in range(5)] + [{**row, "id": "none", "golden_answers": ["Oslo"]}]
    examples = warmup_examples(rows, max_questions=3, seed=0, targets="string_inclusion")
    assert len(examples) == 3 and all(e["completion"][0]["content"] == target for e in examples)
    assert examples[0]["prompt"] == extraction_row(row, tokenizer, "tokens")["prompt"]  # GRPO's own prompt
    assert len(warmup_examples(rows, 10, 0, "string_inclusion")) == 5  # the row without a target is never drawn
    with pytest.raises(ValueError, match="train.format_warmup.targets"):
        warmup_target(row, "gold", seed=0)


def test_format_only_targets_copy_a_seeded_sentence_and_a_span_of_it(tokenizer):
    target = warmup_target(WARMUP_ROW, "format_only", seed=0)
    assert target == format_only_target(WARMUP_ROW, seed=0) == format_only_target(dict(WARMUP_ROW), seed=0)
    assert tags.is_well_formatted(target)
    parsed = tags.parse_response(target)
    drawn = random_sentence(WARMUP_ROW["passages"], "q1", seed=0)
    assert parsed.rationale == f"Passage {drawn.passage} ({drawn.title}) has the sentence I copy as evidence."
    assert parsed.evidence == drawn.sentence
    assert drawn in passage_sentences(WARMUP_ROW["passages"])  # a whole sentence of a passage text
    assert 1 <= len(parsed.answer.split()) <= 3 and parsed.answer in parsed.evidence  # a span of the extract

    sentences = passage_sentences(WARMUP_ROW["passages"])
    assert [s.sentence for s in sentences] == ["Paris is the capital.", "Eiffel lived here.", "It opened in 1889.",
                                               "The company of Gustave Eiffel built it!", "Tall."]
    drawn = collections.Counter(random_sentence(WARMUP_ROW["passages"], f"q{i}", 0).sentence for i in range(500))
    assert set(drawn) == {s.sentence for s in sentences}  # every sentence can be drawn: no position is favoured
    assert max(drawn.values()) < 2 * min(drawn.values())  # uniform: 100 each in expectation
    assert format_only_target({**WARMUP_ROW, "passages": [{"contents": "Empty\n "}]}, seed=0) is None

    rows = [{**WARMUP_ROW, "id": f"q{i}"} for i in range(5)]
    examples = warmup_examples(rows + [{**WARMUP_ROW, "id": "none", "golden_answers": ["Oslo"]}], 10, 0)
    assert len(examples) == 6  # an unanswerable question is drawn like any other
    assert examples[0]["prompt"] == extraction_row(WARMUP_ROW, tokenizer, "tokens")["prompt"]


golden_answers = st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(answers=st.lists(golden_answers, min_size=6, max_size=6), n=st.integers(1, 6))
@example(answers=[["Gustave Eiffel"], ["Paris"], ["1889"], ["Tall"], ["Oslo"], ["Eiffel lived here."]], n=3)
def test_format_only_warmup_is_identical_whatever_the_golden_answers(answers, n):
    """The targets, and which questions are trained on, carry no information about the golden answers."""
    rows = [{**WARMUP_ROW, "id": f"q{i}"} for i in range(6)]
    relabelled = [{**row, "golden_answers": golden} for row, golden in zip(rows, answers)]
    assert [format_only_target(r, 7) for r in relabelled] == [format_only_target(r, 7) for r in rows]
    assert warmup_examples(relabelled, n, seed=7) == warmup_examples(rows, n, seed=7)


def test_the_recall_check_pairs_the_policys_extract_with_the_random_sentence_by_hand():
    rows = [{**WARMUP_ROW, "id": f"q{i}"} for i in range(8)]
    drawn = [random_sentence(row["passages"], row["id"], 0).sentence for row in rows]
    holds = [metrics.answer_recall(sentence, WARMUP_ROW["golden_answers"]) for sentence in drawn]
    good = "<reason>r</reason><extract>The company of Gustave Eiffel built it!</extract><answer>Eiffel</answer>"
    bad = "<reason>r</reason><extract>It opened in 1889.</extract><answer>1889</answer>"
    rollouts = [good] * 6 + ["<reason>r</reason><extract>Gustave Eiffel", "Gustave Eiffel, no tags"]
    items = recall_items(rows, rollouts, seed=0)
    assert items["evidence_random"].tolist() == drawn and items["ar_random"].tolist() == holds
    assert items["evidence_policy"].tolist() == [good[27:66]] * 6 + ["Gustave Eiffel", ""]  # no <extract>: none
    assert items["ar_policy"].tolist() == [1.0] * 7 + [0.0]
    assert items["ar_random_expected"].tolist() == [2 / 5] * 8  # 2 of the 5 sentences hold Eiffel

    items = recall_items(rows, [bad] * 8, seed=0)
    assert items["answerable"].all()
    summary = compare_recall(items).set_index("subset").loc["all"]
    ones = int(sum(holds))  # the random sentence recalls, the policy never does: all pairs are discordant that way
    assert summary["policy_only"] == 0 and summary["random_only"] == ones > 0
    assert summary["ar_difference"] == pytest.approx(-ones / 8)
    assert summary["mcnemar_p"] == pytest.approx(min(1.0, 2 * 0.5 ** ones))  # exact binomial, two-sided
    assert summary["format_rate"] == summary["extract_rate"] == 1.0 and summary["questions"] == 8
    # the exact interval: Clopper-Pearson of 0/ones is [0, 1 − 0.025^(1/ones)], times ones/8 as 2θ − 1
    assert [summary["ci_low"], summary["ci_high"]] == pytest.approx(
        [-ones / 8, ones / 8 * (1 - 2 * 0.025 ** (1 / ones))])
    assert summary["words_policy"] == 4.0

    unanswerable = [{**row, "golden_answers": ["Oslo"]} if i >= 6 else row for i, row in enumerate(rows)]
    items = recall_items(unanswerable, [bad] * 8, seed=0)
    assert items["answerable"].tolist() == [True] * 6 + [False] * 2  # "Oslo" is in no passage
    summary = compare_recall(items).set_index("subset")
    first_six = int(sum(holds[:6]))
    assert summary["questions"].tolist() == [8, 6] and summary["random_only"].tolist() == [first_six] * 2
    assert summary["ar_difference"].tolist() == pytest.approx([-first_six / 8, -first_six / 6])  # 8 dilutes it
    assert summary.loc["answerable", ["ci_low", "ci_high"]].tolist() == pytest.approx(
        stats.mcnemar_exact_interval(0, first_six, 6))
    assert compare_recall(items.iloc[5:])["subset"].tolist() == ["all"]  # one answerable question: no subset row
    with pytest.raises(ValueError, match="8 questions but 1 rollouts"):
        recall_items(rows, [bad], seed=0)


# rewards.design: one config key switches the training reward (issue #18) ---------------------------------------

def test_switching_rewards_design_changes_the_training_reward(tokenizer):
    completions = [[{"role": "assistant", "content": "<relevance>[1]</relevance>" + ROLLOUT}],
                   [{"role": "assistant", "content": ROLLOUT.replace("Gustave Eiffel</answer>", "Paris</answer>")}]]
    columns = dict(golden_answers=[["Gustave Eiffel"]] * 2, passages_length=[200, 200], o_r=[None, None],
                   o_e=[None, None], question=[QUESTION] * 2, gold_passages=[[1], [1]])
    values = {}
    for design in ("eval_rar", "arena", "evinote"):
        cfg = RewardsConfig(answer_subset=("full",), design=design)
        nli = (lambda p, h: [0.5] * len(p)) if design == "evinote" else None
        logged = {}
        values[design] = DesignReward(cfg, tokenizer, nli)(completions, log_metric=logged.__setitem__, **columns)
        assert logged[f"eviomni/reward_{design}"] == pytest.approx(np.mean(values[design]))
    # rollout 1: EM 1 (the relevance prefix breaks EviOmni's strict format); rollout 2: wrong answer, evidence holds gold
    assert values["eval_rar"] == [1.0, pytest.approx(0.1)]
    assert values["arena"] == [1 + 1 + 1 + 10, 0 + 0 + 0]
    assert values["evinote"] == [0.0, 0.0]  # paper reading: format ✗ / no note markers
    eviomni = DesignReward(RewardsConfig(answer_subset=("full",)), tokenizer)(completions, **columns)
    assert eviomni != values["eval_rar"]


def test_a_reward_design_that_declares_eq5s_terms_logs_them_under_its_own_name(tokenizer, monkeypatch):
    completions = [[{"role": "assistant", "content": ROLLOUT}]]
    columns = dict(golden_answers=[["Gustave Eiffel"]], passages_length=[200], o_r=["Eiffel"], o_e=["Paris"],
                   question=[QUESTION])
    f1_score = score_rollout(ROLLOUT, "Eiffel", "Paris", ["Gustave Eiffel"], 200, RewardsConfig(), tokenizer)
    assert f1_score.f1 == pytest.approx({"rationale": 2 / 3, "evidence": 0.0, "full": 1.0})
    logged = {}
    eqr = DesignReward(RewardsConfig(design="eviomni_eqr"), tokenizer, lambda p, h: [0.5] * len(p))
    values = eqr(completions, log_metric=logged.__setitem__, **columns)
    assert eqr.__name__ == "eviomni_eqr" and values == [pytest.approx(f1_score.final + 0.5)]
    assert logged == pytest.approx({f"eviomni/{k}": v for k, v in f1_score.summary().items()}
                                   | {"eviomni/reward_eviomni_eqr": values[0]})

    monkeypatch.setitem(REWARD_DESIGNS, "eviomni_em",
                        dataclasses.replace(REWARD_DESIGNS["eviomni"], name="eviomni_em", answer_metric="em"))
    logged = {}
    em = DesignReward(RewardsConfig(design="eviomni_em"), tokenizer)
    values = em(completions, log_metric=logged.__setitem__, **columns)
    # R^ans: EM (0, 0, 1) instead of F1 (2/3, 0, 1); F1 and EM are both still logged
    assert em.__name__ == "eviomni_em" and values == [pytest.approx(f1_score.final - 0.8 * 2 / 9)]
    assert logged["eviomni/reward_final"] == pytest.approx(values[0])  # Eq. 5 itself: not logged twice
    assert "eviomni/reward_eviomni_em" not in logged
    assert logged["eviomni/f1_rationale"] == pytest.approx(2 / 3) and logged["eviomni/em_rationale"] == 0.0
    assert DesignReward(RewardsConfig(design="eval_rar"), tokenizer).__name__ == "eval_rar"


def test_designs_that_need_nli_refuse_to_run_without_a_scorer(tokenizer):
    with pytest.raises(ValueError, match="needs an NLI scorer"):
        DesignReward(RewardsConfig(design="evinote"), tokenizer)


def test_training_rows_carry_arenas_gold_passages(tokenizer):
    passages = [{"id": "a", "contents": "Eiffel Tower\nIt was built by Gustave Eiffel."},
                {"id": "b", "contents": "Paris\nCapital of France."}]
    row = {"id": 1, "question": QUESTION, "golden_answers": ["Gustave Eiffel"], "passages": passages}
    assert extraction_row(row, tokenizer, "tokens")["gold_passages"] == [1]  # contains a golden answer
    supporting = [dict(p, is_supporting=i == 1) for i, p in enumerate(passages)]
    assert extraction_row({**row, "passages": supporting}, tokenizer, "tokens")["gold_passages"] == [2]


# train.kl_estimator: k3 (TRL) vs k2 (ARENA) ---------------------------------------------------------------------

def test_kl_estimate_hand_values():
    logp, ref = torch.log(torch.tensor([0.5, 0.25])), torch.log(torch.tensor([0.25, 0.25]))
    d = math.log(0.5)  # ref − logp of the first token
    torch.testing.assert_close(kl_estimate(logp, ref, "k3"), torch.tensor([math.exp(d) - d - 1, 0.0]))
    torch.testing.assert_close(kl_estimate(logp, ref, "k2"), torch.tensor([0.5 * d**2, 0.0]))
    with pytest.raises(ValueError, match="unknown KL estimator 'k9'"):
        kl_estimate(logp, ref, "k9")


def _stub_trainer(estimator: str, monkeypatch, logp: torch.Tensor, ref: torch.Tensor, mask: torch.Tensor, beta: float,
                  bias_correction: bool = False):
    """An EviOmniTrainer without a model whose parent loss is TRL's KL term alone (zero policy term)."""
    from types import SimpleNamespace

    from trl import GRPOTrainer

    def parent_logps(self, *args, **kwargs):
        return logp, None, None

    def parent_loss(self, model, inputs):  # TRL 1.16.0: β·k3·coef_1 per token, grpo aggregation, no policy term
        per_token_logps, _, _ = self._get_per_token_logps_and_entropies(model, None, None, None)
        kl = kl_estimate(per_token_logps, inputs["ref_per_token_logps"], "k3")
        if bias_correction:
            kl = kl * torch.exp(per_token_logps - per_token_logps.detach())
        return aggregate_like_trl(self.beta * kl, inputs["completion_mask"], "grpo")

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", parent_logps)
    monkeypatch.setattr(GRPOTrainer, "_compute_loss", parent_loss)
    trainer = EviOmniTrainer.__new__(EviOmniTrainer)
    trainer.kl_estimator, trainer.beta, trainer.loss_type, trainer._captured_logps = estimator, beta, "grpo", None
    trainer.model, trainer.current_gradient_accumulation_steps = SimpleNamespace(training=True), 1
    trainer.max_completion_length, trainer._metrics = 2, {"train": collections.defaultdict(list)}
    trainer.args = SimpleNamespace(use_bias_correction_kl=bias_correction)
    trainer.importance_sampling_level, trainer.shared_prefill = "token", False
    inputs = {"ref_per_token_logps": ref, "completion_mask": mask}
    return trainer, inputs


def test_k2_estimator_replaces_k3_in_the_loss_by_hand(monkeypatch):
    logp = torch.log(torch.tensor([[0.5, 0.25], [0.25, 0.9]])).requires_grad_()
    ref = torch.log(torch.tensor([[0.25, 0.25], [0.25, 0.5]]))
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # the last token is padding
    d = math.log(2.0)  # logp − ref of token (0, 0); every other unmasked token has logp = ref
    k3_loss = 0.1 * ((math.exp(-d) + d - 1) / 2 + 0.0) / 2  # β · mean over sequences of per-sequence means
    k2_loss = 0.1 * ((0.5 * d**2) / 2 + 0.0) / 2
    trainer, inputs = _stub_trainer("k3", monkeypatch, logp, ref, mask, beta=0.1)
    assert trainer._compute_loss(None, inputs).item() == pytest.approx(k3_loss)
    trainer, inputs = _stub_trainer("k2", monkeypatch, logp, ref, mask, beta=0.1)
    loss = trainer._compute_loss(None, inputs)
    assert loss.item() == pytest.approx(k2_loss) and k2_loss != pytest.approx(k3_loss)
    loss.backward()  # the gradient flows through the policy's log-probabilities: ∂/∂logp of β·½d²/2/2 = β·d/4
    assert logp.grad[0, 0].item() == pytest.approx(0.1 * d / 4)
    assert logp.grad[1, 1].item() == 0.0
    assert trainer._metrics["train"]["eviomni/kl_k2"] == [pytest.approx((0.5 * d**2) / 3)]


def test_kl_estimator_is_a_train_config_key_defaulting_to_trls_k3():
    assert TrainConfig(dataset="nq").kl_estimator == "k3"
    assert set(typing.get_args(typing.get_type_hints(TrainConfig)["kl_estimator"])) == set(KL_ESTIMATORS)


def test_rollout_model_is_a_train_config_key_defaulting_to_the_policy():
    assert TrainConfig(dataset="nq").rollout_model == "policy"
    assert set(typing.get_args(typing.get_type_hints(TrainConfig)["rollout_model"])) == set(ROLLOUT_MODELS)


def test_k2_estimator_keeps_trls_importance_ratio_on_the_kl_term(monkeypatch):
    logp = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    ref = torch.log(torch.tensor([[0.25, 0.25]]))
    trainer, inputs = _stub_trainer("k2", monkeypatch, logp, ref, torch.ones(1, 2), beta=0.1, bias_correction=True)
    loss = trainer._compute_loss(None, inputs)
    d = math.log(2.0)
    assert loss.item() == pytest.approx(0.1 * (0.5 * d**2) / 2)  # coef_1 = 1 on-policy: same value
    loss.backward()  # but ∂(k2·coef_1)/∂logp = k2' + k2 on-policy: β·(d + ½d²)/2
    assert logp.grad[0, 0].item() == pytest.approx(0.1 * (d + 0.5 * d**2) / 2)


def test_rolling_band_is_the_window_mean_and_its_standard_error_by_hand():
    band = rolling_band(pd.Series([0.0, 1.0, 2.0, 6.0], index=[1, 2, 3, 4]), 3)
    assert band["mean"].tolist() == [0.5, 1.0, 3.0, 4.0]  # centred windows {0,1} {0,1,2} {1,2,6} {2,6}
    # half-widths 1.96·sd/√n: 1.96·0.7071/√2, 1.96·1/√3, 1.96·√7/√3, 1.96·2.8284/√2
    assert band["high"].tolist() == pytest.approx([1.48, 2.131607, 5.993949, 7.92], abs=1e-6)
    assert band["low"].tolist() == pytest.approx([-0.48, -0.131607, 0.006051, 0.08], abs=1e-6)
    single = rolling_band(pd.Series([0.3]), 5)
    assert single["mean"].tolist() == [0.3] and single["low"].isna().all()  # no band from one point
    bounded = rolling_band(pd.Series([0.0, 0.0, 1.0, 1.0]), 3, (0.0, 1.0))  # F1 rewards: the band stays in [0, 1]
    # windows {0,0} {0,0,1} {0,1,1} {1,1}: half-width 1.96·√(1/3)/√3 = 1.96/3 on the middle ones, around 1/3 and 2/3
    assert bounded["low"].tolist() == pytest.approx([0.0, 0.0, 2 / 3 - 1.96 / 3, 1.0])  # not 1/3 − 1.96/3 < 0
    assert bounded["high"].tolist() == pytest.approx([0.0, 1 / 3 + 1.96 / 3, 1.0, 1.0])  # not 2/3 + 1.96/3 > 1
    assert rolling_band(pd.Series([0.0, 1.0, 2.0, 6.0]), 3, (0.0, None))["low"].tolist() == pytest.approx(
        [0.0, 0.0, 0.006051, 0.08], abs=1e-6)  # lengths: only the lower bound


def test_figure_4s_bands_stay_within_the_bounds_of_rewards_and_lengths():
    spiky = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0]  # mean ± 1.96 SE would leave [0, 1] on both sides
    log = pd.DataFrame({"f1_full": spiky, "f1_rationale": spiky, "f1_evidence": spiky,
                        "len_reason": [0, 0, 0, 30, 0, 0, 0, 0], "len_extract": 5.0, "len_answer": 1.0},
                       index=range(1, 9))
    rewards, lengths = (np.concatenate([band.get_paths()[0].vertices[:, 1] for band in ax.collections])
                        for ax in plot_training_dynamics(log, smooth=3).axes)
    assert 0.0 <= rewards.min() and rewards.max() <= 1.0 and lengths.min() >= 0.0
    assert lengths.max() == pytest.approx(10 * (1 + 1.96))  # windows around the 30: mean 10 = SE; no upper bound


def test_the_held_out_comparison_pairs_the_two_policies_by_hand():
    ids = ["a", "b", "c", "d"]
    start = pd.DataFrame({"id": ids, "answerable": [True, True, True, False], "f1_evidence": [0, 0.5, 0, 1],
                          "ar_evidence": [0, 1, 0, 0], "reward_format": [0, 1, 1, 0]})
    trained = start.assign(f1_evidence=[1, 0.5, 0.5, 1], ar_evidence=[1, 1, 1, 0], reward_format=[1, 1, 1, 1])
    both = compare_policies(start, trained)
    assert both["subset"].tolist() == ["all"] * 3 + ["answerable"] * 3
    table = both[both["subset"] == "all"].set_index("metric")
    assert table["start"].tolist() == [0.375, 0.25, 0.5] and table["trained"].tolist() == [0.75, 0.75, 1.0]
    assert table["difference"].tolist() == [0.375, 0.5, 0.5]
    assert table.loc["ar_evidence", ["trained_only", "start_only"]].tolist() == [2, 0]
    # exact McNemar with 2 discordant pairs on one side: 2·0.5²; the permutation test over the 2⁴ sign flips of the
    # differences (1, 0, 0.5, 0): |mean| ≥ 0.375 for 2 of the 4 flips of the non-zero ones
    assert table["p_value"].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert table["p_holm"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert table["test"].tolist() == ["approximate randomization (two-sided)", "McNemar (exact)", "McNemar (exact)"]
    # the binary rows' interval is the exact one: Clopper-Pearson of 2/2 is [√0.025, 1], times 2/4 as 2θ − 1
    assert table.loc["ar_evidence", ["ci_low", "ci_high"]].tolist() == pytest.approx([0.5 * (2 * 0.025**0.5 - 1), 0.5])
    answerable = both[both["subset"] == "answerable"].set_index("metric")  # the 3 questions with an answer to find
    assert (answerable["questions"] == 3).all()
    assert answerable["difference"].tolist() == pytest.approx([0.5, 2 / 3, 1 / 3])
    assert answerable.loc["reward_format", ["trained_only", "start_only"]].tolist() == [1, 0]
    one = compare_policies(start.assign(answerable=[True, False, False, False]), trained)
    assert set(one["subset"]) == {"all"}  # one answerable question: no subset to test
    with pytest.raises(ValueError, match="different questions"):
        compare_policies(start, trained.iloc[::-1])


def test_held_out_questions_need_dev_questions_the_selection_does_not_use():
    cfg = load_profile("ci")
    no_holdout = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, dev_max_questions=None))
    with pytest.raises(ValueError, match="train.dev_max_questions is null"):
        heldout_rows(no_holdout)
    none = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, heldout_questions=None))
    with pytest.raises(ValueError, match="train.heldout_questions is null"):
        heldout_rows(none)


class CountingScorer:
    """A trainer whose greedy dev scoring is counted (each call scores every row 0.5 on F1 of o_e)."""

    def __init__(self):
        self.calls = 0

    def score_greedy(self, rows):
        self.calls += 1
        return [types.SimpleNamespace(summary=lambda: {"f1_evidence": 0.5}) for _ in rows]


@pytest.mark.parametrize("max_steps, score_single, scored", [
    (1, False, 0),   # Table 3's one-step row: its only checkpoint has nothing to be selected against (D172)
    (24, False, 1),  # two checkpoints (12, 24): the dev pass selects
    (1, True, 1),    # the default, and length tuning, whose pair runs are scored by their dev value
])
def test_a_run_with_one_checkpoint_skips_its_dev_pass_only_when_asked(tmp_path, max_steps, score_single, scored):
    from repro.train.grpo.callbacks import DevSelectionCallback

    trainer = CountingScorer()
    callback = DevSelectionCallback(trainer, [{"id": "q"}], "f1_evidence", tmp_path / "dev_eval.jsonl",
                                    evaluate_initial=False, score_single_checkpoint=score_single)
    state = TrainerState(max_steps=max_steps, global_step=max_steps)
    callback.on_step_end(types.SimpleNamespace(save_steps=12), state, TrainerControl(should_save=True))
    assert trainer.calls == scored
    assert (state.best_metric, state.best_global_step) == ((0.5, max_steps) if scored else (None, None))
    log = tmp_path / "dev_eval.jsonl"
    assert (len(read_log(log)) if log.exists() and log.stat().st_size else 0) == scored
