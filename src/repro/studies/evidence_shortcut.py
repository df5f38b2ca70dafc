"""The free checks of issue #49 on step 2's per-item records (docs/cpu-evidence.md): the positional shortcut and the
shared-weights reader.

    flags = shortcut_items(study.rows, study.items)   # per policy and question: the flags below, F1(o_e)
    recall_by_shortcut(flags)     # evidence AR, trained − start, split by whether the shortcut holds an answer
    shortcut_copies(flags)        # how often each policy's extract is the shortcut, or holds a title outside a copy
    reader_f1_table(flags)        # F1(o_e) where the extract holds an answer: start against each seed

The shortcut sentence is the first sentence of passage 1 (`evidence_seeds.first_sentence`), which holds an answer
for about half of step 2's questions without reading them. Answers are page titles, so an extract can also gain
answer recall by naming a passage's title without copying the sentence around it, which the random-span baseline
(titles left out) cannot do. o_e is the policy's own greedy answer from its evidence (the reader shares the
policy's weights), so F1(o_e) where the extract holds an answer asks whether that reader decays with training.

The records are the `evidence_seeds` stage's: each policy's items (`evidence_seeds.ITEM_COLUMNS`; the scores under
data/<profile>/train/evidence_seeds/scores/) on the held-out rows (`SeedsStudy.rows`: passages, golden answers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from repro.data.corpus import split_contents
from repro.data.sentences import collapse_whitespace, passage_sentences
from repro.formulas import metrics, tags
from repro.reporting import stats
from repro.studies.evidence_seeds import START, first_sentence
from repro.studies.heldout import policy_evidence

FLAG_COLUMNS = ["policy", "id", "ar_evidence", "shortcut_holds_answer", "extract_is_shortcut", "extract_has_shortcut",
                "title_outside_copy", "f1_evidence"]


def is_shortcut(extract: str, passages: Sequence[dict]) -> bool:
    """Whether the extract is passage 1's first sentence, whitespace collapsed (False when either is empty)."""
    shortcut = collapse_whitespace(first_sentence(passages))
    return bool(shortcut) and collapse_whitespace(extract) == shortcut


def has_shortcut(extract: str, passages: Sequence[dict]) -> bool:
    """Whether the extract contains passage 1's first sentence, whitespace collapsed."""
    shortcut = collapse_whitespace(first_sentence(passages))
    return bool(shortcut) and shortcut in collapse_whitespace(extract)


def title_outside_copy(extract: str, passages: Sequence[dict]) -> bool:
    """Whether the extract names a passage title (SQuAD-normalised substring, as answer recall matches) in what is
    left once every passage sentence it copies verbatim (whitespace collapsed) is cut out, longest first."""
    rest = collapse_whitespace(extract)
    for sentence in sorted({collapse_whitespace(s.sentence) for s in passage_sentences(passages)}, key=len,
                           reverse=True):
        rest = rest.replace(sentence, " ")
    titles = [split_contents(p["contents"])[0] for p in passages]
    titles = [t for t in titles if metrics.normalize_answer(t)]
    return bool(titles) and metrics.answer_recall(rest, titles) == 1.0


def reader_f1(o_e: str | None, golden_answers: Sequence[str]) -> float:
    """F1 of o_e, read as the training reward reads it (`tags.extract_answer`); NaN when o_e was not generated."""
    if not isinstance(o_e, str):
        return float("nan")
    return metrics.f1(tags.extract_answer(o_e), golden_answers)


