"""RECOMP extractive: the top-scored sentences against the query, kept in their original order (real MiniLM)."""

import pytest
from sentence_transformers import util

from repro import assets
from repro.baselines.recomp import RecompExtractive, load_encoder, recomp_sentences, top_sentences
from repro.config import RecompConfig

ROW = {"id": "a", "question": "Which river flows through Lyon?", "golden_answers": ["Rhone"], "passages": [
    {"id": "1", "contents": '"Cheese"\nBrie is a soft cheese. It is named after the French region Brie.', "score": 3.0},
    {"id": "2", "contents": '"Lyon"\nLyon is a city in France. The Rhone river flows through Lyon. '
                            'Lyon is known for its cuisine.', "score": 2.0},
    {"id": "3", "contents": '"Football"\nFootball is played by two teams of eleven players.', "score": 1.0}]}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("all-minilm-l6-v2")
    assets.copy_minilm(path)
    return load_encoder(str(path), device="cpu")


def test_top_sentences_are_the_highest_scores_in_original_order():
    assert top_sentences([0.1, 0.9, 0.5, 0.9], 2) == [1, 3]
    assert top_sentences([0.1, 0.9, 0.5, 0.9], 3) == [1, 2, 3]
    assert top_sentences([0.3, 0.2], 5) == [0, 1]
    assert top_sentences([0.5, 0.5, 0.5], 1) == [0]  # ties: the earlier sentence
    assert top_sentences([], 2) == []


def test_sentences_come_from_the_passage_texts_not_titles():
    assert recomp_sentences(ROW) == [
        "Brie is a soft cheese.", "It is named after the French region Brie.", "Lyon is a city in France.",
        "The Rhone river flows through Lyon.", "Lyon is known for its cuisine.",
        "Football is played by two teams of eleven players."]


@pytest.mark.parametrize("top_n", [1, 3])
def test_recomp_keeps_the_top_scored_sentences_in_original_order(encoder, top_n):
    refiner = RecompExtractive(encoder, "minilm", RecompConfig(model="minilm", top_n=top_n))
    (refinement,) = refiner.refine([ROW])
    sentences = recomp_sentences(ROW)
    scores = util.cos_sim(encoder.encode(ROW["question"]), encoder.encode(sentences))[0].tolist()  # normalised
    kept = sorted(sorted(range(len(sentences)), key=lambda i: -scores[i])[:top_n])
    assert refinement.evidence == " ".join(sentences[i] for i in kept)
    assert "The Rhone river flows through Lyon." in refinement.evidence
    ((_, computed),) = refiner.sentence_scores([ROW])
    assert computed == pytest.approx(scores, abs=1e-5)


def test_rows_without_sentences_give_empty_evidence(encoder):
    empty = {**ROW, "passages": []}
    refinements = RecompExtractive(encoder, "minilm", RecompConfig(model="minilm", top_n=2)).refine([empty, ROW])
    assert refinements[0].evidence == "" and refinements[1].evidence
