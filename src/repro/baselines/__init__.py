"""Table 2's vanilla-refinement (VAR) baselines, each a `repro.evaluation.refiners.Refiner`, one module each:

- `lead_sentence`      the first sentence of passage 1, no model: the extractors' floor (CPU profiles only, D209)
- `selective_context`  SeleCtx (Li et al., 2023): self-information of lexical units under a causal LM,
                       percentile pruning to a reduction ratio
- `llmlingua2`         LLMLingua-2 (Pan et al., 2024) through the llmlingua package, offline
- `recomp`             RECOMP extractive (Xu et al., 2024): top-n sentences by dual-encoder score, original order
- `filco`              FilCo (Wang et al., 2023): StrInc / lexical-overlap silver contexts, LoRA SFT of the filter
- `seer`               SEER (Zhao et al., 2024a): sampled candidate evidences, three-expert assessment, DPO alignment

Their sentence splitters live in `repro.data.sentences` (SeleCtx and RECOMP: Selective Context's rule; FilCo:
Punkt; the lead sentence: the project's). The methods that use them are registered in repro.evaluation.methods;
settings are params.yaml's `baselines`, `filco` and `seer` sections; choices are docs/decisions.md D59 onwards.
"""
