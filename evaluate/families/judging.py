"""Builds the judge backend a run config asks for, shared by every family that asks a judge
(GPT, SAGEval, UniEval's causal-LM variant), so one run loads one local model and keeps one cache.

The API key comes from `--openai_key` or the environment variable named by `judge.api_key_env`;
it is handed to the client and never written to results, cache, manifest or logs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..backends.base import Backend

if TYPE_CHECKING:
    from ..config import RunConfig

_SHARED: dict[tuple, Backend] = {}


def cache_path(cfg: "RunConfig") -> Path | None:
    if cfg.judge.cache is False:
        return None
    if isinstance(cfg.judge.cache, str):
        return cfg.resolve(cfg.judge.cache)
    return cfg.save_path / "judge_cache.sqlite"


def make_backend(cfg: "RunConfig") -> Backend:
    """The (cached) judge for this config; one instance per distinct judge within a process."""
    j = cfg.judge
    cpath = cache_path(cfg)
    key = (j.backend, j.model, j.base_url, j.dtype, j.lookahead, str(cpath))
    if key in _SHARED:
        return _SHARED[key]
    if j.backend == "openai":
        from ..backends.openai_compat import OpenAICompatBackend

        inner: Backend = OpenAICompatBackend(j.model, base_url=j.base_url, api_key_env=j.api_key_env,
                                             api_key=cfg.openai_key, concurrency=j.concurrency, timeout=j.timeout,
                                             max_retries=j.max_retries, price=j.price)
    else:
        from ..backends.local import LocalBackend

        inner = LocalBackend(j.model, dtype=j.dtype, max_new_tokens=j.max_tokens, lookahead=j.lookahead)
    backend = inner
    if cpath is not None:
        from ..backends.cache import CachedBackend

        backend = CachedBackend(inner, cpath)
    _SHARED[key] = backend
    return backend


def backend_usage(backend: Backend) -> dict:
    usage = getattr(backend, "usage", None)
    return usage() if callable(usage) else {}


def release_all() -> None:
    for b in _SHARED.values():
        b.close()
    _SHARED.clear()
