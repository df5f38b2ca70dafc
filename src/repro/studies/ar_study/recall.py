"""Answer recall of the two variants (§2.2, Table 1): per-item records on the in- and out-of-distribution sets.

    files = run_recall(cfg)        # one row per (dataset, variant): path of its per-item records, counts

Each variant extracts with Table 14's prompt from the question's passages (the prompt it was fine-tuned on), greedy,
stopped at `</extract>`, through `ar_study.student` with the variant's LoRA adapter; by default the assistant turn
opens with the variant's first tag, `<reason>` or `<extract>` (D86). Then

- questions whose passages do not contain a golden answer, and (by default) yes/no questions, are excluded
  before anything runs (D80);
- the evidence (the `<extract>` content, read as in D9) is cut to its first `evidence_cap` tokens of the student's
  tokenizer, or words (D81); the rationale is kept whole unless `cap_rationale` (D82);
- AR is repro.formulas.metrics.answer_recall: a normalised golden answer is a substring of the normalised text (D12).

A record holds: id, question, golden_answers, dataset, variant, output (the raw response), rationale, evidence (as
capped), evidence_length_uncapped, evidence_length, evidence_capped, rationale_length (in `cap_unit`),
well_formatted, ar_evidence, ar_rationale (null for the vanilla variant, which writes none).
"""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from repro.assets import resolve
from repro.config import ArRecallConfig, Profile
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.evaluation.records import RecordFile, process_resumably
from repro.formulas.metrics import answer_recall, normalize_answer, text_length
from repro.formulas.prompts import EVIDENCE_EXTRACTION_TEMPLATE, EVIDENCE_STOP, render_chat
from repro.formulas.tags import extract_evidence, extract_rationale, is_well_formatted
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint
from repro.studies.ar_study.paths import VARIANTS, adapter_dir, recall_records_path
from repro.studies.ar_study.teacher import extraction_messages

AR_FIELDS = ("id", "question", "golden_answers", "variant", "output", "rationale", "evidence", "ar_evidence",
             "ar_rationale")
FIRST_TAG = {"rational": "<reason>", "vanilla": "<extract>"}
_VANILLA_FORMAT = re.compile(r"\s*<extract>(?P<extract>.*?)</extract>\s*", re.DOTALL)


def passages_text(row: dict) -> str:
    """The passages as the extractor reads them, titles included, without the "Passage i" labels (whose numbers
    would "recall" a golden answer such as "2")."""
    return "\n".join(passage["contents"] for passage in row["passages"])


def passages_hold_answer(row: dict, exclusion: str = "answer_recall") -> bool:
    """The exclusion rule (D80): True if the row is kept. `answer_recall`: AR of the passages is 1, so every
    kept item can be recalled by a perfect extractor; `has_answer`: DPR's token-boundary match in the passage
    texts (titles excluded), as in Table 8."""
    if exclusion == "answer_recall":
        return answer_recall(passages_text(row), row["golden_answers"]) > 0
    if exclusion == "has_answer":
        return answer_in_passages(row)
    raise ValueError(f"exclusion must be 'answer_recall' or 'has_answer', got {exclusion!r}")


def is_yes_no(row: dict) -> bool:
    """Every golden answer is "yes" or "no" (HotpotQA comparisons, FanOutQA booleans): no span to recall."""
    return all(normalize_answer(a) in ("yes", "no") for a in row["golden_answers"])


def cap_length(text: str, cap: int, unit: str = "tokens", tokenizer=None) -> str:
    """The first `cap` tokens (of `tokenizer`, decoded) or whitespace words of `text`; `text` itself if shorter."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    if unit == "words":
        words = text.split()
        return text if len(words) <= cap else " ".join(words[:cap])
    if unit != "tokens":
        raise ValueError(f"unit must be 'tokens' or 'words', got {unit!r}")
    if tokenizer is None:
        raise ValueError("unit='tokens' needs a tokenizer (the student's)")
    ids = tokenizer.encode(text, add_special_tokens=False)
    return text if len(ids) <= cap else tokenizer.decode(ids[:cap])


def follows_format(output: str, variant: str) -> bool:
    """The variant's own target format: `<reason>…</reason><extract>…</extract>` or `<extract>…</extract>`."""
    if variant == "rational":
        return is_well_formatted(output, with_answer=False)
    match = _VANILLA_FORMAT.fullmatch(output)
    single = output.count("<extract>") == 1 and "<reason>" not in output
    return bool(match and match.group("extract").strip()) and single


def ar_record(row: dict, output: str, variant: str, dataset: str, ev: ArRecallConfig, tokenizer) -> dict:
    """The per-item record of one response (fields in the module docstring)."""
    golden = row["golden_answers"]
    rationale, uncapped = extract_rationale(output), extract_evidence(output)
    evidence = cap_length(uncapped, ev.evidence_cap, ev.cap_unit, tokenizer)
    if ev.cap_rationale:
        rationale = cap_length(rationale, ev.evidence_cap, ev.cap_unit, tokenizer)

    def length(text: str) -> int:
        return text_length(text, ev.cap_unit, tokenizer)

    return {"id": row["id"], "question": row["question"], "golden_answers": golden, "dataset": dataset,
            "variant": variant, "output": output, "rationale": rationale, "evidence": evidence,
            "evidence_length_uncapped": length(uncapped), "evidence_length": length(evidence),
            "evidence_capped": evidence != uncapped, "rationale_length": length(rationale),
            "well_formatted": follows_format(output, variant), "ar_evidence": answer_recall(evidence, golden),
            "ar_rationale": answer_recall(rationale, golden) if variant == "rational" else None}


