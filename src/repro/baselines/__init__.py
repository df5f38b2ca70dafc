"""The trained and prompted baselines of Table 2, each a refiner of the evaluation runner (repro.evaluation).

- `filco`  FilCo (Wang et al. 2023): StrInc / lexical-overlap silver contexts, LoRA SFT of the context filter
- `seer`   SEER (Zhao et al. 2024a): sampled candidate evidences, three-expert assessment, DPO self-alignment
"""
