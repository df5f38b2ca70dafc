"""LLMLingua-2 through llmlingua, offline: tiktoken from the packaged vocabulary, the seeded untrained stand-in."""

import hashlib
import re
import tempfile

import pytest

from repro import assets
from repro.baselines.llmlingua2 import LLMLingua2, check_model_name, seed_tiktoken_cache
from repro.config import LLMLingua2Config
from repro.formulas.prompts import passages_document
from repro.registry import METHODS

ROWS = [
    {"id": "a", "question": "Who designed the Eiffel Tower?", "golden_answers": ["Gustave Eiffel"], "passages": [
        {"id": "1", "contents": '"Eiffel Tower"\nThe Eiffel Tower is a wrought-iron lattice tower on the Champ de '
                                'Mars in Paris. It is named after the engineer Gustave Eiffel, whose company '
                                'designed and built the tower from 1887 to 1889.', "score": 2.0},
        {"id": "2", "contents": '"Paris"\nParis is the capital and largest city of France. About two million '
                                'people live in the city proper.', "score": 1.0}]},
    {"id": "b", "question": "Where is Lyon?", "golden_answers": ["France"], "passages": [
        {"id": "3", "contents": '"Lyon"\nLyon is the third-largest city of France? It lies where the Rhone and '
                                'the Saone meet.', "score": 1.0}]},
]


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    out = tmp_path_factory.mktemp("llmlingua2-untrained-minilm")
    assets.build_llmlingua2_standin(out)
    return out / assets.LLMLINGUA2_STANDIN_DIR


@pytest.fixture(scope="module")
def refiner(standin):
    settings = LLMLingua2Config(tiktoken="embedded:cl100k-base", standin="x", rate=0.33)
    return LLMLingua2(str(standin), "standin", settings, str(assets.CL100K.verified()), device="cpu")


def test_the_tiktoken_cache_makes_cl100k_work_offline(tmp_path, monkeypatch):
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    seeded = seed_tiktoken_cache(assets.CL100K.verified())
    assert seeded.parent == tmp_path and seeded.name == hashlib.sha1(
        b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken").hexdigest()
    encoding = tiktoken.core.Encoding(**tiktoken_ext_cl100k())
    assert encoding.encode("hello world") == [15339, 1917]


def tiktoken_ext_cl100k():
    from tiktoken_ext.openai_public import cl100k_base

    return cl100k_base()  # reads the cache, never the network


def test_without_a_cache_variable_the_vocabulary_goes_where_tiktoken_looks_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seeded = seed_tiktoken_cache(assets.CL100K.verified())
    assert seeded.parent == tmp_path / "data-gym-cache" and seed_tiktoken_cache(assets.CL100K.verified()) == seeded
    assert [p.name for p in seeded.parent.iterdir()] == [seeded.name]  # no temporary copy left behind
    assert tiktoken_ext_cl100k()["mergeable_ranks"][b"hello"] == 15339


def test_an_empty_cache_variable_is_refused(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(ValueError, match="TIKTOKEN_CACHE_DIR is empty"):
        seed_tiktoken_cache(assets.CL100K.verified())


def test_the_standin_is_deterministic_and_named_for_llmlingua(tmp_path, standin):
    assets.build_llmlingua2_standin(tmp_path)
    again = tmp_path / assets.LLMLINGUA2_STANDIN_DIR / "model.safetensors"
    assert assets.sha256_file(again) == assets.sha256_file(standin / "model.safetensors")
    check_model_name(str(standin))
    with pytest.raises(ValueError, match="bert-base-multilingual-cased"):
        check_model_name("sentence-transformers/all-MiniLM-L6-v2")
    assert METHODS["llmlingua2_standin"].label == "LLMLingua-2 (untrained stand-in)"
    assert METHODS["llmlingua2_standin"].paper_method == METHODS["llmlingua2"].paper_method == "LLMLingua-2"


def test_each_passage_line_keeps_about_rate_of_its_words_in_order(refiner):
    refinements = refiner.refine(ROWS)
    for row, refinement in zip(ROWS, refinements):
        lines = passages_document(row).lower().split("\n")  # MiniLM's WordPiece vocabulary is uncased
        compressed = refinement.evidence.split("\n")
        assert len(compressed) == len(lines)
        for line, kept in zip(lines, compressed):
            words, kept_words = re.findall(r"\w+", line), re.findall(r"\w+", kept)
            assert 0 < len(kept_words) <= 0.5 * len(words)
            remaining = iter(words)
            assert all(word in remaining for word in kept_words)  # a subsequence: order preserved
    assert refinements[1].evidence.count("?") == 1  # a forced token is always kept


def test_rows_compressed_together_equal_rows_compressed_alone(refiner):
    together = refiner.refine(ROWS)
    assert [refiner.refine([row])[0] for row in ROWS] == together
    assert refiner.config() == {"refiner": "llmlingua2", "model": "standin", "token_level_only": True,
                                "rate": 0.33, "force_tokens": ["\n", "?"]}
