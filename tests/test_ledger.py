"""The claims ledger: our-run verdicts by the fixed rules of repro.reporting.claims (hand-built tests), the studies'
tables read in the paper's names, and the ledger's files (an HTML page that needs no network)."""

import json
import re

import pandas as pd
import pytest

from repro.evaluation.records import RecordFile
from repro.evaluation.tables import compare_methods
from repro.io import pipeline_stages
from repro.registry import METHODS
from repro.reporting import claims as rules
from repro.reporting.ledger import (
    LATEX_SYMBOLS, MATH, RULES, STUDY_TESTS, STUDY_VERDICTS, double_struck, ledger, ledger_html, math_text,
    our_comparisons, paper_name, readable_html, readable_markdown, study_verdict, verdict_counts, write_ledger,
)
from repro.reporting.paper import load_claims, load_paper_tables
from repro.reporting.plots import save_table


def paired(a, b, effect, p, n=50, metric="EM", dataset="NQ", stage="main_comparison"):
    """One paired test of a against b (effect = a − b) with an interval around it."""
    return {"stage": stage, "dataset": dataset, "a": a, "b": b, "metric": metric, "test": "McNemar (exact)", "n": n,
            "effect": effect, "ci_low": effect - 5, "ci_high": effect + 5, "p_value": p, "source": f"{stage}/x.csv"}


SIGN = {"id": "x", "ours": ["main_comparison"],
        "reported_test": {"test": "sign", "better": "EviOmni", "than": ["FilCo", "CoT"], "metric": "EM",
                          "alternative": "greater"}}


def verdict(claim, *tests, cells=None):
    return rules.our_verdict(claim, pd.DataFrame(list(tests), columns=rules.COMPARISON_COLUMNS), cells)


def test_a_sign_claim_is_supported_when_every_other_method_is_beaten_each_at_alpha():
    # intersection-union: each test at 0.05, the claim's p the largest (Holm would have made 0.03 · 2 = 0.06)
    both = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.03), paired("EviOmni", "CoT", 6, 0.03, n=40))
    assert both["our_verdict"] == "supported" and both["our_tests"] == 2
    assert "(intersection-union): p = 0.03" in both["our_detail"]
    one_open = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.01), paired("EviOmni", "CoT", 6, 0.2, n=40))
    assert one_open["our_verdict"] == "inconclusive at n = 40"


def test_against_the_claim_holm_decides_and_a_test_too_small_is_untestable():
    # CoT − EviOmni = +4 with p = 0.03, but Holm over the claim's two tests makes it 2 · 0.03 = 0.06: no contradiction
    out = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.04), paired("CoT", "EviOmni", 4, 0.03))
    assert out["our_verdict"] == "inconclusive at n = 50" and "against the claim (Holm): p = 0.06" in out["our_detail"]
    # 4 questions: even all four one way gives p = 2 · 0.5^4 = 0.125
    tiny = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.5, n=4), paired("EviOmni", "CoT", 8, 0.5, n=4))
    assert tiny["our_verdict"] == "untestable at n = 4"


def test_on_our_runs_em_is_the_unit_and_f1_is_beside():
    claim = {**SIGN, "reported_test": {**SIGN["reported_test"], "than": ["FilCo"], "metric": ["EM", "F1"]}}
    out = verdict(claim, paired("EviOmni", "FilCo", 8, 0.001), paired("FilCo", "EviOmni", 3, 0.001, metric="F1"))
    assert out["our_verdict"] == "supported" and out["our_tests"] == 1
    assert "beside, not counted: EviOmni − FilCo, F1, NQ: -3" in out["our_detail"]


def test_a_test_stored_the_other_way_round_is_turned_and_can_contradict():
    # CoT − EviOmni = +9 points, significant: EviOmni is beaten, whatever FilCo does
    out = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.001), paired("CoT", "EviOmni", 9, 0.001))
    assert out["our_verdict"] == "contradicted" and "beaten by CoT" in out["our_detail"]
    assert "EviOmni − CoT, EM, NQ: -9 [-14, -4]" in out["our_detail"]


def test_lower_is_better_flips_the_claimed_direction():
    claim = {**SIGN, "reported_test": {**SIGN["reported_test"], "than": ["FilCo"], "metric": "avg_searches",
                                       "alternative": "less"}}
    fewer, more = (paired("EviOmni", "FilCo", d, 0.001, metric="avg_searches") for d in (-1.2, +1.2))
    assert verdict(claim, fewer)["our_verdict"] == "supported" and verdict(claim, more)["our_verdict"] == "contradicted"


def test_a_method_never_run_keeps_a_claim_from_support_and_is_named():
    out = verdict(SIGN, paired("EviOmni", "FilCo", 8, 0.001))
    assert out["our_verdict"] == "inconclusive at n = 50" and "not run at this profile: CoT" in out["our_detail"]


