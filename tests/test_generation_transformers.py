"""The transformers backend on real models: SmolLM2-135M-Instruct (answers, stops, batching) and the tiny
random Llama (sampling, LoRA, dtype), both built from their packaged weights by the conftest fixtures."""

import contextlib
import json
import shutil

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro.generation import GenerationParams, make_generator
from repro.generation.attention import SDPA_GROUPED_DECODE
from repro.generation.prompting import encode, load_tokenizer, render
from repro.generation.transformers_backend import TransformersGenerator, left_pad

pytestmark = pytest.mark.slow

STOP = "</extract>"
# Greedy SmolLM2 closes the tag after 5 tokens (a list pattern), after 8 (copying a sentence it was shown),
# or never (counting).
EARLY_STOP = "<extract>apple</extract>\n<extract>banana</extract>\n<extract>"
NEVER_STOPS = "1, 2, 3, 4, 5, 6,"
LATE_STOP = "Copy the tags.\n<extract>Paris is the capital of France.</extract>\n<extract>Paris is"
MAX_NEW = 12


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    return TransformersGenerator(str(smollm2_dir), dtype="float32", progress=False)


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


@contextlib.contextmanager
def counting_forward_passes(model):
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        yield calls
    finally:
        handle.remove()


def n_tokens(generator, text: str) -> int:
    return len(generator.tokenizer(text, add_special_tokens=False)["input_ids"])


def test_each_row_stops_at_its_own_stop_string(smollm2):
    prompts = [EARLY_STOP, NEVER_STOPS, LATE_STOP]
    free = smollm2.generate(prompts, GenerationParams(max_new_tokens=MAX_NEW, batch_size=3))
    assert STOP in free[0] and STOP in free[2] and STOP not in free[1]

    kept = smollm2.generate(prompts, GenerationParams(max_new_tokens=MAX_NEW, batch_size=3, stop=STOP,
                                                      include_stop=True))
    for text, reference in zip(kept, free):
        end = reference.find(STOP)
        assert text == (reference if end < 0 else reference[: end + len(STOP)])
    assert kept[0].endswith(STOP) and kept[2].endswith(STOP)
    assert n_tokens(smollm2, kept[0]) < n_tokens(smollm2, kept[2]) < MAX_NEW  # stopped at different steps
    assert n_tokens(smollm2, kept[1]) == MAX_NEW  # the row without a stop ran to max_new_tokens

    # When every row has stopped the batch ends early, without running to max_new_tokens.
    with counting_forward_passes(smollm2.model) as passes:
        cut = smollm2.generate([EARLY_STOP, LATE_STOP], GenerationParams(max_new_tokens=MAX_NEW, batch_size=2,
                                                                         stop=STOP))
    assert cut == [free[0].split(STOP)[0], free[2].split(STOP)[0]]
    assert len(passes) == n_tokens(smollm2, kept[2]) < MAX_NEW


def test_batched_greedy_equals_one_by_one_and_keeps_input_order(smollm2):
    prompts = [
        [{"role": "user", "content": "What is the capital of France?"}],
        "Question: Who painted the Mona Lisa?\nAnswer:",
        [{"role": "system", "content": "Answer in one word."},
         {"role": "user", "content": "Passage: Mount Everest is Earth's highest mountain above sea level, "
                                     "on the border of Nepal and China.\nQuestion: Which mountain is the highest?"}],
        "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in",
    ]
    params = GenerationParams(max_new_tokens=12, batch_size=3)  # two batches of left-padded, sorted prompts
    batched = smollm2.generate(prompts, params)
    one_by_one = [smollm2.generate([p], params)[0] for p in prompts]
    assert batched == one_by_one
    assert "Paris" in batched[0] and "1889" in batched[3]


def test_left_padding_keeps_logits_exact(smollm2):
    """Why batched greedy text matches: generate derives position ids from the attention mask, so a
    left-padded row computes the logits of the row alone, up to float rounding (different matmul shapes
    and the masked attention path differ by ~1e-5 in fp32), far below the gap between top tokens."""
    short, long = (encode(smollm2.tokenizer, p) for p in ("Hi there", "A much longer prompt than the other one"))
    input_ids, attention_mask = left_pad([short, long], smollm2.pad_id)
    assert attention_mask[0].tolist() == [0] * (len(long) - len(short)) + [1] * len(short)
    with torch.inference_mode():
        alone = smollm2.model(torch.tensor([short])).logits[0, -1]
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        padded = smollm2.model(input_ids, attention_mask=attention_mask, position_ids=position_ids).logits[0, -1]
    torch.testing.assert_close(padded, alone, rtol=0, atol=1e-4)


