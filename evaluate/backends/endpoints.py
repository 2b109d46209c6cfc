"""Where judge requests go: one shared pool of requests for the whole run, over one or several
OpenAI-compatible endpoints.

`RequestPool` is a fixed set of worker threads (as many as the endpoints' total concurrency) fed
by every `complete_many` of the run: ratings of every model and category, battles, SAGEval and
UniEval-judge calls all queue here (first come, first served), so the run keeps `concurrency`
requests in flight whatever the size of each batch, and no batch waits for another's slowest call.

`EndpointSet` picks, for each HTTP attempt, the endpoint with the fewest requests in flight
(relative to its own concurrency) among those not set aside. An endpoint with `failures`
consecutive failed attempts (connection errors, timeouts, 5xx, malformed replies; not 4xx or 429)
is set aside for `cooldown` seconds (doubling on each new trip, at most `max_cooldown`); after
that it gets one probe request at a time until one succeeds. When every endpoint is set aside
the attempt goes to the one whose cool-down ends first, so a run never waits on the breaker and
degrades to the per-request retries it had with one endpoint.

An endpoint that cannot even be connected to (refused, DNS, TLS, no route: "down" attempts), or
that accepts connections and answers nothing at all ("hung": a request timed out and so did a
GET /models), is dropped for the rest of the run once such failures keep coming, `down_attempts`
in a row over `unreachable_after` seconds if it never answered in this run (a wrong URL, a server
not started or hung), or over `down_after` seconds if it did (long enough for a restart). While its
cool-down runs, it gets its probe when that span ends, not later. When every endpoint is dropped
the judge is unreachable: `acquire` raises `JudgeUnreachable` and `on_unreachable` is told once,
so the backend can stop sending instead of retrying each request for minutes.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from .base import Completion
from .retry import JudgeUnreachable

log = logging.getLogger("evaluate.backends.endpoints")
T = TypeVar("T")
ResultFn = Callable[[int, Completion], None]
CANCELLED = "cancelled: the run was stopped before this request was sent"


# ---------------------------------------------------------------------------------------- endpoints
@dataclass(eq=False)
class Endpoint:
    url: str  # scrubbed (no credentials): safe to log and to show in usage
    limit: int  # requests in flight at most
    client: Any = field(default=None, repr=False)  # the openai client (holds the raw URL and the key)
    in_flight: int = 0
    failures: int = 0  # consecutive failed attempts
    trips: int = 0  # times set aside since the last success
    open_until: float = 0.0
    calls: int = 0
    failed_calls: int = 0
    set_aside: int = 0
    reached: bool = False  # it answered at least once in this run (a reply, an error status, a busy server's /models)
    down: int = 0  # consecutive attempts that could not connect
    down_since: float = 0.0  # when the first of them started
    down_error: str = ""
    dropped: str = ""  # why the endpoint is out of the run for good ("" while it is in)

    def usage(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": self.calls, "failed_calls": self.failed_calls, "set_aside": self.set_aside,
                               "concurrency": self.limit}
        if self.dropped:
            out["dropped"] = self.dropped
        return out


class EndpointSet:
    """Chooses an endpoint per attempt (fewest in flight), with a circuit breaker per endpoint."""

    def __init__(self, endpoints: Sequence[Endpoint], *, failures: int = 5, cooldown: float = 30.0,
                 max_cooldown: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 down_attempts: int = 3, unreachable_after: float = 2.0, down_after: float = 60.0,
                 on_unreachable: Callable[[str], None] | None = None):
        if not endpoints:
            raise ValueError("EndpointSet: no endpoint")
        self.endpoints = list(endpoints)
        self.threshold = max(1, failures)
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.clock = clock
        self.down_attempts = max(1, down_attempts)
        self.unreachable_after = unreachable_after
        self.down_after = down_after
        self.on_unreachable = on_unreachable
        self.unreachable: str | None = None  # set once every endpoint is dropped: why
        self.label: str | None = None  # the judge's name (a panel's), put before the URL in messages
        self._cond = threading.Condition()

    @property
    def capacity(self) -> int:
        return sum(e.limit for e in self.endpoints)

    def _limit(self, e: Endpoint) -> int:
        return 1 if e.failures >= self.threshold else e.limit  # a tripped endpoint back from cool-down: one probe

    def acquire(self, avoid: Sequence[Endpoint] = ()) -> Endpoint:
        """A slot on the least-loaded endpoint that is not set aside, preferring those not in `avoid`
        (the endpoints this request already failed on); blocks while every usable slot is taken."""
        with self._cond:
            while True:
                if self.unreachable is not None:
                    raise JudgeUnreachable(self.unreachable)
                now = self.clock()
                alive = [e for e in self.endpoints if not e.dropped]
                usable = [e for e in alive if e.open_until <= now]
                if not usable:  # everything set aside: the first to come back takes the attempt
                    usable = [min(alive, key=lambda e: e.open_until)]
                preferred = [e for e in usable if e not in avoid] or usable
                free = [e for e in preferred if e.in_flight < self._limit(e)]
                if free:
                    best = min(free, key=lambda e: (e.in_flight / e.limit, e.in_flight))
                    best.in_flight += 1
                    best.calls += 1
                    return best
                waits = [e.open_until - now for e in alive if e.open_until > now]
                self._cond.wait(timeout=min(waits) if waits else None)

    def release(self, e: Endpoint, outcome: str, *, started: float | None = None, error: str = "") -> None:
        """outcome: "ok", "fail" (counts towards setting the endpoint aside), "down" (could not
        connect) or "hung" (connected, but neither the request nor a check got any answer): a fail
        that may also drop the endpoint (`started` is when the attempt began, `error` what went
        wrong); or "neutral"."""
        gone: str | None = None
        with self._cond:
            e.in_flight -= 1
            now = self.clock()
            if outcome in ("down", "hung"):
                if e.down == 0:
                    e.down_since = now if started is None else started
                    log.warning("%s: %s; dropped if this goes on for %gs", self.where(e), error,
                                self.down_after if e.reached else self.unreachable_after)
                e.down += 1
                e.down_error = error
            else:
                e.reached = True
                e.down = 0
            if outcome == "ok":
                e.failures = e.trips = 0
            elif outcome in ("fail", "down", "hung"):
                e.failed_calls += 1
                e.failures += 1
                grace = self.down_after if e.reached else self.unreachable_after
                if e.down >= self.down_attempts and now - e.down_since >= grace and not e.dropped:
                    gone = self._drop(e, now)
                elif e.failures >= self.threshold:
                    pause = min(self.max_cooldown, self.cooldown * 2.0 ** e.trips)
                    e.trips += 1
                    e.set_aside += 1
                    e.open_until = now + pause
                    if e.down:  # cannot connect: probe again when it would be dropped, not later
                        e.open_until = min(e.open_until, max(now, e.down_since + grace))
                    if len(self.endpoints) > 1:
                        log.warning("endpoint %s set aside for %.0fs after %d failed attempts in a row",
                                    self.where(e), e.open_until - now, e.failures)
            self._cond.notify_all()
        if gone is not None and self.on_unreachable is not None:
            self.on_unreachable(gone)

    def where(self, e: Endpoint) -> str:
        """An endpoint as messages name it: its URL, after its judge's name when the judge has one."""
        return f"judge {self.label} at {e.url}" if self.label else e.url

    def _drop(self, e: Endpoint, now: float) -> str | None:
        """Drop `e` for good (lock held); returns why the judge is unreachable when `e` was the last."""
        when = "it had answered before" if e.reached else "it never answered in this run"
        what = e.down_error.removeprefix("connection failed: ")
        e.dropped = f"{what} ({e.down} attempts in a row over {now - e.down_since:.1f}s; {when})"
        alive = [x for x in self.endpoints if not x.dropped]
        if alive:
            log.warning("endpoint %s dropped for the rest of the run: %s; %d endpoint(s) left",
                        self.where(e), e.dropped, len(alive))
            return None
        hint = ("is the server running and answering, and is base_url right?"
                if not any(x.reached for x in self.endpoints) else "the server stopped answering")
        self.unreachable = "; ".join(f"{x.url}: {x.dropped}" for x in self.endpoints) + f" - {hint}"
        return self.unreachable

    def others_usable(self, avoid: Sequence[Endpoint]) -> bool:
        """Whether an endpoint outside `avoid` can take a request now (then a retry need not back off)."""
        with self._cond:
            now = self.clock()
            return any(e not in avoid and not e.dropped and e.open_until <= now for e in self.endpoints)

    def usage(self) -> dict[str, dict[str, Any]]:
        with self._cond:
            return {e.url: e.usage() for e in self.endpoints}


