"""The evaluation runner on a real (tiny random) generator: record fields, resume after a crash, and
configuration changes that must never mix records."""

import dataclasses
import json

import pytest

from repro.config import load_profile
from repro.data import layout
from repro.evaluation.answering import Answerer, read_prediction
from repro.evaluation.records import read_records
from repro.evaluation.refiners import ClosedBook, FullPassages
from repro.evaluation.runner import evaluate
from repro.formulas.metrics import exact_match, f1
from repro.formulas.prompts import format_passages
from repro.generation import GenerationParams
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import write_jsonl
from repro.studies.comparison import sample_answerable, run_reading_check

pytestmark = pytest.mark.slow


def contexts_row(i: int, answer_in_passages: bool = True) -> dict:
    capital = f"Capital{i}" if answer_in_passages else "unknown"
    return {"id": f"q{i}", "question": f"What is the capital of Country{i}?", "golden_answers": [f"Capital{i}"],
            "metadata": {}, "passages": [
                {"id": f"{i}a", "contents": f'"Country{i}"\nCountry{i} is a country. Its capital is {capital}.',
                 "score": 2.0},
                {"id": f"{i}b", "contents": '"Weather"\nWeather is the state of the atmosphere.', "score": 1.0}]}


ROWS = [contexts_row(i, answer_in_passages=i % 2 == 0) for i in range(7)]


class CountingRefiner(FullPassages):
    """Full, counting the rows it refines and raising after `crash_after` calls (a kill mid-way)."""

    def __init__(self, crash_after: int | None = None):
        self.calls, self.rows, self.crash_after = 0, [], crash_after

    def refine(self, rows):
        if self.crash_after is not None and self.calls == self.crash_after:
            raise RuntimeError("killed")
        self.calls += 1
        self.rows += [row["id"] for row in rows]
        return super().refine(rows)


@pytest.fixture(scope="module")
def generator(tiny_llama_dir):
    return TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)


@pytest.fixture(scope="module")
def answerer(generator):
    return Answerer(generator, "tiny-llama", GenerationParams(max_new_tokens=2, batch_size=8))


def run(refiner, answerer, path, generator, chunk_size=2):
    return evaluate(ROWS, refiner, answerer, path, length_tokenizer=generator.tokenizer, tokenizer_id="tiny",
                    chunk_size=chunk_size, progress=False)


def test_records_hold_the_evidence_the_scores_and_the_lengths(tmp_path, generator, answerer):
    full = run(FullPassages(), answerer, tmp_path / "full.jsonl", generator, chunk_size=len(ROWS))
    zero = run(ClosedBook(), answerer, tmp_path / "zero.jsonl", generator, chunk_size=len(ROWS))
    tokens = lambda text: len(generator.tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    for row, rec, closed in zip(ROWS, full, zero):
        document = format_passages(row["passages"])
        assert rec["id"] == row["id"] and rec["golden_answers"] == row["golden_answers"]
        assert rec["evidence"] == document and rec["raw_output"] is None
        assert rec["passage_tokens"] == rec["evidence_tokens"] == tokens(document) and rec["cr"] == 1.0
        assert rec["passage_words"] == len(document.split())
        assert rec["prediction"] == read_prediction(rec["generation"])
        assert rec["em"] == exact_match(rec["prediction"], row["golden_answers"])
        assert rec["f1"] == f1(rec["prediction"], row["golden_answers"])
        assert rec["answer_in_passages"] == (int(row["id"][1:]) % 2 == 0)
        assert rec["refine_seconds"] >= 0 and rec["answer_seconds"] > 0
        assert closed["evidence"] is None and closed["evidence_tokens"] is None and closed["cr"] is None
        assert closed["passage_tokens"] == rec["passage_tokens"]


def test_an_interrupted_run_resumes_without_recomputing_or_duplicating(tmp_path, generator, answerer):
    path = tmp_path / "full.jsonl"
    with pytest.raises(RuntimeError, match="killed"):
        run(CountingRefiner(crash_after=2), answerer, path, generator)
    partial = path.with_suffix(".partial.jsonl")
    assert not path.exists()
    saved = [json.loads(line) for line in partial.read_text().splitlines()[1:]]
    assert [r["id"] for r in saved] == ["q0", "q1", "q2", "q3"]  # two chunks of two were flushed

    resumed = CountingRefiner()
    records = run(resumed, answerer, path, generator)
    assert resumed.rows == ["q4", "q5", "q6"]  # only the unfinished questions ran
    assert [r["id"] for r in records] == [row["id"] for row in ROWS]
    assert records[:4] == saved  # finished records reused as they were
    assert read_records(path) == records and not partial.exists()

    again = CountingRefiner()
    assert run(again, answerer, path, generator) == records and again.calls == 0  # the finished file is reused


def test_a_changed_configuration_never_mixes_records(tmp_path, generator, answerer):
    path = tmp_path / "full.jsonl"
    with pytest.raises(RuntimeError):
        run(CountingRefiner(crash_after=1), answerer, path, generator)
    longer = Answerer(generator, "tiny-llama", GenerationParams(max_new_tokens=3, batch_size=8))
    refiner = CountingRefiner()
    with pytest.warns(UserWarning, match="another configuration"):
        records = run(refiner, longer, path, generator, chunk_size=len(ROWS))
    assert refiner.rows == [row["id"] for row in ROWS]  # everything recomputed
    assert read_records(path) == records
    manifest = json.loads(path.with_suffix(".manifest.json").read_text())
    assert manifest["config"]["answerer"]["decoding"]["max_new_tokens"] == 3


def test_duplicate_question_ids_are_refused(tmp_path, generator, answerer):
    with pytest.raises(ValueError, match="unique ids"):
        evaluate(ROWS + ROWS[:1], FullPassages(), answerer, tmp_path / "x.jsonl", length_tokenizer=generator.tokenizer,
                 tokenizer_id="tiny", progress=False)


def test_the_reading_check_runs_zero_and_full_on_answerable_questions_only(tiny_llama_dir, tmp_path, monkeypatch):
    cfg = load_profile("ci")
    models = dataclasses.replace(cfg.models, generator=str(tiny_llama_dir), extractor=str(tiny_llama_dir))
    cfg = dataclasses.replace(cfg, models=models, evaluation=dataclasses.replace(
        cfg.evaluation, datasets=["fanoutqa"], qa_adapter=False, reading_check_questions=2))
    monkeypatch.chdir(tmp_path)  # the study reads the data stage's contexts relative to the cwd
    write_jsonl(layout.contexts_path(cfg, "fanoutqa", "test"), ROWS)  # q0, q2, q4, q6 hold their answer

    files = run_reading_check(cfg, progress=False)
    assert files["method"].tolist() == ["zero", "full"]
    records = {m: read_records(p) for m, p in zip(files["method"], files["path"])}
    assert [r["id"] for r in records["zero"]] == [r["id"] for r in records["full"]]
    assert len(records["full"]) == 2 and all(r["answer_in_passages"] for r in records["full"])
    assert records["zero"][0]["evidence_tokens"] is None and records["full"][0]["evidence_tokens"] > 0
    assert sample_answerable(ROWS, None, seed=0) == ROWS[::2]
