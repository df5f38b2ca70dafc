"""The trained extractor against the policy it started from, on held-out dev questions (issue #17, D151).

    rows = heldout_rows(cfg)                              # questions neither GRPO nor the selection saw
    start, trained = score_policy(cfg, start_dir, rows), score_policy(cfg, extractor_dir, rows)
    compare_policies(start, trained)                      # paired tests of the three headline metrics, Holm,
                                                          # on every question and on the answerable ones

Held-out questions: `train.heldout_questions` seeded questions of the training dataset's dev split after its first
`train.dev_max_questions`, the rows dev selection scores (`repro.train.grpo.run`). A policy is scored as dev selection
scores a checkpoint (`EviOmniTrainer.score_greedy`): a greedy rollout from GRPO's prompt with `max_completion_length`
new tokens, greedy o_r and o_e from the Eq. 4 contexts with `max_answer_length`, the training reward's terms
(`score_rollout`), and the answer recall of the text inside the rollout's `<extract>` (§2.2; "" without one). Both
policies are scored by one kind of engine, `train.heldout_backend` (D171). A question is answerable when its top-k
passages hold a golden answer (`repro.data.answers.answer_in_passages`, as `train.require_answer_in_passages`, D149):
the others hold no answer for the evidence to keep, so the comparison is also reported without them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from repro.config import Profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.formulas import metrics, tags
from repro.generation import GenerationParams, make_generator
from repro.generation.prompting import load_tokenizer
from repro.reporting import stats
from repro.train.grpo.data import extraction_row
from repro.train.grpo.rollout import MASKED_TARGETS, answer_contexts, parse_rollout
from repro.train.grpo.rollout_reward import score_rollout

BATCH_SIZE = 16  # transformers' prompts per batch; on a 2-core CPU, 64 at once decoded 0.79x as fast (bench_generation)
HEADLINE = ("f1_evidence", "ar_evidence", "reward_format")
BINARY = ("ar_evidence", "reward_format")  # 0/1 outcomes: exact McNemar and its exact interval (stats.paired_test)


def policy_evidence(rollout: str) -> str:
    """The text inside the rollout's `<extract>` (up to `</extract>`, `<answer>` or the end); "" if it has none."""
    return tags.extract_evidence(rollout) if "<extract>" in rollout else ""


def heldout_rows(cfg: Profile, questions: int | None = None, answerable: bool = False) -> list[dict]:
    """`questions` (default `train.heldout_questions`) seeded contexts rows of the training dataset's dev split,
    drawn from the rows after the first `train.dev_max_questions` (those select the checkpoint; every row when
    `train.selection_metric` is null), only among the answerable ones with `answerable`."""
    train = cfg.train
    questions = questions or train.heldout_questions
    if questions is None:
        raise ValueError(f"profile {cfg.name}: train.heldout_questions is null (no held-out questions)")
    selecting = train.selection_metric is not None
    if selecting and train.dev_max_questions is None:
        raise ValueError(f"profile {cfg.name}: train.dev_max_questions is null, so dev selection uses every dev "
                         f"question and none is held out; set it to hold some out")
    path = layout.contexts_path(cfg, train.dataset, "dev")
    remaining = read_contexts(path)[train.dev_max_questions if selecting else 0:]
    if answerable:
        remaining = [row for row in remaining if answer_in_passages(row)]
    if not remaining:
        raise ValueError(f"{path}: no {'answerable ' if answerable else ''}dev question after the first "
                         f"train.dev_max_questions={train.dev_max_questions if selecting else 0}")
    return sample_rows(remaining, questions, cfg.seed)


