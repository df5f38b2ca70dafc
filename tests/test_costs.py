"""repro.costs: the formulas against hand-computed values, and what the estimate says of the profiles (D137). Every
number here is an ESTIMATE's arithmetic, not a measurement."""

import dataclasses
import math

import pytest

from repro import costs
from repro.config import RewardDesignsConfig, load_profile

SIMPLE = dataclasses.replace(costs.OPTIMISTIC, bandwidth=1e12, bandwidth_efficiency=0.5, step_overhead=0.01,
                             generated_fraction=0.5, gpu_flops=1e15, prefill_mfu=0.5, train_mfu=0.5)


def test_sizes_of_weights_kv_cache_and_indexes():
    assert costs.index_bytes(21_015_324, 768) == 64_559_075_328  # wiki-18 x 768 x 4 bytes: 64.6 GB
    assert costs.QWEN_1P5B.weights == 3.08e9
    assert costs.QWEN_1P5B.kv_per_token == 2 * 28 * 2 * 128 * 2 == 28_672
    assert costs.QWEN_7B.kv_per_token == 57_344


def test_a_decode_step_reads_the_weights_and_the_running_kv_cache():
    assert costs.decode_step_seconds(costs.QWEN_1P5B, SIMPLE, running=10, context=1000) == pytest.approx(
        (3.08e9 + 10 * 1000 * 28_672) / 5e11 + 0.01)
    assert costs.decode_step_seconds(costs.QWEN_7B, SIMPLE, tp=4) == pytest.approx(15.24e9 / 4 / 5e11 + 0.01)


def test_generation_is_bound_by_the_longest_output_or_by_throughput():
    prefill = 2 * 1.54e9 * 512 * 1000 / 5e14
    # 512 prompts, 256 running, mean 50 new tokens: 512 x 50 / 256 = 100 steps = max_new, at context 1000 + 25
    assert costs.generation_seconds(costs.QWEN_1P5B, SIMPLE, 512, 1000, 100) == pytest.approx(
        100 * ((3.08e9 + 256 * 1025 * 28_672) / 5e11 + 0.01) + prefill)
    # 2048 prompts: 2048 x 50 / 256 = 400 steps > 100
    assert costs.generation_seconds(costs.QWEN_1P5B, SIMPLE, 2048, 1000, 100) == pytest.approx(
        400 * ((3.08e9 + 256 * 1025 * 28_672) / 5e11 + 0.01) + 4 * prefill)
    # 4 prompts: the longest output (100 tokens) bounds the batch
    assert costs.generation_seconds(costs.QWEN_1P5B, SIMPLE, 4, 1000, 100) == pytest.approx(
        100 * ((3.08e9 + 4 * 1025 * 28_672) / 5e11 + 0.01) + prefill / 128)
    assert costs.generation_seconds(costs.QWEN_1P5B, SIMPLE, 0, 1000, 100) == 0


def test_training_and_encoding_flops():
    assert costs.train_seconds(costs.QWEN_1P5B, SIMPLE, 1e6, 12, 8) == pytest.approx(12 * 1.54e9 * 1e6 / (8 * 5e14))
    assert costs.encode_seconds(110e6, SIMPLE, 21_015_324, 140) == pytest.approx(2 * 110e6 * 21_015_324 * 140 / 5e14)
    assert costs.search_seconds(SIMPLE, 1000, 10**6, 768, 8) == pytest.approx(2 * 1000 * 10**6 * 768 / (8 * 40e12))


def test_paper_1p5b_trains_one_epoch_of_nq_in_2474_steps():
    cfg = load_profile("paper-1p5b")
    _, steps = costs.grpo_wall(cfg, SIMPLE)
    assert steps == math.ceil(79_168 * 8 / (8 * 8 * 4)) == 2474  # G x questions / completions per step
    _, steps = costs.grpo_wall(load_profile("gpu-smoke"), SIMPLE, 4)
    assert steps == 4


def test_the_ablation_trains_only_the_subsets_that_are_not_the_main_run():
    cfg, a = load_profile("paper-1p5b"), costs.PESSIMISTIC
    five = costs.ablation_stage(cfg, a, 80e9)  # the reference row is train_eviomni's run (D165)
    assert five.note == "5 GRPO run(s) of 2,474 steps, the main run's reused"
    assert five.disk == 5 * costs.grpo_disk(cfg)
    unshared = dataclasses.replace(cfg, rewards=dataclasses.replace(cfg.rewards, answer_subset=("rationale", "full")))
    six = costs.ablation_stage(unshared, a, 80e9)  # a main run that is none of the six: every subset is trained
    assert six.note == "6 GRPO run(s) of 2,474 steps" and six.disk == 6 * costs.grpo_disk(cfg)
    reference, _ = costs.grpo_wall(cfg, a, None, ("evidence", "rationale", "full"))
    assert six.wall - five.wall == pytest.approx(reference)
    assert six.gpu_seconds - five.gpu_seconds == pytest.approx(8 * reference)


