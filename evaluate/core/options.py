"""Typed options: a config block declared as a dataclass, checked key by key when the config loads.

A block (`judge:`, `repeval:`, `sageval:`, ...) is a dataclass whose fields are its keys. Each
field has a type hint, a default and a one-line doc, and may carry bounds or choices:

    @dataclass
    class RepEvalOptions:
        k: int = option(20, "pairs used to fit a direction", min=2)
        method: Literal["pca", "mean", "svm"] = option("pca", "how the direction is estimated")

`parse_options(RepEvalOptions, raw, "repeval")` returns the filled dataclass and every problem
with its key path: unknown keys (with the closest known ones), wrong types, values out of range.
A dataclass may add cross-field checks in a `problems(self) -> list[tuple[key, message]]` method.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import MISSING, field, fields
from typing import Any, Literal, TypeVar, Union

from .registry import suggest

T = TypeVar("T")


def option(default: Any = MISSING, doc: str = "", *, min: float | None = None, max: float | None = None,
           gt: float | None = None, default_factory: Any = MISSING, nonempty: bool = False) -> Any:
    """A dataclass field with its doc and bounds (`min`/`max` inclusive, `gt` exclusive)."""
    meta = {"doc": doc, "min": min, "max": max, "gt": gt, "nonempty": nonempty}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    if isinstance(default, (dict, list, set)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


def type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def short(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: JSON, cut to `limit` characters (never the whole of a big value)."""
    if isinstance(value, (dict, list)) and len(value) > 20:
        return f"<{type_name(value)} of {len(value)} entries>"
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe_type(hint: Any) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if hint is str:
        return "a string"
    if hint is type(None):
        return "null"
    if origin is Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if origin is dict:
        return f"a mapping of {describe_type(args[1]) if args else 'values'}"
    if origin is list:
        return f"a list of {describe_type(args[0]) if args else 'values'}"
    return getattr(hint, "__name__", str(hint))


def expected_text(hint: Any, meta: typing.Mapping[str, Any]) -> str:
    """What a field expects, in words, bounds included ("a positive integer", "a number > 0")."""
    base = typing.get_args(hint)[0] if typing.get_origin(hint) in (Union, types.UnionType) and \
        len(typing.get_args(hint)) == 2 and type(None) in typing.get_args(hint) else hint
    lo, hi, gt = meta.get("min"), meta.get("max"), meta.get("gt")
    if base is int and hi is None and gt is None and lo in (0, 1):
        text = "a positive integer" if lo == 1 else "a non-negative integer"
    elif base in (int, float) and (lo is not None or hi is not None or gt is not None):
        kind = "an integer" if base is int else "a number"
        if gt is not None:
            text = f"{kind} > {gt:g}"
        elif lo is not None and hi is not None:
            text = f"{kind} from {lo:g} to {hi:g}"
        else:
            text = f"{kind} >= {lo:g}" if lo is not None else f"{kind} <= {hi:g}"
    else:
        return describe_type(hint)
    return text + (" or null" if base is not hint else "")


def check_type(value: Any, hint: Any) -> bool:
    """Whether `value` (parsed JSON/YAML) fits the type hint. bool is never an int; an int is a float."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(check_type(value, a) for a in args)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is dict:
        return isinstance(value, dict) and all(check_type(k, args[0]) and check_type(v, args[1])
                                               for k, v in value.items()) if args else isinstance(value, dict)
    if origin is list:
        return isinstance(value, list) and (not args or all(check_type(v, args[0]) for v in value))
    return isinstance(value, hint) if isinstance(hint, type) else True


def parse_options(cls: type[T], raw: Any, where: str) -> tuple[T, list[str]]:
    """`cls` filled from the mapping `raw`, and every problem found (each starts with its key path)."""
    problems: list[str] = []
    names = [f.name for f in fields(cls)]
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return cls(), [f"{where}: expected a mapping of options ({', '.join(names)}), got {type_name(raw)} {short(raw)}"]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in names:
            problems.append(f'{where}: unknown key "{key}"{suggest(str(key), names)} (known: {", ".join(names)})')
            continue
        f = next(x for x in fields(cls) if x.name == key)
        hint = hints[key]
        if not check_type(value, hint):
            choices = [a for a in typing.get_args(hint) if isinstance(a, str)] if typing.get_origin(hint) is Literal else []
            if choices and isinstance(value, str):
                problems.append(f"{where}.{key}: expected {describe_type(hint)}, got {short(value)}{suggest(value, choices)}")
            else:
                problems.append(f"{where}.{key}: expected {expected_text(hint, f.metadata)}, "
                                f"got {type_name(value)} {short(value)}")
            continue
        bad = _bounds(value, f.metadata)
        if bad:
            problems.append(f"{where}.{key}: expected {expected_text(hint, f.metadata) if bad != 'a non-empty string' else bad}"
                            f", got {short(value)}")
            continue
        values[key] = value
    obj = cls(**values)
    check = getattr(obj, "problems", None)
    if callable(check) and not problems:
        problems.extend(f"{where}.{key}: {msg}" if key else f"{where}: {msg}" for key, msg in check())
    return obj, problems


def _bounds(value: Any, meta: typing.Mapping[str, Any]) -> str | None:
    if meta.get("nonempty") and isinstance(value, str) and not value.strip():
        return "a non-empty string"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    lo, hi, gt = meta.get("min"), meta.get("max"), meta.get("gt")
    if value != value:  # NaN
        return "a number, not NaN"
    if gt is not None and not value > gt:
        return f"a value > {gt:g}"
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        if lo is not None and hi is not None:
            return f"a value from {lo:g} to {hi:g}"
        return f"a value >= {lo:g}" if lo is not None else f"a value <= {hi:g}"
    return None


def options_doc(cls: type) -> list[tuple[str, str, Any, str]]:
    """(key, type, default, doc) for each option: the reference docs/config.md and docs/judge.md are
    generated from (docs/generate_reference.py)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING
                                                             else None)
        out.append((f.name, describe_type(hints[f.name]), default, f.metadata.get("doc", "")))
    return out


def as_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)
