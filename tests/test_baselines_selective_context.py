"""SeleCtx: self-information on the ci model, units, percentile pruning (hand-checked on a fixed table)."""

import math
import re

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro import assets
from repro.baselines.selective_context import (
    SelectiveContext,
    TokenInformation,
    kept_text,
    load_phrase_parser,
    percentile_filter,
    self_information,
    unit_self_information,
)
from repro.config import SelectiveContextConfig
from repro.data.sentences import selective_context_sentences
from repro.formulas.prompts import passages_document

ROWS = [
    {"id": "a", "question": "Who designed the Eiffel Tower?", "golden_answers": ["Gustave Eiffel"], "passages": [
        {"id": "1", "contents": '"Eiffel Tower"\nThe Eiffel Tower is a wrought-iron lattice tower on the Champ de '
                                'Mars in Paris. It is named after the engineer Gustave Eiffel, whose company '
                                'designed and built the tower from 1887 to 1889.', "score": 2.0},
        {"id": "2", "contents": '"Paris"\nParis is the capital and largest city of France. About two million '
                                'people live in the city proper.', "score": 1.0}]},
    {"id": "b", "question": "Where is Lyon?", "golden_answers": ["France"], "passages": [
        {"id": "3", "contents": '"Lyon"\nLyon is the third-largest city of France. It lies at the confluence '
                                'of the Rhone and the Saone.', "score": 1.0}]},
]


@pytest.fixture(scope="module")
def lm(tiny_llama_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    return AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32).eval(), tokenizer


@pytest.fixture(scope="module")
def nlp():
    return load_phrase_parser(str(assets.SPACY_EN.verified().parent.parent))


class FixedTable(SelectiveContext):
    """Whitespace-separated words as tokens, each with the self-information the table gives it."""

    def __init__(self, table: dict[str, float], nlp=None, **settings):
        settings = SelectiveContextConfig(model="table", phrase_parser="spacy", **settings)
        super().__init__(None, None, "table", settings, nlp=nlp)
        self.table = table

    def score(self, texts):
        return [TokenInformation([m.span() for m in re.finditer(r"\S+", t)],
                                 [self.table[m.group()] for m in re.finditer(r"\S+", t)]) for t in texts]


def test_sentences_follow_selective_contexts_rule():
    text = "Mr. Smith met Dr. Jones in  Paris. Was it e.g. raining? Yes! It was."
    assert selective_context_sentences(text) == ["Mr. Smith met Dr. Jones in Paris.", "Was it e.g. raining?",
                                                 "Yes! It was."]


def test_percentile_filter_removes_the_units_below_the_percentile():
    # 40th percentile of [1, 2, 3, 4, 5] (linear interpolation) = 2.6: the units scoring 1 and 2 go
    assert percentile_filter([1.0, 5.0, 3.0, 2.0, 4.0], 0.4) == [False, True, True, False, True]
    assert percentile_filter([1.0, 5.0, 3.0], 0.0) == [True, True, True]
    assert percentile_filter([math.nan, 1.0, 2.0], 0.5) == [True, False, True]  # no tokens: never removed


def test_unit_scores_average_their_tokens_and_split_straddling_ones():
    units = [(0, 5), (6, 11), (12, 13)]  # "alpha", "bravo", "."
    tokens = [(0, 3), (3, 5), (6, 13)]  # "alp", "ha", "bravo." straddles two units
    assert unit_self_information(units, tokens, [2.0, 4.0, 6.0]) == [3.0, 3.0, 3.0]
    assert unit_self_information(units, tokens, [2.0, 4.0, 6.0], "sum") == [6.0, 3.0, 3.0]
    assert math.isnan(unit_self_information([(0, 5), (9, 12)], [(0, 5)], [1.0])[1])


def test_kept_text_drops_a_removed_unit_with_its_leading_space():
    line = "The tower stands in Paris."
    units = [(0, 9), (10, 16), (17, 19), (20, 25), (25, 26)]
    assert kept_text(line, units, [True, True, False, True, True]) == "The tower stands Paris."
    assert kept_text(line, units, [False, True, True, False, False]) == "stands in"


def test_token_units_on_a_fixed_table_prune_the_lowest_to_the_ratio():
    table = {"alpha": 1, "beta": 5, "gamma": 2, "delta.": 6, "epsilon": 3, "zeta.": 4}
    refiner = FixedTable(table, unit="token", reduce_ratio=0.5)
    # median of 1..6 is 3.5 over both lines: alpha, gamma and epsilon go, order and line breaks stay
    assert refiner.compress(["alpha beta gamma delta.\nepsilon zeta."]) == ["beta delta.\nzeta."]


