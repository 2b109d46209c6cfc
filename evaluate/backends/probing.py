"""A run's judges that know within seconds whether they are there: each HTTP judge, under its
cache, probes its endpoints (evaluate.backends.probe) before the first request that would be paid for,
and a judge none of whose endpoints can be reached fails every request at once instead of retrying."""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from .base import Backend, Completion, JudgeRequest, ProgressFn, WrappingBackend
from .cache import CachedBackend
from .options import JudgeOptions
from .pool import JudgePool, open_backend
from .probe import probe
from .kinds import ServerLog
from .registry import capabilities
from .retry import JudgeUnreachable

PROBE_TIMEOUT = 10.0  # seconds an endpoint has to answer the probe (a live server lists its models in ms)
FATAL_PROBE = ("unreachable", "timeout")  # a probe failure that every request would repeat, for minutes


def probe_judge(opts: JudgeOptions, api_key: str | None = None) -> tuple[list[Any], str | None]:
    """Probe every endpoint of an openai judge (evaluate.backends.probe; free when the server lists
    its models). Returns the per-endpoint results and why the judge cannot be used (no endpoint
    answers), or None."""
    results = probe(opts, api_key=api_key, timeout=PROBE_TIMEOUT)
    if not results or any(r.ok for r in results):
        return results, None
    return results, "; ".join(f"{r.url}: {(r.error or r.kind).removeprefix('unreachable: ')}" for r in results)


class ProbeFirst(WrappingBackend):
    """In front of an HTTP judge, under the cache: the first request that would be paid for first
    probes the endpoints, so a judge that is not there is known within seconds (a run answered
    from the cache needs no server and probes nothing). When no endpoint can be reached
    (refused, DNS, TLS, no route, no answer), every request fails at once, unsent, and
    `unreachable` says why; a probe failure that requests may still get past (a refused key, a
    model name the listing lacks) is logged and the requests decide."""

    def __init__(self, inner: Backend, opts: JudgeOptions, api_key: str | None, log: Callable[[str], None]):
        super().__init__(inner)
        self._opts, self._api_key, self._log = opts, api_key, log
        self._lock = threading.Lock()
        self._probed = False
        self.reason: str | None = None

    @property
    def unreachable(self) -> str | None:
        return self.reason or getattr(self.inner, "unreachable", None)

    def _check(self) -> str | None:
        with self._lock:
            if not self._probed:
                self._probed = True
                results, down = probe_judge(self._opts, self._api_key)
                for r in results:
                    if not r.ok or r.note:
                        self._log(f"{'warning: ' if not r.ok else ''}{r.line()}")
                if down and all(r.kind in FATAL_PROBE for r in results):
                    self.reason = down
        return self.reason

    def _unsent(self, n: int) -> list[Completion]:
        return [Completion(error=str(JudgeUnreachable(self.reason or "", sent=False))) for _ in range(n)]

    def complete(self, request: JudgeRequest) -> Completion:
        if self._check():
            raise JudgeUnreachable(self.reason or "", sent=False)
        return self.inner.complete(request)

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        if requests and self._check():
            out = self._unsent(len(requests))
            for c in out:
                if progress is not None:
                    progress(c)
            return out
        return self.inner.complete_many(requests, progress)

    def complete_many_indexed(self, requests: Sequence[JudgeRequest], on_result=None) -> list[Completion]:
        if requests and self._check():
            return self._unsent(len(requests))  # the cache reports what comes back unreported
        indexed = getattr(self.inner, "complete_many_indexed", None)
        if callable(indexed):
            return indexed(requests, on_result)
        out = self.inner.complete_many(requests)
        for i, c in enumerate(out):
            if on_result is not None:
                on_result(i, c)
        return out

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class ProbingPool(JudgePool):
    """The run's judges, each HTTP one behind `ProbeFirst`; `unreachable()` says why the run must stop."""

    def __init__(self, api_key: str | None = None, log: Callable[[str], None] = lambda s: None,
                 server_log: ServerLog | None = None):
        super().__init__(api_key=api_key, server_log=server_log)
        self._log = log

    def backend(self, opts, cache_path):  # type: ignore[override]
        key = self.key(opts, cache_path)
        with self._lock:
            if key not in self._backends:
                b = open_backend(opts, cache_path, self._api_key, self._server_log)
                if capabilities(opts).user_server and not opts.batch:
                    if isinstance(b, CachedBackend):
                        b.inner = ProbeFirst(b.inner, opts, self._api_key, self._log)
                    else:
                        b = ProbeFirst(b, opts, self._api_key, self._log)
                self._backends[key] = b
            return self._backends[key]

    def unreachable(self) -> str | None:
        with self._lock:
            backends = list(self._backends.values())
        return next((r for r in (getattr(b, "unreachable", None) for b in backends) if r), None)

    def cache_stats(self) -> list[Any]:
        """Size and this run's hits of every judge cache the run opened."""
        with self._lock:
            backends = list(self._backends.values())
        return [b.stats() for b in backends if isinstance(b, CachedBackend)]
