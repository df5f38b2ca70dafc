"""What makes a GRPO step cheaper without changing it (issue 17, D144-D146, D162), each against the computation it
replaces, on the `ci` model (a real 2-layer Llama with random weights and grouped-query attention): one prefill of a
shared prefix in generation and in scoring, prefixes carried from one generation call to the next, grouped-query decode
attention, a LoRA adapter merged for generation, a merged copy of the policy that follows its optimizer steps."""

import contextlib

import pytest
import torch
from peft import get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, MistralConfig
from trl.trainer.utils import add_fused_lm_head

from repro.config import ConfigError, PolicyLoRAConfig, load_profile
from repro.generation.attention import SDPA_GROUPED_DECODE, grouped_decode_attention
from repro.train.speedups.lora_policy import merged_adapter, peft_config
from repro.train.speedups.rollout_copy import MergedCopy
from repro.train.speedups.shared_prefill import (
    PrefixCache,
    common_prefix_length,
    generate_sharing_prefixes,
    prefix_groups,
    score_sharing_prefixes,
    shared_columns,
    supports,
)

PAD = 0


@pytest.fixture(scope="module")
def model(tiny_llama_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True).eval()


def random_ids(n: int, seed: int) -> list[int]:
    return torch.randint(5, 1000, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def left_padded_generate(model, prompts, config) -> torch.Tensor:
    """transformers' own batched generation (left padding, every row prefilled in full): the reference."""
    width = max(map(len, prompts))
    ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]


def test_prefix_groups_prefill_each_shared_prefix_once_and_leave_every_row_a_token():
    prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    assert common_prefix_length(prompt, prompt[:5] + [9]) == 5
    assert prefix_groups([prompt] * 4) == [([0, 1, 2, 3], 7)]  # G copies: the prompt but its last token, once

    # o_r contexts extend the prompt (rows 0, 2); o_e contexts share a shorter head with each other (rows 1, 3)
    o_r = [prompt + [20, 21], prompt + [30, 31, 32]]
    o_e = [[1, 2, 40, 41, 42], [1, 2, 40, 43]]
    groups = prefix_groups([o_r[0], o_e[0], o_r[1], o_e[1]], overhead=0)
    assert sorted(groups) == [([0, 2], 8), ([1, 3], 3)]
    # cost: 8 + 2 + 3 and 3 + 2 + 1, against 2 + (8 + 3 + 6) + (3 + 2) for one group sharing [1, 2]
    assert prefix_groups([[5, 6], [7, 8]]) == [([0, 1], 0)]  # nothing shared: one group, no prefill call
    assert prefix_groups([[5], [5, 6]]) == [([0, 1], 0)]  # a one-token row leaves nothing to share
    with pytest.raises(ValueError, match="at least one token"):
        prefix_groups([[], [1]])


@pytest.mark.parametrize("case", ["group", "masked_contexts"])
def test_generation_from_shared_prefixes_is_transformers_generation(model, case):
    prompt = random_ids(40, 0)
    prompts = {"group": [prompt] * 4,
               "masked_contexts": [prompt + random_ids(6, 1), random_ids(12, 2), prompt + random_ids(3, 3),
                                   random_ids(12, 2)[:9] + random_ids(5, 4), prompt]}[case]
    config = GenerationConfig(max_new_tokens=8, do_sample=False, pad_token_id=PAD, eos_token_id=None)
    with torch.no_grad():
        expected = left_padded_generate(model, prompts, config)
        shared = generate_sharing_prefixes(model, prompts, config, PAD, "cpu")
    assert torch.equal(shared, expected)


