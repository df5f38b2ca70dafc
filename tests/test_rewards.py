import dataclasses
import math
import typing

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import tagged_texts
from repro.config import RewardsConfig
from repro.formulas.rewards import (
    GAMMA_GRID,
    TAU_GRID,
    AnswerRewards,
    answer_rewards,
    answer_term,
    arena_format_reward,
    arena_reward,
    clipped_group_advantages,
    design_reward,
    eqr_hypothesis,
    eval_rar_reward,
    evaluation_reward,
    evidence_length_reward,
    evidence_quality_reward,
    evinote_reward,
    final_reward,
    format_reward,
    notes_marked,
    permuted_within_groups,
    placebo_final_rewards,
    rationale_length_reward,
    relevance_ids,
    relevance_reward,
    score_response,
)
from repro.formulas.tags import is_well_formatted
from repro.registry import REWARD_DESIGNS

GOOD = "<reason>Passage 2 names the capital.</reason><extract>Paris is the capital of France.</extract><answer>Paris</answer>"


# Eq. 10 -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("L_r", "L_e", "tau", "expected"),
    [
        (2, 1, 0.5, 0.8807970779778823),  # σ((2/1 − 1)/0.5) = σ(2)
        (1, 2, 0.5, 0.11920292202211755),  # σ((1 − 2/1)/0.5) = σ(−2)
        (7, 7, 0.1, 0.5),  # L_r = L_e
        (3, 1, 1.0, 0.8807970779778823),  # σ(2/1)
        (30, 20, 0.2, 0.9241418199787566),  # σ(0.5/0.2) = σ(2.5)
        (20, 30, 1.0, 0.3775406687981454),  # σ(1 − 1.5) = σ(−0.5) = 1/(1 + e^0.5)
    ],
)
def test_rationale_length_reward_hand_values(L_r, L_e, tau, expected):
    assert rationale_length_reward(L_r, L_e, tau) == pytest.approx(expected, abs=1e-12)


def test_rationale_length_reward_puts_tau_inside_the_sigmoid():
    # τ outside (σ(x)/τ) would give 0.8808/0.1 = 8.8 > 1
    assert rationale_length_reward(2, 1, 0.1) == pytest.approx(1 / (1 + math.exp(-10)))


def test_rationale_length_reward_edges_are_finite_and_in_range():
    assert rationale_length_reward(0, 5, 0.5) == 0.0  # empty rationale
    assert rationale_length_reward(5, 0, 0.5) == 1.0  # empty evidence
    assert rationale_length_reward(0, 0, 0.5) == 0.0
    assert rationale_length_reward(1, 10**9, 0.1) == 0.0  # σ underflow, still finite
    for L_r in (0, 1, 3, 1e6):
        for L_e in (0, 1, 3, 1e6):
            value = rationale_length_reward(L_r, L_e, 0.1)
            assert math.isfinite(value) and 0.0 <= value <= 1.0


@pytest.mark.parametrize("bad", [dict(L_r=-1, L_e=1, tau=0.5), dict(L_r=1, L_e=math.nan, tau=0.5),
                                 dict(L_r=1, L_e=1, tau=0), dict(L_r=1, L_e=1, tau=-1)])
def test_rationale_length_reward_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        rationale_length_reward(**bad)


def test_rationale_length_reward_rejects_non_numbers():
    with pytest.raises(TypeError):
        rationale_length_reward("2", 1, 0.5)


# Eq. 11 -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("L_e", "L_P", "gamma", "omega", "expected"),
    [
        (50, 100, 0.5, 0.9, 0.7071067811865476),  # (1 − 0.5)^0.5
        (50, 100, 1.0, 0.9, 0.5),
        (80, 100, 0.3, 0.9, 0.6170338627200097),  # 0.2^0.3
        (10, 100, 0.5, 0.9, 1.0),  # 1 − 0.1 = ω exactly: threshold reached
        (5, 100, 0.1, 0.9, 1.0),  # L_e ≤ (1 − ω)·L_P
        (30, 100, 0.8, 0.6, 1.0),  # 0.7 ≥ ω = 0.6
        (50, 100, 0.5, 0.4, 1.0),  # 0.5 ≥ ω = 0.4
    ],
)
def test_evidence_length_reward_hand_values(L_e, L_P, gamma, omega, expected):
    assert evidence_length_reward(L_e, L_P, gamma, omega) == pytest.approx(expected, abs=1e-12)


