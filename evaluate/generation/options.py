"""The `model:` block of a model config: the model under test, reached as the judge is.

The transport keys are the judge's own (`JudgeOptions`: backend, base_url / endpoints, model,
api_key_env, concurrency, timeout, max_retries, cache, price, batch, ...), declared once in
evaluate/backends/options.py and copied here field by field with their docs and bounds, so the two
blocks are validated by the same code (`parse_options`, did-you-mean) and open the same backends
(`judge_options()` -> `open_backend`). The judge-only keys (mode, both_orders, explain,
local_batch_size) are left out; the generation keys (temperature, top_p, max_tokens, seed, system,
stop) are added.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import MISSING, field, fields
from pathlib import Path
from typing import Any

from ..backends.options import JudgeOptions
from ..backends.preflight import check_model
from ..core.errors import InputError
from ..core.io import read_structured
from ..core.options import option, parse_options
from ..core.registry import suggest

# judge keys that mean nothing for a model under test
JUDGE_ONLY = ("mode", "both_orders", "explain", "local_batch_size")
# keys whose generation default differs from the judge's
_DEFAULTS: dict[str, Any] = {"max_tokens": 1024, "temperature": None, "model": None}


def _transport_fields() -> list[tuple[str, Any, Any]]:
    hints = typing.get_type_hints(JudgeOptions)
    out = []
    for f in fields(JudgeOptions):
        if f.name in JUDGE_ONLY or f.name == "temperature":
            continue
        hint = hints[f.name]
        if f.name in _DEFAULTS:
            hint = hint | None
            new = field(default=_DEFAULTS[f.name], metadata=f.metadata)
        elif f.default_factory is not MISSING:
            new = field(default_factory=f.default_factory, metadata=f.metadata)
        else:
            new = field(default=f.default, metadata=f.metadata)
        out.append((f.name, hint, new))
    return out


def _generation_fields() -> list[tuple[str, Any, Any]]:
    return [
        ("temperature", float | None, option(None, "sampling temperature; null: 0 (greedy), or FastChat's table "
                                                   "per category for MT-bench questions", min=0, max=2)),
        ("top_p", float | None, option(None, "nucleus sampling (null: the server's default)", gt=0, max=1)),
        ("seed", int | None, option(None, "sampling seed sent with every request (servers that honour it)")),
        ("system", str | None, option(None, "system message sent before the first user turn")),
        ("stop", list[str] | None, option(None, "stop sequences")),
    ]


def _problems(self: Any) -> list[tuple[str, str]]:
    out = [(k, m) for k, m in JudgeOptions.problems(self.judge_options()) if k != "model"]
    if not self.model:
        out.append(("model", "the model to ask: a served model name (openai backend) or a packaged/local model "
                             "(local backend)"))
    if self.stop is not None and any(not s for s in self.stop):
        out.append(("stop", "expected non-empty strings"))
    return out


def _judge_options(self: Any) -> JudgeOptions:
    """The transport part as JudgeOptions: what `open_backend` and the probe read."""
    keys = {f.name for f in fields(JudgeOptions)}
    given = {f.name: getattr(self, f.name) for f in fields(self) if f.name in keys and f.name != "temperature"}
    given["model"] = self.model or JudgeOptions.model
    return JudgeOptions(**given)


ModelOptions = dataclasses.make_dataclass(
    "ModelOptions", _transport_fields() + _generation_fields(),
    namespace={"problems": _problems, "judge_options": _judge_options,
               "endpoint_specs": lambda self: self.judge_options().endpoint_specs(),
               "__doc__": "The `model:` block: the judge's transport keys plus generation keys."})
ModelOptions.__module__ = __name__

TOP_KEYS = ("model",)


def parse_model_block(raw: Any, where: str, base: Path | None = None) -> Any:
    """A `model:` block (a mapping) as ModelOptions; InputError naming `where` and every bad key. A model
    this process loads itself is found (a relative path from `base`, the folder of the file holding the
    block, then the current directory) and its folder checked before anything loads."""
    if isinstance(raw, dict):
        secrets = [k for k in raw if str(k).lower() in ("api_key", "key", "openai_key", "openai_api_key")]
        if secrets:
            raise InputError(f"{where}.{secrets[0]}: put the API key in an environment variable and name it in "
                             "api_key_env; keys are never read from config files")
    opts, problems = parse_options(ModelOptions, raw, where)
    if problems:
        raise InputError("; ".join(problems))
    check_model(opts, [base], f"{where}.model")
    return opts


def load_model_config(path: Path) -> Any:
    """A model config file: a mapping with one `model:` block. InputError (exit 2) naming the file and key."""
    raw = read_structured(Path(path), "model config")
    if not isinstance(raw, dict) or "model" not in raw:
        keys = ", ".join(map(str, raw)) if isinstance(raw, dict) else type(raw).__name__
        hint = ""
        if isinstance(raw, dict):
            hint = next((suggest(str(k), list(TOP_KEYS)) for k in raw if suggest(str(k), list(TOP_KEYS))), "")
        raise InputError(f"{path}: expected a mapping with a model: block (backend, model, base_url, temperature, "
                         f"...), got {keys or 'nothing'}{hint}")
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown:
        raise InputError(f'{path}: unknown key "{unknown[0]}"{suggest(str(unknown[0]), list(TOP_KEYS))} '
                         "(a model config has one model: block)")
    if not isinstance(raw["model"], dict):
        raise InputError(f"{path}: model: expected a mapping (backend, model, base_url, ...), got "
                         f"{type(raw['model']).__name__}")
    return parse_model_block(raw["model"], f"{path}: model", Path(path).resolve().parent)
