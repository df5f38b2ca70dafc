"""The CPU compaction of TRL's fused LM head: only labelled positions reach the kernel, results are unchanged."""

import torch
import trl.trainer.utils as trl_utils
from transformers import AutoModelForCausalLM
from trl.trainer.utils import add_fused_lm_head

from repro.train.speedups.fused_head import compact_fused_lm_head_on_cpu


def _logprobs_and_head_grad(model, ids, labels, fused: bool):
    model.zero_grad()
    mask = labels[:, 1:] != -100
    if fused:
        logprobs = model(input_ids=ids, labels=labels, fused_lm_head=True).log_probs[mask]
    else:
        logits = model(input_ids=ids).logits[:, :-1].float()
        logprobs = logits.log_softmax(-1).gather(-1, labels[:, 1:].clamp(min=0).unsqueeze(-1)).squeeze(-1)[mask]
    logprobs.sum().backward()
    return logprobs.detach(), model.get_output_embeddings().weight.grad.clone()


def test_only_completion_positions_are_scored_and_logprobs_and_gradients_are_unchanged(tiny_llama_dir, monkeypatch):
    monkeypatch.setattr(trl_utils, "_use_triton", trl_utils._use_triton)  # restored after the test
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, use_safetensors=True)
    ids = torch.randint(0, model.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    labels = ids.clone()
    labels[:, :30] = -100  # a 30-token prompt before a 10-token completion
    reference, reference_grad = _logprobs_and_head_grad(model, ids, labels, fused=False)

    scored_rows = []
    kernel = trl_utils._ChunkedLogProbFunction

    class Spy:
        @staticmethod
        def apply(hidden, *args):
            scored_rows.append(hidden.shape[0])
            return kernel.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)
    compact_fused_lm_head_on_cpu()
    compact_fused_lm_head_on_cpu()  # idempotent
    add_fused_lm_head(model)
    logprobs, grad = _logprobs_and_head_grad(model, ids, labels, fused=True)

    assert scored_rows == [2 * 10]  # TRL alone would score all 2 x 39 shifted positions on a CPU
    torch.testing.assert_close(logprobs, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, reference_grad, rtol=1e-4, atol=1e-6)