def test_evidence_length_reward_is_one_below_the_threshold_everywhere():
    for L_e in np.linspace(0, 10, 21):
        assert evidence_length_reward(L_e, 100, 0.3, 0.9) == 1.0


def test_evidence_length_reward_edges_are_finite_and_in_range():
    assert evidence_length_reward(0, 100, 0.5) == 1.0  # empty evidence
    assert evidence_length_reward(100, 100, 0.5) == 0.0  # as long as the passages
    assert evidence_length_reward(150, 100, 0.5) == 0.0  # longer: base clamped, no NaN from (−0.5)^0.5
    assert evidence_length_reward(150, 100, 0.0) == 1.0  # γ = 0 is the constant function
    for L_e in (0, 1, 99, 100, 101, 1e9):
        for gamma in (0.1, 0.3, 0.5, 0.8, 1.0):
            value = evidence_length_reward(L_e, 100, gamma)
            assert math.isfinite(value) and 0.0 <= value <= 1.0


@pytest.mark.parametrize("bad", [dict(L_e=1, L_P=0, gamma=0.5), dict(L_e=-1, L_P=10, gamma=0.5),
                                 dict(L_e=1, L_P=10, gamma=-0.5), dict(L_e=1, L_P=10, gamma=0.5, omega=1.5),
                                 dict(L_e=1, L_P=math.inf, gamma=0.5)])
def test_evidence_length_reward_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        evidence_length_reward(**bad)


# format and answer rewards -----------------------------------------------------------------------------

def test_format_reward():
    assert format_reward(GOOD) == 1.0
    assert format_reward("  <reason>r</reason>\n\n<extract>e</extract>\n<answer>a</answer>\n") == 1.0
    assert format_reward("<reason>r</reason><extract>e</extract>") == 0.0  # no answer
    assert format_reward("<extract>e</extract><reason>r</reason><answer>a</answer>") == 0.0  # order
    assert format_reward("<reason>r</reason><extract> </extract><answer>a</answer>") == 0.0  # empty evidence
    assert format_reward("Sure! <reason>r</reason><extract>e</extract><answer>a</answer>") == 0.0  # text outside
    assert format_reward("<reason>r</reason><extract>e</extract><answer>a</answer><answer>b</answer>") == 0.0


def test_answer_rewards_are_unigram_f1_of_each_output():
    result = answer_rewards("Paris", "<answer>the city of Paris</answer>", "London</answer>", ["Paris"])
    assert result == AnswerRewards(1.0, 0.5, 0.0)  # "city of paris" vs "paris": P = 1/3, R = 1
    assert result.evidence == 0.5 and result._asdict() == {"rationale": 1.0, "evidence": 0.5, "full": 0.0}
    assert (result["e"], result["o_r"], result["full"], result[2]) == (0.5, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="unknown answer-reward name"):
        result["answer"]


# Eq. 5 --------------------------------------------------------------------------------------------------

def test_final_reward_hand_value():
    # 0.8·mean(0.6, 0.3, 0.9) + 0.1·mean(0.5, 1.0) + 0.1·0 = 0.48 + 0.075
    assert final_reward((0.6, 0.3, 0.9), (0.5, 1.0), 0.0) == pytest.approx(0.555)
    assert final_reward(AnswerRewards(1, 1, 1), (1, 1), 1) == pytest.approx(1.0)
    assert final_reward((0, 0, 0), (0, 0), 0) == 0.0


