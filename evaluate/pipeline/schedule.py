"""Independent units of a run, worked on side by side when the judge is an HTTP server.

A unit is one (model, category, family) `score` call, or a family's run-wide `score_run` that
does not read the per-model results (battles). When a unit only builds judge requests and waits
on an HTTP judge (`Family.judge_bound`), the runner hands it to a `UnitScheduler`: its requests
join the judge's one pool of requests (backends/endpoints.py) while other units build theirs, so
the run keeps `judge.concurrency` requests in flight whatever the size of each category. Every
other unit (automatic metrics, local models, the local judge) runs in the runner's own thread, in
order. The runner takes the results back in the sequential order, so result files get
the same content in the same order as a sequential run; only log lines may interleave.

Threads are daemons: a stopped run does not wait for them (the judge pool is cancelled first, so
they finish at once with errors that nobody records).
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable


class UnitScheduler:
    """At most `workers` units at a time, started in the order they were submitted."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self._pending: list[tuple[Future, Callable[..., Any], tuple]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        ctx = contextvars.copy_context()
        with self._lock:
            if self._closed:
                fut.cancel()
                return fut
            self._pending.append((fut, ctx.run, (fn, *args)))
            if len(self._threads) < self.workers:
                t = threading.Thread(target=self._worker, name=f"unit-{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
        return fut

    def _worker(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._threads.remove(threading.current_thread())
                    return
                fut, fn, args = self._pending.pop(0)
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # handed to the runner, which decides
                fut.set_exception(exc)

    def shutdown(self) -> None:
        """Units not started yet never start (their futures are cancelled)."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, []
        for fut, _, _ in pending:
            fut.cancel()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the units already running (after the judge was cancelled,
        they only wait for their requests in flight, which are paid for and go to the cache)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
