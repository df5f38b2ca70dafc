"""End to end on the `ci` model (a real 2-layer Llama with random weights): a few GRPO steps change the
parameters, write both logs, survive a crash and resume, export a loadable extractor; a real batch gets
Eq. 7 advantages and a completion-only loss mask; `accelerate launch` runs the same trainer in 2 processes.

A random model never writes the format, so these tests check mechanics, not learning."""

import dataclasses
import json
import math
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from repro.config import load_profile, with_overrides
from repro.data import layout
from repro.data.splits import sample_rows
from repro.formulas import prompts, rewards
from repro.io import write_jsonl, write_parts
from repro.studies.heldout import compare_policies, heldout_rows, score_policy
from repro.studies.recall_check import warmup_recall_check
from repro.train.grpo import TrainRun, fit, read_log, train_extractor
from repro.train.grpo.data import extraction_row, extraction_rows
from repro.train.grpo.run import build_trainer, grpo_seed
from repro.train.grpo.warmup import warm_up_policy

pytestmark = pytest.mark.slow

LOG_COLUMNS = ["f1_rationale", "f1_evidence", "f1_full", "reward_length_rationale", "reward_length_evidence",
               "reward_format", "reward_final", "len_reason", "len_extract", "len_answer", "kl", "clip_frac",
               "std_clip_frac"]


def contexts(n: int) -> list[dict]:
    """Contexts rows (QA row + passages) in the data stage's format."""
    return [{"id": f"q{i}", "question": f"Who founded the town of Vell{i}?", "golden_answers": [f"Anna Berg{i}"],
             "passages": [{"id": f"p{i}-{j}", "contents": f'"Vell{i}"\nVell{i} was founded by Anna Berg{i} in '
                                                           f"{1800 + j}, on the river Tarn.", "score": 1.0 - j / 10}
                          for j in range(3)]}
            for i in range(n)]


@pytest.fixture(scope="module")
def ci_cfg(tiny_llama_dir):
    cfg = load_profile("ci")
    train = dataclasses.replace(cfg.train, max_steps=3, save_steps=2,  # the kill-and-resume test counts on these
                                format_warmup=None)  # GRPO from the random model; the warm-up has its own test
    return dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=str(tiny_llama_dir)), train=train)


@pytest.fixture(scope="module")
def rows(tiny_llama_dir):
    return extraction_rows(contexts(8), AutoTokenizer.from_pretrained(tiny_llama_dir), "tokens")


