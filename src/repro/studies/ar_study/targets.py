"""The two SFT sets of §2.2 from the kept teacher responses: the same Table 14 prompt, two kinds of target.

    rational (𝕄)   <reason>r</reason><extract>e</extract>
    vanilla  (ℕ)   <extract>e</extract>

Both variants see the same prompt (Table 14 over the question's passages, D79): only the target differs, so the
comparison isolates reasoning before extracting. The `<answer>` part is dropped from both (at inference extraction
stops at `</extract>`); the loss covers the target only.
"""

from __future__ import annotations

from repro.studies.ar_study.paths import VARIANTS
from repro.studies.ar_study.teacher import kept_records, extraction_messages


def variant_target(rationale: str, evidence: str, variant: str) -> str:
    """The assistant turn a variant learns: rationale and evidence (rational) or the evidence alone (vanilla)."""
    if variant == "rational":
        return f"<reason>{rationale.strip()}</reason><extract>{evidence.strip()}</extract>"
    if variant == "vanilla":
        return f"<extract>{evidence.strip()}</extract>"
    raise ValueError(f"unknown variant {variant!r}; the study has {list(VARIANTS)}")


def sft_set(rows: list[dict], teacher_records: list[dict], variant: str) -> list[dict]:
    """Prompt-completion examples (chat messages) of the kept teacher records, in teacher order; `rows` are the
    contexts rows the teacher answered (their passages fill the prompt)."""
    by_id = {row["id"]: row for row in rows}
    examples = []
    for record in kept_records(teacher_records):
        if record["id"] not in by_id:
            raise KeyError(f"teacher record {record['id']!r} has no contexts row")
        target = variant_target(record["rationale"], record["evidence"], variant)
        examples.append({"id": record["id"], "prompt": extraction_messages(by_id[record["id"]]),
                         "completion": [{"role": "assistant", "content": target}]})
    return examples
