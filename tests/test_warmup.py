"""The format warm-up's answers (D189): the base model's own greedy answer after the target's extract, never
informed by the golden answers; D141's span where the model writes nothing."""

import functools

import pytest

from repro.data.sentences import random_sentence
from repro.formulas import tags
from repro.train.grpo.data import extraction_prompt
from repro.train.grpo.warmup import format_only_prefix, format_only_target, model_answers, warmup_examples

ROW = {"id": "q1", "question": "Who designed the Eiffel Tower?", "golden_answers": ["Gustave Eiffel", "Eiffel"],
       "passages": [{"contents": "Paris\nParis is the capital. Eiffel lived here."},
                    {"contents": "Eiffel Tower\nIt opened in 1889. The company of Gustave Eiffel built it! Tall."}]}
ROWS = [{**ROW, "id": f"q{i}", "question": f"Who designed tower {i}?"} for i in range(6)]


def test_a_written_answer_closes_the_prefix_and_a_blank_one_falls_back_to_the_span():
    drawn = random_sentence(ROW["passages"], "q1", seed=0)
    prefix = format_only_prefix(ROW, seed=0)
    assert prefix == (f"<reason>Passage {drawn.passage} ({drawn.title}) has the sentence I copy as evidence.</reason>\n"
                      f"<extract>{drawn.sentence}</extract>\n<answer>")
    assert format_only_target(ROW, 0, "Gustave Eiffel") == prefix + "Gustave Eiffel</answer>"
    assert format_only_target(ROW, 0, "") == format_only_target(ROW, 0)  # D141's span
    assert format_only_prefix({**ROW, "passages": [{"contents": "Empty\n "}]}, seed=0) is None

    seen = []

    def writer(prompts, prefixes):
        seen.extend(zip(prompts, prefixes))
        return ["Gustave Eiffel", ""] * (len(prompts) // 2)

    examples = warmup_examples(ROWS, max_questions=4, seed=0, answers=writer)
    kept = [next(row for row in ROWS if extraction_prompt(row) == e["prompt"]) for e in examples]
    assert [e["completion"][0]["content"] for e in examples] == [
        format_only_target(kept[0], 0, "Gustave Eiffel"), format_only_target(kept[1], 0),
        format_only_target(kept[2], 0, "Gustave Eiffel"), format_only_target(kept[3], 0)]
    assert seen == [(extraction_prompt(row), format_only_prefix(row, 0)) for row in kept]  # the prompt and prefix only
    with pytest.raises(ValueError, match="answers applies to format_only"):
        warmup_examples(ROWS, 4, 0, "string_inclusion", answers=writer)


@pytest.mark.slow
def test_the_base_models_answers_are_one_clean_line_and_blind_to_the_golden_answers(smollm2_dir):
    writer = functools.partial(model_answers, str(smollm2_dir), dtype="float32", max_new_tokens=12, progress=False)
    examples = warmup_examples(ROWS, max_questions=4, seed=0, answers=writer)
    relabelled = [{**row, "golden_answers": ["Oslo"]} for row in ROWS]
    assert warmup_examples(relabelled, max_questions=4, seed=0, answers=writer) == examples
    for example in examples:
        completion = example["completion"][0]["content"]
        assert tags.is_well_formatted(completion), completion
        answer = tags.parse_response(completion).answer
        assert answer and "\n" not in answer and "<" not in answer
