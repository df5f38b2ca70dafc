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


def test_sign_rule_supported_inconclusive_and_contradicted_by_hand():
    six = cells({"A": [5, 5, 5, 5, 5, 5], "B": [1, 1, 1, 1, 1, 1], "C": [1, 1, 1, 1, 1, 9]})
    wins = claims_module.sign_verdict(six, "A", ["B"], "EM", "greater")
    assert wins["verdict"] == "supported" and wins["p"] == 1 / 64 and wins["n"] == 6  # 6 of 6: 0.5^6
    holm = claims_module.sign_verdict(six, "A", ["B", "C"], "EM", "greater")
    # Holm: B's 1/64 doubled, C's P(5 or 6 wins of 6) = 7/64 kept: C is not supported
    assert holm["p"] == pytest.approx(7 / 64) and holm["verdict"] == "inconclusive at n = 6"
    assert holm["detail"] == "wins-ties-losses vs B: 6-0-0; vs C: 5-0-1"
    four = claims_module.sign_verdict(six[six["dataset"] < "d4"], "A", ["B"], "EM", "greater")
    assert four["verdict"] == "inconclusive at n = 4" and four["floor_p"] == 1 / 16  # 4 cells cannot reach 0.05
    assert claims_module.sign_verdict(six, "B", ["A"], "EM", "greater")["verdict"] == "contradicted"
    faster = claims_module.sign_verdict(six, "B", ["A"], "EM", "less")  # lower is better, as latency
    assert faster["verdict"] == "supported" and faster["p"] == 1 / 64
    averaged = pd.concat([six, cells({"A": [0], "B": [9]}).assign(dataset="Average")])
    assert claims_module.sign_verdict(averaged, "A", ["B"], "EM", "greater")["n"] == 6  # the Average row is left out


def test_ordering_rule_by_hand():
    table = cells({"A": [3, 2, 5], "B": [2, 3, 1], "C": [1, 1, 4]})
    first = claims_module.ordering_verdict(table, "method", "A", 1, "higher")
    assert first["verdict"] == "contradicted" and first["detail"].startswith("holds at 2 of 3 positions; fails: A at")
    assert "'dataset': 'd1'" in first["detail"]
    assert claims_module.ordering_verdict(table, "method", "A", 2, "higher")["verdict"] == "supported"
    assert claims_module.ordering_verdict(table, "method", ["A", "B"], 2, "higher")["verdict"] == "contradicted"
    assert claims_module.ordering_verdict(table, "method", "C", 1, "lower")["verdict"] == "contradicted"  # d2: B lower
    tied = cells({"A": [2], "B": [2]})
    assert claims_module.ordering_verdict(tied, "method", "A", 1, "higher")["verdict"] == "supported"  # none above


def test_every_committed_claim_gets_a_verdict_in_the_fixed_words(claims):
    verdicts = claims_module.reported_verdicts(claims, load_paper_tables())
    assert verdicts["id"].tolist() == [claim["id"] for claim in claims]
    words = verdicts["verdict"].str.replace(r" at n = \d+$", "", regex=True)
    assert set(words) <= {"supported", "contradicted", "inconclusive", "not tested"}
    by_id = verdicts.set_index("id")
    assert by_id.at["eviomni-beats-var-rar", "verdict"] == "supported"  # 18 cells, every VAR/RAR method
    assert by_id.at["eviomni-fewer-searches-7b-multihop", "verdict"] == "contradicted"  # HotpotQA 7B: 1.67 > 1.63
    assert by_id.at["eviomni-beats-var-rar-significantly", "verdict"] == "not tested"
