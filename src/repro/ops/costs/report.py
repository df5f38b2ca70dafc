"""A profile's estimate, one range per stage, its totals and the tables of docs/gpu-costs.md."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from repro.config import Profile, load_profile
from repro.config import launchers
from repro.io import pipeline_stages
from repro.ops import remote
from repro.ops.costs.model import Assumptions, GB, OPTIMISTIC, PESSIMISTIC, node_gpus
from repro.ops.costs.measured import CHECK_DIR, Measured, committed
from repro.ops.costs.stages import light_stage, measured_stages, priced_stages, stage_cost
from repro.registry import STAGES


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A stage's range: (optimistic, pessimistic) wall seconds and GPU-seconds busy; disk, memory and what does not fit
    do not depend on the throughput assumptions."""

    stage: str
    gpus: int
    wall: tuple[float, float]
    gpu_seconds: tuple[float, float]
    disk: float
    memory: float
    note: str
    problems: tuple[str, ...]  # one line each: what cannot run on the card, and the key to change
    scratch: float = 0.0  # bytes beyond `disk` while the stage runs


def without_starts(a: Assumptions) -> Assumptions:
    """`a` with free process and engine starts: what the work itself costs."""
    return dataclasses.replace(a, stage_start=0, light_stage_start=0, engine_start=0, eager_engine_start=0,
                               disk_read=math.inf)


def estimate(cfg: Profile, card: float = 80 * GB, bounds: tuple[Assumptions, Assumptions] = (OPTIMISTIC, PESSIMISTIC),
             measured: Measured | None = None) -> list[Estimate]:
    """One row per stage the profile gives work, under the two `bounds`, then one for the light stages; a profile the
    model does not estimate (`covers`) is a ValueError that says why. With `measured`, the training of the rows it
    covers (`stages.measured_stages`) takes its figures, and their notes say so."""
    if reason := uncovered(cfg):
        raise ValueError(reason)
    bounds = tuple(dataclasses.replace(a, measured=measured) for a in bounds)
    replaced = measured_stages(cfg, measured) if measured else set()
    ranged = [costed for stage in priced_stages()
              if None not in (costed := tuple(stage_cost(cfg, stage, a, card) for a in bounds))]
    light = [name for name in pipeline_stages() if name not in {high.stage for _, high in ranged}]
    rows = []
    for low, high in [*ranged, tuple(light_stage(light, a) for a in bounds)]:
        problems = tuple(f"{high.stage}: {p}" for p in high.problems) or (  # engine problems say why already
            (f"{high.stage}: about {high.memory / GB:.0f} GB per GPU > {card / GB:.0f} GB; {high.hint}",)
            if high.memory > card else ())
        note = f"{high.note}; training MEASURED" if high.stage in replaced else high.note
        rows.append(Estimate(high.stage, high.gpus, (low.wall, high.wall), (low.gpu_seconds, high.gpu_seconds),
                             high.disk, high.memory, note, problems, high.scratch))
    return rows


EXTRA_RUN_STAGES = tuple(s.name for s in STAGES.values() if s.extra_runs)  # the studies training GRPO runs of their own


def totals(rows: list[Estimate], extra_runs: bool = True, node: int = 1) -> dict:
    """Sums over the stages after fetching (with or without EXTRA_RUN_STAGES: Table 3's ablation and the reward-design
    study): wall time, GPU-seconds busy, GPU-seconds held (`node` GPUs for the whole wall time); disk over every stage
    at its peak: what the stages leave plus the largest transient (a checkpoint written before rotation)."""
    kept = [r for r in rows if extra_runs or r.stage not in EXTRA_RUN_STAGES]
    chosen = [r for r in kept if r.stage != "fetch"]
    wall = tuple(sum(r.wall[i] for r in chosen) for i in (0, 1))
    return {"wall": wall, "gpu_seconds": tuple(sum(r.gpu_seconds[i] for r in chosen) for i in (0, 1)),
            "held": tuple(node * w for w in wall),
            "disk": sum(r.disk for r in kept) + max((r.scratch for r in kept), default=0.0),
            "memory": max((r.memory for r in chosen), default=0)}


def start_seconds(cfg: Profile, card: float = 80 * GB, measured: Measured | None = None) -> tuple[float, float]:
    """The part of the total wall time that process and engine starts take, which no smaller size removes."""
    work = totals(estimate(cfg, card, (without_starts(OPTIMISTIC), without_starts(PESSIMISTIC)), measured))["wall"]
    return tuple(t - w for t, w in zip(totals(estimate(cfg, card, measured=measured))["wall"], work))


