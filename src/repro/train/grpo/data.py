"""The rows GRPO trains and selects on: one per question, with its passages in the extraction prompt.

A row holds the chat prompt TRL samples from (the Table 14 prompt as the user turn, D3) and the columns
the reward needs: the question and the formatted passages (to rebuild the masked contexts of Eq. 4), the
golden answers, L_P and ARENA's gold passage numbers (D129). L_P is the length of the formatted `{passages}`
slot, numbers and titles included: the text the extractor actually reads and compresses (D40).

`train.require_answer_in_passages` (D149) leaves out the training questions whose top-k passages hold no golden
answer (DPR's `has_answer`, as Table 8 counts them) before `train.max_train_questions` takes the first N;
`training_rows` returns how many it left out, which the run records. Dev rows are never filtered: selection scores
every dev question, as the evaluation does (D31).
"""

from __future__ import annotations

from collections.abc import Sequence

from repro.config import Profile
from repro.data import layout
from repro.data.answers import answer_in_passages, has_answer
from repro.data.qa import read_contexts
from repro.formulas import metrics, prompts


def gold_passages(passages: Sequence[dict], golden_answers: Sequence[str]) -> list[int]:
    """ARENA's gold passage numbers (1-based, D129): the supporting paragraphs where the data marks them
    (`is_supporting`: HotpotQA/2Wiki/MuSiQue distractor settings, FanOutQA's evidence pages), else the
    passages that contain a golden answer (`repro.data.answers.has_answer`)."""
    if any("is_supporting" in p for p in passages):
        return [i for i, p in enumerate(passages, start=1) if p.get("is_supporting")]
    return [i for i, p in enumerate(passages, start=1) if has_answer(p["contents"], golden_answers)]


def extraction_prompt(row: dict) -> list[dict]:
    """GRPO's prompt for a contexts row (QA row + `passages`, see repro.data.layout)."""
    return prompts.extraction_messages(row["question"], prompts.format_passages(row["passages"]))


def extraction_row(row: dict, tokenizer, length_unit: str) -> dict:
    """The training row of one contexts row."""
    passages = prompts.format_passages(row["passages"])
    return {
        "id": str(row["id"]),
        "prompt": extraction_prompt(row),
        "question": row["question"],
        "passages": passages,
        "golden_answers": list(row["golden_answers"]),
        "passages_length": metrics.text_length(passages, length_unit, tokenizer),
        "gold_passages": gold_passages(row["passages"], row["golden_answers"]),
    }


def extraction_rows(contexts: Sequence[dict], tokenizer, length_unit: str, limit: int | None = None) -> list[dict]:
    return [extraction_row(row, tokenizer, length_unit) for row in list(contexts)[:limit]]


def split_rows(cfg: Profile, split: str, tokenizer, limit: int | None = None) -> list[dict]:
    """Rows of `split` of the profile's training dataset, from the data stage's contexts file."""
    return extraction_rows(read_contexts(layout.contexts_path(cfg, cfg.train.dataset, split)), tokenizer,
                           cfg.rewards.length_unit, limit)


def trainable_rows(contexts: Sequence[dict], require_answer_in_passages: bool) -> tuple[list[dict], dict]:
    """The contexts rows GRPO may train on and what to record about them: every row, or with
    `require_answer_in_passages` only those whose top-k passages hold a golden answer (D149)."""
    kept = [row for row in contexts if answer_in_passages(row)] if require_answer_in_passages else list(contexts)
    return kept, {"require_answer_in_passages": require_answer_in_passages, "questions": len(contexts),
                  "dropped": len(contexts) - len(kept)}


def training_rows(cfg: Profile, tokenizer) -> tuple[list[dict], dict]:
    """The training rows of the profile (train split, filtered by `train.require_answer_in_passages`, then the first
    `train.max_train_questions`) and the record of `trainable_rows`, which the run keeps in run_config.json."""
    contexts = read_contexts(layout.contexts_path(cfg, cfg.train.dataset, "train"))
    kept, record = trainable_rows(contexts, cfg.train.require_answer_in_passages)
    return extraction_rows(kept, tokenizer, cfg.rewards.length_unit, cfg.train.max_train_questions), record