def test_final_reward_answer_subset_for_the_table3_ablation():
    answer = {"rationale": 0.6, "evidence": 0.3, "full": 0.9}
    assert final_reward(answer, (0.5, 1.0), 0.0, answer_subset=["evidence"]) == pytest.approx(0.8 * 0.3 + 0.075)
    assert final_reward(answer, (0.5, 1.0), 1.0, answer_subset=["evidence", "full"]) == pytest.approx(
        0.8 * 0.6 + 0.075 + 0.1
    )
    assert final_reward({"evidence": 0.3}, (0.5, 1.0), 0.0, answer_subset=["evidence"]) == pytest.approx(0.315)
    aliased = final_reward(answer_rewards={"r": 0.6, "e": 0.3, "f": 0.9}, length_rewards=(0.5, 1.0), format_reward=0.0,
                           answer_subset=("o_e",))
    assert aliased == pytest.approx(0.315)


def test_final_reward_custom_weights():
    assert final_reward((1, 0, 0), (0.2, 0.4), 1, weights=(1, 0, 0)) == pytest.approx(1 / 3)
    assert final_reward((1, 0, 0), (0.2, 0.4), 1, weights=(0, 1, 0)) == pytest.approx(0.3)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(answer_rewards=(0.5, 0.5), length_rewards=(0.5, 0.5), format_reward=1),
        dict(answer_rewards=(0.5, 0.5, 1.5), length_rewards=(0.5, 0.5), format_reward=1),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5,), format_reward=1),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5, 0.5), format_reward=2),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5, 0.5), format_reward=1, answer_subset=[]),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5, 0.5), format_reward=1, answer_subset=["answer"]),
        dict(answer_rewards={"evidence": 0.5}, length_rewards=(0.5, 0.5), format_reward=1),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5, 0.5), format_reward=1, weights=(0.8, 0.2)),
        dict(answer_rewards=(0.5, 0.5, 0.5), length_rewards=(0.5, math.nan), format_reward=1),
    ],
)
def test_final_reward_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        final_reward(**kwargs)


# Eq. 7 --------------------------------------------------------------------------------------------------

def test_clipped_group_advantages_paper_example():
    np.testing.assert_allclose(clipped_group_advantages([0.49, 0.51], 2, eps_std=0.1), [-0.1, 0.1])
    np.testing.assert_allclose(clipped_group_advantages([0.49, 0.51], 2, eps_std=0.0), [-1.0, 1.0])
    np.testing.assert_allclose(clipped_group_advantages([0.49, 0.51], 2, eps_std=0.001), [-1.0, 1.0])


def test_clipped_group_advantages_uses_population_std_per_group():
    # group 1: mean 2.5, population std sqrt(1.25); group 2: all equal -> zeros
    expected = np.array([-1.5, -0.5, 0.5, 1.5]) / math.sqrt(1.25)
    result = clipped_group_advantages([1, 2, 3, 4, 0.2, 0.2, 0.2, 0.2], group_size=4)
    np.testing.assert_allclose(result, np.concatenate([expected, np.zeros(4)]))
    np.testing.assert_allclose(clipped_group_advantages([0.3] * 3, 3, eps_std=0.0), np.zeros(3))
    grouped = clipped_group_advantages([[1, 2, 3, 4], [0.2, 0.2, 0.2, 0.2]], group_size=4)
    np.testing.assert_allclose(grouped, np.stack([expected, np.zeros(4)]))  # one group per row, shape kept


@pytest.mark.parametrize("kwargs", [dict(rewards=[1, 2, 3], group_size=2), dict(rewards=[], group_size=1),
                                    dict(rewards=[1, 2], group_size=0), dict(rewards=[1, math.nan], group_size=2),
                                    dict(rewards=[1, 2], group_size=2, eps_std=-0.1)])
def test_clipped_group_advantages_rejects_bad_input(kwargs):
    with pytest.raises(ValueError):
        clipped_group_advantages(**kwargs)


# The placebo of the answer reward (issue #49) -------------------------------------------------------------------