def test_grpo_memory_per_gpu_under_zero_2_and_zero_3():
    tokens = 8 * (costs.INSTRUCTION_TOKENS + 5 * costs.PASSAGE_TOKENS + 768)  # micro-batch x (prompt + completion)
    p = 1.54e9  # paper-1p5b: ZeRO-2 over 8 GPUs, bf16 reference, checkpointed activations, fp32 log-probs, vLLM 0.3
    assert costs.grpo_memory(load_profile("paper-1p5b"), 80e9) == pytest.approx(
        2 * p + 14 * p / 8 + 2 * p + tokens * 1536 * (2 * 28 + 34) + 8 * 768 * 151_936 * 4 + 0.3 * 80e9)
    p = 7.62e9  # paper-7b: ZeRO-3 shards the states and the reference too
    assert costs.grpo_memory(load_profile("paper-7b"), 80e9) == pytest.approx(
        16 * p / 8 + 2 * p / 8 + tokens * 3584 * (2 * 28 + 34) + 8 * 768 * 152_064 * 4 + 0.3 * 80e9)
    assert costs.grpo_disk(load_profile("paper-1p5b")) == pytest.approx(2 * 14 * 1.54e9 + 2 * 1.54e9)


def test_the_data_stage_disk_is_its_indexes_and_retrieved_passages():
    paper = costs.data_stage(load_profile("paper-1p5b"), costs.PESSIMISTIC, 80e9)
    questions = (79_168 + 8_757 + 3_610) + (78_785 + 8_837 + 11_313) + (90_447 + 7_405 + 7_405)  # HotpotQA test = dev
    assert paper.disk == costs.index_bytes(21_015_324, 768) + questions * 5 * 800  # DPR; e5 is imported (D118)
    smoke = costs.data_stage(load_profile("gpu-smoke"), costs.PESSIMISTIC, 80e9)
    assert smoke.disk == 100_000 * 666 + 2 * costs.index_bytes(100_000, 768) + 200 * 9 * 5 * 800


def test_starts_are_counted_as_the_code_makes_them():
    """One process per stage (the AR study's two LoRA runs share theirs), one vLLM engine for both AR variants (their
    adapters are LoRA requests, D94), and a start for length_tuning's stage when it is not requested (D166)."""
    cfg, a, card = load_profile("gpu-smoke"), costs.PESSIMISTIC, 80e9
    free, weights = costs.without_starts(a), 3.08e9 / a.disk_read  # Qwen2.5-1.5B read from disk
    evaluation = costs.ar_stage(cfg, a, card).wall - costs.ar_stage(cfg, free, card).wall
    assert evaluation == pytest.approx(a.stage_start + a.eager_engine_start + weights)
    train = costs.ar_train_stage(cfg, a, card).wall - costs.ar_train_stage(cfg, free, card).wall
    assert train == pytest.approx(a.stage_start + (a.eager_engine_start + weights) + 2 * weights)  # teacher, 2 LoRA
    qa = costs.qa_generator_stage(cfg, a, card).wall - costs.qa_generator_stage(cfg, free, card).wall
    assert qa == pytest.approx(a.stage_start + weights)
    light = costs.light_stage(cfg, a, card)
    assert light.stage == "9 light stages" and light.note.endswith(", length_tuning")
    assert light.wall == 9 * a.light_stage_start


def test_the_smoke_is_sized_for_half_an_hour_on_one_80_gb_gpu():
    rows = costs.estimate(load_profile("gpu-smoke"))
    low, high = costs.totals(rows)["wall"]
    _, starts = costs.start_seconds(load_profile("gpu-smoke"))
    assert low <= 20 * 60 and high <= 42 * 60  # 19.7-41.2 estimated minutes (D136, D167)
    assert high - starts <= 17 * 60 and 0 < starts < 26 * 60  # pessimistically, the starts are 25 of them
    ablation = next(r for r in rows if r.stage == "ablation_answer_rewards")
    assert ablation.note == "1 GRPO run(s) of 4 steps, the main run's reused"  # [evidence]; the reference: D165
    assert [r.problems for r in rows if r.problems] == []  # every engine and batch fits the card
    assert {r.stage for r in rows} >= {"data", "train_eviomni", "main_comparison", "ablation_answer_rewards",
                                       "agentic_search_r1", "ar_study", "latency", "noise_robustness"}


def test_the_paper_estimate_against_the_issues_rough_one():
    rows = costs.estimate(load_profile("paper-1p5b"))
    low, high = (h / 3600 for h in costs.totals(rows, extra_runs=False)["gpu_seconds"])
    assert low <= 240 and high >= 135  # the issue: about 135-240 A100-hours without the ablation (and reward designs)
    indexes = costs.index_bytes(costs.WIKI18_PASSAGES, 768) * 2  # DPR encoded, e5 fetched
    assert indexes == pytest.approx(129e9, rel=0.01)  # the issue: about 130 GB of indexes


