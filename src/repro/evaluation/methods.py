"""The methods of Table 2 and how a profile builds them: refiners, the QA generator and the models they share.

A method key (params.yaml `evaluation.methods`, `latency.methods`) names a refiner and its model:

    zero                 Zero (WR): closed-book, Table 12
    full                 Full (WR): all top-k passages
    selective_context    SeleCtx (VAR): self-information pruning (repro.baselines.selective_context)
    llmlingua2           LLMLingua-2 (VAR) with a real checkpoint, baselines.llmlingua2.model
    llmlingua2_standin   the same code with baselines.llmlingua2.standin, an UNTRAINED head (embedded default)
    recomp               RECOMP extractive (VAR): top-n sentences by dual-encoder score (repro.baselines.recomp)
    cot                  CoT (RAR): Table 13 on models.extractor (the untrained backbone, as the paper's baseline)
    prompted_extractor   Table 14 on the untrained models.extractor: "prompted extraction", not EviOmni
    eviomni              Table 14 on the extractor selected by GRPO training (repro.train, data/<profile>/train)
    eviomni_released     Table 14 on models.released_extractor (the authors' HIT-TMG checkpoints); with
                         `eviomni: released_extractor` in params.yaml it replaces `eviomni` in every study (D132)
    filco                FilCo (VAR): models.extractor + the LoRA filter of the filco_train stage (repro.baselines.filco)
    seer                 SEER (VAR): models.extractor + the DPO-aligned LoRA of the seer_train stage (repro.baselines.seer)
"""

from __future__ import annotations

import dataclasses

from repro.assets import resolve
from repro.config import Profile
from repro.data import layout
from repro.evaluation.answering import Answerer, qa_adapter
from repro.evaluation.refiners import ChainOfThought, ClosedBook, FullPassages, RationalExtractor, Refiner
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.io import model_fingerprint
from repro.train.logs import TrainRun


@dataclasses.dataclass(frozen=True)
class Method:
    key: str
    label: str  # column name in our tables
    group: str  # WR (without refinement), VAR (vanilla), RAR (rational refinement)
    paper_method: str | None  # the method's name in data/paper (None: not in the paper)
    tagged: bool = False  # a RationalExtractor: evidence read from `<extract>`, else the untagged output (D9)


METHODS = {m.key: m for m in [
    Method("zero", "Zero", "WR", "Zero"),
    Method("full", "Full", "WR", "Full"),
    Method("selective_context", "SeleCtx", "VAR", "SeleCtx"),
    Method("llmlingua2", "LLMLingua-2", "VAR", "LLMLingua-2"),
    Method("llmlingua2_standin", "LLMLingua-2 (untrained stand-in)", "VAR", "LLMLingua-2"),
    Method("recomp", "RECOMP", "VAR", "RECOMP"),
    Method("cot", "CoT", "RAR", "CoT"),
    Method("prompted_extractor", "Prompted extraction", "RAR", None, tagged=True),
    Method("eviomni", "EviOmni", "RAR", "EviOmni", tagged=True),
    Method("eviomni_released", "EviOmni (released)", "RAR", "EviOmni", tagged=True),
    Method("filco", "FilCo", "VAR", "FilCo"),
    Method("seer", "SEER", "VAR", "SEER"),
]}


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


def build_baseline(key: str, cfg: Profile) -> Refiner:
    """The VAR baseline of method `key` with the profile's `baselines` settings (models load here)."""
    if cfg.baselines is None:
        raise ValueError(f"profile {cfg.name} has no baselines section")
    if key == "selective_context":
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from repro.baselines.selective_context import SelectiveContext, load_phrase_parser
        from repro.generation.transformers_backend import resolve_dtype

        settings = cfg.baselines.selective_context
        model = resolve(settings.model, cfg.name)
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=False)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=resolve_dtype(cfg.models.inference, device),
                                                  device_map=device, use_safetensors=True, trust_remote_code=False)
        parser = resolve(settings.phrase_parser, cfg.name) if settings.unit == "phrase" else None
        return SelectiveContext(lm.eval(), tokenizer, model_fingerprint(model), settings,
                                nlp=load_phrase_parser(parser) if parser else None,
                                parser_id=model_fingerprint(parser) if parser else None)
    if key in ("llmlingua2", "llmlingua2_standin"):
        from repro.baselines.llmlingua2 import LLMLingua2

        settings = cfg.baselines.llmlingua2
        ref = settings.model if key == "llmlingua2" else settings.standin
        if ref is None:
            field = "model" if key == "llmlingua2" else "standin"
            hint = " (no LLMLingua-2 weights here? list llmlingua2_standin instead)" if field == "model" else ""
            raise ValueError(f"profile {cfg.name}: method {key} needs baselines.llmlingua2.{field}{hint}")
        model = resolve(ref, cfg.name)
        return LLMLingua2(model, model_fingerprint(model), settings, resolve(settings.tiktoken, cfg.name))
    if key == "recomp":
        from repro.baselines.recomp import RecompExtractive, load_encoder

        settings = cfg.baselines.recomp
        model = resolve(settings.model, cfg.name)
        return RecompExtractive(load_encoder(model), model_fingerprint(model), settings)
    raise ValueError(f"method {key!r} is not a VAR baseline")


def build_refiner(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """The refiner of method `key`; prompted ones decode with `params` (greedy)."""
    if key == "zero":
        return ClosedBook()
    if key == "full":
        return FullPassages()
    if key in ("filco", "seer"):
        return trained_baseline(key, cfg, pool, params)
    if METHODS[key].group == "VAR":
        return build_baseline(key, cfg)
    generator, model_id = pool.get(extractor_model(key, cfg))
    return (RationalExtractor if METHODS[key].tagged else ChainOfThought)(generator, model_id, params)


def trained_baseline(key: str, cfg: Profile, pool: ModelPool, params: GenerationParams) -> Refiner:
    """FilCo's filter or SEER's extractor: models.extractor with the LoRA adapter its training stage wrote; the
    adapter's fingerprint is part of the refiner's model id, hence of its configuration."""
    if key == "filco":
        from repro.baselines.filco import FilCoFilter, filter_adapter

        refiner_class, adapter = FilCoFilter, filter_adapter(cfg)
    else:
        from repro.baselines.seer import SEERExtractor, extractor_adapter

        refiner_class, adapter = SEERExtractor, extractor_adapter(cfg)
    generator, model_id = pool.get(resolve(cfg.models.extractor, cfg.name), str(adapter))
    return refiner_class(generator, model_id, params)


def build_answerer(cfg: Profile, pool: ModelPool) -> Answerer:
    """The QA generator of the profile: models.generator with the LoRA adapter (or without, see `qa_adapter`)."""
    adapter = qa_adapter(cfg)
    generator, model_id = pool.get(resolve(cfg.models.generator, cfg.name), str(adapter) if adapter else None)
    ev = cfg.evaluation
    return Answerer(generator, model_id, GenerationParams(max_new_tokens=ev.answer_max_new_tokens,
                                                          batch_size=ev.batch_size))
