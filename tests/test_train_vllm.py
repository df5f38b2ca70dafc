"""o_r and o_e under `train.use_vllm`: the trainer's answers through TRL 1.16.0's own vLLM generation code (D138).

What runs for real, on vLLM's CPU build with SmolLM2-135M-Instruct in float32 (whose greedy texts equal
transformers' there, D93):

- server mode: `vllm serve` on 127.0.0.1 and TRL's `VLLMGeneration` / `VLLMClient` as `GRPOTrainer` builds them
  from `grpo_args` (`train.vllm_server_base_url`), requests over HTTP included;
- colocate mode: TRL's in-process `vllm.LLM` (in a subprocess, because TRL sets RANK/WORLD_SIZE and starts
  torch.distributed in the process that holds the engine).

What does not, and stands in: weight sync. TRL pushes weights to a server through an NCCL rendezvous that needs a
CUDA device (`VLLMClient.init_communicator` refuses a CPU device), and colocated `load_weights` fails on the CPU
build ("'Parameter' object has no attribute 'weight_loader'"); so `init_communicator` does nothing and
`sync_weights` is recorded, not run. The engines hold the policy's initial weights, which is what a sync at step 0
pushes. With two training processes, TRL's `gather_object` / `broadcast_object_list` are replaced by what they
compute on one machine (a contract stand-in for the collectives; the generation request itself is real).
"""

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import pytest
from conftest import ROOT, SMOLLM2_SERVER
from transformers import AutoTokenizer
from trl.generation import vllm_generation
from trl.generation.vllm_client import VLLMClient
from trl.generation.vllm_generation import VLLMGeneration

from repro.config import load_profile
from repro.train.grpo import TrainRun
from repro.train.grpo.data import extraction_rows
from repro.train.grpo.rollout import MASKED_TARGETS, answer_contexts, parse_rollout
from repro.train.grpo.run import build_trainer

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(600),  # a server, an engine, SmolLM2
              pytest.mark.xdist_group(SMOLLM2_SERVER)]  # one worker: one server, one transformers reference

TOWNS = ("Vell", "Orm", "Tarnby")
ROLLOUTS = [
    "<reason>Passage 1 says who founded {town}.</reason><extract>{town} was founded by {founder}.</extract>"
    "<answer>{founder}</answer>",
    "<reason>The passages name a founder of {town}.</reason><extract>{founder} founded it in 1800.</extract>"
    "<answer>{founder}</answer>",
]


def contexts() -> list[dict]:
    return [{"id": f"q{i}", "question": f"Who founded the town of {town}?", "golden_answers": [f"Anna Berg{i}"],
             "passages": [{"id": f"p{i}-{j}", "contents": f'"{town}"\n{town} was founded by Anna Berg{i} in '
                                                          f"{1800 + j}, on the river Tarn.", "score": 1.0 - j / 10}
                          for j in range(3)]}
            for i, town in enumerate(TOWNS)]


def batch(tokenizer) -> tuple[list[dict], list[str]]:
    """Rows and rollouts whose o_r/o_e contexts are distinct, except two identical rollouts of the same row (a
    duplicate must get its own answer, not be merged), plus a rollout without tags (empty r and e)."""
    rows = extraction_rows(contexts(), tokenizer, "tokens")
    texts = [ROLLOUTS[k].format(town=TOWNS[i], founder=f"Anna Berg{i}") for i, k in ((0, 0), (1, 0), (2, 1), (0, 0))]
    return [rows[0], rows[1], rows[2], rows[0], rows[1]], [*texts, "I cannot tell."]


def ci_cfg(model, **train):
    cfg = load_profile("ci", ROOT / "params.yaml")
    train = dataclasses.replace(cfg.train, format_warmup=None, **train)
    return dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=str(model)), train=train)


def trainer_for(cfg, root):
    rows = extraction_rows(contexts(), AutoTokenizer.from_pretrained(cfg.models.extractor), "tokens")
    return build_trainer(cfg, TrainRun(Path(root)), rows[:2], rows[2:], progress=False)


