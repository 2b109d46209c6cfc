"""How each backend kind is opened (kinds.py says what each kind is and can do).

For each kind:
- `open(opts, api_key, server_log)`: the backend that answers (nothing is loaded, started or sent
  before its first request); `pool.open_backend` puts batch jobs and the cache in front;
- `identity(opts)`: a backend for its signature and capabilities only (a dry run's estimate, an
  export), which needs no key and starts nothing.

`shown_options` is what the report's judge panel shows of a manifest's judge block: the keys the
judge's kind reads (each option declares its kinds in options.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from .base import Backend
from .kinds import Capabilities, ServerLog, capabilities, get, kind_name, names  # noqa: F401  (the registry's API)
from .options import JudgeOptions


@dataclass(frozen=True)
class Factories:
    open: Callable[[JudgeOptions, str | None, ServerLog | None], Backend]
    identity: Callable[[JudgeOptions], Backend]


_FACTORIES: dict[str, Factories] = {}


def register_factories(kind: str, factories: Factories) -> None:
    get(kind)  # a kind of kinds.py
    _FACTORIES[kind] = factories


def open_inner(opts: JudgeOptions, api_key: str | None = None, server_log: ServerLog | None = None) -> Backend:
    """The backend `opts` names, bare (no cache, no batch jobs): `pool.open_backend` adds those."""
    return _FACTORIES[get(opts.backend).name].open(opts, api_key, server_log)


def identity(opts: JudgeOptions) -> Backend:
    """The judge `opts` names, for its signature and capabilities only: no key, nothing started or sent."""
    return _FACTORIES[get(opts.backend).name].identity(opts)


# keys that older or newer versions wrote for the local judge only (read from manifests)
_RETIRED_LOCAL = ("threads",)


def reads(kind: str, key: str) -> bool:
    """Whether backend `kind` reads option `key` (an option of no declared kind is read by every kind;
    a key that is not an option, from an older or newer version's manifest, counts as read)."""
    meta = next((f.metadata for f in fields(JudgeOptions) if f.name == key), None)
    if meta is None:
        return key not in _RETIRED_LOCAL or kind == "local"
    kinds = meta.get("kinds")
    return kinds is None or kind in kinds


def shown_options(block: dict[str, Any]) -> dict[str, Any]:
    """A judge block (a manifest's `judge`) without the keys its kind does not read, nor those
    that do not apply (batch_poll without batch jobs, base_url beside endpoints, the endpoints'
    settings without endpoints): what the report's judge panel shows."""
    kind = str(block.get("backend", "local"))
    if kind not in names():
        return dict(block)
    drop = {k for k in block if k != "backend" and not reads(kind, k)}
    if not block.get("batch"):
        drop.add("batch_poll")
    if block.get("endpoints"):
        drop.add("base_url")
    else:
        drop.update(("endpoints", "endpoint_failures", "endpoint_cooldown"))
    return {k: v for k, v in block.items() if k not in drop}


# ------------------------------------------------------------------ the kinds this package brings
def _open_openai(opts: JudgeOptions, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(opts.model, base_url=opts.base_url, endpoints=opts.endpoint_specs(),
                               api_key_env=opts.api_key_env, api_key=api_key,
                               concurrency=opts.concurrency, timeout=opts.timeout,
                               max_retries=opts.max_retries, price=opts.price,
                               endpoint_failures=opts.endpoint_failures,
                               endpoint_cooldown=opts.endpoint_cooldown)


def _identity_openai(opts: JudgeOptions) -> Backend:
    from .openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(opts.model, base_url=opts.base_url or "http://127.0.0.1:1/v1",
                               api_key="EMPTY", concurrency=opts.concurrency, timeout=opts.timeout)


def _open_local(opts: JudgeOptions, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .local import LocalBackend

    return LocalBackend(opts.model, dtype=opts.dtype, max_new_tokens=opts.max_tokens, lookahead=opts.lookahead,
                        batch_size=opts.local_batch_size, sequences=opts.local_sequences,
                        batch_tokens=opts.local_batch_tokens,
                        matmul=opts.local_matmul, pack=opts.local_pack_weights, device=opts.device)


def _identity_local(opts: JudgeOptions) -> Backend:
    from .local import LocalBackend

    return LocalBackend(opts.model, dtype=opts.dtype, max_new_tokens=opts.max_tokens, lookahead=opts.lookahead,
                        matmul=opts.local_matmul, device=opts.device)


def _open_vllm(opts: JudgeOptions, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .vllm import VllmBackend

    return VllmBackend(opts, server_log=server_log)


def _identity_vllm(opts: JudgeOptions) -> Backend:
    from .vllm import VllmBackend

    return VllmBackend(opts)



register_factories("local", Factories(_open_local, _identity_local))
register_factories("openai", Factories(_open_openai, _identity_openai))
register_factories("vllm", Factories(_open_vllm, _identity_vllm))
