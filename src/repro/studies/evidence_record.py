"""An arm of the evidence experiment kept in git (issue #49; docs/cpu-evidence.md, amendment of 2026-12-02): each
policy's held-out items as its `evidence_seeds` run scored them, each seed's GRPO log, and the fingerprint of the
weights each items file was scored from. A control arm pairs with its recipe's record when the recipe's run is not in
its clone: the machine that runs the experiment keeps no files between its sessions, and the two arms do not fit
one. The records also let anyone recompute the verdicts from the per-item files.

    write_record(cfg, rows)           # where `evidence_seeds` ran: data/measured/<profile>/evidence_seeds/
    recorded_items(cfg, start, rows)  # the arm's items, each checked (`checked_scores`) before it is used
    recorded_logs(cfg)                # each seed's train_log.jsonl, checked by its sha256

A recorded items file is used only if its bytes have the recorded sha256 and its recorded key is the one this
clone's scoring code, settings and questions give with the recorded weights (`evidence_seeds.weights_score_key`);
the start's weights must also be those of this clone's start policy (both arms start from the same warm-up), unless
the control arm scores its own start beside the recorded one (`evidence.recipe_start: rescored`, D245). The manifest
also names the machine that scored the arm (`machine`): its CPU and PyTorch's CPU kernels decide the float rounding
of training, so a control arm on another CPU takes the recorded warm-up adapter (`adapter/`) and merges it exactly
into the recipe's start (`train.format_warmup.adapter`, D246).
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from repro.config import Profile
from repro.data import layout
from repro.io import (
    InputError,
    atomic_dir,
    file_sha256,
    model_fingerprint,
    read_json_object,
    read_jsonl,
    read_parted,
    write_json,
    write_parts,
)
from repro.studies.evidence_seeds import (
    ITEM_COLUMNS,
    START,
    STUDY,
    scored_items,
    scored_policies,
    scores_path,
    scoring_code,
    seed_name,
    seed_run,
    weights_score_key,
)
from repro.train.grpo.warmup import ADAPTER_FILES

RECORDS = Path("data/measured")  # tracked in git, beside data/paper/ (the paper's numbers)
MANIFEST = "manifest.json"
ADAPTER = "adapter"  # the warm-up's LoRA adapter, as repro.train.lora.runner writes it
ADAPTER_WEIGHTS = "adapter_model.safetensors"  # recorded in parts (`repro.io.write_parts`): 7.4 MB at r = 16, float32


def record_dir(profile: str) -> Path:
    """data/measured/<profile>/evidence_seeds/: manifest.json, scores/<policy>.jsonl, logs/seed-<s>.jsonl and, when
    the arm fitted its warm-up, adapter/ (its config, and its weights in parts: `ADAPTER_WEIGHTS`)."""
    return RECORDS / profile / STUDY


def adapter_sha256(adapter: Path) -> dict[str, str]:
    """The sha256 of each of the adapter's ADAPTER_FILES, a file kept in parts read whole (`read_parted`)."""
    return {name: hashlib.sha256(read_parted(adapter / name)).hexdigest() for name in ADAPTER_FILES}