# ---------------------------------------------------------------------------------------- the pool
@dataclass(eq=False)
class _Batch:
    items: Sequence[Any]
    work: Callable[[Any], Completion]
    context: contextvars.Context
    done: "deque[tuple[int, Completion] | None]" = field(default_factory=deque)
    ready: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    next: int = 0
    started: int = 0
    cancelled: bool = False

    def put(self, entry: tuple[int, Completion] | None) -> None:
        self.done.append(entry)
        self.ready.release()

    def get(self) -> tuple[int, Completion] | None:
        self.ready.acquire()
        return self.done.popleft()


class RequestPool:
    """`workers` threads shared by every caller; `run` hands each caller its results in order.

    Batches are served in the order they arrive, item by item, so many small batches (one per
    model and category) keep every worker busy. `cancel()` (a stopped run) ends every batch: items
    not yet started come back as errors at once, items in flight are finished.
    """

    def __init__(self, workers: int, name: str = "judge"):
        self.workers = max(1, workers)
        self.name = name
        self._queue: deque[_Batch] = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._reason = CANCELLED

    def _start(self) -> None:
        if self._threads:
            return
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, name=f"{self.name}-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _worker(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = self._queue[0]
                idx = batch.next
                batch.next += 1
                batch.started += 1
                if batch.next >= len(batch.items):
                    self._queue.popleft()
            try:
                # a copy per item: the caller's context vars, and no two threads entering one context
                comp = batch.context.copy().run(batch.work, batch.items[idx])
            except Exception as exc:  # a bug or an unexpected library error must not sink the batch
                comp = Completion(error=f"{type(exc).__name__}: {exc}")
            batch.put((idx, comp))

    def _stop_batch(self, batch: _Batch) -> int:
        """No new item of `batch` starts; returns how many started (those will still come back)."""
        with self._cond:
            batch.cancelled = True
            if batch in self._queue:
                self._queue.remove(batch)
            return batch.started

    def run(self, items: Sequence[T], work: Callable[[T], Completion], on_result: ResultFn | None = None
            ) -> list[Completion]:
        """`work` on every item through the shared workers; results in input order.

        `on_result(index, completion)` runs in the calling thread as each item finishes. If it raises,
        no new item of this batch starts, items in flight are finished and still handed to it (their
        own exceptions ignored), and the first exception propagates.
        """
        n = len(items)
        results: list[Completion | None] = [None] * n
        if n == 0:
            return []
        batch = _Batch(items=items, work=work, context=contextvars.copy_context())
        with self._cond:
            if self._closed:
                batch.cancelled = True
            else:
                self._start()
                self._queue.append(batch)
                self._cond.notify_all()
        expected = n if not batch.cancelled else 0
        received = 0
        try:
            while received < expected:
                entry = batch.get()
                if entry is None:  # cancelled: wait only for what had started
                    expected = batch.started
                    continue
                idx, comp = entry
                received += 1
                results[idx] = comp
                if on_result is not None:
                    on_result(idx, comp)
        except BaseException:
            expected = self._stop_batch(batch)
            while received < expected:
                entry = batch.get()
                if entry is None:
                    continue
                idx, comp = entry
                received += 1
                results[idx] = comp
                if on_result is not None:
                    try:
                        on_result(idx, comp)
                    except Exception:
                        pass
            raise
        return [c if c is not None else Completion(error=self._reason) for c in results]

    def cancel(self, reason: str = CANCELLED) -> None:
        """Stop the run: queued items are not sent (they come back as errors saying `reason`), new
        batches are refused."""
        with self._cond:
            if not self._closed:
                self._reason = reason
            self._closed = True
            batches = list(self._queue)
            self._queue.clear()
            for b in batches:
                b.cancelled = True
            self._cond.notify_all()
        for b in batches:
            b.put(None)

    def close(self) -> None:
        self.cancel()
        for t in self._threads:
            t.join(timeout=0.1)