@pytest.fixture(scope="module")
def reference(smollm2_dir, tmp_path_factory):
    """The same trainer on TRL's transformers path: greedy answers, float32."""
    trainer = trainer_for(ci_cfg(smollm2_dir), tmp_path_factory.mktemp("transformers"))
    rows, texts = batch(trainer.processing_class)
    return trainer.masked_answers(rows, texts, MASKED_TARGETS, do_sample=False)


@pytest.fixture(scope="module")
def server_trainer(smollm2_dir, smollm2_server, tmp_path_factory):
    """EviOmniTrainer with use_vllm in server mode; yields (trainer, requests to the server, steps of the syncs)."""
    requests, syncs = [], []
    generate = VLLMClient.generate

    def recorded_generate(client, **kwargs):
        requests.append(kwargs)
        return generate(client, **kwargs)

    def recorded_sync(engine):
        syncs.append(trainer.state.global_step)

    cfg = ci_cfg(smollm2_dir, use_vllm=True, vllm_mode="server", vllm_server_base_url=smollm2_server)
    with (mock.patch.object(VLLMClient, "init_communicator", lambda client, device=0: None),
          mock.patch.object(VLLMClient, "generate", recorded_generate),
          mock.patch.object(VLLMGeneration, "sync_weights", recorded_sync)):
        trainer = trainer_for(cfg, tmp_path_factory.mktemp("server"))
        assert trainer.use_vllm and trainer.vllm_generation.vllm_client.base_url == smollm2_server
        yield trainer, requests, syncs


def token_ids(trainer, rows, texts) -> list[list[int]]:
    """The o_r and o_e contexts of each rollout, in the order `masked_answers` sends them."""
    return [ctx.token_ids(trainer.processing_class) for row, text in zip(rows, texts)
            for ctx in answer_contexts(row["question"], row["passages"], parse_rollout(text), MASKED_TARGETS,
                                       trainer.rewards_config)]


def test_server_mode_answers_each_context_once_in_order_like_the_transformers_path(server_trainer, reference):
    trainer, requests, _ = server_trainer
    rows, texts = batch(trainer.processing_class)
    requests.clear()
    answers = trainer.masked_answers(rows, texts, MASKED_TARGETS, do_sample=False)
    assert answers == reference
    assert len(set(answers["rationale"][:3])) == 3  # distinct contexts, distinct answers: a mix-up would show
    assert answers["rationale"][0] == answers["rationale"][3] and answers["evidence"][0] == answers["evidence"][3]

    (request,) = requests  # one batched request: every context, none de-duplicated, one completion each
    assert request["prompts"] == token_ids(trainer, rows, texts) and len(request["prompts"]) == 2 * len(rows)
    assert (request["n"], request["temperature"], request["max_tokens"]) == (1, 0.0, trainer.max_answer_length)
    engine = trainer.vllm_generation  # the rollout settings are back
    assert (engine.temperature, engine.max_completion_length) == (trainer.temperature, trainer.max_completion_length)


def test_sampled_answers_use_the_rollout_temperature_and_weights_sync_once_per_step(server_trainer):
    trainer, requests, syncs = server_trainer
    rows, texts = batch(trainer.processing_class)
    requests.clear()
    answers = trainer.masked_answers(rows, texts, MASKED_TARGETS, do_sample=True)
    assert all(len(answers[t]) == len(rows) and all(isinstance(a, str) for a in answers[t]) for t in MASKED_TARGETS)
    assert (requests[0]["n"], requests[0]["temperature"], requests[0]["top_p"]) == (1, trainer.temperature,
                                                                                    trainer.top_p)
    # every call so far was at step 0: one sync, the rollouts' (o_r/o_e come from the same π_θold) ...
    assert trainer.state.global_step == 0 and syncs == [0]
    trainer.state.global_step += 1  # ... and dev selection at a later step scores the current weights
    try:
        trainer.masked_answers(rows[:1], texts[:1], MASKED_TARGETS, do_sample=False)
        assert syncs == [0, 1]
    finally:
        trainer.state.global_step -= 1


