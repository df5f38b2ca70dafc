"""SEER as a refiner of the evaluation runner: Zhao, Li, Zhong, Hu, Chen, Hu and Zhang (2024a), "SEER: Self-Aligned
Evidence Extraction for Retrieval-Augmented Generation", EMNLP 2024, pp. 3027-3041 (arXiv:2410.11315).

SEER turns a vanilla model into an evidence extractor in three stages, reproduced here on models.extractor:
1. Evidence extraction: M candidate evidences are sampled per training question from the base extractor
   (seeded sampling through repro.generation) and near-duplicates are removed (`deduplicate`).
2. Expert assessment of each candidate e for (question q, answer a, passages P), each score in [0, 1]:
   - `faithfulness`: the share of e's words found in P (stand-in for SEER's AlignScore expert, D72);
   - `helpfulness`: σ(log p_G(a | q, e) - log p_G(a | q)), the answer gain of the QA generator M_G, with
     length-normalised log-likelihoods under Tables 11/12 (D72);
   - `conciseness`: the cosine similarity of e to the full answer "q a" (sentence encoder), or 1 - L_e / L_P
     (`seer.conciseness`, D73);
   combined by CoV-weighting over the whole candidate pool (`cov_weights`, D74).
3. Self-alignment: SEER's listwise "lambda preference optimisation" is replaced by DPO (TRL's DPOTrainer with a
   LoRA adapter), on pairs of the best candidate against the worst ones (`preference_pairs`, D76).
At evaluation the aligned extractor's greedy output is the evidence (`SEERExtractor`).

    adapter = train_seer(cfg)             # data/<profile>/baselines/seer/extractor/adapter/
    python -m repro.stages.seer_train --profile tiny

data/<profile>/baselines/seer/ holds candidates.jsonl (resumable, chunk by chunk, repro.evaluation.records),
weights.json, pairs.jsonl and the DPO run directory extractor/ (repro.train.lora.runner's layout). SEER's own
extraction prompt is not available offline; `SEER_TEMPLATE` is ours (D71).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from repro.assets import resolve
from repro.config import Profile, SEERConfig
from repro.data import layout
from repro.data.answers import answer_in_passages
from repro.data.qa import read_contexts
from repro.data.splits import sample_rows
from repro.evaluation.answering import qa_adapter
from repro.evaluation.records import RecordFile
from repro.evaluation.refiners import PromptedRefiner
from repro.formulas.metrics import normalize_answer
from repro.formulas.prompts import chat_messages, passages_document, qa_messages
from repro.generation import GenerationParams, Generator, Prompt
from repro.generation.pool import ModelPool
from repro.generation.prompting import encode, load_tokenizer
from repro.generation.transformers_backend import TransformersGenerator
from repro.io import fingerprint, model_fingerprint, write_json, write_jsonl
from repro.retrieval.encoders import TextEncoder
from repro.train.lora.runner import LoRARun, example_length, train_lora

# D71: SEER's extraction prompt is not public offline; ours asks for the three properties its experts reward.
SEER_TEMPLATE = (
    "[Instruction]\n"
    "You are a helpful assistant. Your task is:\n"
    "Read the given question and passages, and extract the evidence from the passages that helps answer the "
    "question. The evidence must be faithful to the passages, helpful for answering the question, and concise.\n"
    "Question: {question}\n"
    "Passages: {passages}\n"
    "Evidence:"
)
CRITERIA = ("faithfulness", "helpfulness", "conciseness")
CANDIDATE_FIELDS = ("id", "question", "golden_answers", "candidates")


def seer_prompt(question: str, passages: str) -> str:
    return SEER_TEMPLATE.format(question=question.strip(), passages=passages)


def words(text: str) -> list[str]:
    """SQuAD-normalised words (lower-case, no punctuation or articles)."""
    return normalize_answer(text).split()


def unigram_jaccard(a: str, b: str) -> float:
    """|A ∩ B| / |A ∪ B| of the two texts' word sets (0 when both are empty)."""
    sa, sb = set(words(a)), set(words(b))
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def deduplicate(candidates: Sequence[str], threshold: float) -> list[str]:
    """The stripped candidates in sampling order, without empty ones and without those whose word-set Jaccard
    similarity to an earlier kept one reaches `threshold`."""
    kept: list[str] = []
    for text in (c.strip() for c in candidates):
        if words(text) and all(unigram_jaccard(text, k) < threshold for k in kept):
            kept.append(text)
    return kept