def score_policy(cfg: Profile, policy: str, rows: Sequence[dict], rollouts: Sequence[str] | None = None,
                 progress: bool = True, masked: Sequence[str] = MASKED_TARGETS) -> pd.DataFrame:
    """One row per question: whether it is answerable, the greedy rollout (or the given `rollouts`, e.g. the recall
    check's), o_r, o_e, every term of `score_rollout`'s summary, and `ar_evidence`, the answer recall of the rollout's
    evidence. `masked` (a subset of MASKED_TARGETS) says which masked answers are generated; the others are None
    and their terms NaN (the answer subset must not need them)."""
    tokenizer = load_tokenizer(policy)
    train_rows = [extraction_row(row, tokenizer, cfg.rewards.length_unit) for row in rows]
    with make_generator(cfg.train.heldout_backend, policy, dtype=cfg.models.inference, progress=progress,
                        **cfg.train.heldout_options) as generator:
        if rollouts is None:
            rollouts = generator.generate([row["prompt"] for row in train_rows],
                                          GenerationParams(max_new_tokens=cfg.train.max_completion_length,
                                                           batch_size=BATCH_SIZE))
        if len(rollouts) != len(train_rows):
            raise ValueError(f"{len(train_rows)} questions but {len(rollouts)} rollouts")
        contexts = [answer_contexts(row["question"], row["passages"], parse_rollout(text), masked, cfg.rewards)
                    for row, text in zip(train_rows, rollouts)]
        answers = iter(generator.generate([ctx.render(tokenizer) for group in contexts for ctx in group],
                                          GenerationParams(max_new_tokens=cfg.train.max_answer_length,
                                                           batch_size=BATCH_SIZE)))
    items = []
    for row, train_row, text, group in zip(rows, train_rows, rollouts, contexts):
        masked = {ctx.target: next(answers) for ctx in group}
        score = score_rollout(text, masked.get("rationale"), masked.get("evidence"), train_row["golden_answers"],
                              train_row["passages_length"], cfg.rewards, tokenizer)
        items.append({"id": train_row["id"], "answerable": answer_in_passages(row), "rollout": text,
                      "o_r": masked.get("rationale"), "o_e": masked.get("evidence"),
                      **score.summary(),
                      "ar_evidence": metrics.answer_recall(policy_evidence(text), train_row["golden_answers"])})
    return pd.DataFrame(items)


def compare_policies(start: pd.DataFrame, trained: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Trained against start on the same questions, for each HEADLINE metric, on every question (`subset` "all") and
    on the answerable ones ("answerable", when at least two): both means, the difference with its 95% interval (exact
    McNemar interval for the binary metrics, `stats.mcnemar_exact_interval`; paired bootstrap, BCa, for F1), the
    metric's paired test (`stats.paired_test`), its discordant pairs (binary metrics), and Holm's correction over the
    subset's three tests."""
    if start["id"].tolist() != trained["id"].tolist():
        raise ValueError("the two policies were scored on different questions")
    answerable = start["answerable"].to_numpy(dtype=bool)
    subsets = {"all": np.ones_like(answerable), "answerable": answerable}
    tables = [_compare_subset(start[kept], trained[kept], seed).assign(subset=name)
              for name, kept in subsets.items() if name == "all" or kept.sum() >= 2]
    table = pd.concat(tables, ignore_index=True)
    return table[["subset", *table.columns.drop("subset")]]


def _compare_subset(start: pd.DataFrame, trained: pd.DataFrame, seed: int) -> pd.DataFrame:
    rows = []
    for metric in HEADLINE:
        a, b = trained[metric].to_numpy(dtype=float), start[metric].to_numpy(dtype=float)
        test, interval = stats.paired_test(a, b, metric in BINARY, seed=seed)
        row = {"metric": metric, "questions": len(a), "start": float(b.mean()), "trained": float(a.mean()),
               "difference": interval.effect, "ci_low": interval.ci_low, "ci_high": interval.ci_high,
               "test": test.test, "p_value": test.p_value}
        if metric in BINARY:
            trained_only, start_only = stats.discordant_pairs(a, b)
            row |= {"trained_only": trained_only, "start_only": start_only}
        rows.append(row)
    table = pd.DataFrame(rows)
    table["p_holm"] = stats.holm(table["p_value"])[0]
    return table
