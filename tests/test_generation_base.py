"""The backend-independent contract: parameters, prompt validation, stop-string cutting, the factory."""

import pytest

from repro.generation import GenerationParams, cut_at_stop, make_generator
from repro.generation.base import check_prompts


def test_params_normalise_stop_strings():
    assert GenerationParams(stop="</extract>").stop == ("</extract>",)
    assert GenerationParams(stop=["</a>", "</b>"]).stop == ("</a>", "</b>")


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_new_tokens=0), "max_new_tokens must be >= 1"),
    (dict(batch_size=0), "batch_size must be >= 1"),
    (dict(n=0), "n must be >= 1"),
    (dict(n=4), "n=4 samples per prompt need do_sample=True"),
    (dict(do_sample=True, temperature=0.0), "temperature must be > 0"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
    (dict(stop=["</extract>", ""]), "stop must be non-empty strings"),
])
def test_params_reject_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GenerationParams(**kwargs)


def test_prompts_are_strings_or_chat_messages():
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert check_prompts(("plain", chat)) == ["plain", chat]
    assert check_prompts([]) == []


@pytest.mark.parametrize("prompts, message", [
    ("one string", "prompts must be a list of prompts, got a single str"),
    (["ok", 3], "prompt 1 must be a string or a non-empty list of chat messages, got int"),
    (["ok", "ok", []], "prompt 2 must be a string or a non-empty list"),
    ([[{"role": "user"}]], r"prompt 0 has a message that is not \{'role': str, 'content': str\}"),
    ([[{"role": "user", "content": None}]], "prompt 0 has a message"),
])
def test_bad_prompts_name_their_index(prompts, message):
    with pytest.raises(TypeError, match=message):
        check_prompts(prompts)


def test_cut_at_stop():
    text = "<reason>r</reason><extract>e</extract><answer>a</answer>"
    assert cut_at_stop(text, ["</extract>"]) == "<reason>r</reason><extract>e"
    assert cut_at_stop(text, ["</extract>"], include_stop=True) == "<reason>r</reason><extract>e</extract>"
    assert cut_at_stop(text, ["</answer>", "</reason>"]) == "<reason>r"  # the earliest stop wins
    assert cut_at_stop("a</ex>b", ["</ex", "</ex>"], include_stop=True) == "a</ex>"  # tie: the longer one
    assert cut_at_stop(text, ["</none>"]) == text
    assert cut_at_stop(text, []) == text


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown generation backend 'tgi'; choose one of"):
        make_generator("tgi", "some/model")
