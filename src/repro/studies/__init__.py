"""The studies: each one the runs, tables and tests of one question, built from the blocks below (the evaluation
harness, the baselines, GRPO and LoRA training, the agent loop). A stage (`repro.stages`) calls one; no block imports a
study.

- `comparison`          every method on every set: Table 2, Tables 9-10 (distractor setting), Figure 5 (noise)
- `trained_extractors`  one GRPO run per variant, each evaluated like Table 2's EviOmni column
- `ablation`            Table 3: the answer-reward subsets
- `reward_designs`      issue #18: one GRPO run per reward design
- `latency`             Table 4's harness
- `released`            the released checkpoints checked against Table 2 before any study uses them
- `cases`, `figures`    Figure 8's case viewer; the plots of the evaluation studies
- `training_dynamics`   Figure 4 from a GRPO run's logs
- `heldout`             a policy scored as dev selection scores it, on questions the selection never sees
- `recall_check`        the starting policy's evidence answer-recall against the lead-sentence and random extractors
- `evidence_gate`, `evidence_seeds`, `evidence_probe`  issue #31's gate, its GRPO seeds and their teacher-forced probe
- `length_tuning`       τ and γ on a dev grid (App. A.2)
- `ar_study`            §2.2's answer-recall study (a package: teacher, SFT sets, recall, tables, figures)
- `agentic`, `agentic_cases`  the Search-R1 study (Tables 5-6) and its case viewer
"""