def faithfulness(evidence: str, passages: str) -> float:
    """The share of the evidence's words that occur in the passages (0 for an evidence without words)."""
    evidence_words, passage_words = words(evidence), set(words(passages))
    return sum(w in passage_words for w in evidence_words) / len(evidence_words) if evidence_words else 0.0


def helpfulness(log_likelihood_with: float, log_likelihood_without: float) -> float:
    """σ of the answer's log-likelihood gain from the evidence: 0.5 when the evidence changes nothing."""
    return 1.0 / (1.0 + math.exp(log_likelihood_without - log_likelihood_with))


def conciseness_by_similarity(evidence_vector: np.ndarray, full_answer_vector: np.ndarray) -> float:
    """Cosine similarity of the (L2-normalised) evidence and full-answer embeddings, clipped to [0, 1]."""
    return float(np.clip(np.dot(evidence_vector, full_answer_vector), 0.0, 1.0))


def conciseness_by_length(evidence: str, passages: str) -> float:
    """1 - L_e / L_P in whitespace words, clipped to [0, 1]."""
    return max(0.0, 1.0 - len(evidence.split()) / max(len(passages.split()), 1))


def full_answer(question: str, answer: str) -> str:
    """The text the conciseness expert compares an evidence with: the question followed by its answer."""
    return f"{question.strip()} {answer.strip()}"


def cov_weights(scores: np.ndarray, smoothing: float = 0.0) -> np.ndarray:
    """CoV-weighting of the criteria (columns of `scores`, one row per candidate): weight_k ∝ σ_k / μ_k +
    `smoothing` (population std; a criterion with mean 0 has CoV 0), uniform when every weight is 0."""
    scores = np.asarray(scores, dtype=float)
    mean, std = scores.mean(axis=0), scores.std(axis=0)
    cov = np.divide(std, mean, out=np.zeros_like(mean), where=mean > 0) + smoothing
    return cov / cov.sum() if cov.sum() > 0 else np.full(len(cov), 1.0 / len(cov))


def preference_pairs(candidates: Sequence[str], overall: Sequence[float], min_margin: float = 0.0,
                     max_pairs: int = 1) -> list[tuple[str, str]]:
    """(chosen, rejected) pairs of one question: its best candidate against the worst ones, worst first, as long
    as the score gap exceeds `min_margin`; ties are broken by sampling order."""
    order = sorted(range(len(candidates)), key=lambda i: (-overall[i], i))
    if len(order) < 2:
        return []
    best = order[0]
    rejected = [i for i in reversed(order[1:]) if overall[best] - overall[i] > min_margin]
    return [(candidates[best], candidates[i]) for i in rejected[:max_pairs]]


@torch.inference_mode()
def completion_log_likelihoods(generator: TransformersGenerator, prompts: Sequence[Prompt],
                               completions: Sequence[str], batch_size: int = 8) -> list[float]:
    """Mean log-probability per token of each completion as the model's reply to its prompt."""
    tokenizer, model = generator.tokenizer, generator.model
    rows = []
    for prompt, completion in zip(prompts, completions, strict=True):
        completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
        if not completion_ids:
            raise ValueError(f"completion {completion!r} encodes to no tokens")
        rows.append((encode(tokenizer, prompt), completion_ids))
    scores = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        width = max(len(p) + len(c) for p, c in batch)
        # right padding: the real tokens keep positions 0..n-1 without position ids
        input_ids = torch.tensor([p + c + [generator.pad_id] * (width - len(p) - len(c)) for p, c in batch])
        attention = torch.tensor([[1] * (len(p) + len(c)) + [0] * (width - len(p) - len(c)) for p, c in batch])
        logits = model(input_ids=input_ids.to(generator.device), attention_mask=attention.to(generator.device)).logits
        for k, (p, c) in enumerate(batch):
            predicted = logits[k, len(p) - 1 : len(p) + len(c) - 1].float().log_softmax(-1)
            scores.append(predicted.gather(-1, torch.tensor(c, device=predicted.device)[:, None]).mean().item())
    return scores