def test_an_ordering_of_rank_two_allows_one_method_above():
    claim = {"id": "y", "ours": ["main_comparison"],
             "reported_test": {"test": "ordering", "by": "method", "top": "EviOmni", "rank": 2, "direction": "higher"}}
    cells = pd.DataFrame({"method": ["EviOmni", "CoT", "FilCo"], "metric": ["EM"] * 3})
    beaten_once = [paired("CoT", "EviOmni", 9, 0.001), paired("EviOmni", "FilCo", 8, 0.001)]
    assert verdict(claim, *beaten_once, cells=cells)["our_verdict"] == "supported"  # second best, FilCo beaten
    beaten_twice = [paired("CoT", "EviOmni", 9, 0.001), paired("FilCo", "EviOmni", 8, 0.001)]
    assert verdict(claim, *beaten_twice, cells=cells)["our_verdict"] == "contradicted"


def test_claims_without_a_paired_form_or_without_a_run_are_not_tested():
    none = {"id": "z", "ours": ["training_dynamics"], "reported_test": {"test": "none", "why": "a figure"}}
    assert verdict(none) == {"our_verdict": "not tested", "our_n": 0, "our_tests": 0,
                             "our_detail": "no paired comparison: a figure", "our_sources": ""}
    by_size = {"id": "s", "ours": ["main_comparison"],
               "reported_test": {"test": "ordering", "by": "model_size", "top": "7B", "rank": 1, "direction": "higher"}}
    assert "ordering of model_size values" in verdict(by_size)["our_detail"]
    elsewhere = paired("EviOmni", "FilCo", 8, 0.001, stage="distractor_setting")  # not one of the claim's stages
    out = verdict(SIGN, elsewhere)
    assert out["our_verdict"] == "not tested" and out["our_detail"].startswith("no paired test of EviOmni")


def test_labels_of_variants_are_the_paper_methods_they_stand_in_for():
    for method in METHODS.values():
        if method.paper_method:
            assert paper_name(method.label) == method.paper_method, method.key
    assert paper_name("Prompted extraction") == "Prompted extraction"


def records(em: list[int], evidence_tokens: int | None) -> list[dict]:
    return [{"id": f"q{i}", "question": "q?", "golden_answers": ["a"], "evidence": evidence_tokens and "e",
             "prediction": "a", "em": float(e), "f1": float(e), "passage_tokens": 100,
             "cr": evidence_tokens and 100 / evidence_tokens,
             "evidence_tokens": evidence_tokens, "answer_in_passages": True} for i, e in enumerate(em)]


@pytest.fixture
def run(tmp_path):
    """results/<profile> with the main comparison's significance table written as its notebook writes it: the
    released EviOmni against an untrained LLMLingua-2 stand-in and Zero, on 30 questions."""
    files = []
    for method, em, tokens in [("eviomni_released", [1] * 20 + [0] * 10, 10), ("llmlingua2_standin", [0] * 30, 50),
                               ("zero", [1] * 20 + [0] * 10, None)]:
        path = tmp_path / "predictions" / f"{method}.jsonl"
        RecordFile(path, {"method": method}).finish(records(em, tokens))
        files.append({"dataset": "NQ", "method": method, "path": str(path)})
    tests = compare_methods(pd.DataFrame(files), pairs=[("eviomni_released", "llmlingua2_standin"),
                                                        ("eviomni_released", "zero")], n_resamples=999)
    save_table(tests, tmp_path / "tiny" / "main_comparison", "significance")
    return tmp_path / "tiny"


def test_the_studies_tables_are_read_in_the_papers_names_one_test_per_comparison(run):
    comparisons = our_comparisons(run)
    assert set(comparisons["a"]) == {"EviOmni"} and set(comparisons["b"]) == {"LLMLingua-2", "Zero"}
    assert sorted(comparisons["test"].unique()) == ["McNemar (exact)", "approximate randomization (two-sided)"]
    assert len(comparisons) == 5  # EM and F1 against each, CR against LLMLingua-2 only: Zero gives no evidence
    cr = comparisons[comparisons["metric"] == "CR"]  # per item 100/10 against 100/50: the bootstrap's interval beside
    assert cr["b"].tolist() == ["LLMLingua-2"] and cr["effect"].item() == pytest.approx(8.0)
    assert cr["ci_low"].item() == cr["ci_high"].item() == pytest.approx(8.0) and cr["p_value"].item() < 0.01
    em = comparisons[(comparisons["metric"] == "EM") & (comparisons["b"] == "LLMLingua-2")]
    assert em["effect"].item() == pytest.approx(100 * 20 / 30, abs=0.01) and em["n"].item() == 30
    assert set(comparisons["source"]) == {"main_comparison/significance.csv"}