def held_gpus(cfg: Profile, gpus: int | None = None) -> int:
    """The GPUs of the node: `gpus`, or the profile's largest launcher; a node with fewer cannot run that launcher."""
    need = node_gpus(cfg)
    if gpus is None:
        return need
    if gpus < need:
        key, path = max(launchers.launchers(cfg).items(), key=lambda item: launchers.processes(item[1]))
        raise ValueError(f"--gpus {gpus}: {key}: {path} launches {need} processes; set num_processes there")
    return gpus


def _range(values: tuple[float, float], unit: float) -> str:
    low, high = (v / unit for v in values)
    digits = 0 if high >= 100 else 1 if high >= 10 else 2
    return f"{low:.{digits}f}-{high:.{digits}f}"


LEGEND = ("GPU-hours busy count the GPUs a stage keeps busy, GPU-hours held the node's GPUs for the whole wall "
          "time (what a rented node bills), idle the difference: a stage that leaves the node idle and needs no GPU "
          "(`ar_study_teacher` over an API) can run on another machine (docs/gpu.md); disk is what a stage leaves, and "
          "the totals add the largest checkpoint in flight (written before the oldest is rotated away); the totals "
          "leave out the fetch.")


def ablation_line(cfg: Profile, rows: list[Estimate], unit: float, label: str, node: int) -> str:
    """What Table 3's ablation costs and the key that switches it off."""
    if cfg.ablation is None:
        return "Table 3's ablation: not requested (`ablation: null`); its stage records so and trains nothing."
    row = next(r for r in rows if r.stage == "ablation_answer_rewards")
    return (f"Table 3's ablation (`ablation_answer_rewards`): {_range(tuple(node * w for w in row.wall), unit)} "
            f"GPU-{label} held, {_range(row.wall, unit)} {label} of wall time, {row.disk / GB:.0f} GB of disk. "
            f"`ablation: null` (params.yaml: profiles.{cfg.name}.ablation) switches it off: its stage then records "
            f"\"not requested\".")


