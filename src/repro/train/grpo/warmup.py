"""The policy GRPO starts from, and the format warm-up that makes it on the CPU profiles (D90).

    policy = starting_policy(cfg)        # models.extractor, or data/<profile>/train/format_warmup/policy/
    python -m repro.stages.format_warmup --profile tiny

The paper starts GRPO from Qwen2.5-1.5B/7B-Instruct, which follow Table 14's instructions well enough for the
format reward to vary within a group. SmolLM2-135M-Instruct does not: of 48 rollouts sampled from six training
prompts, even with `<reason>` prefilled, none closed `</reason>` and opened `<extract>` (D90). Every rollout then
scores R^fmt = 0, and GRPO has no signal to learn the format from. `train.format_warmup` stands in for the
larger models' instruction following with a short LoRA SFT, like DeepSeek-R1's cold start. Its targets teach the
format only (`targets: format_only`, D141): they depend on the question id and the passages, never on the golden
answers,

    <reason>Passage {n} ({title}) has the sentence I copy as evidence.</reason>
    <extract>{sentence of passage n, drawn uniformly from all the passages' sentences by question id}</extract>
    <answer>{the base model's own greedy answer after this extract (`answers: model`, D189)}</answer>

so which passage, sentence or span holds the answer is left to the rewards, and any later gain in evidence
answer-recall belongs to GRPO. The answer is what `models.extractor` itself writes after `…</extract><answer>`, so
the warm-up teaches the tags without teaching the reader (the same weights write o_r and o_e) to answer otherwise
than it does; `answers: span` keeps D141's former answer, a random span of one to three words of the sentence.
`targets: string_inclusion` keeps the former targets (the AR study's heuristic
teacher: the first sentence holding a golden answer, and that answer) on the questions that have one (D142).
The adapter is merged into a plain model directory, `policy/`, which GRPO samples from and keeps as its KL
reference, exactly (repro.generation.adapters.exactly_merged_model): its bytes depend on the adapter and base alone,
so a control arm on another CPU rebuilds the same start from the recorded adapter (`format_warmup.adapter`, D246).
The paper profiles set `format_warmup: null`: the policy is `models.extractor`, exactly as in the paper.

The run directory holds the LoRA run of `repro.train.lora.runner.fit_in_run_dir` (checkpoints/, adapter/,
run_config.json, train_log.jsonl), the merged `policy/`, and `policy.json` naming the starting policy (written for every
profile, so the pipeline stage has one output either way).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import string
import tempfile
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from repro.assets import resolve
from repro.config import Profile, WarmupTargets
from repro.data import layout
from repro.data.answers import first_answer_sentence
from repro.data.qa import read_contexts
from repro.data.sentences import keyed_rng, PassageSentence, random_sentence
from repro.data.splits import sample_rows
from repro.formulas import tags
from repro.formulas.prompts import render_chat
from repro.generation import GenerationParams, make_generator
from repro.generation.adapters import merge_adapter
from repro.generation.prompting import load_tokenizer
from repro.io import fingerprint, model_fingerprint, parts_index, read_parted
from repro.train.grpo.data import extraction_prompt
from repro.train.lora.runner import fit_lora_sft, fitting_examples, sft_args


ANSWER_WORDS = (1, 3)  # the span answer's length in words, drawn uniformly (capped by the sentence)
ANSWER_BATCH_SIZE = 16  # prompts per transformers batch for the base model's answers (as the held-out scoring)


def format_only_answer(sentence: str, key: str, seed: int) -> str:
    """A span of ANSWER_WORDS words of `sentence` at a position drawn by a generator keyed on (seed, key), with the
    punctuation at its ends removed (kept when nothing else is left)."""
    words = sentence.split()
    rng = keyed_rng(key, seed, "answer")
    length = min(rng.randint(*ANSWER_WORDS), len(words))
    start = rng.randrange(len(words) - length + 1)
    span = " ".join(words[start : start + length])
    return span.strip(string.punctuation + " ") or span


def format_only_prefix(row: dict, seed: int) -> str | None:
    """The format-only rollout up to its answer, every part blind to the golden answers (D141): a rationale naming
    its passage in the String Inclusion template's words, a passage sentence drawn uniformly by question id
    (`random_sentence`) as the extract, and `<answer>`; None if the passages hold no sentence."""
    drawn = random_sentence(row["passages"], str(row["id"]), seed)
    return None if drawn is None else _prefix(drawn)


def _prefix(drawn: PassageSentence) -> str:
    reason = f"Passage {drawn.passage} ({drawn.title}) has the sentence I copy as evidence."
    return f"<reason>{reason}</reason>\n<extract>{drawn.sentence}</extract>\n<answer>"


def format_only_target(row: dict, seed: int, answer: str | None = None) -> str | None:
    """`format_only_prefix` closed by `answer` (the base model's, `model_answers`), or without one by a span of the
    extract (`format_only_answer`); None if the passages hold no sentence."""
    drawn = random_sentence(row["passages"], str(row["id"]), seed)
    if drawn is None:
        return None
    answer = answer or format_only_answer(drawn.sentence, str(row["id"]), seed)
    return f"{_prefix(drawn)}{answer}</answer>"


def string_inclusion_target(row: dict) -> str | None:
    """The String Inclusion rollout of a contexts row, or None if no passage sentence holds a golden answer."""
    found = first_answer_sentence(row["passages"], row["golden_answers"])
    if found is None:
        return None
    reason = f"Passage {found.passage} ({found.title}) has the sentence that answers the question."
    return f"<reason>{reason}</reason>\n<extract>{found.sentence}</extract>\n<answer>{found.answer}</answer>"


def warmup_target(row: dict, targets: WarmupTargets, seed: int) -> str | None:
    """The warm-up rollout of a contexts row under `train.format_warmup.targets` (format_only with D141's span
    answer), or None if it has none."""
    if targets == "format_only":
        return format_only_target(row, seed)
    if targets == "string_inclusion":
        return string_inclusion_target(row)
    raise ValueError(f"train.format_warmup.targets: unknown {targets!r}; "
                     f"choose one of {list(typing.get_args(WarmupTargets))}")


def model_answers(model: str, prompts: Sequence[list[dict]], prefixes: Sequence[str], dtype: str,
                  max_new_tokens: int, progress: bool = True) -> list[str]:
    """`model`'s greedy answer after each rollout prefix (the prompt's turns, then the prefix up to `<answer>`), on
    the transformers engine: its text up to `</answer>`, a line break or another tag; "" when that is blank."""
    tokenizer = load_tokenizer(model)
    texts = [render_chat(tokenizer, messages, prefix) for messages, prefix in zip(prompts, prefixes)]
    with make_generator("transformers", model, dtype=dtype, progress=progress) as generator:
        outputs = generator.generate(texts, GenerationParams(max_new_tokens=max_new_tokens, stop=("</answer>",),
                                                             batch_size=ANSWER_BATCH_SIZE))
    return [re.split(r"[\n<]", tags.extract_answer(text), maxsplit=1)[0].strip() for text in outputs]


AnswerWriter = Callable[[Sequence[list[dict]], Sequence[str]], list[str]]  # (prompts, rollout prefixes) -> answers


def warmup_examples(rows: list[dict], max_questions: int, seed: int, targets: WarmupTargets = "format_only",
                    answers: AnswerWriter | None = None) -> list[dict]:
    """Prompt-completion examples (GRPO's own prompt → warm-up rollout) for a seeded sample of the rows that have a
    target: with format_only targets every row whose passages hold a sentence, so the choice of questions is blind
    to the golden answers too (D142). With `answers` (format_only only), each answer is what it writes after the
    target's prefix, or the span of D141 where it writes nothing (D189); it sees the prompt and the prefix only."""
    by_id = {row["id"]: target for row in rows if (target := warmup_target(row, targets, seed)) is not None}
    kept = sample_rows([row for row in rows if row["id"] in by_id], max_questions, seed)
    prompts = [extraction_prompt(row) for row in kept]
    if answers is not None:
        if targets != "format_only":
            raise ValueError(f"train.format_warmup.answers applies to format_only targets, not {targets!r}")
        written = answers(prompts, [format_only_prefix(row, seed) for row in kept])
        by_id = {row["id"]: format_only_target(row, seed, answer) for row, answer in zip(kept, written)}
    return [{"prompt": prompt, "completion": [{"role": "assistant", "content": by_id[row["id"]]}]}
            for row, prompt in zip(kept, prompts)]


ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")  # what a LoRA adapter is merged from


@contextlib.contextmanager
def recorded_adapter(cfg: Profile, scratch: Path) -> Iterator[Path]:
    """`train.format_warmup.adapter`, checked to hold an adapter; a file of it kept in parts (the record in git,
    `repro.io.write_parts`) is joined, checked, into a directory under `scratch` that lives while the context does."""
    path = Path(cfg.train.format_warmup.adapter)
    for name in ADAPTER_FILES:
        if not (path / name).is_file() and not parts_index(path / name).is_file():
            raise FileNotFoundError(f"params.yaml: profiles.{cfg.name}.train.format_warmup.adapter: {path / name} "
                                    f"is missing (a recorded warm-up adapter is a directory holding {name}, whole or "
                                    f"in parts)")
    if all((path / name).is_file() for name in ADAPTER_FILES):
        yield path
        return
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="adapter.", dir=scratch) as joined:
        for name in ADAPTER_FILES:
            (Path(joined) / name).write_bytes(read_parted(path / name))
        yield Path(joined)