def test_the_ledger_gives_every_claim_two_verdicts_and_a_page_that_needs_no_network(run):
    claims, rows = load_claims(), load_paper_tables()
    frame = ledger(claims, rows, our_comparisons(run), run)
    assert frame["id"].tolist() == [c["id"] for c in claims]
    assert set(frame["reported_verdict"].map(rules.verdict_word)) <= set(rules.REPORTED_VERDICTS)
    assert set(frame["our_verdict"].map(rules.verdict_word)) <= set(rules.OUR_VERDICTS)
    compact = frame.set_index("id").loc["eviomni-more-compact-than-var"]  # CR of EviOmni vs the VAR methods
    assert compact["our_tests"] == 1 and "LLMLingua-2" in compact["our_detail"]
    assert compact["our_verdict"] == "inconclusive at n = 30"  # SeleCtx, RECOMP, FilCo, SEER never ran
    counts = verdict_counts(frame)
    assert sum(counts["ours"].values()) == sum(counts["reported"].values()) == len(claims)

    paths = write_ledger(frame, run / "claims", "tiny")
    assert [p.name for p in paths] == ["ledger.csv", "ledger.md", "index.html"]
    markdown = paths[1].read_text()
    assert "show the mechanics" in markdown and "docs/cpu-evidence.md" in ledger_html(frame, "cpu-evidence")
    assert "𝕄 ∧ ¬ℕ" in markdown and "$" not in markdown and "traditional and agentic" in markdown
    page = paths[2].read_text()
    assert "<script" not in page and "http" not in page  # renders offline: no script, no remote resource
    assert "`" not in page and "$" not in page  # no raw markdown or LaTeX: the intro's code, the paper's math
    assert "𝕄 ∧ ¬ℕ" in page and "<strong>(1)</strong>" in page and "<em>i.e.</em>" in page
    assert "<th>wins</th>" in page and "intersection-union" in page  # the counts behind each verdict, and the rules
    assert "one unit per (model size, dataset) position" in page.lower()
    assert all(c["id"] in page for c in claims) and 'href="../main_comparison/significance.csv"' in page
    assert 'href="../../../data/tiny/predictions/main_comparison/"' in page  # the per-item records behind it
    assert pd.read_csv(paths[0])["our_verdict"].tolist() == frame["our_verdict"].tolist()


def test_a_study_that_decides_its_own_question_gives_its_verdict_or_where_it_runs(tmp_path):
    claim = next(c for c in load_claims() if "evidence_seeds" in c["ours"])
    assert "runs in the cpu-evidence profile" in study_verdict(claim, tmp_path)["our_detail"]
    out = tmp_path / "evidence_seeds"
    out.mkdir()
    (out / "verdict.json").write_text(json.dumps(
        {"requested": True, "verdict": "inconclusive at n = 600", "reading": "measurement", "pairs": 600, "seeds": 3,
         "heldout_questions": 200,
         "ar_difference": 0.028, "ci_low": 0.002, "ci_high": 0.056, "p_holm": 0.046, "detectable_difference": 0.038}))
    got = study_verdict(claim, tmp_path)
    assert got["our_verdict"] == "inconclusive at n = 600" and got["our_sources"] == "evidence_seeds/verdict.json"
    assert "+2.8 points [+0.2, +5.6] on 200 questions × 3 seeds" in got["our_detail"] and got["our_n"] == 200


def test_the_claims_stage_depends_on_the_results_of_every_study_the_ledger_reads():
    read = {f"results/${{profile}}/{stage}" for stage in [*STUDY_TESTS, *STUDY_VERDICTS]}
    assert {d for d in pipeline_stages()["claims"]["deps"] if d.startswith("results/")} == read


def test_the_papers_words_read_as_text_offline():
    words = r"(3) The percentage of $\mathbb{M} \wedge \neg \mathbb{N}$ is higher, *e.g.*, **(1)** o_f and R_e^{ans}"
    assert readable_html(words) == ("(3) The percentage of 𝕄 ∧ ¬ℕ is higher, <em>e.g.</em>, <strong>(1)</strong> "
                                    "o<sub>f</sub> and R<sub>e</sub><sup>ans</sup>")
    assert readable_html("`a_b` <x> & *y*") == "<code>a_b</code> &lt;x&gt; &amp; <em>y</em>"  # code untouched, escaped
    assert readable_html("tra-\n\nditional") == "traditional"
    assert readable_markdown(r"$\neg \mathbb{M} \wedge \mathbb{N}$ | **Right**") == r"¬𝕄 ∧ ℕ \| **Right**"
    assert [double_struck(c) for c in "MNRX"] == ["𝕄", "ℕ", "ℝ", "𝕏"]
    assert math_text(r"\mathbb{M} \vee \mathbb{N}") == r"𝕄 \vee ℕ"  # a command without a symbol stays as written


def test_every_latex_command_in_the_claims_has_its_symbol():
    commands = {c for claim in load_claims() for span in MATH.findall(claim["words"])
                for c in re.findall(r"\\([A-Za-z]+)", span)} - {"mathbb"}
    assert commands and commands <= set(LATEX_SYMBOLS)
    assert all("`" not in readable_html(rule) and "**" not in readable_html(rule) for rule in RULES)
