"""Training: EviOmni's GRPO (`grpo`), the LoRA runner its four fine-tuned models share (`lora`: the QA generator,
FilCo's filter, SEER's DPO, the AR study's two variants), the CPU speed-ups both use (`speedups`), the accelerate
launch of their worker processes (`launch`) and the last complete checkpoint of a run (`checkpoints`)."""