def test_answer_term_is_lambda1_times_the_subsets_mean_and_final_reward_adds_the_rest():
    assert answer_term((0.5, 1.0, 0.0)) == pytest.approx(0.8 * 0.5)  # mean(0.5, 1, 0) = 0.5
    assert answer_term({"e": 0.25}, (0.6, 0.2, 0.2), ["evidence"]) == pytest.approx(0.15)
    assert final_reward((0.5, 1.0, 0.0), (0.5, 1.0), 1.0) == answer_term((0.5, 1.0, 0.0)) + 0.1 * 0.75 + 0.1
    with pytest.raises(ValueError, match=r"answer rewards missing for \['full'\]"):
        answer_term({"e": 0.25}, answer_subset=["full"])


def test_permuted_within_groups_permutes_each_group_apart_seeded_and_reproducible():
    values = [0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 1.2, 1.3]  # two groups of G = 4
    first = permuted_within_groups(values, 4, np.random.default_rng(7))
    again = permuted_within_groups(values, 4, np.random.default_rng(7))
    np.testing.assert_array_equal(first, again)  # the same seed, the same permutation
    for group, permuted in zip(np.reshape(values, (2, 4)), first.reshape(2, 4)):
        assert sorted(permuted) == sorted(group)  # each group's multiset, nothing moved between groups
    # the permutations are numpy's: rng.permutation(4) once per group, in group order
    rng = np.random.default_rng(7)
    order = [rng.permutation(4), rng.permutation(4)]
    np.testing.assert_array_equal(first, [values[i] for i in order[0]] + [values[4 + i] for i in order[1]])
    draws = {tuple(permuted_within_groups(values, 4, np.random.default_rng(seed))) for seed in range(20)}
    assert len(draws) > 1  # the seed matters
    with pytest.raises(ValueError, match="groups of 3"):
        permuted_within_groups(values, 3, np.random.default_rng(0))


def test_placebo_final_rewards_permute_the_answer_term_and_leave_the_other_terms():
    answer = np.array([0.8, 0.0, 0.4, 0.0])  # λ1·R^ans of one group of G = 4
    rest = np.array([0.2, 0.1, 0.15, 0.05])  # λ2·R^len + λ3·R^fmt
    placebo = placebo_final_rewards(answer + rest, answer, 4, (0, 3))
    permuted = permuted_within_groups(answer, 4, np.random.default_rng((0, 3)))
    np.testing.assert_allclose(placebo - permuted, rest, atol=1e-15)  # each rollout keeps its other terms
    assert sorted(permuted) == sorted(answer)  # the answer terms' multiset: the same marginal rewards
    assert placebo.mean() == pytest.approx((answer + rest).mean())  # the group's mean, so the advantages' centre
    np.testing.assert_array_equal(placebo, placebo_final_rewards(answer + rest, answer, 4, (0, 3)))
    # with rewards.weights' λ1 = 0.8 and R^ans = F1(o_e): the answer terms are 0.8·F1 (hand: rollout 3 earned 0.5)
    assert answer_term({"e": 0.5}, answer_subset=["evidence"]) == pytest.approx(answer[2])
    with pytest.raises(ValueError, match="4 rewards but 3 answer terms"):
        placebo_final_rewards(answer + rest, answer[:3], 4, 0)



# everything together ------------------------------------------------------------------------------------

def test_score_response_in_words():
    cfg = RewardsConfig(length_unit="words", tau=0.5, gamma=0.5)
    result = score_response(GOOD, ("Paris", "Paris", "Lyon"), ["Paris"], passages_length=50, cfg=cfg)
    assert (result.L_r, result.L_e) == (5, 6)  # "Passage 2 names the capital." / "Paris is the capital of France."
    assert result.answer == AnswerRewards(1.0, 1.0, 0.0)
    assert result.rationale_length == pytest.approx(rationale_length_reward(5, 6, 0.5))  # σ((1 − 6/5)/0.5)
    assert result.evidence_length == pytest.approx((1 - 6 / 50) ** 0.5)
    expected = 0.8 * 2 / 3 + 0.1 * (result.rationale_length + result.evidence_length) / 2 + 0.1
    assert result.format == 1.0 and result.final == pytest.approx(expected)


