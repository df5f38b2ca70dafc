import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import PAPER_SEED, ROOT
from repro.io import InputError
from repro.reporting import claims as claims_module
from repro.reporting.paper import KINDS, load_claims, load_paper_tables, select_cells

SEED = ROOT.parent / "shared" / "seeds" / PAPER_SEED  # the source itself, beside the repository in the lab only
BASE = "eviomni-beats-var"  # a sign test over the EM and F1 cells of Table 2's VAR methods and EviOmni
ORDERING = {"test": "ordering", "by": "method", "top": "EviOmni", "rank": 1, "direction": "higher"}


@pytest.fixture(scope="module")
def claims():
    return load_claims()


def test_committed_claims_load_and_name_stages_of_the_pipeline(claims):
    stages = yaml.safe_load(Path("dvc.yaml").read_text(encoding="utf-8"))["stages"]
    assert len(claims) >= 15 and {claim["kind"] for claim in claims} == set(KINDS)
    assert {stage for claim in claims for stage in claim["ours"]} <= set(stages)
    base = next(claim for claim in claims if claim["id"] == BASE)
    # 2 sizes × 3 datasets × 2 metrics × 6 methods
    assert len(select_cells(load_paper_tables(), base["cells"])) == 2 * 3 * 2 * 6


@pytest.mark.skipif(not SEED.exists(), reason="the paper's source text (shared/seeds) is not beside the repository")
def test_claims_words_are_in_the_source_at_their_lines(claims):
    source = SEED.read_text(encoding="utf-8").splitlines()
    for claim in claims:
        first, last = claim["lines"]
        assert claim["words"] in "\n".join(source[first - 1 : last]), claim["id"]


