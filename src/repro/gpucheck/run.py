"""The check's run: its steps in order, each in a process of its own under its own time limit (its process group is
killed at the limit), one printed line each; then one JSON of measurements and a markdown summary, both written
atomically, named after the device (`nvidia-h200.json`, `cpu-tiny.json`)."""

from __future__ import annotations

import os
import platform
import re
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from repro.gpucheck import bundle, workloads
from repro.io import read_json, write_json, write_text

# seconds per step: the paper shapes on one H200, about twice what the step should take; tiny on a 2-core CPU
LIMITS = {"paper": {"peaks": 60, "models": 240, "grpo_qwen2.5-1.5b": 420, "sft_qwen2.5-7b": 240,
                    "dpo_qwen2.5-7b": 240, "sft_qwen2.5-1.5b": 150, "dpo_qwen2.5-1.5b": 150, "encoder": 120,
                    "generation": 240},
          "tiny": {"peaks": 60, "models": 240, "grpo_qwen2.5-1.5b": 420, "sft_qwen2.5-7b": 240,
                   "dpo_qwen2.5-7b": 240, "sft_qwen2.5-1.5b": 240, "dpo_qwen2.5-1.5b": 240, "encoder": 120,
                   "generation": 180}}
STEPS = tuple(LIMITS["paper"])
MEASURED_DIR = Path("docs/gpu-check")  # where a CUDA run at the paper shapes is committed (repro.ops.costs reads it)
SCRATCH_DIR = Path("data/gpucheck")  # any other run


def plan_for(shapes: str, device: str, work: Path, tokenizers: Path) -> dict:
    tiny, cuda = shapes == "tiny", device == "cuda"
    loads = {"grpo": workloads.grpo(tiny, cuda), "encoder": workloads.encoder(tiny),
             "generation": workloads.generation(tiny)}
    for model in workloads.LORA_PROFILES:
        for kind in ("sft", "dpo"):
            loads[f"{kind}_{model}"] = workloads.lora(model, kind, tiny, cuda)
    return {"shapes": shapes, "device": device, "work": str(work), "tokenizers": str(tokenizers),
            "workloads": loads, "results": {}}


def run_step(name: str, plan: dict, limit: float) -> dict:
    work = Path(plan["work"])
    plan_file, result_file = work / "plan.json", work / f"{name}.result.json"
    write_json(plan_file, plan)
    result_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "repro.gpucheck.steps", name, str(plan_file), str(result_file)]
    start = time.perf_counter()
    process = subprocess.Popen(command, start_new_session=True)  # its own group: the launch's workers die with it
    try:
        process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return {"ok": False, "error": f"timed out after {limit:.0f} s", "wall_seconds": time.perf_counter() - start}
    if not result_file.exists():
        return {"ok": False, "error": f"the step's process exited with {process.returncode} and wrote no result",
                "wall_seconds": time.perf_counter() - start}
    return read_json(result_file)


def gb(value) -> str:
    return "-" if value is None else f"{value / 1e9:.1f} GB"


def pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def line(name: str, r: dict) -> str:
    """The step's one line: status, seconds and what it measured."""
    head = f"[{'ok' if r['ok'] else 'FAILED'}] {name} ({r['wall_seconds']:.0f} s)"
    if "error" in r:
        return f"{head}: {r['error']}"
    if name == "peaks":
        return (f"{head}: bf16 matmul {r['matmul_flops'] / 1e12:.1f} TFLOP/s, "
                f"copy {r['copy_bytes_per_second'] / 1e9:.0f} GB/s")
    if name == "models":
        return f"{head}: {', '.join(r['dirs'])} in {r['seconds']:.0f} s"
    if name.startswith("grpo"):
        failed = [k for k, v in r["checks"].items() if v is False]
        steps = " / ".join(f"{s:.1f}" for s in r["step_seconds"])
        return (f"{head}: peak {gb(r['peak_allocated_bytes'])}, step {steps} s"
                f" (generation {sum(r['generation_seconds']):.1f} s, training {sum(r['train_seconds']):.1f} s), MFU "
                f"{pct(r['mfu'])}, generation at {pct(r['bandwidth_share'])} of copy bandwidth, fused head "
                f"{'triton' if r['fused_head']['triton'] else 'torch'}" + (f"; failed: {failed}" if failed else ""))
    if name.startswith(("sft", "dpo")):
        return (f"{head}: peak {gb(r['peak_allocated_bytes'])}, step {r['train_seconds']:.1f} s, MFU {pct(r['mfu'])}, "
                f"loss {r['losses']}, fused head {'triton' if r['fused_head']['triton'] else 'torch'}")
    if name == "encoder":
        return (f"{head}: {r['passages_per_second']:.0f} passages/s ({r['dtype']}), MFU {pct(r['mfu'])}, "
                f"{pct(r['bandwidth_share'])} of copy bandwidth")
    return (f"{head}: {r['checks']}, {r['tokens_per_second']:.0f} tokens/s at batch {r['batch']}, "
            f"{pct(r['bandwidth_share'])} of copy bandwidth")


