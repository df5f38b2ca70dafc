"""The lead-sentence baseline: the first sentence of passage 1 by the project's rule, no model (D209)."""

from repro.baselines.lead_sentence import LeadSentence, lead_sentence
from repro.config import load_profile
from repro.evaluation.methods import build_refiner
from repro.evaluation.refiners import Refinement
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.registry import METHODS

PASSAGES = [
    {"id": "1", "contents": '"Lyon"\nLyon lies on the Rhone! It is a city in France. Its cuisine is famous.'},
    {"id": "2", "contents": '"Paris"\nParis is the capital of France. The Seine flows through it.'},
]


def test_the_first_sentence_of_passage_1_by_hand():
    assert lead_sentence(PASSAGES) == "Lyon lies on the Rhone!"  # the title line is no sentence; "!" ends one
    assert lead_sentence([{"contents": '"Lyon"\n  Lyon is old.  It is big.'}]) == "Lyon is old."
    assert lead_sentence([{"contents": '"Lyon"\nno end mark at all'}]) == "no end mark at all"


def test_a_passage_1_without_a_sentence_gives_nothing_and_the_other_passages_are_ignored():
    assert lead_sentence([{"contents": '"Empty"\n'}, *PASSAGES]) == ""  # not passage 2's first sentence
    assert lead_sentence([{"contents": '"Blank"\n   \n '}, *PASSAGES]) == ""
    assert lead_sentence([]) == ""
    assert lead_sentence([PASSAGES[0], {"contents": '"Other"\nAnything else.'}]) == lead_sentence(PASSAGES[:1])


def test_the_refiner_gives_each_row_its_lead_sentence():
    rows = [{"question": "Where is Lyon?", "passages": PASSAGES},
            {"question": "Where is Paris?", "passages": [{"contents": '"Empty"\n'}, *PASSAGES]}]
    assert LeadSentence().refine(rows) == [Refinement("Lyon lies on the Rhone!"), Refinement("")]
    assert LeadSentence().config()["refiner"] == "lead_sentence"


def test_the_method_builds_through_the_registry_for_ci_without_a_model():
    cfg, pool = load_profile("ci"), ModelPool()
    assert "lead_sentence" in cfg.evaluation.methods
    refiner = build_refiner("lead_sentence", cfg, pool, GenerationParams())
    assert isinstance(refiner, LeadSentence) and pool._loaded == {}
    method = METHODS["lead_sentence"]
    assert (method.group, method.paper_method, method.cost, method.stages) == ("VAR", None, "answer", ())
    assert "lead_sentence" not in load_profile("paper-1p5b").evaluation.methods  # not a column of the paper's table