def test_score_response_keeps_answer_and_length_rewards_of_malformed_responses():
    cfg = RewardsConfig(length_unit="words")
    result = score_response("<reason>a b c</reason><extract>d</extract>", ("x", "y", "z"), "x", 10, cfg)
    assert result.format == 0.0 and result.answer.rationale == 1.0 and result.L_e == 1
    with pytest.raises(ValueError, match="needs a tokenizer"):
        score_response(GOOD, ("a", "b", "c"), "a", 10, RewardsConfig(length_unit="tokens"))


# Neighbours' reward designs (seeds 002-004) -----------------------------------------------------------------

def _response(evidence: str, answer: str | None = "Paris", relevance: str | None = None) -> str:
    head = f"<relevance>{relevance}</relevance>" if relevance is not None else ""
    tail = f"<answer>{answer}</answer>" if answer is not None else ""
    return f"{head}<reason>Passage 2 names the capital.</reason><extract>{evidence}</extract>{tail}"


class FakeNLI:
    """P(entailment) from a table keyed by the hypothesis's gold answer (default 0); records every call."""

    def __init__(self, by_gold: dict[str, float]):
        self.by_gold, self.calls = by_gold, []

    def __call__(self, premises, hypotheses):
        self.calls.append((list(premises), list(hypotheses)))
        return [next((p for g, p in self.by_gold.items() if h.startswith(f"{g} is the answer")), 0.0)
                for h in hypotheses]


# EviNote-RAG (seed 002) ----------------------------------------------------------------------------------------

def test_eqr_hypothesis_is_the_released_codes_claim_with_one_question_mark():
    expected = 'Jupiter is the answer to the question:"What is the largest planet in the solar system?"'
    assert eqr_hypothesis("Jupiter", "What is the largest planet in the solar system?") == expected
    assert eqr_hypothesis(" Jupiter ", "largest planet ") == 'Jupiter is the answer to the question:"largest planet?"'


def test_evidence_quality_reward_scores_evidence_against_each_claim():
    nli = FakeNLI({"Paris": 0.2, "City of Light": 0.9})
    assert evidence_quality_reward(" Paris is the capital. ", "capital of France?", ["Paris", "City of Light"],
                                   nli) == 0.9  # max over aliases
    assert nli.calls[0] == (["Paris is the capital."] * 2, ['Paris is the answer to the question:"capital of France?"',
                                                           'City of Light is the answer to the question:"capital of France?"'])
    assert evidence_quality_reward("e", "q", ["Paris", "City of Light"], nli, aliases="first") == 0.2


def test_evidence_quality_reward_blanks_long_notes_like_the_released_code():
    nli = FakeNLI({"Paris": 0.4})
    evidence_quality_reward("x" * 513, "q", ["Paris"], nli, max_chars=512)
    evidence_quality_reward("x" * 512, "q", ["Paris"], nli, max_chars=512)
    assert nli.calls[0][0] == [""] and nli.calls[1][0] == ["x" * 512]


def test_evidence_quality_reward_rejects_a_scorer_that_is_not_a_probability():
    with pytest.raises(ValueError, match="probability"):
        evidence_quality_reward("e", "q", ["Paris"], lambda p, h: [1.5])


@pytest.mark.parametrize(("evidence", "marked"), [
    ("* Paris is the capital.", True), ("Facts:\n - maybe 1889", True), ("– uncertain date", True),
    ("The tower was built 1887-1889.", False), ("a * b", False), ("*", False), ("", False)])
def test_notes_marked_needs_a_line_opening_with_a_star_or_dash_marker(evidence, marked):
    assert notes_marked(evidence) is marked


