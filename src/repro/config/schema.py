"""How params.yaml is read and checked: typed sections from mappings, errors with the key path and the field's help."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


PARAMS_FILE = "params.yaml"


class ConfigError(ValueError):
    """A profile that does not match the schema."""


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
            try:
                kwargs[name] = _check_value(data[name], hints[name], f"{where}.{name}")
            except ConfigError as err:  # the field's own error gets its help; a nested field's has its own
                raise ConfigError(f"{err}{field_help(f)}" if str(err).startswith(f"{where}.{name}:") else str(err)) \
                    from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key '{name}'{field_help(f)}")
    return cls(**kwargs)


def field_help(f: dataclasses.Field) -> str:
    """" (<the field's help>)" for an error message, or "" for a field without one."""
    return f" ({f.metadata['help']})" if "help" in f.metadata else ""


def _check_unique_keys(node: yaml.Node, where: str, path: str = "") -> None:
    """ConfigError for a key given twice in one mapping (PyYAML would keep the last one silently)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be overridden; that is no duplicate
                continue
            line = key.start_mark.line + 1
            if key.value in seen:
                raise ConfigError(f"{where}:{line}: {path}{key.value}: duplicate key (first given on line "
                                  f"{seen[key.value]})")
            seen[key.value] = line
            _check_unique_keys(value, where, f"{path}{key.value}.")
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, where, f"{path.rstrip('.')}[{i}].")


def _check_finite(value: Any, where: str, path: str = "") -> None:
    """ConfigError for a NaN or an infinity (`.nan`, `.inf`) anywhere in the parameters."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: {path.rstrip('.')}: {value} is not allowed (NaN and infinities are rejected)")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, where, f"{path}{key}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, where, f"{path.rstrip('.')}[{i}].")


def read_params(params_path: str | Path = PARAMS_FILE) -> dict:
    """params.yaml as a dict; a duplicate key, a NaN or an infinity is a ConfigError naming its key path (D107)."""
    loader = yaml.CSafeLoader(Path(params_path).read_text(encoding="utf-8"))
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_unique_keys(node, str(params_path))
        params = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as err:  # its own message names "<unicode string>", not the file
        line = f":{err.problem_mark.line + 1}" if err.problem_mark else ""
        raise ConfigError(f"{params_path}{line}: invalid YAML ({err.problem})") from None
    finally:
        loader.dispose()
    _check_finite(params, str(params_path))
    if not isinstance(params, dict) or not isinstance(params.get("profiles"), dict):
        raise ConfigError(f"{params_path}: expected a mapping with a 'profiles' section")
    return params


def profile_names(params_path: str | Path = PARAMS_FILE) -> list[str]:
    return list(read_params(params_path)["profiles"])


def walk(value, path: str) -> Iterator[tuple[str, object]]:
    """(key path, value) of `value` and of every section, mapping, list item and leaf under it, dataclasses read as
    mappings: `walk(cfg.train, "train")` yields ("train", {...}), ("train.dataset", "nq"), ... in field order."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")