def environment(device: str) -> dict:
    """The device, its driver, torch's CUDA, and every distribution installed (name: version)."""
    import torch

    env = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "device": device, "gpu": None, "driver": None, "gpu_memory_bytes": None,
           "packages": dict(sorted({d.metadata["Name"].lower(): d.version for d in metadata.distributions()
                                    if d.metadata["Name"]}.items()))}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_bytes=props.total_memory, capability=f"{props.major}.{props.minor}",
                   cudnn=torch.backends.cudnn.version(), driver=driver_version())
    names = [n for n, _ in bundle.WHEELS + bundle.SDISTS]
    env["deepspeed"] = env["packages"].get("deepspeed")
    env["unmet_requirements"] = bundle.unmet_requirements([n for n in names if n.lower() in env["packages"]])
    return env


def driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def summary(report: dict) -> str:
    env = report["environment"]
    lines = [f"# GPU check: {env['gpu'] or 'CPU'} ({report['shapes']} shapes)", "",
             f"`python -m repro.gpucheck` on {env['gpu'] or 'a CPU'} (driver {env['driver']}, torch {env['torch']}, "
             f"CUDA {env['cuda']}, Python {env['python']}); launcher of the GRPO step: "
             f"`{report['plan']['workloads']['grpo']['launcher']}` (DeepSpeed {env['deepspeed'] or 'not installed'}). "
             f"Random weights in the real shapes: the figures time the code, not a model's quality.", "",
             "| step | result |", "| --- | --- |"]
    for name, r in report["steps"].items():
        result = line(name, r).split(": ", 1)[-1] if r["ok"] else "FAILED: " + r.get("error", str(r.get("checks")))
        lines.append(f"| {name} | {result} |")
    if env["unmet_requirements"]:
        lines += ["", "Unmet requirements: " + "; ".join(env["unmet_requirements"])]
    return "\n".join(lines) + "\n"


def run_check(shapes: str | None = None, out: Path | None = None, tokenizers: Path | None = None,
              work: Path | None = None, steps: tuple[str, ...] = STEPS) -> dict:
    import torch

    from repro.gpucheck import models

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shapes = shapes or ("paper" if device == "cuda" else "tiny")
    work = Path(work or SCRATCH_DIR / f"work-{shapes}")
    work.mkdir(parents=True, exist_ok=True)
    if tokenizers is None:  # outside a bundle: the rehearsal trains them (about 10 s), once per work directory
        tokenizers = work / "tokenizers"
        if not (tokenizers / models.BPE_FILE).exists():
            models.write_tokenizer_sources(tokenizers)
    plan = plan_for(shapes, device, work, Path(tokenizers))
    print(f"repro.gpucheck: {shapes} shapes on {device}; work directory {work}", flush=True)
    for name in steps:
        result = run_step(name, plan, LIMITS[shapes][name])
        plan["results"][name] = result
        print(line(name, result), flush=True)
    env = environment(device)
    report = {"shapes": shapes, "environment": env, "plan": {k: v for k, v in plan.items() if k != "results"},
              "steps": plan["results"], "ok": all(r["ok"] for r in plan["results"].values())}
    out = Path(out or (MEASURED_DIR if device == "cuda" and shapes == "paper" else SCRATCH_DIR))
    name = slug(env["gpu"] or "cpu") + ("" if shapes == "paper" else f"-{shapes}")
    write_json(out / f"{name}.json", report)
    write_text(out / f"{name}.md", summary(report))
    print(f"wrote {out / name}.json and .md: {sum(r['ok'] for r in report['steps'].values())} of "
          f"{len(report['steps'])} steps ok", flush=True)
    return report