@pytest.mark.parametrize(("response", "expected"), [
    (_response("* Paris is the capital."), 1.0 + 0.7),  # format ✓ answer ✓: 1 + EQR
    (_response("Paris is the capital."), 1.0 + 0.7),  # answer ✓ needs no markers (Eq. 5's first case)
    (_response("* Paris is the capital.", answer="Lyon"), 0.1 + 0.7),  # answer ✗, notes ✓: 0.1 + EQR
    (_response("Paris is the capital.", answer="Lyon"), 0.0),  # answer ✗, notes ✗
    (_response("* Paris is the capital.", answer=None), 0.0),  # format ✗
])
def test_evinote_reward_paper_reading_hand_values(response, expected):
    assert evinote_reward(response, ["Paris"], "capital of France", FakeNLI({"Paris": 0.7})) == pytest.approx(expected)


def test_evinote_reward_paper_reading_scores_no_eqr_when_the_gate_is_closed():
    nli = FakeNLI({"Paris": 0.7})
    evinote_reward(_response("no notes", answer="Lyon"), ["Paris"], "q", nli)
    assert nli.calls == []


@pytest.mark.parametrize(("response", "expected"), [
    (_response("Paris is the capital.", answer="Lyon"), 0.0 + 0.3),  # EQR added unconditionally
    (_response("- perhaps Paris", answer=None), 0.1 + 0.3),  # no format check in the released code
    (_response("Paris", answer="Paris") + " trailing text", 1.0 + 0.3),
])
def test_evinote_reward_code_reading_hand_values(response, expected):
    nli = FakeNLI({"Paris": 0.3, "City of Light": 0.9})  # the first alias only: 0.3, not 0.9
    assert evinote_reward(response, ["Paris", "City of Light"], "q", nli, reading="code") == pytest.approx(expected)


# Eval-RAR (seed 003) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("response", "gold", "expected"), [
    (_response("Lyon is large.", answer="Paris"), ["Paris"], 1.0),  # R_ans = EM = 1
    (_response("Paris is the capital.", answer="Lyon"), ["Paris"], 0.1),  # EM = 0, gold ⊆ evidence: r_eval
    (_response("Lyon is large.", answer="Lyon"), ["Paris"], 0.0),
    (_response("THE EIFFEL TOWER, built 1889", answer="x"), ["the Eiffel Tower"], 0.1),  # SQuAD-normalised
    (_response("built in 18890", answer="x"), ["1889"], 0.1),  # plain substring, as Eq. 4's a ⊆ y_eval
    (_response("Paris is the capital.", answer=None), ["Paris"], 0.1),  # no answer still earns r_eval (#47)
])
def test_eval_rar_reward_hand_values(response, gold, expected):
    assert eval_rar_reward(response, gold) == pytest.approx(expected)


def test_evaluation_reward_is_r_eval_times_answer_recall():
    assert evaluation_reward("Paris, France", ["Lyon", "paris"]) == pytest.approx(0.1)
    assert evaluation_reward("Paris, France", ["Lyon"], r_eval=0.5) == 0.0


# ARENA (seed 004) ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("response", "ids"), [
    (_response("e", relevance="[3, 1, 3]"), [1, 3]), (_response("e", relevance="[]"), []),
    (_response("e", relevance="1,3"), None), (_response("e", relevance="[true]"), None),
    (_response("e", relevance='["1"]'), None), (_response("e"), None),
    ("<reason>r</reason><relevance>[1]</relevance>", None),  # not before <reason>
])
def test_relevance_ids_parse_a_leading_json_list(response, ids):
    assert relevance_ids(response) == ids


@pytest.mark.parametrize(("predicted", "gold", "expected"), [
    ([1, 3], [3, 1], 1.0), ([1], [1, 3], 0.5), ([1, 2, 3], [1, 3], 0.5),  # a superset is only a partial match
    ([2], [1, 3], 0.0), (None, [1], 0.0), ([], [], 1.0), ([1], [], 0.0)])
def test_relevance_reward_hand_values(predicted, gold, expected):
    assert relevance_reward(predicted, gold) == expected


