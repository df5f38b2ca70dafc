"""The one-GPU check (issue #46): the repository's training and inference code at the paper's shapes on any CUDA
machine, with random weights, and what it measures for the cost model.

    python -m repro.gpucheck [--shapes paper|tiny] [--out DIR] [--tokenizers DIR]   # paper on CUDA, tiny elsewhere
    python -m repro.gpucheck bundle DIR        # the wheels and tokenizers a bare GPU image lacks, <= 60 MiB

- `workloads`   each step's batch and lengths, from the paper profiles (and `tiny`'s, for a CPU in CI)
- `models`      random models from the real configs (the rehearsal's), the rehearsal's tokenizers widened to Qwen's
- `steps`       the steps, one process each: peaks, models, GRPO, LoRA SFT/DPO (7B, 1.5B), encoder, generation
- `grpo_worker`, `lora_worker`   what `accelerate launch` runs: the project's trainers, measured
- `probes`      the fused LM head's path, peak memory
- `run`         the steps in order under their time limits, the JSON and the markdown summary
- `bundle`      the offline bundle and its install command

It drives the trainers, so it sits in the top tier beside `repro.stages` (pyproject.toml's layers).
"""
