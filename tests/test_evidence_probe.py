"""The teacher-forced probe (issue #31, outcome (b)): its prefix, its share by hand, its joint tokenisation, and its
batched log-probabilities against one full forward pass per sentence, on the tiny random Llama."""

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro.generation.prompting import encode
from repro.studies.evidence_probe import (answer_share, probe_items, probe_prefix, sentence_log_probs,
                                        split_tokens)
from repro.train.grpo.data import extraction_row
from repro.train.speedups.shared_prefill import PrefixCache

ROW = {"id": "q1", "question": "Who founded Vell?", "golden_answers": ["Anna Berg"],
       "passages": [{"contents": "Vell\nVell lies on the Tarn. Anna Berg founded it in 1810."},
                    {"contents": "Tarn\nThe Tarn is a long river. It floods. Anna Berg swam in it."}]}
SENTENCES = ["It floods.", "Anna Berg founded it in 1810.", '"Vell" lies on the Tarn, a long river that floods.',
             "The Tarn is a long river that floods each year in spring and autumn alike, from the hills to the sea."]


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32).eval(), tokenizer


def naive_log_prob(model, tokenizer, prompt_ids, prefix, sentence):
    """One full forward pass of prompt + prefix + sentence + </extract>, summed over the scored tokens."""
    context, scored = split_tokens(tokenizer, prefix, sentence + "</extract>")
    ids = list(prompt_ids) + context + scored
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    log_probs = torch.log_softmax(logits[len(ids) - len(scored) - 1:-1], dim=-1)
    return log_probs.gather(-1, torch.tensor(scored)[:, None]).sum().item()


def test_the_prefix_ends_at_the_policys_extract_tag_whatever_the_format():
    assert probe_prefix("<reason>r</reason><extract>e</extract>") == "<reason>r</reason><extract>"
    assert probe_prefix("<reason>r</reason>\n<extract>e <extract>f") == "<reason>r</reason>\n<extract>"
    assert probe_prefix("<reason>r</reason> then <answer>x</answer>") == "<reason>r</reason><extract>"
    assert probe_prefix("<reason>r</reason> a </reason> b") == "<reason>r</reason><extract>"
    assert probe_prefix("<reason>cut off") == "<reason>cut off<extract>"
    assert probe_prefix("no tags at all") == "no tags at all<extract>"
    assert probe_prefix("") == "<extract>"


def test_the_share_by_hand():
    assert answer_share([math.log(0.2), math.log(0.3), math.log(0.5)], [True, False, True]) == pytest.approx(0.7)
    assert answer_share([math.log(0.1), math.log(0.3)], [True, True]) == pytest.approx(1.0)
    assert answer_share([-1000.0, -1001.0], [False, True]) == pytest.approx(1 / (1 + math.e))  # no underflow
    assert answer_share([-3.0], [False]) == 0.0
    assert math.isnan(answer_share([], []))
    with pytest.raises(ValueError, match="2 log-probabilities but 1 answer flags"):
        answer_share([-1.0, -2.0], [True])


def test_prefix_and_sentence_are_tokenised_together(tiny):
    _, tokenizer = tiny
    prefix = "<reason>r</reason><extract>"
    context, scored = split_tokens(tokenizer, prefix, "Anna Berg.</extract>")
    assert context == tokenizer(prefix, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(scored) == "Anna Berg.</extract>"
    # a leading quote merges with the prefix's last ">" into one token, which is then scored whole
    context, scored = split_tokens(tokenizer, prefix, '"Vell".</extract>')
    assert tokenizer.decode(context) == "<reason>r</reason><extract"
    assert tokenizer.decode(scored) == '>"Vell".</extract>'


def test_batched_log_probs_equal_one_forward_pass_per_sentence(tiny, monkeypatch):
    model, tokenizer = tiny
    prompt = tokenizer("Question: who founded Vell?\n")["input_ids"]
    prefix = "<reason>Vell is a town.</reason><extract>"
    # segments of 8, 16, 20 and 29 tokens (the quote's `>"` shortens the shared context by one) packed as [two
    # sentences], [one], [one longer than the budget]
    monkeypatch.setattr("repro.studies.evidence_probe.SEGMENT_TOKENS", 24)
    batched = sentence_log_probs(model, tokenizer, prompt, prefix, SENTENCES)
    expected = [naive_log_prob(model, tokenizer, prompt, prefix, s) for s in SENTENCES]
    assert batched == pytest.approx(expected, abs=1e-4)
    assert all(score < 0 for score in batched)
    assert sentence_log_probs(model, tokenizer, prompt, prefix, SENTENCES) == batched  # the same bytes again
    assert sentence_log_probs(model, tokenizer, prompt, prefix, []) == []


def test_a_prefix_cache_carried_from_another_question_changes_nothing(tiny):
    model, tokenizer = tiny
    prefixes = PrefixCache()
    other = tokenizer("Question: who founded Tarn?\n")["input_ids"]
    sentence_log_probs(model, tokenizer, other, "<extract>", SENTENCES[:1], prefixes)
    prefixes.next_call()
    prompt = tokenizer("Question: who founded Vell?\n")["input_ids"]
    continued = sentence_log_probs(model, tokenizer, prompt, "<extract>", SENTENCES, prefixes)
    assert continued == pytest.approx([naive_log_prob(model, tokenizer, prompt, "<extract>", s) for s in SENTENCES],
                                      abs=1e-4)


def test_probe_items_end_to_end(tiny, tiny_llama_dir):
    model, tokenizer = tiny
    rows = [ROW, {**ROW, "id": "q2", "passages": [{"contents": "Empty\n"}]}]
    rollouts = ["<reason>r</reason><extract>x</extract><answer>y</answer>", "nothing"]
    items = probe_items(str(tiny_llama_dir), rows, rollouts)
    assert items["id"].tolist() == ["q1", "q2"]
    assert items["sentences"].tolist() == [5, 0] and items["answer_sentences"].tolist() == [2, 0]
    assert 0 < items.loc[0, "answer_share"] < 1 and math.isnan(items.loc[1, "answer_share"])
    assert items.loc[1, "log_probs"] == []
    # GRPO's prompt as the held-out scoring renders it, then the policy's text up to its <extract>
    prompt = encode(tokenizer, extraction_row(ROW, tokenizer, "tokens")["prompt"])
    sentences = ["Vell lies on the Tarn.", "Anna Berg founded it in 1810.", "The Tarn is a long river.", "It floods.",
                 "Anna Berg swam in it."]
    expected = [naive_log_prob(model, tokenizer, prompt, "<reason>r</reason><extract>", s) for s in sentences]
    assert items.loc[0, "log_probs"] == pytest.approx(expected, abs=1e-4)
    assert items.loc[0, "answer_share"] == pytest.approx(answer_share(expected, [False, True, False, False, True]))
    assert probe_items(str(tiny_llama_dir), rows, rollouts).equals(items)  # deterministic
    with pytest.raises(ValueError, match="2 questions but 1 rollouts"):
        probe_items(str(tiny_llama_dir), rows, ["x"])