def table(cfg: Profile, card: float = 80 * GB, gpus: int | None = None, legend: bool = True,
          measured: Measured | None = None) -> str:
    """The estimate as a markdown table with totals (with and without the studies of extra GRPO runs), then what
    Table 3's ablation costs and what does not fit; `gpus`: the node's GPUs (default: `node_gpus`); `measured`: a GPU
    check's training figures in place of the assumed ones, where they apply."""
    rows, node = estimate(cfg, card, measured=measured), held_gpus(cfg, gpus)
    unit, label = (60, "min") if totals(rows)["wall"][1] < 4 * 3600 else (3600, "h")
    option = f" --gpus {gpus}" if gpus is not None else ""
    what = (f"the rows marked 'training MEASURED' train at the tokens per second and memory `python -m repro.gpucheck` "
            f"measured on {measured.gpu} ({measured.source}), everything else ESTIMATES" if measured else "ESTIMATES")
    lines = [f"`{cfg.name}`: {what} on one node of {node} A100 GPU(s) of {card / GB:.0f} GB "
             f"(optimistic-pessimistic; `python -m repro.ops.costs --profile {cfg.name} --gpu-memory {card / GB:.0f}"
             f"{option}{f' --measured {measured.source}' if measured else ''}`)", "",
             f"| stage | GPUs busy | GPU-{label} busy | GPU-{label} held | GPU-{label} idle | wall {label} | disk GB | "
             "GB per GPU | notes |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        held = tuple(node * w for w in r.wall)
        idle = tuple(h - busy for h, busy in zip(held, r.gpu_seconds))
        held_idle = f"{_range(held, unit)} | {_range(idle, unit)}" if r.stage != "fetch" else "- | -"
        lines.append(f"| {r.stage} | {r.gpus} | {_range(r.gpu_seconds, unit)} | {held_idle} | {_range(r.wall, unit)} | "
                     f"{r.disk / GB:.1f} | {r.memory / GB:.0f}{' (!)' if r.problems else ''} | {r.note} |")
    for name, t in (("total", totals(rows, node=node)),
                    ("total without Table 3's ablation and the reward designs", totals(rows, False, node))):
        idle = tuple(h - busy for h, busy in zip(t["held"], t["gpu_seconds"]))
        lines.append(f"| **{name}** | | {_range(t['gpu_seconds'], unit)} | {_range(t['held'], unit)} | "
                     f"{_range(idle, unit)} | {_range(t['wall'], unit)} | {t['disk'] / GB:.0f} | "
                     f"{t['memory'] / GB:.0f} | |")
    starts = _range(start_seconds(cfg, card, measured), unit)
    lines.append(f"| of the total, process and engine starts | | | | | {starts} | | "
                 "| |")
    lines += ["", *([LEGEND, ""] if legend else []), ablation_line(cfg, rows, unit, label, node)]
    problems = list(dict.fromkeys(p for r in rows for p in r.problems))
    if problems:
        lines += ["", "(!) does not fit as configured:", *(f"- {p}" for p in problems)]
    return "\n".join(lines)


# --- the generated page ------------------------------------------------------------------------------------

PAGE = Path("docs/gpu-costs.md")
PAGE_PROFILES = ("paper-1p5b", "paper-7b", "gpu-smoke", "gpu-smoke-2gpu", "gpu-smoke-7b-2gpu", "released-1p5b")
PAGE_COMMAND = "python -m repro.ops.costs --markdown"


def markdown(params_path: str | Path = "params.yaml", check_dir: str | Path = CHECK_DIR) -> str:
    """docs/gpu-costs.md: the tables of PAGE_PROFILES on 80 GB cards, under a line saying how it is made; then, for
    each GPU check committed under `check_dir`, the same tables with its measured training figures."""
    checks = committed(check_dir)
    source = (f"Every row is an ESTIMATE except the training of the rows marked 'training MEASURED' in the tables "
              f"after the first set, which take the tokens per second and memory that `python -m repro.gpucheck` "
              f"measured on {', '.join(m.gpu for m in checks)} ({', '.join(m.source for m in checks)}); their "
              f"rollouts, "
              f"evaluation and starts stay estimates." if checks else
              f"Every number here is an ESTIMATE: no GPU check is committed under {check_dir}/ "
              f"(`python -m repro.gpucheck` on a GPU writes one, docs/gpu.md).")
    head = [f"<!-- Generated by `{PAGE_COMMAND}` from params.yaml, src/repro/ops/costs/ and {check_dir}/; do not edit: "
            f"rerun it (tests/test_costs.py fails while this page differs from its output). -->", "",
            "# GPU costs (estimates)", "",
            f"{source} The formulas and their two sets of assumptions (optimistic-pessimistic) are in "
            "`src/repro/ops/costs/` (D137); `python -m repro.ops.costs --profile P [--gpu-memory 40] [--gpus N] "
            "[--measured CHECK.json]` prints one profile's table.", "", LEGEND, ""]
    tables = [table(load_profile(name, params_path), legend=False, measured=m)
              for m in (None, *checks) for name in PAGE_PROFILES]
    return "\n".join(head) + "\n" + "\n\n".join(tables) + "\n"


GPU_OPTIONS = ("gpu_memory_utilization", "tensor_parallel_size")  # engine options that only a GPU run sets
ENGINE_OPTIONS = (("evaluation", "options"), ("latency", "options"), ("agentic", "agent_options"),
                  ("agentic", "extractor_options"))  # the studies' engines, by (section, options key)


def uncovered(cfg: Profile) -> str | None:
    """Why the model does not estimate `cfg`, or None: it estimates GPU runs over wiki-18 (the paper profiles,
    gpu-smoke), not the CPU profiles (tiny and ci over their own corpora; the rehearsal, whose engines are sized by
    `kv_cache_memory_bytes` on vLLM's CPU build rather than by a share of a GPU)."""
    if cfg.data is None or Path(cfg.data.corpus.source) != remote.WIKI18:
        return (f"repro.ops.costs estimates GPU profiles over {remote.WIKI18}; {cfg.name} reads "
                f"{cfg.data.corpus.source if cfg.data else 'no corpus'}")
    engines = [getattr(getattr(cfg, section, None), key, None) or {} for section, key in ENGINE_OPTIONS]
    if not any(k in options for options in engines for k in GPU_OPTIONS):
        return (f"repro.ops.costs estimates GPU profiles; no engine of {cfg.name} asks for a GPU (none of its "
                f"{', '.join(f'{s}.{k}' for s, k in ENGINE_OPTIONS)} sets {' or '.join(GPU_OPTIONS)}): a CPU profile")
    return None


def covers(cfg: Profile) -> bool:
    """Whether the model estimates `cfg` (`uncovered`)."""
    return uncovered(cfg) is None
