"""How a profile builds the methods of the evaluation studies (rows of `repro.registry.METHODS`): refiners, the QA
generator and the models they share.

    refiner = build_refiner("recomp", cfg, pool, params)   # the row's `build`, after checking its settings
    answerer = build_answerer(cfg, pool)                    # models.generator with the QA generator's adapter

The prompted methods run `extractor_model`: CoT and prompted extraction the untrained models.extractor, `eviomni` the
extractor the GRPO stage selected, `eviomni_released` models.released_extractor (with `eviomni: released_extractor`
in params.yaml it replaces `eviomni` in every study, D132).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence

from repro.assets import resolve
from repro.config import Profile
from repro.data import layout
from repro.evaluation.answering import Answerer, qa_adapter
from repro.evaluation.refiners import ChainOfThought, ClosedBook, FullPassages, RationalExtractor, Refiner
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.registry import METHODS, missing_settings
from repro.train.grpo.logs import TrainRun


def extractor_model(key: str, cfg: Profile) -> str:
    """The model a prompted method runs: a local directory or hub id."""
    if key in ("cot", "prompted_extractor"):
        return resolve(cfg.models.extractor, cfg.name)
    if key == "eviomni":
        extractor = TrainRun(layout.train_run_dir(cfg.name)).extractor
        if not extractor.is_dir():
            raise FileNotFoundError(f"{extractor}: no trained extractor yet; run the GRPO training stage, or set "
                                    f"`eviomni: released_extractor` in params.yaml to evaluate "
                                    f"models.released_extractor without training")
        return str(extractor)
    if key == "eviomni_released":
        if cfg.models.released_extractor is None:
            raise ValueError(f"profile {cfg.name} names no models.released_extractor")
        return resolve(cfg.models.released_extractor, cfg.name)
    raise ValueError(f"method {key!r} runs no model; known methods: {list(METHODS)}")


def build_refiner(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """The refiner of method `key`, from its registry row's `build` (repro.registry); prompted ones decode with
    `params` (greedy) on the `pool`'s generators."""
    method = METHODS[key]
    if missing := missing_settings(cfg, method):
        ready = [k for k, m in METHODS.items() if m.settings == method.settings and not missing_settings(cfg, m)]
        raise ValueError(f"profile {cfg.name}: method {key} needs params.yaml: profiles.{cfg.name}.{missing}"
                         + (f" (or list {' or '.join(ready)}, which this profile can build)" if ready else ""))
    module, _, function = method.build.partition(":")
    return getattr(importlib.import_module(module), function)(key, cfg, pool, params)


def closed_book(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """Zero: no passages (Table 12)."""
    return ClosedBook()


def full_passages(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """Full: every top-k passage."""
    return FullPassages()


def prompted_refiner(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """CoT (Table 13) or a rational extractor (Table 14) on the model `extractor_model` names for `key`; a released
    checkpoint decodes as `released_check` says (its stop strings and budget, D216)."""
    model = extractor_model(key, cfg)
    generator, model_id = pool.get(model)
    if not METHODS[key].tagged:
        return ChainOfThought(generator, model_id, params)
    if cfg.models.released_extractor and model == resolve(cfg.models.released_extractor, cfg.name) \
            and cfg.released_check is not None:
        return RationalExtractor(generator, model_id, *released_decoding(cfg, params))
    return RationalExtractor(generator, model_id, params)


def released_decoding(cfg: Profile, params: GenerationParams) -> tuple[GenerationParams, tuple[str, ...]]:
    """(params, stop strings) of a released checkpoint: `released_check`'s stop and budget over `params`."""
    check = cfg.released_check
    budget = check.max_new_tokens or cfg.evaluation.evidence_max_new_tokens
    return dataclasses.replace(params, max_new_tokens=budget), tuple(check.stop)


def adapter_models(cfg: Profile, methods: Sequence[str], answerer: bool = True) -> frozenset[str]:
    """The base models on which `methods` (and, with `answerer`, the QA generator) serve LoRA adapters: the engines
    a study's pool starts with LoRA slots (`ModelPool(adapters_on=...)`)."""
    models = {resolve(cfg.models.extractor, cfg.name)} if any(METHODS[m].adapter for m in methods) else set()
    if answerer and cfg.evaluation is not None and cfg.evaluation.qa_adapter:
        models.add(resolve(cfg.models.generator, cfg.name))
    return frozenset(models)


def build_answerer(cfg: Profile, pool: ModelPool) -> Answerer:
    """The QA generator of the profile: models.generator with the LoRA adapter (or without, see `qa_adapter`)."""
    adapter = qa_adapter(cfg)
    generator, model_id = pool.get(resolve(cfg.models.generator, cfg.name), str(adapter) if adapter else None)
    ev = cfg.evaluation
    return Answerer(generator, model_id, GenerationParams(max_new_tokens=ev.answer_max_new_tokens,
                                                          batch_size=ev.batch_size))
