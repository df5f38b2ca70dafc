"""FilCo as a refiner of the evaluation runner: Wang, Araki, Jiang, Parvez and Neubig (2023), "Learning to Filter
Context for Retrieval-Augmented Generation", arXiv:2311.08377; released code github.com/zorazrw/filco.

1. Silver filtered contexts (FilCo §2.2): the top-k passages of each training question are split into sentences
   and each sentence t is measured against the output o (a golden answer):
   - String Inclusion (STRINC), `string_inclusion`: t contains o (FilCo's `has_answer`: case-insensitive
     substring, any golden answer); every such sentence is kept;
   - Lexical Overlap, `lexical_overlap`: the unigram F1 of t and o (SQuAD normalisation, max over the golden
     answers); sentences with f_lex(t, o) >= λ are kept.
   The kept sentences, in passage order and joined by a space (FilCo's `get_sent`), are the silver context.
2. The context filter M_ctx: the base model (models.extractor) fine-tuned with LoRA SFT (repro.train.lora.runner) to
   generate the silver context from FilCo's released M_ctx prompt (`FILCO_TEMPLATE`: the instruction of its
   `convert_dataset.py` for NQ/TQA/HotpotQA over "question: q" and "context: " the passage texts, one per line).
3. At evaluation the filter's greedy output is the evidence (`FilCoFilter`), answered by the QA generator.

    adapter = train_filco(cfg)            # data/<profile>/baselines/filco/filter/adapter/
    python -m repro.stages.filco_train --profile tiny

Departures and open choices (docs/decisions.md D66-D70): sentences from nltk's Punkt algorithm without its
trained English model (D66); all top-k passages in, silver sentences from all of them (D67); STRINC by default,
CXMI left out (D68); questions without any silver sentence dropped by default (D69); word-level unigram F1 for
the lexical criterion, as the paper says, where the released code counts characters (D70).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.assets import resolve
from repro.config import FilCoConfig, Profile
from repro.data import layout
from repro.data.qa import read_contexts
from repro.data.sentences import punkt_sentences
from repro.data.splits import sample_rows
from repro.evaluation.refiners import PromptedRefiner
from repro.formulas.metrics import f1
from repro.formulas.prompts import chat_messages, format_passages, passage_title_and_text
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint, write_json, write_jsonl
from repro.train.lora.runner import LoRARun, fitting_examples, train_lora

# FilCo's M_ctx instruction for NQ, TQA and HotpotQA (zorazrw/filco convert_dataset.py, MCTX_INSTR_MAP), followed
# by its "question: …" / "context: …" input (get_inputs.py, prefix_format "{}: {}").
FILCO_INSTRUCTION = "Given the ['question', 'context'], predict the most helpful sentences in the context."
FILCO_TEMPLATE = FILCO_INSTRUCTION + "\n\nquestion: {question}\ncontext: {context}"

def filco_sentences(row: dict) -> list[str]:
    """The sentences of every top-k passage text of a contexts row (title line excluded), in retrieval order, split
    by NLTK's Punkt as FilCo's code splits them (D66)."""
    return [s for passage in row["passages"] for s in punkt_sentences(passage_title_and_text(passage)[1])]


def string_inclusion(sentence: str, answers: list[str]) -> bool:
    """FilCo's STRINC f_inc(t, o): the sentence contains a golden answer (case-insensitive substring)."""
    return any(a.strip() and a.strip().lower() in sentence.lower() for a in answers)


def lexical_overlap(sentence: str, answers: list[str]) -> float:
    """FilCo's Lexical Overlap f_lex(t, o): unigram F1 between the sentence and the answer (max over answers)."""
    return f1(sentence, answers)


def silver_context(row: dict, criterion: str = "strinc", threshold: float = 0.5) -> str:
    """The silver filtered context of a contexts row: the sentences passing `criterion`, in order, space-joined."""
    answers = row["golden_answers"]
    if criterion == "strinc":
        keep = [s for s in filco_sentences(row) if string_inclusion(s, answers)]
    elif criterion == "lexical":
        keep = [s for s in filco_sentences(row) if lexical_overlap(s, answers) >= threshold]
    else:
        raise ValueError(f"unknown FilCo criterion {criterion!r}; expected 'strinc' or 'lexical'")
    return " ".join(keep)