class Assessor:
    """SEER's three experts on the candidates of one question: the QA generator (helpfulness) and, for the
    similarity variant of conciseness, a sentence encoder."""

    def __init__(self, answerer: TransformersGenerator, encoder: TextEncoder | None, seer: SEERConfig):
        if seer.conciseness == "similarity" and encoder is None:
            raise ValueError("conciseness by similarity needs a sentence encoder")
        self.answerer, self.encoder, self.seer = answerer, encoder, seer

    def assess(self, row: dict, candidates: list[str]) -> list[dict]:
        """One {"evidence", "faithfulness", "helpfulness", "conciseness"} per candidate."""
        if not candidates:
            return []
        passages, question, answer = passages_document(row), row["question"], row["golden_answers"][0]
        prompts = [qa_messages(question, None)] + [qa_messages(question, e) for e in candidates]
        closed_book, *with_evidence = completion_log_likelihoods(
            self.answerer, prompts, [answer] * len(prompts), self.seer.batch_size)
        if self.seer.conciseness == "similarity":
            vectors = self.encoder.encode([full_answer(question, answer), *candidates], progress=False)
            concise = [conciseness_by_similarity(v, vectors[0]) for v in vectors[1:]]
        else:
            concise = [conciseness_by_length(e, passages) for e in candidates]
        return [{"evidence": e, "faithfulness": faithfulness(e, passages), "helpfulness": helpfulness(ll, closed_book),
                 "conciseness": c} for e, ll, c in zip(candidates, with_evidence, concise, strict=True)]


def sampling_params(seer: SEERConfig, seed: int) -> GenerationParams:
    return GenerationParams(max_new_tokens=seer.max_new_tokens, do_sample=True, temperature=seer.temperature,
                            top_p=seer.top_p, seed=seed, n=seer.num_samples, batch_size=seer.batch_size)


def scored_candidates(rows: Sequence[dict], sampler: Generator, assessor: Assessor, params: GenerationParams,
                      store: RecordFile, chunk_size: int, progress: bool = True) -> list[dict]:
    """Stages 1-2 for every row: sampled, deduplicated and assessed candidates, one record per question, written
    chunk by chunk to `store` (a rerun of the same configuration resumes or reuses)."""
    if (finished := store.finished([row["id"] for row in rows])) is not None:
        return finished
    done = store.resume()
    todo = [row for row in rows if row["id"] not in done]
    seer = assessor.seer
    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc="SEER candidates", unit="q",
              disable=not progress) as bar:
        for start in range(0, len(todo), chunk_size):
            chunk = todo[start : start + chunk_size]
            prompts = [chat_messages(seer_prompt(row["question"], passages_document(row))) for row in chunk]
            samples = sampler.generate(prompts, params)
            records = []
            for k, row in enumerate(chunk):
                candidates = deduplicate(samples[k * params.n : (k + 1) * params.n], seer.dedup_threshold)
                records.append({"id": row["id"], "question": row["question"], "golden_answers": row["golden_answers"],
                                "samples": params.n, "candidates": assessor.assess(row, candidates)})
            store.append(records)
            done.update((r["id"], r) for r in records)
            bar.update(len(chunk))
    records = [done[row["id"]] for row in rows]
    store.finish(records)
    return records


def score_matrix(records: Sequence[dict]) -> np.ndarray:
    """The criteria scores of every candidate of every record, one row per candidate."""
    return np.array([[c[k] for k in CRITERIA] for r in records for c in r["candidates"]], dtype=float).reshape(-1, 3)