def _commit() -> str:
    """The commit of the clone the record is written in; '' outside git."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine() -> dict:
    """The CPU and PyTorch's CPU kernels of this machine: a record's weights and scores are byte-reproducible on
    machines that agree here, not across them (D245)."""
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    fields = {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in lines if ":" in line)}
    return {"cpu": fields.get("model name", platform.processor()), "torch": torch.__version__,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "bf16_flags": sorted(set(fields.get("flags", "").split()) & {"avx512_bf16", "amx_bf16", "avx_ne_convert"})}


def warmup_adapter(cfg: Profile) -> tuple[Path | None, str | None]:
    """The LoRA adapter `cfg`'s start was merged from and, when it was not fitted in this run, the recorded adapter
    it was taken from (`train.format_warmup.adapter`); (None, None) without a warm-up."""
    warmup = cfg.train.format_warmup
    if warmup is None:
        return None, None
    if warmup.adapter is not None:
        return Path(warmup.adapter), warmup.adapter
    return layout.warmup_dir(cfg.name) / ADAPTER, None


def write_record(cfg: Profile, rows: Sequence[dict]) -> dict:
    """Copy the items and GRPO logs of `cfg`'s finished `evidence_seeds` run into `record_dir` (an older record there
    is replaced: git keeps it), with a manifest: per policy its weights' fingerprint, its key, its sha256 and its
    number of questions; per seed its log's sha256 and steps; the scoring code's fingerprint (part of each key); the
    machine (`machine`); the warm-up adapter's files' sha256 (`warmup_adapter`, each file whole), and the adapter
    itself when this run fitted it, its weights in parts (`repro.io.write_parts`): a control arm on another CPU merges
    it into the same start (`train.format_warmup.adapter`, D246).
    Refuses a run whose items were not scored on `rows` with this code and these settings."""
    policies, logs, files = {}, {}, {}
    for name, policy in scored_policies(cfg).items():
        weights = model_fingerprint(policy)
        key = weights_score_key(cfg, weights, rows)
        if scored_items(cfg, name, key) is None:
            raise FileNotFoundError(f"{scores_path(cfg, name)}: no scores of {name} for its weights, these questions "
                                    f"and this code; run `dvc exp run -S profile={cfg.name} evidence_seeds` first")
        path = scores_path(cfg, name)
        policies[name] = {"weights": weights, "key": key, "sha256": file_sha256(path), "questions": len(rows)}
        files[f"scores/{name}.jsonl"] = path
    for seed in cfg.evidence.seeds:
        path = seed_run(cfg, seed).train_log
        logs[seed_name(seed)] = {"sha256": file_sha256(path), "steps": len(path.read_bytes().splitlines())}
        files[f"logs/{seed_name(seed)}.jsonl"] = path
    adapter, source = warmup_adapter(cfg)
    copied = adapter is not None and source is None
    if copied:
        files |= {f"{ADAPTER}/{name}": adapter / name for name in ADAPTER_FILES if name != ADAPTER_WEIGHTS}
    manifest = {"profile": cfg.name, "study": STUDY, "commit": _commit(), "machine": machine(),
                "scoring_code": scoring_code(), "policies": policies, "logs": logs,
                "adapter": None if adapter is None else {"source": source, "files": adapter_sha256(adapter)}}
    target = record_dir(cfg.name)
    shutil.rmtree(target, ignore_errors=True)
    with atomic_dir(target) as tmp:
        for relative, source in files.items():
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tmp / relative)
        if copied:
            write_parts(adapter / ADAPTER_WEIGHTS, tmp / ADAPTER / ADAPTER_WEIGHTS)
        write_json(tmp / MANIFEST, manifest)
    return manifest


def read_manifest(profile: str) -> dict | None:
    """`profile`'s record manifest; None when it has no record."""
    path = record_dir(profile) / MANIFEST
    return read_json_object(path) if path.exists() else None


def _checked(path: Path, entry: dict, where: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"{path}: {where} records it, but the file is missing")
    if file_sha256(path) != entry.get("sha256"):
        raise InputError(path, f"its sha256 is not {where}'s: the file was changed after it was recorded")
    return path


def checked_scores(cfg: Profile, name: str, rows: Sequence[dict]) -> Path:
    """The recorded items file of policy `name`, refused (naming the file and the manifest's field) unless it has the
    manifest's sha256 and the manifest's key is the one this clone computes for `rows` with the recorded weights."""
    manifest_path = record_dir(cfg.name) / MANIFEST
    entry = (read_manifest(cfg.name) or {}).get("policies", {}).get(name)
    if entry is None:
        raise InputError(manifest_path, f"policies.{name} is missing")
    for field in ("weights", "key", "sha256"):
        if field not in entry:
            raise InputError(manifest_path, f"policies.{name}.{field} is missing")
    path = _checked(record_dir(cfg.name) / "scores" / f"{name}.jsonl", entry, str(manifest_path))
    if entry["key"] != weights_score_key(cfg, entry["weights"], rows):
        raise InputError(manifest_path, f"policies.{name}.key is not this clone's key for these weights: the record "
                         f"was scored on other questions, with other settings or other scoring code")
    return path


def recorded_items(cfg: Profile, start: str, rows: Sequence[dict], same_start: bool = True
                   ) -> dict[str, pd.DataFrame] | None:
    """The recorded items of `cfg`'s arm, START first and then each seed, each `checked_scores`; with `same_start`
    the recorded start's weights must also be those of this clone's start policy `start`. None when `cfg` has no
    record."""
    manifest = read_manifest(cfg.name)
    if manifest is None:
        return None
    weights = manifest.get("policies", {}).get(START, {}).get("weights")
    if same_start and weights != model_fingerprint(start):
        raise InputError(record_dir(cfg.name) / MANIFEST, f"policies.{START}.weights are not those of this clone's "
                         f"start policy {start}: the two arms must start from the same warm-up (a record from a CPU "
                         f"whose arithmetic gives other weights pairs only with evidence.recipe_start: rescored)")
    names = [START, *(seed_name(s) for s in cfg.evidence.seeds)]
    return {name: pd.DataFrame(list(read_jsonl(checked_scores(cfg, name, rows))), columns=ITEM_COLUMNS)
            for name in names}


def recorded_logs(cfg: Profile) -> dict[str, Path]:
    """Each seed's recorded train_log.jsonl, by seed name, checked against the manifest's sha256."""
    manifest_path = record_dir(cfg.name) / MANIFEST
    logs = (read_manifest(cfg.name) or {}).get("logs", {})
    paths = {}
    for seed in cfg.evidence.seeds:
        name = seed_name(seed)
        if name not in logs:
            raise InputError(manifest_path, f"logs.{name} is missing")
        paths[name] = _checked(record_dir(cfg.name) / "logs" / f"{name}.jsonl", logs[name], str(manifest_path))
    return paths
