"""ESTIMATED cost of running a profile on GPUs: GPU-hours, wall time, disk and GPU memory per stage (D137).

    python -m repro.ops.costs --profile paper-1p5b [--gpu-memory 40] [--gpus 8]
    python -m repro.ops.costs --markdown            # writes docs/gpu-costs.md: the tables of report.PAGE_PROFILES

Nothing here is measured, except training where a GPU check is committed (`measured`: `python -m repro.gpucheck`'s
tokens per second and peak memory replace the assumed throughput and memory formulas of the rows it covers). Every
figure is a formula over the profile's sizes (questions, passages, steps, lengths, models) and the `Assumptions`
below, computed twice, with an OPTIMISTIC and a PESSIMISTIC set, to give a range. The formulas (P = parameters,
n = GPUs a stage keeps busy):

- weights: P x 2 bytes in bf16 on a GPU, P x bytes as stored on the hub on disk; a Flat index: passages x dim x 4
  bytes; the corpus: passages x `PASSAGE_BYTES`; a checkpoint as transformers and DeepSpeed write it
  (`checkpoint_bytes`: 16P under ZeRO-2, 14P under ZeRO-3, a LoRA run's adapter and its optimizer states only), as
  many as `save_total_limit` keeps plus the one written before the oldest is rotated away (`run_disk`), and the
  exported model;
- decoding (vLLM, and transformers' generate for SEER's sampler on a transformers evaluation backend): one step reads
  the weights and the KV cache of the running sequences once, step = (2P + running x context x KV bytes per token) /
  tp / (bandwidth x efficiency) + overhead; N prompts of at most L new tokens (mean m) take max(L, N x m / running)
  steps, plus the prompts' prefill, 2P FLOPs per token. The stages send their prompts in calls of a resumable chunk
  each (`chunk_size`), and an engine started with `data_parallel` (R replicas of tp GPUs each,
  `repro.generation.sharding`) cuts every call into R slices answered at once, so a call takes as long as its largest
  slice, ceil(call / R) prompts (`calls_seconds`); the replicas start at once, in one engine start's wall time;
- training: FLOPs per token x P x tokens / (n x peak x MFU); GRPO 6P (forward and backward) + 2P (recomputed
  activations, gradient checkpointing) + 2P (reference model, beta > 0) + 2P (old policy, when a generation batch
  spans several optimizer steps); LoRA SFT 4P (no weight gradients of the frozen base), DPO 6P (+ the reference
  forward), over the DDP processes of the run's launcher at `dp_efficiency`. tokens = completions x (prompt +
  completion); steps = epochs x questions x G / completions per step;
- encoding the corpus: 2P x passages x passage tokens over the node's GPUs (a copy of the encoder on each, at
  `dp_efficiency`), the questions on one; Flat search: 2 x queries x passages x dim FLOPs over the node's GPUs
  (the index sharded over them, D214);
- GPU memory per GPU: GRPO's model states under ZeRO stage z (0: 16P; 2: 2P + 14P/n; 3: 16P/n), a bf16 reference
  model, checkpointed activations (micro-batch x sequence x hidden x (2 x layers + 34) bytes), fp32 log-probs over
  the completion (micro-batch x completion x vocab x 4) and the colocated vLLM share x card; an inference stage:
  one engine per base model at once (the studies keep them until they end) x its share x card, on each GPU of
  each replica;
- fixed costs: each stage starts a process (imports, papermill), and so does each launch of training workers;
  each engine reads its weights and profiles memory (and captures CUDA graphs unless `enforce_eager`).

Sizes the profile does not hold are constants here: FlashRAG's split sizes, wiki-18's passage count, the models'
shapes (`SHAPES`, from their config.json). Stages run one after another, as `dvc repro` runs them, so the node's
wall time is their sum; the stages without a formula here (dvc.yaml's others, and those of a study set to null)
count their process start. GPU-hours busy count the GPUs a stage keeps busy (a study's engine replicas: every GPU of
the node with `data_parallel: auto`; Table 4's timing: one); GPU-hours held count the node's GPUs for the whole wall
time, which is what a rented node bills. The node has as many GPUs as the profile's largest launcher starts
processes (`repro.config.launchers.node_gpus`), or `--gpus`. Profiles that run on a CPU (tiny, ci, the rehearsal) are
not estimated (`covers`).

The package's modules follow the model's parts: `model` (assumptions, shapes, formulas, a profile's sizes), `stages`
(one cost function per priced stage, named by its row in repro.registry.STAGES), `report` (the estimate, totals and
tables), `measured` (a GPU check's training figures), `disk` (what the stages still write, for the preflight) and
`__main__` (the command line).
"""

from repro.ops.costs import disk, measured, model, report, stages

__all__ = ["disk", "measured", "model", "report", "stages"]
