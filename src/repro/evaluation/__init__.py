"""Evaluation of refinement methods with the QA generator: Tables 2, 3, 4, 9, 10 and Figures 5 and 8.

- `refiners`   one interface for every method: contexts rows → evidence (Zero, Full, CoT, rational extractor)
- `answering`  the QA generator M_G: Table 11 over the evidence, Table 12 without (Zero)
- `records`    per-item prediction records and their resumable, atomically finished files
- `runner`     `evaluate(rows, refiner, answerer, path)`: one method on one set
- `methods`    the method keys of params.yaml, the models they load, the QA generator of a profile
- `study`      every method on every set: Table 2, Tables 9-10 (distractor setting), Figure 5 (noise)
- `ablation`   Table 3: one GRPO run per answer subset, each evaluated like Table 2's EviOmni column
- `tables`     Table 2's layout, summaries, paired significance on the per-item files
- `latency`    Table 4's harness: seconds per query of evidence extraction
- `cases`      Figure 8's case viewer: passages, each method's evidence, rationale and answer side by side
- `figures`    the plots of the tables and of Figure 5
"""