def test_sentence_units_mean_or_sum_of_their_tokens():
    table = {"x.": 5.0, "y": 3.0, "z.": 3.0}
    assert FixedTable(table, unit="sentence", reduce_ratio=0.5).compress(["x. y z."]) == ["x."]  # 5 vs mean 3
    assert FixedTable(table, unit="sentence", reduce_ratio=0.5, aggregate="sum").compress(["x. y z."]) == ["y z."]


def test_phrase_units_are_spacy_tokens_with_noun_chunks_merged(nlp):
    table = {"The": 1, "Eiffel": 9, "Tower": 2, "stands": 6, "in": 1, "Paris.": 8}
    # phrases: "The Eiffel Tower" 4 (mean), "stands" 6, "in" 1, "Paris" 4 and "." 4 (the word "Paris." splits)
    doc = ["The Eiffel Tower stands in Paris."]
    assert FixedTable(table, nlp, reduce_ratio=0.2).compress(doc) == ["The Eiffel Tower stands Paris."]
    assert FixedTable(table, nlp, reduce_ratio=0.9).compress(doc) == ["stands"]


def test_self_information_is_minus_log_p_of_each_token_in_any_batch(lm):
    model, tokenizer = lm
    texts = ["Paris is the capital of France.", "Lyon", "", "The Rhone meets the Saone at Lyon, a large city."]
    batched = self_information(texts, model, tokenizer, batch_size=3)
    for text, info in zip(texts, batched):
        ids = [tokenizer.bos_token_id, *tokenizer(text, add_special_tokens=False)["input_ids"]]
        with torch.no_grad():
            log_p = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
        expected = [-log_p[t, ids[t + 1]].item() for t in range(len(ids) - 1)]
        assert info.values == pytest.approx(expected, abs=1e-4)
        assert len(info.spans) == len(expected) and "".join(text[s:e] for s, e in info.spans) == text


def trimmed_tokens(text, start, end, model, tokenizer):
    """Token spans (whitespace trimmed, in `text` coordinates) and values of text[start:end] scored alone."""
    (info,) = self_information([text[start:end]], model, tokenizer, batch_size=1)
    spans, values = [], []
    for (s, e), value in zip(info.spans, info.values):
        piece = text[start + s : start + e]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + s + lead, start + s + len(piece.rstrip())))
            values.append(value)
    return spans, values


@pytest.mark.parametrize("condition_on", ["sentence", "passage"])
def test_the_refiner_on_the_ci_model_removes_the_lowest_phrases_in_order(lm, nlp, condition_on):
    model, tokenizer = lm
    settings = SelectiveContextConfig(model="ci", reduce_ratio=0.5, condition_on=condition_on, phrase_parser="x")
    refiner = SelectiveContext(model, tokenizer, "ci", settings, nlp=nlp, parser_id="spacy")
    refinements = refiner.refine(ROWS)
    for row, refinement in zip(ROWS, refinements):
        lines, units, scores = passages_document(row).split("\n"), [], []
        for line in lines:  # independently: one text per forward pass, spaCy per sentence, the unit rule
            sentences = [m.span() for m in re.finditer(r"[^ ][^.?]*[.?]", line)]  # ROWS have no abbreviations
            pieces = sentences if condition_on == "sentence" else [(0, len(line))]
            tokens, values = [], []
            for start, end in pieces:
                piece_tokens, piece_values = trimmed_tokens(line, start, end, model, tokenizer)
                tokens += piece_tokens
                values += piece_values
            line_units = [(s + t.idx, s + t.idx + len(t.text)) for s, e in sentences for t in nlp(line[s:e])]
            units.append(line_units)
            scores.append(unit_self_information(line_units, tokens, values))
        flat = np.array([score for line_scores in scores for score in line_scores])
        threshold = np.percentile(flat, 50)
        assert 0.4 <= (flat < threshold).mean() <= 0.6
        expected = [kept_text(line, u, [not score < threshold for score in sc])
                    for line, u, sc in zip(lines, units, scores)]
        assert refinement.evidence == "\n".join(expected)
        remaining = iter(passages_document(row))  # only deletions: the kept characters in their original order
        assert all(char in remaining for char in refinement.evidence if not char.isspace())
    assert refiner.config()["unit"] == "phrase" and refiner.config()["condition_on"] == condition_on