class SimulatedKill(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise RuntimeError("simulated kill")


def test_training_changes_the_policy_logs_each_step_and_resumes_after_a_kill(ci_cfg, rows, tmp_path,
                                                                             tiny_llama_dir):
    run = TrainRun(tmp_path / "run")
    with pytest.raises(RuntimeError, match="simulated kill"):  # killed between checkpoint-2 and checkpoint-3
        fit(ci_cfg, run, rows[:6], rows[6:], progress=False, callbacks=[SimulatedKill()])
    assert (run.checkpoints / "checkpoint-2").is_dir() and not (run.checkpoints / "checkpoint-3").exists()
    before = read_log(run.train_log)
    assert list(before.index) == [1, 2]

    fit(ci_cfg, run, rows[:6], rows[6:], progress=False)  # the rerun continues from checkpoint-2
    log = read_log(run.train_log)
    assert list(log.index) == [1, 2, 3]
    assert log.loc[1, "wall_time"] == before.loc[1, "wall_time"]  # steps 1-2 were not trained again
    assert set(LOG_COLUMNS) <= set(log.columns)
    generation_steps = log["reward_final"].notna()  # rewards come with each generation batch (every 2 steps)
    assert list(log.index[generation_steps]) == [1, 3]
    assert log.loc[generation_steps, LOG_COLUMNS].notna().all().all()
    assert json.loads((run.checkpoints / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3

    dev = read_log(run.dev_log)
    assert list(dev.index) == [0, 2, 3] and dev["checkpoint"].tolist()[1:] == ["checkpoint-2", "checkpoint-3"]
    assert dev["checkpoint"].isna()[0]  # the initial policy: a reference row, never selected
    selection = run.selection()
    assert selection["metric"] == "f1_evidence" and selection["step"] in (2, 3)

    trained = AutoModelForCausalLM.from_pretrained(run.extractor, use_safetensors=True)
    initial = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    changed = [name for name, p in trained.named_parameters()
               if not torch.equal(p, initial.get_parameter(name))]
    assert changed, "GRPO steps left every parameter unchanged"
    targets = tuple(f"{module}.weight" for module in ci_cfg.train.lora.target_modules)
    assert all(name.endswith(targets) for name in changed)  # the LoRA policy's adapter, merged (D144)
    assert not any("lora" in name for name in trained.state_dict())
    assert AutoTokenizer.from_pretrained(run.extractor).chat_template  # a complete model directory

    fit(ci_cfg, run, rows[:6], rows[6:], progress=False)  # a rerun of a finished run trains nothing
    assert read_log(run.train_log).equals(log) and len(read_log(run.dev_log)) == 3


def test_the_placebo_design_permutes_each_groups_answer_terms_before_eq7(ci_cfg, rows, tmp_path):
    cfg = with_overrides(ci_cfg, {"rewards.design": "eviomni_placebo"})
    trainer = build_trainer(cfg, TrainRun(tmp_path / "run"), rows[:6], rows[6:], progress=False)
    batch = [dict(rows[0]) for _ in range(4)] + [dict(rows[1]) for _ in range(4)]  # two groups of G = 4
    trainer.model.train()
    out = trainer._generate_and_score_completions(batch)

    final = trainer._gathered_rewards[:, 0].double().numpy()  # Eq. 5 per rollout, as the reward function returns it
    answer = np.asarray(trainer._gathered_answer_terms)
    assert answer.shape == (8,) and np.all((answer >= 0) & (answer <= cfg.rewards.weights[0]))
    placebo = rewards.placebo_final_rewards(final, answer, 4, (grpo_seed(cfg, cfg.train), 0))  # GRPO's seed, step 0
    expected = rewards.clipped_group_advantages(placebo, 4, cfg.rewards.eps_std)
    np.testing.assert_allclose(out["advantages"].numpy(), expected, atol=1e-6)
    assert trainer._metrics["train"]["eviomni/group_reward_std"] == [
        pytest.approx(placebo.reshape(2, 4).std(axis=1).mean())]


def test_a_real_batch_gets_eq7_advantages_masked_answers_and_a_completion_only_loss(ci_cfg, rows, tmp_path,
                                                                                    tiny_llama_dir):
    trainer = build_trainer(ci_cfg, TrainRun(tmp_path / "run"), rows[:6], rows[6:], progress=False)
    batch = [dict(rows[0]) for _ in range(4)] + [dict(rows[1]) for _ in range(4)]  # two groups of G = 4
    trainer.model.train()
    out = trainer._generate_and_score_completions(batch)

    final = trainer._gathered_rewards[:, 0].double().numpy()
    expected = rewards.clipped_group_advantages(final, 4, ci_cfg.rewards.eps_std)
    np.testing.assert_allclose(out["advantages"].numpy(), expected, atol=1e-6)
    assert all(isinstance(row["o_r"], str) and isinstance(row["o_e"], str) for row in batch)  # one each

    initial = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    base = {name.replace("base_model.model.", "").replace(".base_layer", ""): p
            for name, p in trainer.model.named_parameters() if "lora_" not in name}
    assert all(torch.equal(p, base[name]) for name, p in initial.named_parameters())  # reference = starting policy

    tokenizer = trainer.processing_class
    mask, ids = out["completion_mask"], out["completion_ids"]
    completions = [c[-1]["content"] for c in list(trainer._logs["completion"])[-8:]]
    for i in range(8):
        n = int(mask[i].sum())
        assert mask[i, :n].all() and not mask[i, n:].any()
        assert tokenizer.decode(ids[i, :n], skip_special_tokens=True) == completions[i]
    prompt = tokenizer.decode(out["prompt_ids"][0][out["prompt_mask"][0].bool()])
    assert prompt == prompts.render_chat(tokenizer, rows[0]["prompt"])  # q and P: conditioning only

    def grad_norm(inputs) -> float:
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, inputs).backward()
        return sum(float(p.grad.abs().sum()) for p in trainer.model.parameters() if p.grad is not None)

    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which this test bypasses
    out["advantages"] = torch.linspace(-1, 1, 8)  # a non-zero objective on every completion
    assert grad_norm(out) > 0
    assert grad_norm({**out, "completion_mask": torch.zeros_like(mask)}) == 0  # nothing outside the mask counts


def test_full_fine_tuning_as_the_paper_trains_every_weight_against_a_reference_copy(ci_cfg, rows, tmp_path,
                                                                                   tiny_llama_dir):
    train = dataclasses.replace(ci_cfg.train, lora=None, shared_prefill=False, attn_implementation=None, max_steps=2)
    cfg = dataclasses.replace(ci_cfg, train=train)
    run = fit(cfg, TrainRun(tmp_path / "run"), rows[:6], rows[6:], progress=False)
    assert not any(p.name.startswith("adapter") for p in (run.checkpoints / "checkpoint-2").iterdir())
    trained = AutoModelForCausalLM.from_pretrained(run.extractor, use_safetensors=True)
    initial = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    changed = {name for name, p in trained.named_parameters() if not torch.equal(p, initial.get_parameter(name))}
    assert any(name.endswith("mlp.down_proj.weight") for name in changed)
    assert any(name.endswith("input_layernorm.weight") for name in changed)  # not a LoRA target: all parameters
    assert build_trainer(cfg, TrainRun(tmp_path / "full"), rows[:6], rows[6:], progress=False).ref_model is not None
    assert build_trainer(ci_cfg, TrainRun(tmp_path / "lora"), rows[:6], rows[6:], progress=False).ref_model is None


def test_grpo_steps_generate_from_a_merged_copy_that_follows_the_policy(ci_cfg, rows, tmp_path):
    cfg = dataclasses.replace(ci_cfg, train=dataclasses.replace(ci_cfg.train, rollout_model="merged_copy",
                                                                max_steps=2))
    trainer = build_trainer(cfg, TrainRun(tmp_path / "run"), rows[:6], rows[6:], progress=False)
    copy = trainer.rollout_copy
    generated = []
    refresh = copy.refresh
    copy.refresh = lambda policy, step: generated.append(step) or refresh(policy, step)
    trainer.train()
    # dev selection of the initial policy, the rollouts and their o_r/o_e (one generation batch for both steps), dev
    # selection of checkpoint-2: every generation ran on the copy, refreshed twice
    assert generated[0] == 0 and generated[-1] == 2 and set(generated) == {0, 2}
    log = read_log(TrainRun(tmp_path / "run").train_log)
    assert list(log.index) == [1, 2] and not math.isnan(log.loc[1, "reward_final"])  # rollouts were scored

    policy, tokenizer = trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class
    ids = torch.tensor([tokenizer.encode(prompts.render_chat(tokenizer, rows[0]["prompt"]), add_special_tokens=False)])
    with torch.no_grad():
        with policy.disable_adapter():
            initial = policy(input_ids=ids).logits
        trained = policy(input_ids=ids).logits
        assert not torch.allclose(trained, initial, atol=1e-6)  # two optimizer steps moved the adapter
        torch.testing.assert_close(copy.model(input_ids=ids).logits, trained, rtol=1e-4, atol=1e-5)
    assert copy.model.dtype == torch.float32  # the ci profile trains without bf16 autocast


def test_format_warmup_merges_an_adapter_into_the_policy_and_is_reused(ci_cfg, tmp_path, tiny_llama_dir):
    cfg = dataclasses.replace(ci_cfg, train=dataclasses.replace(ci_cfg.train,
                                                                format_warmup=load_profile("ci").train.format_warmup))
    warmup_rows = contexts(8) + [{**contexts(9)[8], "golden_answers": ["Oslo"]}]  # format-only: drawn like the rest
    policy = warm_up_policy(cfg, warmup_rows, tmp_path / "warmup", progress=False)

    warmed = AutoModelForCausalLM.from_pretrained(policy, use_safetensors=True)
    initial = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, use_safetensors=True)
    changed = {name for name, p in warmed.named_parameters() if not torch.equal(p, initial.get_parameter(name))}
    assert changed and all(name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"))
                           for name in changed)  # the LoRA targets, merged; no adapter weights left
    assert not any("lora" in name for name in warmed.state_dict())
    assert AutoTokenizer.from_pretrained(policy).chat_template
    run_config = json.loads((tmp_path / "warmup" / "run_config.json").read_text())
    assert run_config["n_examples"] == cfg.train.format_warmup.max_train_questions == 4

    stamp = (policy / "model.safetensors").stat().st_mtime_ns
    assert warm_up_policy(cfg, warmup_rows, tmp_path / "warmup", progress=False) == policy
    assert (policy / "model.safetensors").stat().st_mtime_ns == stamp  # the same configuration is reused

    # D246: a control arm takes the recorded adapter and merges it into the same bytes, fitting nothing
    recorded = dataclasses.replace(cfg.train.format_warmup, adapter=str(tmp_path / "warmup" / "adapter"))
    control = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, format_warmup=recorded))
    rebuilt = warm_up_policy(control, [], tmp_path / "control", progress=False)
    assert (rebuilt / "model.safetensors").read_bytes() == (policy / "model.safetensors").read_bytes()
    assert sorted(p.name for p in (tmp_path / "control").iterdir()) == ["policy"]  # no examples, no fit
    in_parts = tmp_path / "recorded"  # as the record in git keeps it (repro.io.write_parts)
    in_parts.mkdir()
    shutil.copyfile(tmp_path / "warmup" / "adapter" / "adapter_config.json", in_parts / "adapter_config.json")
    write_parts(tmp_path / "warmup" / "adapter" / "adapter_model.safetensors", in_parts / "adapter_model.safetensors",
                part_bytes=2**16)
    parted = dataclasses.replace(cfg.train.format_warmup, adapter=str(in_parts))
    rebuilt = warm_up_policy(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, format_warmup=parted)), [],
                             tmp_path / "from-parts", progress=False)
    assert (rebuilt / "model.safetensors").read_bytes() == (policy / "model.safetensors").read_bytes()
    assert sorted(p.name for p in (tmp_path / "from-parts").iterdir()) == ["policy"]  # the joined copy is gone
    missing = dataclasses.replace(recorded, adapter=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="train.format_warmup.adapter: .*nowhere/adapter_config.json"):
        warm_up_policy(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, format_warmup=missing)), [],
                       tmp_path / "missing", progress=False)


