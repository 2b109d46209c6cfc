"""A run's judges that know within seconds whether they are there: each HTTP judge, under its
cache, probes its endpoints (evaluate.backends.probe) before the first request that would be paid for,
and a judge none of whose endpoints can be reached fails every request at once instead of retrying.

The run's HTTP judges are probed together (`Probes`): the first request any of them would pay for
probes them all, and while one of them is known to be unreachable none of them sends anything. A
panel whose second judge is down stops before its first judge is paid for (issue 47: 49 requests
were paid to the live judge of a panel whose other judge the probe had already found dead)."""

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


class Probes:
    """The run's probing judges, probed together at the first request any of them would pay for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.members: list["ProbeFirst"] = []

    def add(self, member: "ProbeFirst") -> None:
        with self._lock:
            self.members.append(member)

    def check(self) -> str | None:
        """Probe every judge not probed yet; why nothing may be sent (a judge known to be unreachable,
        named), or None."""
        with self._lock:
            for m in self.members:
                m.probe()
            dead = next((m for m in self.members if m.reason), None)
        return None if dead is None else dead.named(dead.reason or "")


class ProbeFirst(WrappingBackend):
    """In front of an HTTP judge, under the cache: the first request that would be paid for first
    probes the endpoints, so a judge that is not there is known within seconds (a run answered
    from the cache needs no server and probes nothing). When no endpoint can be reached
    (refused, DNS, TLS, no route, no answer), every request fails at once, unsent, and
    `unreachable` says why; a probe failure that requests may still get past (a refused key, a
    model name the listing lacks) is logged and the requests decide."""

    def __init__(self, inner: Backend, opts: JudgeOptions, api_key: str | None, log: Callable[[str], None],
                 probes: Probes | None = None):
        super().__init__(inner)
        self._opts, self._api_key, self._log = opts, api_key, log
        self._lock = threading.Lock()
        self._probed = False
        self.reason: str | None = None
        self._stop: str | None = None  # why nothing is sent: this judge or another of the run is unreachable
        self._probes = probes or Probes()
        self._probes.add(self)

    @property
    def unreachable(self) -> str | None:
        return self.reason or getattr(self.inner, "unreachable", None)

    def named(self, text: str) -> str:
        """`text` about this judge, after its name where it has one (a panel's judge)."""
        return f"{self.judge_name}: {text}" if self.judge_name else text

    def probe(self) -> None:
        """Probe the endpoints once; sets `reason` when none can be reached."""
        with self._lock:
            if self._probed:
                return
            self._probed = True
            results, down = probe_judge(self._opts, self._api_key)
            for r in results:
                if not r.ok or r.note:
                    line = r.line()
                    if self.judge_name:  # "judge NAME: URL: ...": every message about a panel's judge names it
                        line = line.replace("judge ", f"judge {self.judge_name}: ", 1)
                    self._log(f"{'warning: ' if not r.ok else ''}{line}")
            if down and all(r.kind in FATAL_PROBE for r in results):
                self.reason = down

    def _check(self) -> str | None:
        if self._stop is None:
            self._stop = self._probes.check()
        return self._stop

    def _unsent(self, n: int) -> list[Completion]:
        return [Completion(error=str(JudgeUnreachable(self._stop or "", sent=False))) for _ in range(n)]

    def complete(self, request: JudgeRequest) -> Completion:
        if self._check():
            raise JudgeUnreachable(self._stop or "", sent=False)
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
        self._probes = Probes()

    def backend(self, opts, cache_path):  # type: ignore[override]
        key = self.key(opts, cache_path)
        with self._lock:
            if key not in self._backends:
                b = open_backend(opts, cache_path, self._api_key, self._server_log)
                if capabilities(opts).user_server and not opts.batch:
                    if isinstance(b, CachedBackend):
                        b.inner = ProbeFirst(b.inner, opts, self._api_key, self._log, self._probes)
                    else:
                        b = ProbeFirst(b, opts, self._api_key, self._log, self._probes)
                self._keep(key, b)
            return self._backends[key]

    def unreachable(self) -> str | None:
        """Why the run must stop: a judge that cannot be reached, after its name where it has one."""
        with self._lock:
            named = [(self._names.get(k), b) for k, b in self._backends.items()]
        for name, b in named:
            why = getattr(b, "unreachable", None)
            if why:
                return f"{name}: {why}" if name else why
        return None

    def cache_stats(self) -> list[Any]:
        """Size and this run's hits of every judge cache the run opened."""
        with self._lock:
            backends = list(self._backends.values())
        return [b.stats() for b in backends if isinstance(b, CachedBackend)]
