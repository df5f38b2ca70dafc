"""Evaluation of refinement methods with the QA generator (Table 2) and their latency (Table 4).

- `refiners`   one interface for every method: contexts rows → evidence (Zero, Full, CoT, rational extractor)
- `answering`  the QA generator M_G: Table 11 over the evidence, Table 12 without (Zero)
- `records`    per-item prediction records and their resumable, atomically finished files
- `runner`     `evaluate(rows, refiner, answerer, path)`: one method on one set
- `methods`    the method keys of params.yaml, the models they load, the QA generator of a profile
- `study`      `run_main_comparison(cfg)`: every method on every set of a profile
- `tables`     Table 2's layout, summaries, paired significance on the per-item files
- `latency`    Table 4's harness: seconds per query of evidence extraction
- `figures`    the plots of both tables
- `paths`      where adapters and prediction files live
"""