@pytest.mark.parametrize(("response", "accuracy", "expected"), [
    (_response("e", relevance="[2]"), "em", 1 + 1 + 1 + 10),  # all three are 1: bonus 10
    (_response("e", answer="Lyon", relevance="[2]"), "em", 1 + 0 + 1),
    (_response("e", relevance="[2, 4]"), "em", 1 + 1 + 0.5),
    (_response("e", relevance="[4]"), "em", 1 + 1 + 0),
    ("<reason>r</reason><relevance>[2]</relevance><extract>e</extract><answer>Paris</answer>", "em", 0 + 1 + 0),
    (_response("e", answer="Paris France", relevance="[2]"), "f1", 1 + 2 / 3 + 1),  # F1 = 2·(½·1)/(½+1)
    (_response("e", relevance="[2]"), "f1", 1 + 1 + 1 + 10),
])
def test_arena_reward_hand_values(response, accuracy, expected):
    assert arena_reward(response, ["Paris"], [2], accuracy) == pytest.approx(expected)


def test_arena_format_needs_relevance_first_then_the_eviomni_format():
    assert arena_format_reward(_response("e", relevance="[2]")) == 1.0
    assert arena_format_reward(_response("e", relevance="[2]", answer=None)) == 0.0
    assert arena_format_reward(_response("e")) == 0.0


# REWARD_DESIGNS ------------------------------------------------------------------------------------------------

def test_reward_designs_table_matches_the_config_key():
    allowed = typing.get_args(typing.get_type_hints(RewardsConfig)["design"])
    assert set(REWARD_DESIGNS) == set(allowed) and RewardsConfig().design == "eviomni"
    assert all(d.source for d in REWARD_DESIGNS.values())
    assert [n for n, d in REWARD_DESIGNS.items() if d.masked_answers] == ["eviomni", "eviomni_eqr", "eviomni_placebo"]
    assert [n for n, d in REWARD_DESIGNS.items() if d.answer_permuted] == ["eviomni_placebo"]


def test_design_reward_dispatches_to_each_design_with_the_inputs_it_needs():
    cfg = RewardsConfig(length_unit="words")
    response = _response("* Paris is the capital.", answer="Lyon", relevance=None)
    nli = FakeNLI({"Paris": 0.5})
    inputs = {"question": "capital?", "nli": nli, "gold_passages": [2], "o_r": "Paris", "o_e": "Lyon",
              "passages_length": 40, "tokenizer": None}
    assert design_reward("evinote", response, ["Paris"], cfg, **inputs) == pytest.approx(0.1 + 0.5)
    assert design_reward("eval_rar", response, ["Paris"], cfg, **inputs) == pytest.approx(0.1)
    assert design_reward("arena", response, ["Paris"], cfg, **inputs) == 0.0  # no relevance, wrong answer
    eviomni = design_reward("eviomni", response, ["Paris"], cfg, **inputs)
    assert eviomni == pytest.approx(score_response(response, ["Paris", "Lyon", "Lyon"], ["Paris"], 40, cfg).final)
    assert design_reward("eviomni_eqr", response, ["Paris"], cfg, **inputs) == pytest.approx(eviomni + 0.5)


def test_the_answer_metric_of_eq5_is_the_design_rows(monkeypatch):
    monkeypatch.setitem(REWARD_DESIGNS, "eviomni_em",
                        dataclasses.replace(REWARD_DESIGNS["eviomni"], name="eviomni_em", answer_metric="em"))
    cfg = RewardsConfig(length_unit="words")
    inputs = {"o_r": "the city of Paris", "o_e": "Paris", "passages_length": 100, "tokenizer": None}
    # L_r = 5 < L_e = 6 words: R_r^len = σ((1 − 6/5)/0.5) = σ(−0.4); 1 − 6/100 ≥ ω: R_e^len = 1; R^fmt = 1
    rest = 0.1 * (0.401312339887548 + 1.0) / 2 + 0.1
    # o_r, o_e, o_f = "the city of Paris", "Paris", "Paris": EM (0, 1, 1), F1 (0.5, 1, 1)
    assert design_reward("eviomni_em", GOOD, ["Paris"], cfg, **inputs) == pytest.approx(0.8 * 2 / 3 + rest)
    assert design_reward("eviomni", GOOD, ["Paris"], cfg, **inputs) == pytest.approx(0.8 * 2.5 / 3 + rest)
    assert answer_rewards("the city of Paris", "Paris", "Paris", ["Paris"], "em") == (0.0, 1.0, 1.0)
    assert answer_rewards("the city of Paris", "Paris", "Paris", ["Paris"]) == (0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="unknown answer metric 'bleu'"):
        answer_rewards("a", "b", "c", ["a"], "bleu")


