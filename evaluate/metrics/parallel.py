"""Split a pure-Python metric over the machine's cores.

The parent process scores the first slice itself while forked children score the others:
the children inherit the inputs and any loaded tokenizer (no pickling of inputs, no second
jieba load), and only the small per-item results travel back. Where 'fork' is not available
(macOS, Windows) slices are pickled to 'spawn' workers, so the chunk function and its inputs
must be picklable: a module-level function (or functools.partial of one) over MetricInputs.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_PARALLEL_ITEMS = 200
"""Below this many items, starting a process costs more than it saves."""

_JOB: tuple[Callable[[Sequence], list], Sequence] | None = None


def default_workers() -> int:
    """Usable CPUs of this process (respects taskset/cgroup affinity), at most 8."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def _run_inherited(start: int, stop: int) -> list:
    assert _JOB is not None, "worker started without a job (not forked?)"
    fn, items = _JOB
    return fn(items[start:stop])


def _bounds(n: int, parts: int) -> list[tuple[int, int]]:
    step, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        stop = start + step + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def map_chunks(
    fn: Callable[[Sequence[T]], list[R]],
    items: Sequence[T],
    workers: int,
    min_items: int = MIN_PARALLEL_ITEMS,
) -> list[R]:
    """`fn(items)`, computed as `fn` over `workers` contiguous slices, results in order.

    `fn` maps a slice of items to one result per item. Runs in this process alone when
    `workers` <= 1 or there are fewer than `min_items` items.
    """
    n = len(items)
    if workers <= 1 or n < max(min_items, 2):
        return fn(items)
    parts = min(workers, n)
    bounds = _bounds(n, parts)
    methods = multiprocessing.get_all_start_methods()
    global _JOB
    if "fork" in methods:
        ctx = multiprocessing.get_context("fork")
        _JOB = (fn, items)
        try:
            with ProcessPoolExecutor(max_workers=parts - 1, mp_context=ctx) as pool:
                futures = [pool.submit(_run_inherited, a, b) for a, b in bounds[1:]]
                head = fn(items[bounds[0][0] : bounds[0][1]])
                rest = [f.result() for f in futures]
        finally:
            _JOB = None
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=parts - 1, mp_context=ctx) as pool:
            futures = [pool.submit(fn, list(items[a:b])) for a, b in bounds[1:]]
            head = fn(items[bounds[0][0] : bounds[0][1]])
            rest = [f.result() for f in futures]
    out = list(head)
    for part in rest:
        out.extend(part)
    return out