def _write(tmp_path, claims) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(claims, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


BAD = {  # what is wrong: (an edit of the valid claim BASE, the field the error names)
    "a missing field": (lambda c: c.pop("kind"), "kind"),
    "an unknown field": (lambda c: c.update(note="seen in Table 2"), "note"),
    "why_not beside stages": (lambda c: c.update(why_not="no GPU"), "why_not"),
    "no stage and no why_not": (lambda c: c.update(ours=[]), "why_not"),
    "an empty why_not": (lambda c: c.update(ours=[], why_not=""), "why_not"),
    "ours not a list": (lambda c: c.update(ours="main_comparison"), "ours"),
    "an id not in kebab case": (lambda c: c.update(id="EviOmni_beats_VAR"), "id"),
    "an empty section": (lambda c: c.update(section=""), "section"),
    "an unknown kind": (lambda c: c.update(kind="novelty"), "kind"),
    "lines not a pair": (lambda c: c.update(lines=[208]), "lines"),
    "lines in no excerpt": (lambda c: c.update(lines=[1, 1]), "lines"),
    "lines wider than the words": (lambda c: c.update(lines=[206, 208]), "lines"),
    "words not verbatim": (lambda c: c.update(words="EviOmni outperforms VAR methods in all cases"), "words"),
    "cells not a list of selectors": (lambda c: c.update(cells={"table": 2}), "cells"),
    "a column not of the tables": (lambda c: c.update(cells=[{"tabel": 2}]), "cells"),
    "a selector matching no cell": (lambda c: c.update(cells=[{"table": 2, "dataset": "SQuAD"}]), "cells"),
    "an unknown test": (lambda c: c.update(reported_test={"test": "t-test"}), "reported_test"),
    "a test's field missing": (lambda c: c["reported_test"].pop("alternative"), "reported_test"),
    "better among than": (lambda c: c["reported_test"].update(than=["EviOmni"]), "reported_test"),
    "an unknown alternative": (lambda c: c["reported_test"].update(alternative="two-sided"), "reported_test"),
    "a method not among the cells": (lambda c: c["reported_test"].update(than=["CoT"]), "reported_test"),
    "a metric not among the cells": (lambda c: c["reported_test"].update(metric="CR"), "reported_test"),
    "ordering by no column": (lambda c: c.update(reported_test={**ORDERING, "by": "size"}), "reported_test"),
    "ordering in no direction": (lambda c: c.update(reported_test={**ORDERING, "direction": "up"}), "reported_test"),
    "a rank every method has": (lambda c: c.update(reported_test={**ORDERING, "rank": 6}), "reported_test"),
    "a top not among the cells": (lambda c: c.update(reported_test={**ORDERING, "top": "CoT"}), "reported_test"),
    "no test without a reason": (lambda c: c.update(reported_test={"test": "none", "why": ""}), "reported_test"),
}


@pytest.mark.parametrize(("edit", "field"), BAD.values(), ids=list(BAD))
def test_load_claims_names_the_file_claim_and_field_of_an_error(tmp_path, claims, edit, field):
    claim = copy.deepcopy(next(claim for claim in claims if claim["id"] == BASE))
    edit(claim)
    path = _write(tmp_path, [claims[0], claim])
    with pytest.raises(InputError, match=f"claim {claim['id']!r}") as error:
        load_claims(path)
    assert error.value.path == str(path) and error.value.field == field


def test_load_claims_rejects_duplicate_ids_and_a_file_without_claims(claims, tmp_path):
    with pytest.raises(InputError, match=f"field 'id': claim '{claims[1]['id']}': another claim has this id"):
        load_claims(_write(tmp_path, [claims[0], claims[1], claims[1]]))
    with pytest.raises(InputError, match="non-empty YAML list of claims"):
        load_claims(_write(tmp_path, {"claims": claims}))


# Verdicts on the reported numbers (repro.reporting.claims), by hand
# ---------------------------------------------------------


def cells(values: dict[str, list[float]], metric: str = "EM") -> pd.DataFrame:
    """Tidy rows of one table: each method's values over the datasets d0, d1, ..."""
    return pd.DataFrame([{"table": "2", "dataset": f"d{i}", "split": "", "model_size": "1.5B", "method": method,
                          "group": "", "metric": metric, "value": value}
                         for method, column in values.items() for i, value in enumerate(column)])


def test_beats_every_is_an_intersection_union_test_without_adjustment():
    six = cells({"A": [5] * 6, "B": [1] * 6, "C": [1] * 6, "D": [1] * 6, "E": [1] * 6})
    every = claims_module.sign_verdict(six, "A", ["B", "C", "D", "E"], "EM", "greater")
    # each comparison 6-0-0, p = 0.5^6 = 1/64 at α; the largest is the claim's p (Holm would give 4/64 = 0.0625)
    assert every["verdict"] == "supported" and every["p"] == 1 / 64 and every["rule"] == "intersection-union"
    assert [(c["wins"], c["ties"], c["losses"], c["p"]) for c in every["comparisons"]] == [(6, 0, 0, 1 / 64)] * 4
    one_loss = cells({"A": [5] * 6, "B": [1] * 6, "C": [1, 1, 1, 1, 1, 9]})
    out = claims_module.sign_verdict(one_loss, "A", ["B", "C"], "EM", "greater")
    # C: P(5 or 6 wins of 6) = 7/64 > 0.05, so "beats every" is open; the best outcome, two sweeps, gives 1/64
    assert out["p"] == pytest.approx(7 / 64) and out["floor_p"] == 1 / 64 and out["verdict"] == "inconclusive at n = 6"
    assert "vs B (EM): 6-0-0, p = 0.0156; vs C (EM): 5-0-1, p = 0.109" in out["detail"]
    faster = claims_module.sign_verdict(one_loss, "B", ["A"], "EM", "less")  # lower is better, as latency
    assert faster["verdict"] == "supported" and faster["p"] == 1 / 64
    averaged = pd.concat([six, cells({"A": [0], "B": [9]}).assign(dataset="Average")])
    assert claims_module.sign_verdict(averaged, "A", ["B"], "EM", "greater")["n"] == 6  # the Average row is left out


def test_some_x_beats_it_contradicts_with_holm_over_the_comparisons():
    six = cells({"A": [1] * 6, "B": [5] * 6, "C": [0] * 6})
    out = claims_module.sign_verdict(six, "A", ["B", "C"], "EM", "greater")
    # B beats A in all 6 units: p 1/64 against the claim; C's against-p is 1; Holm: 2 · 1/64 = 1/32 < 0.05
    assert out["verdict"] == "contradicted"
    assert [c["p_against_holm"] for c in out["comparisons"]] == [pytest.approx(2 / 64), 1.0]
    five = cells({"A": [1] * 5, "B": [5] * 5, "C": [0] * 5})
    # five units: B's 1/32 doubled by Holm is 1/16 > 0.05, not a contradiction; a sweep for A could give 1/32
    assert claims_module.sign_verdict(five, "A", ["B", "C"], "EM", "greater")["verdict"] == "inconclusive at n = 5"


def test_untestable_when_a_clean_sweep_cannot_reach_alpha_after_the_rule():
    four = cells({"A": [5] * 4, "B": [1] * 4, "C": [1] * 4})
    out = claims_module.sign_verdict(four, "A", ["B", "C"], "EM", "greater")
    # 4 units: a sweep gives 0.5^4 = 1/16 = 0.0625 for each comparison, and the largest of them is the floor
    assert out["verdict"] == "untestable from the reported cells" and out["floor_p"] == 1 / 16


def test_a_unit_is_a_position_of_one_metric_family_em_first_and_f1_beside():
    em, f1 = cells({"A": [5] * 3, "B": [1] * 3}), cells({"A": [5] * 3, "B": [1] * 3}, metric="F1")
    both = pd.concat([em, f1])
    out = claims_module.sign_verdict(both, "A", ["B"], ["EM", "F1"], "greater")
    # three positions, not six cells: 1/8 at best, untestable (six cells would have given 1/64)
    assert out["n"] == 3 and out["floor_p"] == 1 / 8 and out["verdict"] == "untestable from the reported cells"
    assert [(c["metric"], c["role"]) for c in out["comparisons"]] == [("EM", "unit"), ("F1", "beside")]
    assert "beside, not counted: vs B (F1): 3-0-0" in out["detail"]
    six_em = cells({"A": [5] * 6, "B": [1] * 6})
    cr = cells({"A": [5, 5, 5, 5, 5, 0], "B": [1] * 6}, metric="CR")  # compactness: a family of its own
    out = claims_module.sign_verdict(pd.concat([six_em, cr]), "A", ["B"], ["EM", "CR"], "greater")
    assert out["p"] == pytest.approx(7 / 64) and out["verdict"] == "inconclusive at n = 6"  # CR's 5-0-1 decides
    assert claims_module.metric_families(["F1", "CR", "EM"]) == {"accuracy": ["EM", "F1"], "CR": ["CR"]}


def test_an_ordering_holds_or_fails_as_printed_without_a_noise_model():
    table = cells({"A": [3, 2, 5], "B": [2, 3, 1], "C": [1, 1, 4]}, metric="CR")
    first = claims_module.ordering_verdict(table, "method", "A", 1, "higher")
    assert first["verdict"] == "fails as printed" and first["detail"].startswith("holds at 2 of 3 unit positions")
    assert "d1 1.5B CR: A 2 vs B 3, margin -1 (no noise model)" in first["detail"]
    assert claims_module.ordering_verdict(table, "method", "A", 2, "higher")["verdict"] == "holds as printed"
    assert claims_module.ordering_verdict(table, "method", ["A", "B"], 2, "higher")["verdict"] == "fails as printed"
    assert claims_module.ordering_verdict(table, "method", "C", 1, "lower")["verdict"] == "fails as printed"
    tied = cells({"A": [2], "B": [2]}, metric="CR")
    assert claims_module.ordering_verdict(tied, "method", "A", 1, "higher")["verdict"] == "holds as printed"


def test_an_ordering_of_em_is_held_to_its_noise():
    sizes = {(2, "d0"): (100,)}
    def ordering(a: float, b: float) -> dict:
        return claims_module.ordering_verdict(cells({"A": [a], "B": [b]}), "method", "A", 1, "higher", sizes)
    # 20 points on 100 questions: p < 0.05 at any discordance the two rates allow, beyond noise: a test
    assert ordering(60, 40)["verdict"] == "supported" and ordering(40, 60)["verdict"] == "contradicted"
    # 1 point is one question: McNemar's p is 1 at every discordance
    near = ordering(41, 40)
    assert near["verdict"] == "within noise" and near["comparisons"][0]["noise"] == "within noise"
    assert ordering(40, 41)["verdict"] == "within noise"  # fails as printed, inside the noise
    # 8 points: only_a − only_b = 8; 8 of 12 discordant gives p = 158/4096 < 0.05, 14 gives 940/16384 > 0.05, so
    # significant up to a discordance of 12%, inside the plausible 8.5%-21.8%: undetermined, an ordering as printed
    middle = ordering(48, 40)
    assert middle["comparisons"][0]["discordance_limit"] == 0.12 and middle["verdict"] == "holds as printed"
    assert middle["comparisons"][0]["se"] == (5.0, 4.9)  # √(0.48 · 0.52 / 100), √(0.4 · 0.6 / 100), in points
    assert claims_module.ordering_verdict(cells({"A": [60], "B": [40]}), "method", "A", 1, "higher")["verdict"] \
        == "holds as printed"  # no test set size: no noise model


def test_what_the_papers_significant_needs():
    sizes = {(2, "d0"): (3600,)}
    test = {"test": "sign", "better": "A", "than": ["B"], "metric": ["EM", "F1"], "alternative": "greater"}
    def needs(a: float, b: float) -> dict:
        return claims_module.significance_verdict(test, cells({"A": [a], "B": [b]}), sizes)
    # 40.44 vs 40.02 on 3,600: 15 more questions one way; 51 discordant give p = 0.0489, 53 give 0.0534
    nq = needs(40.44, 40.02)
    assert nq["comparisons"][0]["discordance_limit"] == 51 / 3600 and nq["verdict"] == "significance implausible"
    assert "at discordance ≤ 1.4%" in nq["detail"] and "8.5%-21.8%" in nq["detail"]
    assert needs(42, 40)["verdict"] == "significance plausible"  # 72 questions: p < 0.05 up to 36% discordance
    assert needs(40, 40)["verdict"] == "fails as printed"  # no improvement to call significant


def test_the_noise_of_a_mean_over_datasets():
    sizes = {(3, "NQ"): (3600,), (3, "TQA"): (11300,), (3, "Average"): (3600, 11300)}
    rows = pd.DataFrame([{"table": 3, "dataset": d, "split": "", "model_size": "1.5B", "method": m, "group": "",
                          "metric": "EM", "value": v}
                         for d, a, b in [("Average", 39.13, 39.05)] for m, v in (("A", a), ("B", b))])
    out = claims_module.ordering_verdict(rows, "method", "A", 1, "higher", sizes)
    margin = out["comparisons"][0]
    assert margin["n"] == (3600, 11300) and margin["noise"] == "within noise" and out["verdict"] == "within noise"


def test_the_reported_test_sets_come_from_table_7_and_section_4_7():
    counts = claims_module.question_counts(load_paper_tables())
    assert counts[(2, "NQ")] == (3600,) and counts[(2, "TQA")] == (11300,) and counts[(10, "MuSiQue")] == (2400,)
    assert counts[(3, "Average")] == (3600, 11300, 5600) and counts[(5, "Average")] == (500,) * 5
    assert (1, "NQ") not in counts  # §2.2 does not say how many questions Table 1 kept


def test_every_committed_claim_gets_a_verdict_in_the_fixed_words(claims):
    verdicts = claims_module.reported_verdicts(claims, load_paper_tables())
    assert verdicts["id"].tolist() == [claim["id"] for claim in claims]
    assert set(verdicts["verdict"].map(claims_module.verdict_word)) <= set(claims_module.REPORTED_VERDICTS)
    by_id = verdicts.set_index("id")
    # issue #47's cases: EM units with the intersection-union test, the floor after the rule, orderings as printed
    assert by_id.at["eviomni-beats-var-rar", "verdict"] == "supported" and by_id.at["eviomni-beats-var-rar", "p"] \
        == 1 / 64  # 6 units, each of six methods swept
    assert by_id.at["abstract-compact-evidence", "p"] == pytest.approx(9 / 256)  # CR vs FilCo 7-0-1 over 8 units
    assert by_id.at["abstract-compact-evidence", "verdict"] == "supported"
    assert by_id.at["eviomni-generalises-from-nq", "verdict"] == "untestable from the reported cells"
    assert by_id.at["eviomni-generalises-from-nq", "floor_p"] == 1 / 16
    assert by_id.at["eviomni-fewer-searches-7b-multihop", "verdict"] == "fails as printed"  # HotpotQA 1.63 → 1.67
    assert by_id.at["evidence-reward-best-single", "verdict"] == "within noise"  # 39.13 vs 39.05
    assert by_id.at["eviomni-beats-var-rar-significantly", "verdict"] == "significance implausible"
    assert by_id.at["full-ctx-pair-significant-on-nq", "verdict"] == "significance implausible"


def test_every_claim_the_paper_calls_significant_is_judged_by_what_significance_needs(claims):
    significant = [c for c in claims if claims_module.calls_significant(c)]
    assert {c["id"] for c in significant} == {"eviomni-beats-var-rar-significantly", "full-ctx-pair-significant-on-nq",
                                              "rar-beats-var-and-full-in-distractor-setting"}
    verdicts = claims_module.reported_verdicts(significant, load_paper_tables())
    assert set(verdicts["rule"]) == {"significance"}


def test_the_scope_errors_of_issue_47_stay_fixed(claims):
    by_id = {c["id"]: c for c in claims}
    lose = by_id["compressing-baselines-lose-accuracy"]  # §4.2's words and observation (6) exclude CoT
    assert "CoT" not in lose["reported_test"]["than"] and all("CoT" not in str(s) for s in lose["cells"])
    # the cpu-evidence experiment measures the evidence's answer recall, not the training rewards of Figure 4
    assert "evidence_seeds" not in by_id["answer-rewards-rise-in-training"]["ours"]
    assert {c["kind"] for c in claims if "evidence_seeds" in c["ours"]} == {"recall"}