def test_chat_messages_get_the_chat_template(smollm2):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    rendered = render(smollm2.tokenizer, messages)
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith("<|im_start|>assistant\n")
    assert encode(smollm2.tokenizer, messages) == smollm2.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    params = GenerationParams(max_new_tokens=12)
    as_chat, as_text = smollm2.generate([messages, rendered], params)
    assert as_chat == as_text and "Paris" in as_chat
    without = smollm2.generate(["What is the capital of France?"], params)[0]
    assert without != as_chat  # the raw question is continued as text, not answered


def test_render_without_a_chat_template_is_an_error(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="has no chat template; pass plain-string prompts"):
        render(tokenizer, [{"role": "user", "content": "hi"}])


def test_seeded_sampling_is_reproducible_and_leaves_the_callers_rng_alone(tiny):
    prompts = ["Once upon a time", [{"role": "user", "content": "Tell me a story."}], "The answer is"]
    params = GenerationParams(max_new_tokens=12, do_sample=True, temperature=1.0, top_p=0.95, n=2, seed=7,
                              batch_size=2)
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = tiny.generate(prompts, params)
    assert torch.rand(1) == expected_next
    assert len(first) == 6 and all(first)
    assert tiny.generate(prompts, params) == first
    assert first[0] != first[1]  # the n samples of one prompt differ
    assert tiny.generate(prompts, GenerationParams(**{**vars(params), "seed": 8})) != first


def test_lora_adapter_is_loaded_and_merged(tiny, tiny_llama_dir, tmp_path):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True)
    peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))  # non-zero B: the adapter matters
    peft_model.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_model.safetensors").is_file()

    adapted = make_generator("transformers", str(tiny_llama_dir), adapter=str(tmp_path), dtype="float32",
                             progress=False)
    prompt = "The capital of France is"
    params = GenerationParams(max_new_tokens=8)
    ids = adapted.tokenizer(prompt, return_tensors="pt")
    with torch.inference_mode():
        reference = peft_model.generate(**ids, max_new_tokens=8, do_sample=False, pad_token_id=adapted.pad_id)
    expected = adapted.tokenizer.decode(reference[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert adapted.generate([prompt], params) == [expected]
    assert adapted.generate([prompt], params) != tiny.generate([prompt], params)


def test_a_tokenizer_loads_once_per_process_until_its_files_change(tiny_llama_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_llama_dir, model)
    first = load_tokenizer(model)
    generators = [TransformersGenerator(str(model), progress=False) for _ in range(2)]
    assert all(g.tokenizer is first for g in generators) and load_tokenizer(str(model) + "/") is first
    stops = [g._stopping(("</extract>",))[0] for g in generators]  # built once for the shared tokenizer
    assert stops[0] is stops[1] and generators[0]._stopping(("</answer>",))[0] is not stops[0]

    config = model / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_max_length": 64}))
    changed = load_tokenizer(model)
    assert changed is not first and changed.model_max_length == 64 and first.model_max_length != 64


def test_dtype_choice(tiny_llama_dir):
    bf16 = TransformersGenerator(str(tiny_llama_dir), dtype="bfloat16", progress=False)
    assert bf16.model.dtype == torch.bfloat16
    assert len(bf16.generate(["Hello"], GenerationParams(max_new_tokens=4))) == 1
    with pytest.raises(ValueError, match=r"dtype must be one of \['float32', 'bfloat16', 'float16', 'auto'\]"):
        TransformersGenerator(str(tiny_llama_dir), dtype="fp32")


def test_cpu_decoding_attends_without_the_flash_kernel_and_greedy_text_is_unchanged(smollm2, smollm2_dir):
    """D168: on a CPU, "auto" loads `sdpa_grouped_decode`; in float32 its greedy text equals SDPA's."""
    assert smollm2.model.config._attn_implementation == SDPA_GROUPED_DECODE
    sdpa = TransformersGenerator(str(smollm2_dir), dtype="float32", attn_implementation="sdpa", progress=False)
    assert sdpa.model.config._attn_implementation == "sdpa"
    prompts = [LATE_STOP, NEVER_STOPS, "The capital of France is"]  # three lengths: left padding in the batch
    params = GenerationParams(max_new_tokens=MAX_NEW, batch_size=3)
    assert smollm2.generate(prompts, params) == sdpa.generate(prompts, params)


def test_bad_prompts_and_empty_input(tiny):
    assert tiny.generate([]) == []
    with pytest.raises(TypeError, match="prompt 1 must be a string or a non-empty list of chat messages"):
        tiny.generate(["fine", {"role": "user", "content": "not wrapped in a list"}])
    with pytest.raises(ValueError, match="prompt 1 encodes to no tokens"):
        tiny.generate(["fine", ""])