def test_design_reward_names_missing_inputs_and_unknown_designs():
    with pytest.raises(ValueError, match=r"needs the inputs \['question', 'nli'\]"):
        design_reward("evinote", _response("e"), ["Paris"], RewardsConfig())
    with pytest.raises(ValueError, match="unknown reward design 'x'; known:"):
        design_reward("x", _response("e"), ["Paris"], RewardsConfig())
# Properties (hypothesis): any response, answers and lengths give rewards in [0, 1], never NaN ------------------

LENGTH = st.integers(0, 10**9) | st.floats(0, 1e9)  # token or word counts
POSITIVE = st.floats(1e-6, 1e6)


@settings(max_examples=400, deadline=None)
@given(LENGTH, LENGTH, LENGTH.filter(lambda v: v > 0), POSITIVE, st.floats(0, 10), st.floats(0, 1))
def test_length_rewards_of_any_lengths_are_in_the_unit_interval(L_r, L_e, L_P, tau, gamma, omega):
    for reward in (rationale_length_reward(L_r, L_e, tau), evidence_length_reward(L_e, L_P, gamma, omega)):
        assert 0.0 <= reward <= 1.0  # NaN fails both comparisons


@settings(max_examples=300, deadline=None)
@given(tagged_texts(), st.lists(tagged_texts(), min_size=3, max_size=3), st.lists(tagged_texts(), min_size=1,
                                                                                   max_size=3),
       LENGTH.filter(lambda v: v > 0), st.sampled_from(TAU_GRID), st.sampled_from(GAMMA_GRID),
       st.sampled_from([("rationale", "evidence", "full"), ("evidence",), ("rationale", "full")]))
def test_score_of_any_response_is_in_the_unit_interval(response, outputs, golden, L_P, tau, gamma, subset):
    cfg = RewardsConfig(tau=tau, gamma=gamma, length_unit="words", answer_subset=subset)
    scores = score_response(response, outputs, golden, L_P, cfg)
    terms = [*scores.answer, scores.rationale_length, scores.evidence_length, scores.format, scores.final]
    assert all(0.0 <= term <= 1.0 for term in terms), scores
    assert scores.format == float(is_well_formatted(response))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8).flatmap(lambda g: st.tuples(st.just(g), st.lists(st.floats(-1e6, 1e6), min_size=g,
                                                                          max_size=4 * g))),
       st.floats(0, 1))
@example((2, [0.0, 3.167025113347791e-159]), 0.0)  # the population std of tiny rewards underflowed (was 1.00000008)
@example((3, [699051.0333134157] * 3), 0.0)  # the mean's rounding error was scaled up to advantages of 1
@example((3, [699051.0, 699051.0, 699051.03125]), 0.0)  # ... and skewed them past sqrt(G - 1)
def test_advantages_of_any_finite_rewards_are_finite_and_centred(group_and_rewards, eps_std):
    group_size, rewards = group_and_rewards
    rewards = rewards[: len(rewards) - len(rewards) % group_size]
    advantages = clipped_group_advantages(rewards, group_size, eps_std).reshape(-1, group_size)
    assert np.all(np.isfinite(advantages))
    # a z-score over G values with the population std is at most sqrt(G - 1) in size; clipping only shrinks it
    assert np.all(np.abs(advantages) <= math.sqrt(group_size - 1) + 1e-9)
    assert np.allclose(advantages.sum(axis=1), 0.0, atol=1e-6 * group_size)
