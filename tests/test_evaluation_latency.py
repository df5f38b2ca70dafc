"""Table 4's harness: warm-up and repetitions as configured, median seconds per query, evidence lengths."""

import statistics

import numpy as np
import pandas as pd
import pytest

from repro.evaluation.refiners import ChainOfThought
from repro.generation import GenerationParams
from repro.generation.transformers_backend import TransformersGenerator
from repro.studies.latency import RESULT_COLUMNS, measure_latency, table4

ROWS = [{"id": str(i), "question": f"What is item {i}?", "golden_answers": ["x"],
         "passages": [{"id": str(i), "contents": f'"Item {i}"\nItem {i} is a thing.', "score": 1.0}]} for i in range(5)]


class CountingCoT(ChainOfThought):
    def __init__(self, *args):
        super().__init__(*args)
        self.batches = []

    def refine(self, rows):
        self.batches.append(len(rows))
        return super().refine(rows)


@pytest.mark.slow
def test_latency_warms_up_repeats_and_reports_the_median_per_query(tiny_llama_dir):
    generator = TransformersGenerator(str(tiny_llama_dir), dtype="float32", progress=False)
    refiner = CountingCoT(generator, "tiny", GenerationParams(max_new_tokens=3, batch_size=2))
    result = measure_latency(refiner, ROWS, batch_size=2, repetitions=3, warmup_batches=1,
                             tokenizer=generator.tokenizer, progress=False)
    assert refiner.batches == [2] + [2, 2, 1] * 3  # one warm-up batch, then 3 passes over 5 queries in batches of 2
    assert len(result["seconds per repetition"]) == 3 and result["queries"] == 5
    assert result["seconds per query"] == pytest.approx(statistics.median(result["seconds per repetition"]) / 5)

    evidence = [r.evidence for r in refiner.refine(ROWS)]  # greedy: the same evidence as in every repetition
    lengths = [len(generator.tokenizer(e, add_special_tokens=False)["input_ids"]) for e in evidence]
    assert result["evidence tokens mean"] == pytest.approx(np.mean(lengths))
    assert result["evidence tokens std"] == pytest.approx(np.std(lengths))
    assert result["output tokens mean"] >= result["evidence tokens mean"]  # the raw output includes the evidence
    assert ["method", "dataset", "max new tokens", *result] == RESULT_COLUMNS  # run_latency's row, as it declares


def test_table4_layout_puts_the_paper_rows_under_ours():
    ours = pd.DataFrame([{"method": "CoT", "dataset": "a", "seconds per query": 1.0},
                         {"method": "CoT", "dataset": "b", "seconds per query": 3.0},
                         {"method": "EviOmni", "dataset": "a", "seconds per query": 0.5},
                         {"method": "EviOmni", "dataset": "b", "seconds per query": 0.7}])
    paper = pd.DataFrame([{"method": "CoT", "dataset": d, "value": v} for d, v in [("NQ", 0.55), ("Average", 0.65)]])
    table = table4(ours, labels={"a": "A"}, paper=paper, source="ours")
    assert list(table.columns) == ["source", "method", "A", "b", "Average", "NQ"]
    assert table.iloc[0].tolist()[:5] == ["ours", "CoT", 1.0, 3.0, 2.0]
    assert table.iloc[1]["Average"] == pytest.approx(0.6)
    assert table.iloc[2][["source", "method", "NQ", "Average"]].tolist() == ["paper (1.5B, A800)", "CoT", 0.55, 0.65]


def test_a_null_latency_section_times_nothing_and_its_table_and_figure_say_so():
    """released-1p5b's `latency: null`: the stage's notebook runs on an empty result (its outputs exist)."""
    import dataclasses

    from repro.config import load_profile
    from repro.evaluation.tables import reference_label
    from repro.reporting.paper import load_paper_tables
    from repro.studies.figures import plot_latency
    from repro.studies.latency import run_latency

    results = run_latency(dataclasses.replace(load_profile("ci"), latency=None))
    assert results.empty and list(results.columns) == RESULT_COLUMNS
    paper = load_paper_tables(4)
    assert set(table4(results, paper=paper)["source"]) == {"paper (1.5B, A800)"}
    assert plot_latency(results, paper).axes[0].texts[0].get_text() == "Table 4: not requested by this profile"
    assert reference_label(None) == "EviOmni"
