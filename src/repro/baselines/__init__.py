"""Table 2's vanilla-refinement (VAR) baselines, each a `repro.evaluation.refiners.Refiner`, one module each:

- `selective_context`  SeleCtx (Li et al., 2023): self-information of lexical units under a causal LM,
                       percentile pruning to a reduction ratio
- `llmlingua2`         LLMLingua-2 (Pan et al., 2024) through the llmlingua package, offline
- `recomp`             RECOMP extractive (Xu et al., 2024): top-n sentences by dual-encoder score, original order
- `sentences`          the sentence splitter SeleCtx and RECOMP share (Selective Context's rule)
- `filco`              FilCo (Wang et al., 2023): StrInc / lexical-overlap silver contexts, LoRA SFT of the filter
- `seer`               SEER (Zhao et al., 2024a): sampled candidate evidences, three-expert assessment, DPO alignment

The methods that use them are registered in repro.evaluation.methods; settings are params.yaml's `baselines`,
`filco` and `seer` sections; choices are docs/decisions.md D59 onwards.
"""