def shortcut_items(rows: Sequence[dict], items: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (policy, question), FLAG_COLUMNS: the policy's evidence AR, whether the shortcut sentence holds
    an answer, whether its extract is (or contains) the shortcut, whether it names a title outside a copied
    sentence, and F1(o_e). `items` are `SeedsStudy.items` (every policy on `rows`, in their order)."""
    by_id = {str(row["id"]): row for row in rows}
    frames = []
    for name, frame in items.items():
        if [str(i) for i in frame["id"]] != list(by_id):
            raise ValueError(f"policy {name}: its items are not the held-out rows, in their order")
        flags = []
        for item in frame.to_dict("records"):
            row = by_id[str(item["id"])]
            passages, gold = row["passages"], row["golden_answers"]
            extract = policy_evidence(item["rollout"])
            flags.append({"policy": name, "id": str(item["id"]), "ar_evidence": float(item["ar_evidence"]),
                          "shortcut_holds_answer": metrics.answer_recall(first_sentence(passages), gold) == 1.0,
                          "extract_is_shortcut": is_shortcut(extract, passages),
                          "extract_has_shortcut": has_shortcut(extract, passages),
                          "title_outside_copy": title_outside_copy(extract, passages),
                          "f1_evidence": reader_f1(item["o_e"], gold)})
        frames.append(pd.DataFrame(flags, columns=FLAG_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def _policies(flags: pd.DataFrame) -> dict[str, pd.DataFrame]:
    policies = {name: frame.reset_index(drop=True) for name, frame in flags.groupby("policy", sort=False)}
    if START not in policies or len(policies) < 2:
        raise ValueError(f"expected the {START!r} policy and at least one seed, got {list(policies)}")
    return policies


def recall_by_shortcut(flags: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Evidence AR of each seed against the start, on the questions whose shortcut sentence holds an answer and on
    those where it does not: both rates, the difference, the discordant questions and the exact McNemar p per seed;
    a pooled row per subset (each question's AR averaged over the seeds against the start's, approximate
    randomization). Deciding nothing: where does the change in recall come from?"""
    policies = _policies(flags)
    start = policies.pop(START)
    rows = []
    for holds in (True, False):
        kept = start["shortcut_holds_answer"].to_numpy(bool) == holds
        subset = "shortcut holds an answer" if holds else "shortcut holds none"
        b = start.loc[kept, "ar_evidence"].to_numpy(float)
        trained = {name: frame.loc[kept, "ar_evidence"].to_numpy(float) for name, frame in policies.items()}
        for name, a in trained.items():
            rows.append(_contrast_row(subset, name, a, b, binary=True, seed=seed))
        if len(trained) > 1:
            rows.append(_contrast_row(subset, "pooled", np.mean(list(trained.values()), axis=0), b, False, seed))
    return pd.DataFrame(rows)


def _contrast_row(subset: str, policy: str, a: np.ndarray, b: np.ndarray, binary: bool, seed: int) -> dict:
    """Both means, the difference and the discordant questions; the paired test with at least two questions."""
    empty = a.size == 0
    row = {"subset": subset, "policy": policy, "questions": int(a.size),
           "start": float("nan") if empty else float(b.mean()), "trained": float("nan") if empty else float(a.mean()),
           "difference": float("nan") if empty else float(a.mean() - b.mean()),
           "trained_only": int((a > b).sum()), "start_only": int((a < b).sum()), "test": None, "p_value": float("nan")}
    if a.size >= 2:
        test = stats.paired_test(a, b, binary=binary, seed=seed).test
        row |= {"test": test.test, "p_value": test.p_value}
    return row


def shortcut_copies(flags: pd.DataFrame) -> pd.DataFrame:
    """Per policy: the share of its extracts that are passage 1's first sentence, that contain it, and that name a
    passage title outside a copied sentence; its evidence AR beside the shortcut's on the same questions, with the
    exact McNemar test of the two."""
    rows = []
    for name, frame in flags.groupby("policy", sort=False):
        evidence, shortcut = frame["ar_evidence"].to_numpy(float), frame["shortcut_holds_answer"].to_numpy(float)
        test = stats.mcnemar_test(evidence.astype(bool), shortcut.astype(bool))
        rows.append({"policy": name, "questions": len(frame),
                     "extract_is_shortcut": frame["extract_is_shortcut"].mean(),
                     "extract_has_shortcut": frame["extract_has_shortcut"].mean(),
                     "title_outside_copy": frame["title_outside_copy"].mean(), "ar_evidence": evidence.mean(),
                     "ar_shortcut": shortcut.mean(), "vs_shortcut_difference": test.effect,
                     "vs_shortcut_ci_low": test.ci_low, "vs_shortcut_ci_high": test.ci_high,
                     "vs_shortcut_p": test.p_value})
    return pd.DataFrame(rows)


def reader_f1_table(flags: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """F1(o_e) where the extract holds an answer: each policy's mean over its own such questions; and each seed
    against the start on the questions where both extracts hold an answer (approximate randomization, paired
    bootstrap interval, as `stats.paired_test`; NaN with fewer than two such questions). Does the shared-weights
    reader decay with training?"""
    policies = _policies(flags)
    start = policies[START]
    rows = []
    for name, frame in policies.items():
        own = frame["ar_evidence"].to_numpy(float) == 1.0
        row = {"policy": name, "questions_holding": int(own.sum()),
               "f1_evidence_where_held": float(frame.loc[own, "f1_evidence"].mean()) if own.any() else float("nan")}
        if name != START:
            both = own & (start["ar_evidence"].to_numpy(float) == 1.0)
            a, b = frame.loc[both, "f1_evidence"].to_numpy(float), start.loc[both, "f1_evidence"].to_numpy(float)
            row |= {"questions_both": int(both.sum())} | dict.fromkeys(
                ("start_f1_both", "trained_f1_both", "difference", "ci_low", "ci_high", "p_value"), float("nan"))
            if both.sum() >= 2:
                test, interval = stats.paired_test(a, b, seed=seed)
                row |= {"start_f1_both": float(b.mean()), "trained_f1_both": float(a.mean()),
                        "difference": test.effect, "ci_low": interval.ci_low, "ci_high": interval.ci_high,
                        "p_value": test.p_value}
        rows.append(row)
    return pd.DataFrame(rows)
