"""Where each stage writes the artefacts of a profile: data/<profile>/ (DVC outputs) and results/<profile>/<stage>/.

The data stage:

    corpus/passages.jsonl, corpus/corpus.json       the passages (embedded, or a slice) and the corpus manifest
    qa/<dataset>/<split>.jsonl                      FlashRAG-format questions
    index/<retriever>/                              FAISS or BM25 index + manifest.json
    retrieval/<retriever>/<dataset>/<split>.jsonl   top-k passages per question (+ .manifest.json)
    retrieval/distractor/<dataset>/<split>.jsonl    shipped paragraphs of distractor-setting questions
    noise/<dataset>/<split>/k<k>.jsonl              retrieved + k irrelevant passages (Figure 5)

The stages after it, where a path is read by more than one layer (a study's own files are named in its
module: `repro.studies.ar_study.paths`, `repro.baselines.filco.filco_dir`, `repro.baselines.seer.seer_dir`):

    train/<name>/                                   a GRPO run (repro.train.grpo.run.TrainRun); `eviomni` is the main
                                                    one, `ablation/<subset>` the Table 3 runs, `reward_designs/<row>`
                                                    the reward-design study's
    train/format_warmup/                            the format warm-up of the starting policy (repro.train.grpo.warmup)
    qa_generator/adapter/                           the LoRA QA generator (repro.stages.qa_generator)
    predictions/<study>/<dataset>/<method>.jsonl    per-item records (+ .manifest.json, + .partial.jsonl while
                                                    running); main_comparison/reading_check/<dataset>/ holds Zero
                                                    and Full on the questions whose passages hold an answer (D91)

Per-item records live under data/ (not results/): they are the intermediate every table and significance test of
a study reads, and must survive a rerun of the notebook that renders them. A notebook stage writes its executed copy,
tables and figures to results/<profile>/<stage>/ (`results_dir`).

A "contexts" row is a QA row plus `passages`: [{"id", "contents", "score"}...] in the order given to
the reader, the single format every downstream study consumes.
"""

from __future__ import annotations

from pathlib import Path

from repro.config import Profile

DATA_DIR = Path("data")
RESULTS_DIR = Path("results")
DISTRACTOR = "distractor"
REQUESTED = "requested.json"  # a baseline's training stage: {"requested": false} where its section is null


def results_dir(profile: str, stage: str) -> Path:
    return RESULTS_DIR / profile / stage


def profile_dir(profile: str) -> Path:
    return DATA_DIR / profile


def corpus_dir(profile: str) -> Path:
    return profile_dir(profile) / "corpus"


def qa_path(profile: str, dataset: str, split: str) -> Path:
    return profile_dir(profile) / "qa" / dataset / f"{split}.jsonl"


def index_dir(profile: str, retriever: str) -> Path:
    return profile_dir(profile) / "index" / retriever


def retrieval_path(profile: str, retriever: str, dataset: str, split: str) -> Path:
    return profile_dir(profile) / "retrieval" / retriever / dataset / f"{split}.jsonl"


def noise_path(profile: str, dataset: str, split: str, k: int) -> Path:
    return profile_dir(profile) / "noise" / dataset / split / f"k{k}.jsonl"


def contexts_path(cfg: Profile, dataset: str, split: str, retriever: str | None = None) -> Path:
    """The contexts file of (dataset, split): the shipped paragraphs in the distractor setting, else the
    top-k of `retriever` (default: the profile's default retriever)."""
    spec = next((d for d in cfg.data.datasets if d.name == dataset), None)
    if spec is None:
        raise KeyError(f"profile {cfg.name} has no dataset '{dataset}'")
    if spec.setting == "distractor":
        return retrieval_path(cfg.name, DISTRACTOR, dataset, split)
    return retrieval_path(cfg.name, retriever or cfg.retrieval.default, dataset, split)


def train_run_dir(profile: str, name: str = "eviomni") -> Path:
    """Where a profile's GRPO training run `name` lives (ablation runs use their own names)."""
    return profile_dir(profile) / "train" / name


def warmup_dir(profile: str) -> Path:
    return profile_dir(profile) / "train" / "format_warmup"


def qa_generator_dir(profile: str) -> Path:
    return profile_dir(profile) / "qa_generator"


def qa_adapter_dir(profile: str) -> Path:
    return qa_generator_dir(profile) / "adapter"


def predictions_path(profile: str, study: str, dataset: str, method: str) -> Path:
    return profile_dir(profile) / "predictions" / study / dataset / f"{method}.jsonl"
