"""The gate of the CPU evidence experiment (issue #31, deliverable 1): can the reward see the evidence at all?

    gate = run_gate(cfg)       # cfg.evidence: readers × answer prompts on training questions; gate.passes
    gate.contrast              # F1 and EM contrasts (answer-bearing − answerless evidence), intervals and tests

GRPO can teach the extractor to keep the answer only if its answer reward tells evidence that holds the answer from
evidence that does not. The reward's evidence term is F1(o_e), o_e = M(· | q, X, X, e) (Eq. 4), written by the
policy itself. Here e is set by hand, twice per question: a passage sentence holding a golden answer (DPR's
`has_answer`) and a sentence holding none (not even as a substring), each drawn uniformly by question id. The
reader answers greedily from each on the transformers engine (its scores repeat byte for byte). The contrast is the
paired difference in F1 (paired bootstrap interval, BCa; approximate randomization) and in EM (exact McNemar with
its conditional exact interval). The golden answers only choose the questions and the sentences: this measures the
reward, it trains nothing.

Decided before the run (docs/cpu-evidence.md): the gate passes when the F1 contrast of the starting policy, under
the profile's own `rewards`, is at least `min_contrast` and its interval excludes 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from repro.assets import resolve
from repro.config import Profile, RewardsConfig
from repro.data import layout
from repro.data.answers import has_answer
from repro.data.qa import read_contexts
from repro.data.sentences import keyed_rng, passage_sentences
from repro.data.splits import sample_rows
from repro.formulas import metrics, tags
from repro.formulas.masking import ANSWER_PROMPTS, knowledge_masked_contexts
from repro.generation import GenerationParams, make_generator
from repro.generation.prompting import load_tokenizer
from repro.reporting import stats

BATCH_SIZE = 16  # prompts per transformers batch, as the held-out scoring (repro.studies.heldout)
EVIDENCE = ("answer", "none")  # e = a sentence holding a golden answer; e = a sentence holding none


def gate_sentences(row: dict, seed: int) -> dict[str, str] | None:
    """The two evidence sentences of a contexts row, each drawn uniformly by question id among the passages'
    sentences that hold a golden answer (`has_answer`) and those that hold none (not even as a substring); None
    unless the passages have both kinds."""
    sentences = [s.sentence for s in passage_sentences(row["passages"])]
    answers = row["golden_answers"]
    kinds = {"answer": [s for s in sentences if has_answer(s, answers)],
             "none": [s for s in sentences if not metrics.answer_recall(s, answers)]}
    if not all(kinds.values()):
        return None
    return {kind: keyed_rng(str(row["id"]), seed, f"gate-{kind}").choice(found) for kind, found in kinds.items()}


def gate_rows(rows: Sequence[dict], questions: int, seed: int) -> list[dict]:
    """A seeded sample of `questions` rows whose passages hold both kinds of sentence (`gate_sentences`)."""
    return sample_rows([row for row in rows if gate_sentences(row, seed) is not None], questions, seed)


def gate_items(reader: str, rows: Sequence[dict], rewards: RewardsConfig, seed: int, max_new_tokens: int,
               dtype: str = "float32", progress: bool = True) -> pd.DataFrame:
    """One row per question and kind of evidence: the sentence, the reader's greedy o_e from Eq. 4's evidence
    context under `rewards` (mask mode, answer prefill, prompt) and its F1 and EM against the golden answers."""
    tokenizer = load_tokenizer(reader)
    items, texts = [], []
    for row in rows:
        for kind, sentence in gate_sentences(row, seed).items():
            context = knowledge_masked_contexts(row["question"], row["passages"], "", sentence, rewards.mask_mode,
                                                rewards.prefill_answer_tag,
                                                prompt=rewards.masked_answer_prompt)["evidence"]
            items.append({"id": row["id"], "evidence": kind, "sentence": sentence,
                          "golden_answers": row["golden_answers"]})
            texts.append(context.render(tokenizer))
    with make_generator("transformers", reader, dtype=dtype, progress=progress) as generator:
        outputs = generator.generate(texts, GenerationParams(max_new_tokens=max_new_tokens, batch_size=BATCH_SIZE))
    for item, o_e in zip(items, outputs):
        answer = tags.extract_answer(o_e)
        item |= {"o_e": o_e, "f1": metrics.f1(answer, item["golden_answers"]),
                 "em": metrics.exact_match(answer, item["golden_answers"])}
    return pd.DataFrame(items)


def gate_contrast(items: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """F1 and EM of o_e with the answer-bearing sentence minus with the answerless one, paired by question: both
    means, the difference with its 95% interval and its test (`stats.paired_test`; F1: paired bootstrap,
    approximate randomization; EM: exact McNemar with its conditional exact interval)."""
    wide = items.pivot(index="id", columns="evidence", values=["f1", "em"])
    rows = []
    for metric in ("f1", "em"):
        a, b = wide[(metric, "answer")].to_numpy(float), wide[(metric, "none")].to_numpy(float)
        test, interval = stats.paired_test(a, b, binary=metric == "em", seed=seed)
        answer_only, answerless_only = stats.discordant_pairs(a, b)
        rows.append({"metric": metric, "questions": len(a), "answer_sentence": float(a.mean()),
                     "answerless_sentence": float(b.mean()), "contrast": float(a.mean() - b.mean()),
                     "ci_low": interval.ci_low, "ci_high": interval.ci_high, "test": test.test,
                     "p_value": test.p_value, "answer_only": answer_only, "answerless_only": answerless_only})
    return pd.DataFrame(rows)


def gate_passes(contrast: pd.DataFrame, min_contrast: float) -> bool:
    """The rule decided before the run: the F1 contrast is at least `min_contrast` and its interval excludes 0."""
    f1 = contrast.set_index("metric").loc["f1"]
    return bool(f1["contrast"] >= min_contrast and f1["ci_low"] > 0)


@dataclasses.dataclass(frozen=True)
class GateResult:
    """Every reader × answer prompt measured: the per-item answers and the contrasts (`reader`, `prompt` columns);
    `passes` is the rule applied to the decisive row (the starting policy under the profile's own prompt)."""

    items: pd.DataFrame
    contrast: pd.DataFrame
    passes: bool


def run_gate(cfg: Profile, progress: bool = True) -> GateResult:
    """The gate of `cfg.evidence` on `gate_questions` rows of the training split's contexts: readers `start` (the
    starting policy, whose o_e GRPO's first steps reward) and `base` (`models.extractor`), each under both
    `rewards.masked_answer_prompt` readings (D148); the profile's own reading of the starting policy decides."""
    from repro.train.grpo.warmup import starting_policy  # the training stack, loaded only where the gate runs

    evidence, rewards = cfg.evidence, cfg.rewards
    path = layout.contexts_path(cfg, cfg.train.dataset, "train")
    rows = gate_rows(read_contexts(path), evidence.gate_questions, cfg.seed)
    if len(rows) < 2:
        raise ValueError(f"{path}: {len(rows)} question(s) whose passages hold both a sentence with a golden answer "
                         f"and one without; the gate needs at least 2")
    readers = {"start": starting_policy(cfg, progress=progress), "base": resolve(cfg.models.extractor, cfg.name)}
    prompts = [rewards.masked_answer_prompt, *(p for p in ANSWER_PROMPTS if p != rewards.masked_answer_prompt)]
    items, contrasts = [], []
    for reader, path in readers.items():
        for prompt in prompts:
            found = gate_items(path, rows, dataclasses.replace(rewards, masked_answer_prompt=prompt), cfg.seed,
                               cfg.train.max_answer_length, cfg.models.inference, progress)
            items.append(found.assign(reader=reader, prompt=prompt))
            contrasts.append(gate_contrast(found, cfg.seed).assign(reader=reader, prompt=prompt))
    contrast = pd.concat(contrasts, ignore_index=True)
    contrast.insert(0, "decisive", (contrast["reader"] == "start") & (contrast["prompt"] == prompts[0]))
    return GateResult(pd.concat(items, ignore_index=True), contrast,
                      gate_passes(contrast[contrast["decisive"]], evidence.gate_min_contrast))


def gate_verdict(cfg: Profile, gate: GateResult) -> dict:
    """The decisive row in numbers, the rule and the verdict, for `gate.json` and the report."""
    f1 = gate.contrast[gate.contrast["decisive"] & (gate.contrast["metric"] == "f1")].iloc[0]
    rule = (f"F1 contrast >= {cfg.evidence.gate_min_contrast} and its 95% interval above 0, for the starting "
            f"policy under rewards.masked_answer_prompt={cfg.rewards.masked_answer_prompt}")
    return {"profile": cfg.name, "questions": int(f1["questions"]), "reader": "start", "prompt": f1["prompt"],
            "f1_answer_sentence": float(f1["answer_sentence"]), "f1_answerless_sentence": float(f1["answerless_sentence"]),
            "f1_contrast": float(f1["contrast"]), "ci_low": float(f1["ci_low"]), "ci_high": float(f1["ci_high"]),
            "p_value": float(f1["p_value"]), "rule": rule, "passes": gate.passes}
