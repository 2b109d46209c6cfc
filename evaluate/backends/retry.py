"""Concurrency, retries and progress for backends that send requests one at a time.

Kept apart from any transport so that the HTTP backend and the cache share one notion of
"a request finished" (`on_result(index, completion)`, always called in the caller's thread),
and so that the retry arithmetic can be tested without a server.
"""

from __future__ import annotations

import contextvars
import os
import random
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from tqdm import tqdm

from .base import BackendError, Completion

T = TypeVar("T")
ResultFn = Callable[[int, Completion], None]

UNREACHABLE = "judge unreachable:"  # the stable start of every error of a judge declared unreachable


class JudgeUnreachable(BackendError):
    """Every endpoint of the judge keeps failing before a connection is made (refused, DNS, TLS,
    no route, connect timeout): more retries would only make a run grind on for hours, so the
    backend stops and every request it did not finish fails with a message that starts with
    `UNREACHABLE` (`reason` says which endpoints failed how)."""

    def __init__(self, reason: str, *, sent: bool = True):
        super().__init__(f"{UNREACHABLE} {reason}" + ("" if sent else " (request not sent)"), retryable=False)
        self.reason = reason


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    Full jitter (a uniform draw in [0, cap]) spreads the clients that failed together so they do
    not come back together. A server-sent Retry-After wins over the backoff: we wait at least that
    long (plus up to 10 % so that a burst of 429s does not return as a burst), unless it is longer
    than `max_retry_after`, in which case waiting is not worth it and the item fails now.
    """

    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `attempt + 1` (attempt counts from 0)."""
        draw = (rng or random).uniform
        if retry_after is not None and retry_after >= 0:
            return retry_after + draw(0.0, 0.1 * retry_after)
        cap = min(self.backoff_max, self.backoff_base * (2.0**attempt))
        return draw(0.0, cap)


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BackendError, float], None] | None = None,
) -> T:
    """Call `fn` until it succeeds, a non-retryable BackendError occurs, or `policy.max_retries`
    retries are spent (so at most max_retries + 1 calls); then the last error propagates."""
    attempt = 0
    while True:
        try:
            return fn()
        except BackendError as exc:
            if not exc.retryable or attempt >= policy.max_retries:
                raise
            if exc.retry_after is not None and exc.retry_after > policy.max_retry_after:
                raise BackendError(
                    f"{exc} (server asks to wait {exc.retry_after:.0f}s, more than the {policy.max_retry_after:.0f}s allowed)",
                    retryable=False,
                ) from exc
            pause = policy.delay(attempt, exc.retry_after)
            if on_retry is not None:
                on_retry(attempt + 1, exc, pause)
            sleep(pause)
            attempt += 1


class Progress:
    """Progress of judge requests on stderr, counting ok / failed / cached items.

    A tqdm bar on a terminal; in a log that is not a terminal (CI, `nohup`), a plain line every
    `EVAL_PROGRESS_SECONDS` (default 30) seconds and a last one when a call that took that long
    ends, so a slow local judge is never silent for minutes. EVAL_NO_PROGRESS=1 turns both off.
    The lines (and the bar's clock) keep coming while nothing finishes: a local model decoding eight
    long replies together finishes none for minutes, and a silent log looks like a hung one.
    """

    def __init__(self, total: int, desc: str = "judging"):
        off = os.environ.get("EVAL_NO_PROGRESS") == "1"
        tty = sys.stderr.isatty()
        self.total, self.desc = total, desc
        self.ok = self.failed = self.cached = 0
        self._plain = not off and not tty
        self._every = float(os.environ.get("EVAL_PROGRESS_SECONDS") or 30)
        self._start = self._last = time.monotonic()
        self._printed = 0
        self._bar = tqdm(total=total, desc=desc, file=sys.stderr, disable=off or not tty, unit="req", dynamic_ncols=True)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if not off:
            self._beat = threading.Thread(target=self._heartbeat, name="progress", daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        """While the call lasts: a line (or the bar redrawn) whenever `EVAL_PROGRESS_SECONDS` pass with none."""
        every = max(self._every, 1.0)
        while not self._stop.wait(every / 4):
            if time.monotonic() - self._last < every:
                continue
            with self._lock:
                if self._stop.is_set():
                    return
                if self._plain:
                    self._line()
                else:
                    self._last = time.monotonic()
                    self._bar.refresh()

    def add(self, comp: Completion) -> None:
        if comp.cached:
            self.cached += 1
        elif comp.ok:
            self.ok += 1
        else:
            self.failed += 1
        with self._lock:
            self._bar.set_postfix(ok=self.ok, failed=self.failed, cached=self.cached, refresh=False)
            self._bar.update(1)
            if self._plain and time.monotonic() - self._last >= self._every:
                self._line()

    def _line(self) -> None:
        self._last = time.monotonic()
        done = self._printed = self.ok + self.failed + self.cached
        print(f"{self.desc}: {done}/{self.total} (ok {self.ok}, failed {self.failed}, cached {self.cached}) "
              f"after {self._last - self._start:.0f}s", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            done = self.ok + self.failed + self.cached
            if self._plain and self._last > self._start and done != self._printed:  # a last line, if not said
                self._line()
            self._bar.close()


_ACTIVE: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("evaluate_progress", default=None)


@contextmanager
def progress_bar(total: int, desc: str = "judging") -> Iterator[Progress]:
    """One bar per top-level call: a wrapper (the cache) opens it for all requests, and the
    backend it wraps, asking for its own bar for the misses, gets the same one."""
    current = _ACTIVE.get()
    if current is not None:
        yield current
        return
    bar = Progress(total, desc)
    token = _ACTIVE.set(bar)
    try:
        yield bar
    finally:
        _ACTIVE.reset(token)
        bar.close()