def warm_up_policy(cfg: Profile, rows: list[dict], root: Path, progress: bool = True) -> Path:
    """Fine-tune (or reuse, or resume) the format warm-up of `cfg` on contexts `rows` in `root`, or take the recorded
    adapter `train.format_warmup.adapter`; returns the policy directory it is merged into, exactly (the same bytes on
    every CPU, D246)."""
    warmup = cfg.train.format_warmup
    base = resolve(cfg.models.extractor, cfg.name)
    policy = root / "policy"
    if warmup.adapter is not None:
        if not (policy / "model.safetensors").exists():
            with recorded_adapter(cfg, root) as adapter:
                merge_adapter(base, adapter, policy, cfg.models.dtype, exact=True)
        return policy
    answers = None
    if warmup.targets == "format_only" and warmup.answers == "model":
        answers = functools.partial(model_answers, base, dtype=cfg.models.inference,
                                    max_new_tokens=cfg.train.max_answer_length, progress=progress)
    examples = warmup_examples(rows, warmup.max_train_questions, cfg.seed, warmup.targets, answers)
    examples, dropped = fitting_examples(examples, load_tokenizer(base), warmup.max_length)
    if not examples:
        raise ValueError(f"train.format_warmup: no {cfg.train.dataset}/{warmup.split} question has a "
                         f"{warmup.targets} target within max_length={warmup.max_length} tokens")
    config = {"extractor": cfg.models.extractor, "model": model_fingerprint(base), "dtype": cfg.models.dtype,
              "seed": cfg.seed, "dataset": cfg.train.dataset, "format_warmup": dataclasses.asdict(warmup),
              "examples": fingerprint(examples), "n_examples": len(examples), "dropped_too_long": dropped}
    adapter = fit_lora_sft(base, examples, sft_args(cfg, warmup, root / "checkpoints", progress), warmup, root, config)
    if not (policy / "model.safetensors").exists():
        merge_adapter(base, adapter, policy, cfg.models.dtype, exact=True)
    return policy


def starting_policy(cfg: Profile, root: str | Path | None = None, progress: bool = True) -> str:
    """The model GRPO starts from and regularises towards: `models.extractor`, or its format-warmed copy when
    `train.format_warmup` is set (trained here on first use, reused after)."""
    if cfg.train is None:
        raise ValueError(f"profile {cfg.name} has no train section")
    warmup = cfg.train.format_warmup
    if warmup is None:
        return resolve(cfg.models.extractor, cfg.name)
    rows = read_contexts(layout.contexts_path(cfg, cfg.train.dataset, warmup.split))
    root = Path(root) if root is not None else layout.warmup_dir(cfg.name)
    return str(warm_up_policy(cfg, rows, root, progress))