def test_generation_continued_from_the_last_calls_prefixes_is_transformers_generation(model):
    prompt = random_ids(40, 0)
    calls = [[prompt] * 4,  # the rollouts of a group, then the o_r and o_e contexts of its rollouts
             [prompt + random_ids(6, 1), random_ids(12, 2), prompt + random_ids(3, 3), random_ids(12, 2)[:9] + [7]]]
    config = GenerationConfig(max_new_tokens=6, do_sample=False, pad_token_id=PAD, eos_token_id=None)
    prefilled = []  # tokens of each batch-1 forward call (the prefills; generate runs the other rows)
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: prefilled.append(kwargs["input_ids"].shape[1])
        if kwargs["input_ids"].shape[0] == 1 else None, with_kwargs=True)
    cache = PrefixCache()
    try:
        with torch.no_grad():
            for prompts in calls:
                assert torch.equal(generate_sharing_prefixes(model, prompts, config, PAD, "cpu", cache),
                                   left_padded_generate(model, prompts, config))
            reused = list(prefilled)
            cache.clear()  # new weights: nothing is reused
            prefilled.clear()
            generate_sharing_prefixes(model, calls[1], config, PAD, "cpu", cache)
    finally:
        hook.remove()
    # the rollouts prefill the prompt but its last token (39); o_r's group (the prompt, 40 tokens) continues from it,
    # and the o_e group prefills the 9 tokens its rows share, of which none is cached
    assert reused[0] == 39 and sorted(reused[1:]) == [1, 9]
    assert sorted(prefilled) == [9, 40]


