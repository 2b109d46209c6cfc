"""The judge of a run: one backend per distinct judge configuration, opened on first use, shared by
every family that asks a judge (GPT, SAGEval, UniEval's judge variant), closed by the runner.

`JudgePool.for_family(name)` hands a family the shared backend behind a meter, so the calls,
tokens and cost of each family reach the manifest without the family doing anything. The key of
the pool is the *whole* judge configuration and the cache path: two configs that differ in
max_tokens, concurrency, timeout or price get separate backends (the weights of a local model are
still loaded once per process, by `weights.load_causal_lm`).

The API key comes from `--openai_key` or the environment variable named by `judge.api_key_env`;
it is handed to the client and never written to results, cache, manifest or logs.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any, Sequence

from .base import Backend, Completion, JudgeRequest, ProgressFn, WrappingBackend
from .options import JudgeOptions
from .kinds import ServerLog
from .registry import open_inner


def open_backend(opts: JudgeOptions, cache_path: Path | None, api_key: str | None = None,
                 server_log: ServerLog | None = None) -> Backend:
    """The judge `opts` describe (its kind's factory, registry.py), behind the SQLite cache at
    `cache_path` (None: no cache). `server_log`: where a server the backend starts writes its log."""
    inner: Backend = open_inner(opts, api_key, server_log)
    if opts.batch:  # provider batch jobs, under the cache (evaluate/backends/batch.py)
        from .batch import wrap

        inner = wrap(inner, opts, cache_path, api_key)
    if cache_path is None:
        return inner
    from .cache import CachedBackend

    cached = CachedBackend(inner, cache_path)
    if opts.batch:
        inner.attach(cached)  # type: ignore[attr-defined]
    return cached


class MeteredBackend(WrappingBackend):
    """A view of a shared backend that counts what one family asked of it."""

    def __init__(self, inner: Backend, price: dict[str, float] | None = None):
        super().__init__(inner)
        self.price = price
        self._lock = threading.Lock()
        self.counts = dict(requests=0, cache_hits=0, cache_misses=0, failures=0, prompt_tokens=0, completion_tokens=0)

    def _count(self, comps: Sequence[Completion]) -> None:
        with self._lock:
            for c in comps:
                self.counts["requests"] += 1
                self.counts["cache_hits" if c.cached else "cache_misses"] += 1
                self.counts["failures"] += int(not c.ok)
                if not c.cached:
                    self.counts["prompt_tokens"] += c.prompt_tokens
                    self.counts["completion_tokens"] += c.completion_tokens

    def complete(self, request: JudgeRequest) -> Completion:
        comp = self.inner.complete(request)
        self._count([comp])
        return comp

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        comps = self.inner.complete_many(requests, progress=progress)
        self._count(comps)
        return comps

    def usage(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self.counts)
        out["cost_usd"] = (round(out["prompt_tokens"] * self.price["prompt"] / 1e6
                                 + out["completion_tokens"] * self.price["completion"] / 1e6, 6)
                           if self.price else None)
        return out

    def __getattr__(self, name: str) -> Any:  # the local backend's tokenizer, forward-pass counters...
        return getattr(self.inner, name)


def _name(backend: Backend | None, name: str) -> None:
    """Give every layer of a judge (cache, probe, the backend itself) its name, for their messages."""
    while isinstance(backend, Backend):
        backend.judge_name = name
        backend = backend.__dict__.get("inner")


class JudgePool:
    """The run's judges, keyed on the full judge configuration; opened lazily, closed by `close`."""

    def __init__(self, api_key: str | None = None, server_log: ServerLog | None = None):
        self._api_key = api_key
        self._server_log = server_log
        self._backends: dict[tuple, Backend] = {}
        self._meters: dict[tuple[tuple, str], MeteredBackend] = {}
        self._names: dict[tuple, str] = {}  # a named judge's pool key -> its name (the first given)
        self._lock = threading.Lock()

    @staticmethod
    def key(opts: JudgeOptions, cache_path: Path | None) -> tuple:
        return (tuple(sorted((k, repr(v)) for k, v in dataclasses.asdict(opts).items())), str(cache_path))

    def backend(self, opts: JudgeOptions, cache_path: Path | None) -> Backend:
        key = self.key(opts, cache_path)
        with self._lock:
            if key not in self._backends:
                self._keep(key, open_backend(opts, cache_path, self._api_key, self._server_log))
            return self._backends[key]

    def _keep(self, key: tuple, backend: Backend) -> None:
        """A judge opened for the run (under the pool's lock): two judges that share a model name on
        different servers no longer read the cache rows keyed on the model name alone (cache.py)."""
        from .cache import CachedBackend, separate_namesakes

        self._backends[key] = backend
        separate_namesakes(b for b in self._backends.values() if isinstance(b, CachedBackend))

    def for_family(self, family: str, opts: JudgeOptions, cache_path: Path | None,
                   judge: str | None = None) -> MeteredBackend:
        """The judge `opts` describe, metered for `family`; `judge`: its name (a panel's judge), which every
        message about it then says."""
        backend = self.backend(opts, cache_path)
        key = (self.key(opts, cache_path), family)
        with self._lock:
            if judge is not None:
                self._names.setdefault(key[0], judge)
                _name(backend, self._names[key[0]])
            if key not in self._meters:
                self._meters[key] = MeteredBackend(backend, opts.price)
            return self._meters[key]

    def usage(self) -> dict[str, Any]:
        """Per family: requests, cache hits, failures, tokens, cost; and the judges' own totals. A family
        that asked nothing (a judge built only to read its signature, as the judge check's store lookup
        does) is left out rather than shown as an empty line."""
        out: dict[str, Any] = {}
        for (_, family), meter in self._meters.items():
            used = meter.usage()
            if not any(used.get(k) for k in ("requests", "cache_hits", "cache_misses", "failures")):
                continue
            fam = out.setdefault(family, {})
            for k, v in used.items():
                fam[k] = (fam.get(k) or 0) + v if v is not None else fam.get(k)
        totals = [b.usage() for b in self._backends.values() if callable(getattr(b, "usage", None))]
        if totals:
            out["(judge)"] = totals[0] if len(totals) == 1 else totals
        return out

    def cancel(self) -> None:
        """A stopped run: judge requests not yet sent come back as errors at once (in flight ones finish)."""
        with self._lock:
            backends = list(self._backends.values())
        for b in backends:
            inner = b
            while inner is not None and not callable(getattr(type(inner), "cancel", None)):
                inner = getattr(inner, "inner", None)
            if inner is not None:
                inner.cancel()

    def close(self) -> None:
        with self._lock:
            for b in self._backends.values():
                b.close()
            self._backends.clear()
            self._meters.clear()
