import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from repro.formulas.masking import MASK_PLACEHOLDER, assistant_prefix, knowledge_masked_contexts, user_prompt
from repro.formulas.prompts import EVIDENCE_EXTRACTION_TEMPLATE, format_passages

QUESTION = "Who composed The Midsummer Marriage?"
PASSAGES = [
    {"title": "Michael Tippett", "text": "PASSAGE-SECRET Tippett wrote the opera The Midsummer Marriage."},
    {"title": "Benjamin Britten", "text": "Britten was a contemporary of Tippett."},
]
RATIONALE = "RATIONALE-SECRET Passage 1 names the composer."
EVIDENCE = "EVIDENCE-SECRET Michael Tippett composed The Midsummer Marriage."
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    """A small byte-level BPE tokenizer with a ChatML template, trained here (no download)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([EVIDENCE_EXTRACTION_TEMPLATE, RATIONALE, EVIDENCE, format_passages(PASSAGES)], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|im_start|>", eos_token="<|im_end|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(params=["empty_tags", "drop", "placeholder"])
def contexts(request):
    return knowledge_masked_contexts(QUESTION, PASSAGES, RATIONALE, EVIDENCE, mode=request.param)


def _visible_text(context) -> str:
    return "\n".join(m["content"] for m in context.as_messages())


def test_contexts_hide_exactly_the_masked_spans(contexts):
    """Eq. 4: o_r sees (q, P, r), o_e sees (q, e), o_f sees (q, P, r, e), in every mask mode."""
    seen = {target: _visible_text(context) for target, context in contexts.items()}
    for target, visible in {"rationale": ("PASSAGE", "RATIONALE"), "evidence": ("EVIDENCE",),
                            "full": ("PASSAGE", "RATIONALE", "EVIDENCE")}.items():
        for span in ("PASSAGE", "RATIONALE", "EVIDENCE"):
            assert (f"{span}-SECRET" in seen[target]) == (span in visible), (target, span)
        assert QUESTION in seen[target]


def test_empty_tags_mode_keeps_tags_and_label():
    contexts = knowledge_masked_contexts(QUESTION, PASSAGES, RATIONALE, EVIDENCE)
    assert contexts["full"].assistant_prefix == f"<reason>{RATIONALE}</reason><extract>{EVIDENCE}</extract><answer>"
    assert contexts["rationale"].assistant_prefix == f"<reason>{RATIONALE}</reason><extract></extract><answer>"
    assert contexts["evidence"].assistant_prefix == f"<reason></reason><extract>{EVIDENCE}</extract><answer>"
    assert contexts["evidence"].messages[-1]["content"].endswith(f"Question: {QUESTION}\nPassages:")
    assert contexts["full"].messages[-1]["content"].endswith("Passages: " + format_passages(PASSAGES))


def test_drop_and_placeholder_modes():
    assert assistant_prefix("r", "e", "evidence", mode="drop") == "<extract>e</extract><answer>"
    assert assistant_prefix("r", "e", "rationale", mode="drop") == "<reason>r</reason><answer>"
    assert user_prompt("q", "P", "evidence", mode="drop").endswith("Question: q")
    assert assistant_prefix("r", "e", "evidence", mode="placeholder") == (
        f"<reason>{MASK_PLACEHOLDER}</reason><extract>e</extract><answer>"
    )
    assert user_prompt("q", "P", "evidence", mode="placeholder").endswith(f"Passages: {MASK_PLACEHOLDER}")
    assert assistant_prefix("r", "e", "full", prefill_answer_tag=False) == "<reason>r</reason><extract>e</extract>"


def test_instruction_text_is_never_masked():
    instruction = EVIDENCE_EXTRACTION_TEMPLATE.split("Question:")[0]
    for mode in ("empty_tags", "drop", "placeholder"):
        assert user_prompt("q", "P", "evidence", mode).startswith(instruction)


def test_render_and_token_ids_prefill_from_scratch(tokenizer):
    contexts = knowledge_masked_contexts(QUESTION, format_passages(PASSAGES), RATIONALE, EVIDENCE, system=None)
    for target, context in contexts.items():
        text = context.render(tokenizer)
        assert text.startswith("<|im_start|>user\n[Instruction]\n")
        assert text.endswith("<|im_end|>\n<|im_start|>assistant\n" + context.assistant_prefix)
        ids = context.token_ids(tokenizer)
        assert tokenizer.decode(ids) == text  # the whole context, no added special tokens
        assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert "EVIDENCE-SECRET" not in contexts["rationale"].render(tokenizer)
    assert len(contexts["evidence"].token_ids(tokenizer)) < len(contexts["full"].token_ids(tokenizer))


def test_as_messages_ends_with_the_assistant_prefix():
    context = knowledge_masked_contexts(QUESTION, PASSAGES, RATIONALE, EVIDENCE)["rationale"]
    assert [m["role"] for m in context.as_messages()] == ["system", "user", "assistant"]
    assert context.as_messages()[-1]["content"] == context.assistant_prefix


def test_bad_input():
    with pytest.raises(ValueError, match="mask_mode"):
        knowledge_masked_contexts(QUESTION, PASSAGES, RATIONALE, EVIDENCE, mode="soft")
    with pytest.raises(ValueError, match="target"):
        assistant_prefix("r", "e", "answer")
    with pytest.raises(TypeError):
        knowledge_masked_contexts(QUESTION, PASSAGES, None, EVIDENCE)
