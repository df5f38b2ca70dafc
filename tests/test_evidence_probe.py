"""The teacher-forced probe (issue #31, outcome (b)): its prefix, its share by hand, and its batched log-probabilities
against one full forward pass per sentence, on the `ci` model."""

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro.train.evidence_probe import answer_share, probe_items, probe_prefix, sentence_log_probs

ROW = {"id": "q1", "question": "Who founded Vell?", "golden_answers": ["Anna Berg"],
       "passages": [{"contents": "Vell\nVell lies on the Tarn. Anna Berg founded it in 1810."},
                    {"contents": "Tarn\nThe Tarn is a long river. It floods. Anna Berg swam in it."}]}


def test_the_prefix_ends_at_the_policys_extract_tag_whatever_the_format():
    assert probe_prefix("<reason>r</reason><extract>e</extract>") == "<reason>r</reason><extract>"
    assert probe_prefix("<reason>r</reason> then <answer>x</answer>") == "<reason>r</reason><extract>"
    assert probe_prefix("no tags at all") == "no tags at all<extract>"
    assert probe_prefix("") == "<extract>"


def test_the_share_by_hand():
    assert answer_share([math.log(0.2), math.log(0.3), math.log(0.5)], [True, False, True]) == pytest.approx(0.7)
    assert answer_share([-1000.0, -1001.0], [False, True]) == pytest.approx(1 / (1 + math.e))  # no underflow
    assert answer_share([-3.0], [False]) == 0.0
    assert math.isnan(answer_share([], []))


def test_batched_log_probs_equal_one_forward_pass_per_sentence(tiny_llama_dir, monkeypatch):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32).eval()
    context = tokenizer("Question: who founded Vell? <reason>r</reason><extract>")["input_ids"]
    sentences = ["Anna Berg founded it in 1810.", "It floods.", "The Tarn is a long river that floods each year."]
    monkeypatch.setattr("repro.train.evidence_probe.SENTENCE_BATCH", 2)  # a full batch and a padded one
    batched = sentence_log_probs(model, tokenizer, context, sentences)
    for sentence, score in zip(sentences, batched, strict=True):
        continuation = tokenizer(sentence + "</extract>", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + continuation])).logits[0]
        log_probs = torch.log_softmax(logits[len(context) - 1:-1].float(), dim=-1)
        expected = log_probs.gather(-1, torch.tensor(continuation)[:, None]).sum().item()
        assert score == pytest.approx(expected, abs=1e-4)
    assert sentence_log_probs(model, tokenizer, context, sentences) == batched  # the same bytes again


def test_probe_items_end_to_end(tiny_llama_dir):
    rows = [ROW, {**ROW, "id": "q2", "passages": [{"contents": "Empty\n"}]}]
    items = probe_items(str(tiny_llama_dir), rows, ["<reason>r</reason><extract>x", "nothing"])
    assert items["id"].tolist() == ["q1", "q2"]
    assert items["sentences"].tolist() == [5, 0] and items["answer_sentences"].tolist() == [2, 0]
    assert 0 < items.loc[0, "answer_share"] < 1 and math.isnan(items.loc[1, "answer_share"])
    with pytest.raises(ValueError, match="2 questions but 1 rollouts"):
        probe_items(str(tiny_llama_dir), rows, ["x"])
