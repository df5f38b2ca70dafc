"""LoRA fine-tuning: `runner`, the SFT and DPO runs of every section with an adapter (resumable, launched through
accelerate), and `worker`, the entry point of each launched process."""