def test_two_processes_each_get_the_answers_to_their_own_contexts_from_one_request(server_trainer):
    trainer, requests, _ = server_trainer
    rows, texts = batch(trainer.processing_class)
    local = [token_ids(trainer, rows[:2], texts[:2]), token_ids(trainer, rows[3:], texts[3:])]  # rank 0, rank 1
    engine, sent = trainer.vllm_generation, []

    def gather(objects):  # every rank's list in rank order: the prompts, then the (absent) images
        return [*objects, *objects] if all(o is None for o in objects) else [*local[0], *local[1]]

    def broadcast(objects, from_process=0):  # rank 0 runs first and sends; rank 1 receives what it sent
        if objects[0] is None:
            objects[0] = sent[-1]
        else:
            sent.append(objects[0])

    with trainer._decoding(trainer.max_answer_length, do_sample=False):
        alone = [engine.generate(prompts, None, 1)[1] for prompts in local]  # each rank's contexts, one process
        requests.clear()
        accelerator = engine.accelerator
        try:
            with (mock.patch.object(vllm_generation, "gather_object", gather),
                  mock.patch.object(vllm_generation, "broadcast_object_list", broadcast)):
                together = []
                for rank in (0, 1):
                    engine.accelerator = types.SimpleNamespace(process_index=rank, is_main_process=rank == 0,
                                                               num_processes=2)
                    together.append(engine.generate(local[rank], None, 1)[1])
        finally:
            engine.accelerator = accelerator
    assert together == alone
    (request,) = requests  # the main process alone asked the server, for both ranks' contexts
    assert request["prompts"] == local[0] + local[1] and request["n"] == 1
    assert local[0][:2] == local[1][:2]  # both ranks open with the same two contexts: neither lost its answers


COLOCATE = """
import json, sys
from unittest import mock
from trl.generation import vllm_generation
sys.path.insert(0, {tests!r})
import test_train_vllm as t
from repro.train.grpo.rollout import MASKED_TARGETS

syncs, built, real_llm = [], [], vllm_generation.LLM

def llm(**kwargs):  # TRL's own vllm.LLM call, plus eager mode and float32 like the other engines of the tests
    built.append({{k: v for k, v in kwargs.items() if isinstance(v, (str, int, float, type(None)))}})
    return real_llm(**kwargs, enforce_eager=True, dtype="float32")

cfg = t.ci_cfg({model!r}, use_vllm=True, vllm_mode="colocate", vllm_max_model_length=2048)
with (mock.patch.object(vllm_generation, "LLM", llm),
      mock.patch.object(vllm_generation.VLLMGeneration, "sync_weights", lambda engine: syncs.append(1))):
    trainer = t.trainer_for(cfg, {root!r})
    rows, texts = t.batch(trainer.processing_class)
    answers = trainer.masked_answers(rows, texts, MASKED_TARGETS, do_sample=False)
print("RESULT", json.dumps({{"answers": answers, "syncs": len(syncs), "llm": built}}))
"""


def test_colocate_mode_answers_like_the_transformers_path(smollm2_dir, reference, tmp_path):
    script = COLOCATE.format(tests=str(ROOT / "tests"), model=str(smollm2_dir), root=str(tmp_path / "run"))
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}  # GiB; TRL passes no KV-cache size of its own
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=280)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["answers"] == reference and result["syncs"] == 1
    (llm,) = result["llm"]  # one in-process engine on the policy's weights, sized by the train section
    assert llm["model"] == str(smollm2_dir) and llm["distributed_executor_backend"] == "external_launcher"
    assert "dtype" not in llm  # TRL's engine runs in the checkpoint's dtype (SmolLM2's: bf16), not models.dtype
    share = load_profile("ci", ROOT / "params.yaml").train.vllm_gpu_memory_utilization
    assert (llm["max_model_len"], llm["gpu_memory_utilization"]) == (2048, share)