def dpo_examples(records: Sequence[dict], rows_by_id: dict[str, dict], weights: np.ndarray,
                 seer: SEERConfig) -> list[dict]:
    """Conversational preference examples (SEER's prompt → chosen / rejected evidence) of every record."""
    examples = []
    for record in records:
        candidates = [c["evidence"] for c in record["candidates"]]
        overall = [float(np.dot([c[k] for k in CRITERIA], weights)) for c in record["candidates"]]
        row = rows_by_id[record["id"]]
        prompt = chat_messages(seer_prompt(row["question"], passages_document(row)))
        for chosen, rejected in preference_pairs(candidates, overall, seer.min_margin, seer.max_pairs_per_question):
            examples.append({"id": record["id"], "prompt": prompt,
                             "chosen": [{"role": "assistant", "content": chosen}],
                             "rejected": [{"role": "assistant", "content": rejected}]})
    return examples


def pair_length(example: dict, tokenizer) -> int:
    """Tokens of the prompt with its longer completion, chat template applied."""
    return max(example_length({"prompt": example["prompt"], "completion": example[side]}, tokenizer)
               for side in ("chosen", "rejected"))


def training_rows(cfg: Profile) -> list[dict]:
    """The contexts rows SEER learns from: a seeded subset of each dataset's split (answerable ones by default)."""
    seer, rows = cfg.seer, []
    for dataset in seer.datasets:
        split = read_contexts(layout.contexts_path(cfg, dataset, seer.split))
        if seer.require_answer_in_passages:
            split = [row for row in split if answer_in_passages(row)]
        rows += sample_rows(split, seer.max_train_questions, cfg.seed)
    return rows


def seer_dir(profile: str) -> Path:
    """data/<profile>/baselines/seer: candidates, weights, pairs and the DPO run directory extractor/."""
    return layout.profile_dir(profile) / "baselines" / "seer"


def extractor_adapter(cfg: Profile) -> Path:
    """The SEER-aligned extractor's LoRA adapter of a profile."""
    path = seer_dir(cfg.name) / "extractor" / "adapter"
    if not (path / "adapter_model.safetensors").exists():
        raise FileNotFoundError(f"{path}: no SEER extractor yet (run the seer_train stage)")
    return path


def candidate_pools(cfg: Profile) -> tuple[ModelPool, ModelPool]:
    """(the sampler's pool, the answerer's). The sampler runs where the studies generate: `evaluation.backend` with
    `evaluation.options` (vLLM on the paper profiles, over every GPU with `data_parallel`). The answerer's
    log-likelihoods read its logits, so it stays on transformers, in the same pool when that is the studies' backend
    (the CPU profiles: one pool, as before)."""
    ev = cfg.evaluation
    sampling = ModelPool(ev.backend, cfg.models.inference, progress=False, options=ev.options)
    if ev.backend == "transformers":
        return sampling, sampling
    return sampling, ModelPool("transformers", cfg.models.inference, progress=False)


def candidate_records(cfg: Profile, rows: Sequence[dict], path: Path, progress: bool = True) -> list[dict]:
    """Stages 1-2 on `rows` with the profile's models: the sampler (models.extractor), the QA generator (with its
    LoRA adapter when the evaluation answers with it) and the sentence encoder; resumable in `path`. Their engines
    end when it returns, before the DPO run needs the GPUs."""
    seer = cfg.seer
    sampling, scoring = candidate_pools(cfg)
    with sampling, scoring:
        sampler, sampler_id = sampling.get(resolve(cfg.models.extractor, cfg.name))
        adapter = qa_adapter(cfg)
        answerer, answerer_id = scoring.get(resolve(cfg.models.generator, cfg.name), str(adapter) if adapter else None)
        encoder_ref = resolve(seer.similarity_model, cfg.name) if seer.conciseness == "similarity" else None
        assessor = Assessor(answerer, TextEncoder(encoder_ref, "mean", normalize=True) if encoder_ref else None, seer)
        params = sampling_params(seer, cfg.seed)
        config = {"rows": fingerprint(list(rows)), "sampler": sampler_id, "answerer": answerer_id,
                  "encoder": model_fingerprint(encoder_ref) if encoder_ref else None, "template": SEER_TEMPLATE,
                  "sampling": dataclasses.asdict(params),
                  "assessment": {k: getattr(seer, k) for k in ("dedup_threshold", "conciseness")}}
        if sampling.backend != "transformers":  # other samples; the CPU profiles' fingerprint stays as it was
            config["sampler_backend"] = sampling.backend
        store = RecordFile(path, config, required=CANDIDATE_FIELDS)
        return scored_candidates(rows, sampler, assessor, params, store, seer.chunk_size, progress)