def test_a_merged_copy_computes_the_policys_logits_and_follows_its_optimizer_steps(tiny_llama_dir):
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True)
    policy = get_peft_model(base, peft_config(load_profile("ci").train.lora))
    exact, bf16 = MergedCopy(policy), MergedCopy(policy, torch.bfloat16)
    assert exact.model.dtype == torch.float32 and bf16.model.dtype == torch.bfloat16
    ids = torch.tensor([random_ids(24, 7)])
    for copy in (exact, bf16):
        copy.refresh(policy, step=0)
    with torch.no_grad():
        start = policy(input_ids=ids).logits
        torch.testing.assert_close(exact.model(input_ids=ids).logits, start, rtol=1e-5, atol=1e-5)

    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    policy(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()  # an optimizer step of the adapter
    weights = {n: p.detach().clone() for n, p in policy.named_parameters()}
    exact.refresh(policy, step=0)  # the copy refreshes once per optimizer step: step 0's weights are kept
    with torch.no_grad():
        updated = policy(input_ids=ids).logits
        assert not torch.allclose(updated, start, atol=1e-3)  # the step moved the policy
        torch.testing.assert_close(exact.model(input_ids=ids).logits, start, rtol=1e-5, atol=1e-5)
        for copy in (exact, bf16):
            copy.refresh(policy, step=1)
        torch.testing.assert_close(exact.model(input_ids=ids).logits, updated, rtol=1e-4, atol=1e-5)
        # in bf16 the copy is as close to the float32 policy as the policy's own bf16 autocast pass (TRL's scoring)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = policy(input_ids=ids).logits.float()
        copy_error = (bf16.model(input_ids=ids).logits.float() - updated).abs().max()
        autocast_error = (autocast - updated).abs().max()
        assert 0 < copy_error <= 2 * autocast_error
    assert all(torch.equal(p, weights[n]) for n, p in policy.named_parameters())  # the policy is untouched
    assert bf16.model.lm_head.weight is bf16.model.get_input_embeddings().weight  # tied as the policy's


def test_scoring_a_shared_prompt_once_gives_trls_logprobs_entropies_and_gradients(tiny_llama_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    completions = torch.randint(5, 1000, (4, 7), generator=torch.Generator().manual_seed(1))
    ids = torch.cat([torch.tensor(random_ids(30, 0)).expand(4, -1), completions], dim=1)
    mask = torch.ones_like(ids)
    mask[1, -3:] = mask[3, -5:] = 0  # completions that stopped early
    assert shared_columns(ids, mask) == 30

    def trl_scoring():  # GRPOTrainer._get_per_token_logps_and_entropies, text only
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, :-7] = -100
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        return out.log_probs[:, -7:], out.entropy[:, -7:]

    results = []
    for score in (trl_scoring, lambda: score_sharing_prefixes(model, ids, mask, 7, 2, True, contextlib.nullcontext)):
        model.zero_grad()
        logps, entropy = score()
        (logps * mask[:, -7:]).sum().backward()
        results.append((logps.detach(), entropy.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (logps, entropy, grads), (shared_logps, shared_entropy, shared_grads) = results
    torch.testing.assert_close(shared_logps, logps, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared_entropy, entropy, rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-4, atol=1e-6)


def test_grouped_decode_attention_is_eager_attention_of_one_query():
    torch.manual_seed(0)
    query, key, value = torch.randn(3, 6, 1, 8), torch.randn(3, 2, 11, 8), torch.randn(3, 2, 11, 8)
    mask = torch.ones(3, 1, 1, 11, dtype=torch.bool)
    mask[1, ..., :4] = False  # left padding
    mask[2, ..., 5:7] = False  # padding between a shared prefix and the rest of a prompt
    repeated_key, repeated_value = (x.repeat_interleave(3, dim=1) for x in (key, value))  # eager's repeat_kv
    scores = query @ repeated_key.transpose(-1, -2) / 8**0.5
    expected = (scores.masked_fill(~mask, float("-inf")).softmax(-1) @ repeated_value).transpose(1, 2)
    torch.testing.assert_close(grouped_decode_attention(query, key, value, mask, 8**-0.5), expected)
    additive = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(grouped_decode_attention(query, key, value, additive, 8**-0.5), expected)


def test_the_registered_attention_generates_as_sdpa(tiny_llama_dir, model):
    grouped = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True,
                                                   attn_implementation=SDPA_GROUPED_DECODE).eval()
    prompts = [random_ids(20, 5), random_ids(13, 6), random_ids(20, 5)]  # one left-padded row
    config = GenerationConfig(max_new_tokens=10, do_sample=False, pad_token_id=PAD, eos_token_id=None)
    with torch.no_grad():
        assert torch.equal(left_padded_generate(grouped, prompts, config), left_padded_generate(model, prompts, config))
        assert torch.equal(generate_sharing_prefixes(grouped, prompts, config, PAD, "cpu"),
                           left_padded_generate(model, prompts, config))


def test_a_merged_adapter_generates_as_the_adapter_and_leaves_the_base_weights_bit_for_bit(tiny_llama_dir):
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True)
    policy = get_peft_model(base, peft_config(load_profile("ci").train.lora)).eval()
    for name, param in policy.named_parameters():
        if "lora_B" in name:  # a trained adapter (B starts at zero)
            torch.nn.init.normal_(param, std=0.05, generator=torch.Generator().manual_seed(0))
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    ids = torch.tensor([random_ids(16, 7)])
    with torch.no_grad():
        unmerged = policy(input_ids=ids).logits
        with merged_adapter(policy):
            merged = policy(input_ids=ids).logits
        with policy.disable_adapter():
            reference = policy(input_ids=ids).logits
        assert not torch.allclose(reference, unmerged, atol=1e-3)  # the adapter matters
    torch.testing.assert_close(merged, unmerged, rtol=1e-4, atol=1e-5)
    assert all(torch.equal(p, before[n]) for n, p in policy.named_parameters())  # the reference is untouched
    with merged_adapter(base.config):  # not a peft model: nothing to merge
        pass


def test_lora_switch_validates_and_the_paper_profiles_fine_tune_every_parameter():
    assert load_profile("paper-1p5b").train.lora is None and load_profile("paper-7b").train.lora is None
    tiny = load_profile("tiny").train
    assert tiny.lora is not None and tiny.shared_prefill and tiny.attn_implementation == SDPA_GROUPED_DECODE
    assert tiny.num_generations == tiny.per_device_batch_size * tiny.gradient_accumulation_steps  # one group a step
    with pytest.raises(ConfigError, match="train.lora"):
        PolicyLoRAConfig(rank=0, alpha=16, target_modules=["q_proj"])
    assert peft_config(None) is None
    assert peft_config(tiny.lora).lora_dropout == 0.0


def test_shared_prefill_needs_a_full_attention_cache(tiny_llama_dir):
    assert supports(AutoModelForCausalLM.from_pretrained(tiny_llama_dir).config)
    assert not supports(MistralConfig(num_hidden_layers=2, sliding_window=16))
