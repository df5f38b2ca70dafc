"""Typed experiment profiles read from params.yaml.

params.yaml holds a top-level `profile` key (the profile `dvc repro` runs) and a `profiles` mapping. Every
profile is written out in full (YAML anchors share sections), so the keys DVC tracks for a stage,
`profiles.<profile>.<section>`, are exactly the values the stage reads. Each section is a dataclass: a
misspelt or unknown key fails loudly with its full path instead of being silently ignored.

    >>> cfg = load_profile("ci")          # or load_profile() for the selected one
    >>> cfg.retrieval.topk
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = "params.yaml"


class ConfigError(ValueError):
    """A profile that does not match the schema."""


@dataclasses.dataclass(frozen=True)
class ModelsConfig:
    """Model references: `embedded:<name>` (materialised under data/assets by repro.assets), a local
    directory, or a Hugging Face hub id (paper profiles, on machines that can reach the weights)."""

    extractor: str  # the policy trained by GRPO (EviOmni) and the backbone of FilCo/SEER/CoT
    generator: str  # the LoRA QA generator's base model (Appendix A.2)
    agents: list[str]  # Search-R1 agents of the agentic study (Table 5)
    released_extractor: str | None = None  # the authors' EviOmni checkpoint, for inference-only runs
    dtype: typing.Literal["float32", "bfloat16", "float16", "auto"] = "float32"


@dataclasses.dataclass(frozen=True)
class RewardsConfig:
    """Rewards, masking and advantage of §3.1-3.3 (Eqs. 4-7, 10-11); choices in docs/decisions.md."""

    weights: tuple[float, ...] = (0.8, 0.1, 0.1)  # λ1 answer, λ2 length, λ3 format (Eq. 5)
    answer_subset: tuple[str, ...] = ("rationale", "evidence", "full")  # averaged into R^ans (Table 3)
    tau: float = 0.5  # τ of Eq. 10, grid {0.1, 0.2, 0.5, 1.0}; chosen value unreported (D16)
    gamma: float = 0.5  # γ of Eq. 11, grid {0.1, 0.3, 0.5, 0.8, 1.0}; chosen value unreported (D16)
    omega: float = 0.9  # ω of Eq. 11
    eps_std: float = 0.1  # ε_std of Eq. 7
    length_unit: typing.Literal["tokens", "words"] = "tokens"  # L_r, L_e, L_P and CR (D13)
    mask_mode: typing.Literal["empty_tags", "drop", "placeholder"] = "empty_tags"  # a masked span (D6)
    prefill_answer_tag: bool = True  # open the answer turn with "<answer>" for o_r, o_e, o_f (D7)

    def __post_init__(self):
        if len(self.weights) != 3 or any(w < 0 for w in self.weights):
            raise ConfigError(f"rewards.weights: expected 3 non-negative numbers, got {list(self.weights)}")
        allowed = ("rationale", "evidence", "full")
        if not self.answer_subset or len(set(self.answer_subset)) != len(self.answer_subset) or not set(
            self.answer_subset
        ) <= set(allowed):
            raise ConfigError(f"rewards.answer_subset: expected distinct names from {list(allowed)}")
        if self.tau <= 0 or self.gamma < 0 or not 0 <= self.omega <= 1 or self.eps_std < 0:
            raise ConfigError("rewards: need tau > 0, gamma >= 0, 0 <= omega <= 1, eps_std >= 0")


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    description: str
    seed: int
    models: ModelsConfig
    rewards: RewardsConfig = dataclasses.field(default_factory=RewardsConfig)  # defaults = the paper + D16


def _is_optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _check_value(value: Any, tp: Any, where: str) -> Any:
    """Validate (and lightly coerce: int -> float) one value against a type hint."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if _is_optional(tp):
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _check_value(value, inner, where)
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{where}: {value!r} is not one of {list(typing.get_args(tp))}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        items = [_check_value(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        _, val_tp = typing.get_args(tp) or (Any, Any)
        return {k: _check_value(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool) or not isinstance(value, tp):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__} ({value!r})")
    return value


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _check_value(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key '{name}'")
    return cls(**kwargs)


def read_params(params_path: str | Path = PARAMS_FILE) -> dict:
    params = yaml.safe_load(Path(params_path).read_text(encoding="utf-8"))
    if not isinstance(params, dict) or not isinstance(params.get("profiles"), dict):
        raise ConfigError(f"{params_path}: expected a mapping with a 'profiles' section")
    return params


def profile_names(params_path: str | Path = PARAMS_FILE) -> list[str]:
    return list(read_params(params_path)["profiles"])


def load_profile(name: str | None = None, params_path: str | Path = PARAMS_FILE) -> Profile:
    """Load profile `name` (default: the top-level `profile` key) and validate it against the schema."""
    params = read_params(params_path)
    name = name or params.get("profile")
    if not name:
        raise ConfigError(f"{params_path}: no profile given and no top-level 'profile' key")
    profiles = params["profiles"]
    if name not in profiles:
        raise ConfigError(f"{params_path}: unknown profile '{name}'; defined: {sorted(profiles)}")
    return _build(Profile, {"name": name, **profiles[name]}, f"{params_path}: profiles.{name}")