def test_held_out_scoring_matches_dev_selection_and_skips_the_selection_questions(ci_cfg, tmp_path, tiny_llama_dir,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # the held-out rows come from the data stage's dev contexts, relative to the cwd
    dev = contexts(12)
    write_jsonl(layout.contexts_path(ci_cfg, ci_cfg.train.dataset, "dev"), dev)
    rows = heldout_rows(ci_cfg)
    held_out = sample_rows(dev[ci_cfg.train.dev_max_questions:], ci_cfg.train.heldout_questions, ci_cfg.seed)
    assert [r["id"] for r in rows] == [r["id"] for r in held_out]
    assert not {r["id"] for r in rows} & {r["id"] for r in dev[: ci_cfg.train.dev_max_questions]}

    items = score_policy(ci_cfg, str(tiny_llama_dir), rows, progress=False)
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    train_rows = extraction_rows(contexts(2), tokenizer, ci_cfg.rewards.length_unit)
    trainer = build_trainer(ci_cfg, TrainRun(tmp_path / "run"), train_rows, train_rows, progress=False)
    expected = trainer.score_greedy([extraction_row(row, tokenizer, ci_cfg.rewards.length_unit) for row in rows])
    assert items["id"].tolist() == [r["id"] for r in rows]
    for (_, item), score in zip(items.iterrows(), expected, strict=True):  # dev selection's scores of the same policy
        for metric, value in score.summary().items():
            assert item[metric] == pytest.approx(value, abs=1e-9, nan_ok=True), metric

    reused = score_policy(ci_cfg, str(tiny_llama_dir), rows, rollouts=items["rollout"].tolist(), progress=False)
    pd.testing.assert_frame_equal(reused, items)
    evidence_only = dataclasses.replace(ci_cfg, rewards=dataclasses.replace(ci_cfg.rewards, answer_subset=["evidence"]))
    o_e_only = score_policy(evidence_only, str(tiny_llama_dir), rows, rollouts=items["rollout"].tolist(),
                            progress=False, masked=["evidence"])
    assert o_e_only["o_r"].isna().all() and o_e_only[["f1_rationale", "em_rationale"]].isna().all().all()
    assert o_e_only["o_e"].map(lambda text: isinstance(text, str)).all()
    check = warmup_recall_check(rows, items["rollout"].tolist(), ci_cfg.seed)
    assert check.items["ar_policy"].tolist() == items["ar_evidence"].tolist()
    assert items["answerable"].all() and check.items["answerable"].all()  # every passage names Anna Berg<i>
    assert check.summary["subset"].tolist() == ["all", "answerable"]
    assert (check.summary["ar_random"] == 1.0).all()  # every sentence names Anna Berg<i>
    table = compare_policies(items, items)
    assert table["subset"].tolist() == ["all"] * 3 + ["answerable"] * 3
    assert table["difference"].tolist() == [0.0] * 6 and table["p_value"].tolist() == [1.0] * 6
    assert table["ci_low"].tolist() == table["ci_high"].tolist() == [0.0] * 6  # no discordant pair, no F1 difference


@pytest.mark.vllm
def test_held_out_scoring_on_vllms_engine_equals_transformers(ci_cfg, tmp_path, tiny_llama_dir, monkeypatch):
    """D171: `train.heldout_backend: vllm` scores a policy as transformers does (float32 greedy texts agree, D93), and
    `cpu_reserved_cores` reaches the engine only while it starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    write_jsonl(layout.contexts_path(ci_cfg, ci_cfg.train.dataset, "dev"), contexts(12))
    rows = heldout_rows(ci_cfg)
    on_vllm = dataclasses.replace(ci_cfg, train=dataclasses.replace(
        ci_cfg.train, heldout_backend="vllm", heldout_options=dict(
            max_model_len=1024, enforce_eager=True, kv_cache_memory_bytes=2**30, cpu_reserved_cores=0)))
    pd.testing.assert_frame_equal(score_policy(on_vllm, str(tiny_llama_dir), rows, progress=False),
                                  score_policy(ci_cfg, str(tiny_llama_dir), rows, progress=False))
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ


def test_accelerate_launch_runs_the_trainer_in_two_processes(ci_cfg, rows, tmp_path, monkeypatch):
    warmup = load_profile("ci").train.format_warmup  # runs before the launch
    monkeypatch.chdir(tmp_path)  # the workers read the data stage's contexts files relative to the cwd
    for split, part in (("train", contexts(8)[:6]), ("dev", contexts(8)[6:])):
        write_jsonl(tmp_path / "data" / "ci" / "retrieval" / "minilm" / "fanoutqa" / f"{split}.jsonl", part)
    from conftest import ROOT

    train = dataclasses.replace(ci_cfg.train, per_device_batch_size=2, steps_per_generation=1, max_steps=2,
                                save_steps=2, format_warmup=warmup,  # a group of G = 4 spans both processes
                                accelerate_config=str(ROOT / "configs/accelerate/cpu-2proc.yaml"))
    run = train_extractor(dataclasses.replace(ci_cfg, train=train), tmp_path / "run")
    assert list(read_log(run.train_log).index) == [1, 2]
    assert json.loads(run.config_file.read_text())["processes"] == 2
    assert (run.extractor / "model.safetensors").exists() and run.selection()["step"] == 2
    assert (tmp_path / "data" / "ci" / "train" / "format_warmup" / "policy" / "model.safetensors").exists()


def test_a_reward_design_and_the_k2_estimator_switch_by_config_key_on_a_real_batch(ci_cfg, rows, tmp_path):
    cfg = dataclasses.replace(ci_cfg, rewards=dataclasses.replace(ci_cfg.rewards, design="arena"),
                              train=dataclasses.replace(ci_cfg.train, kl_estimator="k2", beta=0.04))
    trainer = build_trainer(cfg, TrainRun(tmp_path / "run"), rows[:6], rows[6:], progress=False)
    batch = [dict(rows[0]) for _ in range(4)] + [dict(rows[1]) for _ in range(4)]
    trainer.model.train()
    out = trainer._generate_and_score_completions(batch)
    assert all(row["o_r"] is None and row["o_e"] is None for row in batch)  # ARENA needs no masked answers
    completions = [c[-1]["content"] for c in list(trainer._logs["completion"])[-8:]]
    expected = [rewards.arena_reward(c, row["golden_answers"], row["gold_passages"]) for c, row in
                zip(completions, batch, strict=True)]
    np.testing.assert_allclose(trainer._gathered_rewards[:, 0].numpy(), expected, atol=1e-6)

    trainer.current_gradient_accumulation_steps = 1
    shifted = {**out, "ref_per_token_logps": out["ref_per_token_logps"] - 0.5}  # log π_θ − log π_ref ≈ 0.5
    losses = {}
    for estimator in ("k3", "k2"):
        trainer.kl_estimator = estimator
        losses[estimator] = trainer.compute_loss(trainer.model, shifted).item()
    mask = out["completion_mask"]
    per_token = (0.5 * 0.5**2) - (math.exp(-0.5) + 0.5 - 1)  # k2 − k3 at log-ratio 0.5, the same on every token
    rows_with_tokens = float((mask.sum(-1) > 0).float().mean())
    assert losses["k2"] - losses["k3"] == pytest.approx(0.04 * per_token * rows_with_tokens, abs=1e-4)