def train_seer(cfg: Profile, root: str | Path | None = None, *, progress: bool = True) -> Path:
    """SEER's three stages for `cfg` (each reused or resumed when its configuration is unchanged); returns the
    aligned extractor's adapter (the stage's directory with `seer: null`, which trains nothing and records "not
    requested" in requested.json)."""
    seer = cfg.seer
    root = Path(root) if root is not None else seer_dir(cfg.name)
    write_json(root / layout.REQUESTED, {"requested": seer is not None})  # the stage's output exists either way
    if seer is None:
        print(f"profiles.{cfg.name}.seer is null: SEER is not requested", flush=True)
        return root
    rows = training_rows(cfg)
    records = candidate_records(cfg, rows, root / "candidates.jsonl", progress)
    scores = score_matrix(records)
    if not len(scores):
        raise ValueError(f"profile {cfg.name}: no SEER candidate from {len(rows)} training questions")
    weights = cov_weights(scores, seer.cov_smoothing)
    write_json(root / "weights.json", {"criteria": list(CRITERIA), "weights": weights.tolist(),
                                       "mean": scores.mean(axis=0).tolist(), "std": scores.std(axis=0).tolist(),
                                       "candidates": len(scores), "questions": len(records)})
    extractor = resolve(cfg.models.extractor, cfg.name)
    tokenizer = load_tokenizer(extractor)
    examples = dpo_examples(records, {row["id"]: row for row in rows}, weights, seer)
    fitting = [e for e in examples if pair_length(e, tokenizer) <= seer.max_length]
    write_jsonl(root / "pairs.jsonl", fitting)
    if not fitting:
        raise ValueError(f"no SEER preference pair ({len(examples)} built, none within seer.max_length="
                         f"{seer.max_length}); sample more candidates or lower seer.min_margin")
    pairs = [{k: e[k] for k in ("prompt", "chosen", "rejected")} for e in fitting]
    config = {"extractor": cfg.models.extractor, "model": model_fingerprint(extractor), "dtype": cfg.models.dtype,
              "seed": cfg.seed, "seer": dataclasses.asdict(seer), "pairs": fingerprint(pairs),
              "n_pairs": len(pairs), "dropped_too_long": len(examples) - len(fitting)}
    return align_with_dpo(cfg, extractor, pairs, root / "extractor", config, progress)


def align_with_dpo(cfg: Profile, model: str, pairs: list[dict], run: Path, config: dict, progress: bool = True) -> Path:
    """Stage 3: DPO of a LoRA adapter on `model` over preference `pairs` ({"prompt", "chosen", "rejected"}) in run
    directory `run`, in the worker processes of `seer.accelerate_config` (reused or resumed,
    repro.train.lora.runner.train_lora); the reference is the adapter-free model."""
    return train_lora(cfg, [LoRARun("seer", "dpo", model, pairs, run, config)], progress)[0]


class SEERExtractor(PromptedRefiner):
    """The self-aligned extractor: SEER's prompt over the formatted passages; its (greedy) output is the evidence."""

    name, template = "seer", SEER_TEMPLATE

    def prompt(self, question: str, passages: str) -> str:
        return seer_prompt(question, passages)


def build(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> SEERExtractor:
    """The registry's builder (repro.registry): models.extractor with the DPO-aligned adapter the seer_train stage
    wrote; the adapter's fingerprint is part of the refiner's model id, hence of its configuration."""
    generator, model_id = pool.get(resolve(cfg.models.extractor, cfg.name), str(extractor_adapter(cfg)))
    return SEERExtractor(generator, model_id, params)