def test_the_reward_design_study_is_costed_and_left_out_with_the_ablation():
    cfg = load_profile("paper-1p5b")
    assert "reward_designs" not in {r.stage for r in costs.estimate(cfg)}  # opt-in on the paper profiles (D158)
    study = RewardDesignsConfig(designs=["eviomni", "eviomni_eqr", "evinote", "eval_rar", "arena", "eviomni_k2"],
                                datasets=["nq", "triviaqa", "hotpotqa"])  # the section params.yaml comments
    rows = {r.stage: r for r in costs.estimate(dataclasses.replace(cfg, reward_designs=study))}
    assert rows["reward_designs"].note == "5 GRPO run(s) of 2,474 steps, the main run's reused"  # eviomni (D170)
    # every design costed as EviOmni's run, whose o_r and o_e the other designs skip: at least the ablation's
    assert rows["reward_designs"].gpu_seconds[0] >= rows["ablation_answer_rewards"].gpu_seconds[0]
    every, without = costs.totals(list(rows.values())), costs.totals(list(rows.values()), extra_runs=False)
    extra = sum(rows[stage].gpu_seconds[1] for stage in costs.EXTRA_RUN_STAGES)
    assert every["gpu_seconds"][1] - without["gpu_seconds"][1] == pytest.approx(extra)
    assert "reward_designs" not in {r.stage for r in costs.estimate(load_profile("gpu-smoke"))}  # null (D158)


def test_what_does_not_fit_names_the_key_to_change():
    cfg = load_profile("paper-1p5b")
    assert not [p for r in costs.estimate(cfg) for p in r.problems if "evaluation.options" in p]  # 3 x 0.3
    cfg = dataclasses.replace(cfg, evaluation=dataclasses.replace(cfg.evaluation, options={}))
    problems = [p for r in costs.estimate(cfg) for p in r.problems]
    assert ("main_comparison: params.yaml: profiles.paper-1p5b.evaluation.options: 3 engines at once ask 2.70 of a "
            "GPU; lower gpu_memory_utilization so that they sum below 0.9") in problems  # vLLM's default 0.9 each
    problems = [p for r in costs.estimate(load_profile("paper-7b"), 40e9) for p in r.problems]
    assert ("train_eviomni: params.yaml: profiles.paper-7b.train.vllm: gpu_memory_utilization 0.3 holds 12.0 GB < "
            "15.2 GB of weights per GPU + 1 GB of KV cache; raise it or tensor_parallel_size") in problems
    assert any(p.startswith("qa_generator: about ") and "halve qa_generator.per_device_batch_size" in p
               for p in problems)


def test_an_unknown_model_names_the_table_to_extend():
    with pytest.raises(ValueError, match=r"no shape for 'org/model'.*repro\.costs\.SHAPES"):
        costs.shape("org/model")


def test_the_command_prints_the_table(capsys):
    costs.main(["--profile", "gpu-smoke"])
    out = capsys.readouterr().out
    assert "ESTIMATES on one node of 1 A100 GPU(s) of 80 GB" in out and "| train_eviomni | 1 |" in out
    assert "| **total** |" in out and "GPU-min" in out


def test_the_readmes_changes_for_40_gb_cards_fit():
    def replaced(cfg, **sections):
        return dataclasses.replace(cfg, **{k: dataclasses.replace(getattr(cfg, k), **v) for k, v in sections.items()})

    shares = {"evaluation": {"options": {"gpu_memory_utilization": 0.3}},
              "latency": {"options": {"gpu_memory_utilization": 0.3}}}
    agentic = {"agent_options": {"tensor_parallel_size": 8, "gpu_memory_utilization": 0.4, "max_model_len": 8192},
               "extractor_options": {"gpu_memory_utilization": 0.45, "max_model_len": 4096}}
    for name in ("paper-1p5b", "paper-7b"):  # any card: one share of 0.3 per engine the studies hold at once
        assert not [p for r in costs.estimate(replaced(load_profile(name), **shares)) for p in r.problems]
    small = replaced(load_profile("paper-1p5b"), **shares, agentic=agentic)
    assert not [p for r in costs.estimate(small, 40e9) for p in r.problems]
    tp2 = {"options": {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.3}}
    halved = {"per_device_batch_size": 4, "gradient_accumulation_steps": 8}
    large = replaced(load_profile("paper-7b"), evaluation=tp2, latency=tp2, agentic=agentic, qa_generator=halved,
                     filco=halved, seer={"batch_size": 8},
                     train={**halved, "steps_per_generation": 16, "vllm_tensor_parallel_size": 2})
    assert not [p for r in costs.estimate(large, 40e9) for p in r.problems]


def test_the_agentic_estimate_counts_its_conditions():
    cfg = load_profile("paper-1p5b")

    def stage(**agentic):
        changed = dataclasses.replace(cfg, agentic=dataclasses.replace(cfg.agentic, **agentic))
        return costs.agentic_stage(changed, costs.PESSIMISTIC, 80e9)

    without, eval_rar = stage(conditions=["without"]), stage(conditions=["without", "eval_rar"])
    separate = stage(conditions=["without", "eval_rar"], evaluate_step="separate")
    assert without.wall < eval_rar.wall < separate.wall < stage(conditions=["without", "with", "eval_rar"]).wall
    assert stage().note == "2 agent(s) x 3 conditions x 2,500 items"