def filter_context(row: dict) -> str:
    """FilCo's `context`: the passage texts, one per line, without titles or numbers (get_inputs.get_context)."""
    return format_passages(row["passages"], numbered=False, with_titles=False)


def filter_prompt(question: str, context: str) -> str:
    return FILCO_TEMPLATE.format(question=question.strip(), context=context)


def filter_examples(rows: list[dict], filco: FilCoConfig) -> list[dict]:
    """Prompt-completion examples of M_ctx: FilCo's prompt over a row's passages → its silver context."""
    examples = []
    for row in rows:
        silver = silver_context(row, filco.criterion, filco.lexical_threshold)
        if filco.require_silver and not silver:
            continue
        examples.append({"id": row["id"], "silver": silver,
                         "prompt": chat_messages(filter_prompt(row["question"], filter_context(row))),
                         "completion": [{"role": "assistant", "content": silver}]})
    return examples


def training_examples(cfg: Profile, tokenizer) -> tuple[list[dict], int]:
    """The filter's examples from the profile's training splits that fit `max_length`, and how many were dropped."""
    filco = cfg.filco
    examples = []
    for dataset in filco.datasets:
        rows = read_contexts(layout.contexts_path(cfg, dataset, filco.split))
        examples += filter_examples(sample_rows(rows, filco.max_train_questions, cfg.seed), filco)
    return fitting_examples(examples, tokenizer, filco.max_length)


def filco_dir(profile: str) -> Path:
    """data/<profile>/baselines/filco: silver.jsonl and the run directory filter/ (repro.train.lora.runner's layout)."""
    return layout.profile_dir(profile) / "baselines" / "filco"


def filter_adapter(cfg: Profile) -> Path:
    """The trained filter's LoRA adapter of a profile."""
    path = filco_dir(cfg.name) / "filter" / "adapter"
    if not (path / "adapter_model.safetensors").exists():
        raise FileNotFoundError(f"{path}: no FilCo filter yet (run the filco_train stage)")
    return path


def train_filco(cfg: Profile, root: str | Path | None = None, *, progress: bool = True) -> Path:
    """Build the silver contexts and fine-tune (or reuse, or resume) the LoRA filter; returns the adapter (the stage's
    directory with `filco: null`, which trains nothing and records "not requested" in requested.json)."""
    filco = cfg.filco
    root = Path(root) if root is not None else filco_dir(cfg.name)
    write_json(root / layout.REQUESTED, {"requested": filco is not None})  # the stage's output exists either way
    if filco is None:
        print(f"profiles.{cfg.name}.filco is null: FilCo is not requested", flush=True)
        return root
    model = resolve(cfg.models.extractor, cfg.name)
    examples, dropped = training_examples(cfg, load_tokenizer(model))
    if not examples:
        raise ValueError(f"no FilCo training example (criterion {filco.criterion}, require_silver "
                         f"{filco.require_silver}) fits filco.max_length={filco.max_length}")
    write_jsonl(root / "silver.jsonl", [{"id": e["id"], "silver": e["silver"]} for e in examples])
    sft_examples = [{"prompt": e["prompt"], "completion": e["completion"]} for e in examples]
    config = {"extractor": cfg.models.extractor, "model": model_fingerprint(model), "dtype": cfg.models.dtype,
              "seed": cfg.seed, "filco": dataclasses.asdict(filco), "examples": fingerprint(sft_examples),
              "n_examples": len(examples), "dropped_too_long": dropped}
    return train_lora(cfg, [LoRARun("filco", "sft", model, sft_examples, root / "filter", config)], progress)[0]


class FilCoFilter(PromptedRefiner):
    """The trained filter M_ctx: FilCo's prompt over the passage texts; its whole (greedy) output is the evidence."""

    name, template = "filco", FILCO_TEMPLATE

    def prompt(self, question: str, passages: str) -> str:
        return filter_prompt(question, passages)

    def document(self, row: dict) -> str:
        return filter_context(row)


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> FilCoFilter:
    """The registry's builder (repro.registry): models.extractor with the filter adapter the filco_train stage wrote;
    the adapter's fingerprint is part of the refiner's model id, hence of its configuration."""
    generator, model_id = pool.get(resolve(cfg.models.extractor, cfg.name), str(filter_adapter(cfg)))
    return FilCoFilter(generator, model_id, params)