def recall_sets(cfg: Profile) -> dict[str, dict]:
    """Per evaluated dataset (in-distribution first): its kept rows and how many questions were excluded."""
    ev = cfg.ar_study.evaluation
    sets = {}
    for role, dataset in (("in-distribution", ev.in_distribution), ("out-of-distribution", ev.out_of_distribution)):
        rows = read_contexts(layout.contexts_path(cfg, dataset, ev.split))
        kept = [row for row in rows if passages_hold_answer(row, ev.exclusion)
                and not (ev.exclude_yes_no and is_yes_no(row))]
        sets[dataset] = {"role": role, "questions": len(rows), "excluded": len(rows) - len(kept),
                         "rows": sample_rows(kept, ev.max_questions, cfg.seed)}
    return sets


class VariantExtractor:
    """One variant's extraction: Table 14's prompt (the one it was fine-tuned on), greedy, stopped at `</extract>`,
    the assistant turn opened with the variant's first tag when `prefill_first_tag` (D86). `load()` makes the
    generator (student + adapter, from the study's pool) on first use, so finished records need no model."""

    def __init__(self, variant: str, load, model_id: str, tokenizer, ev: ArRecallConfig):
        self.load, self.model_id, self.tokenizer = load, model_id, tokenizer
        self.prefix = FIRST_TAG[variant] if ev.prefill_first_tag else ""
        self.params = GenerationParams(max_new_tokens=ev.max_new_tokens, stop=(EVIDENCE_STOP,), include_stop=True,
                                       batch_size=ev.batch_size)
        self.generator = None

    def extract(self, rows: list[dict]) -> list[str]:
        """The raw response to each row, prefix included."""
        if self.generator is None:
            self.generator = self.load()
        messages = [extraction_messages(row) for row in rows]
        prompts = [render_chat(self.tokenizer, m, self.prefix) for m in messages] if self.prefix else messages
        return [self.prefix + output for output in self.generator.generate(prompts, self.params)]

    def config(self) -> dict:
        decoding = dataclasses.asdict(self.params)
        decoding.pop("batch_size")
        return {"template": EVIDENCE_EXTRACTION_TEMPLATE, "model": self.model_id, "prefix": self.prefix,
                "decoding": decoding}


def run_recall(cfg: Profile, progress: bool = True) -> pd.DataFrame:
    """Run (or reuse, or resume) both variants on both sets; one row per (dataset, variant) records file. Both
    variants are adapters of the student in one `ModelPool` (on vLLM: one engine, two LoRA requests), loaded only
    when a records file needs them and released when the study ends."""
    if cfg.ar_study is None:
        raise ValueError(f"profile {cfg.name} has no ar_study section")
    ev = cfg.ar_study.evaluation
    student = resolve(cfg.ar_study.student, cfg.name)
    tokenizer = load_tokenizer(student)
    options = {"dtype": cfg.models.dtype, **ev.options}
    sets, files = recall_sets(cfg), []
    with ModelPool(ev.backend, cfg.models.dtype, progress=False, options=ev.options, adapters_on=[student]) as pool:
        for variant in VARIANTS:
            adapter = str(adapter_dir(cfg.name, variant))
            if not (adapter_dir(cfg.name, variant) / "adapter_model.safetensors").exists():
                raise FileNotFoundError(f"{adapter}: no {variant} adapter yet (run the ar_study_train stage)")
            model_id = f"{model_fingerprint(student)}+lora:{model_fingerprint(adapter)}"
            extractor = VariantExtractor(variant, lambda adapter=adapter: pool.get(student, adapter)[0], model_id,
                                         tokenizer, ev)
            for dataset, spec in sets.items():
                path = recall_records_path(cfg.name, dataset, variant)
                config = {"rows": fingerprint(spec["rows"]), "extractor": extractor.config(), "options": options,
                          "tokenizer": cfg.ar_study.student, "cap": [ev.evidence_cap, ev.cap_unit, ev.cap_rationale]}

                def process(chunk: list[dict], variant=variant, dataset=dataset, extractor=extractor) -> list[dict]:
                    return [ar_record(row, output, variant, dataset, ev, tokenizer)
                            for row, output in zip(chunk, extractor.extract(chunk), strict=True)]

                process_resumably(spec["rows"], RecordFile(path, config, required=AR_FIELDS), process, ev.chunk_size,
                                  progress, desc=f"{variant} on {dataset}")
                files.append({"dataset": dataset, "role": spec["role"], "variant": variant,
                              "questions": spec["questions"], "excluded": spec["excluded"],
                              "evaluated": len(spec["rows"]), "path": str(path)})
    return pd.DataFrame(files)
