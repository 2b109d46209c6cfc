"""What every library-backed metric here shares: option checking, reference checking,
the signature layout and the worker count."""

from __future__ import annotations

import importlib.metadata
from typing import Any, Callable, ClassVar, Mapping, Sequence

from ..core.errors import InputError
from .base import Metric, MetricInput
from .parallel import MIN_PARALLEL_ITEMS, default_workers, map_chunks
from .text import LANGUAGES


def library_version(distribution: str) -> str:
    """'sacrebleu 2.6.0': the installed distribution and its version, for signatures."""
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{distribution} (version unknown)"


class LibraryMetric(Metric):
    """A Metric with declared options: unknown options or languages fail at construction,
    so a config typo is reported before any scoring starts.

    Subclasses list their options and defaults in `defaults`; `workers` (processes used
    for pure-Python metrics, default: usable CPUs) is accepted by all and is not part of
    the signature because it does not change any number.
    """

    defaults: ClassVar[Mapping[str, Any]] = {}
    parallel: ClassVar[bool] = True
    min_parallel_items: ClassVar[int] = MIN_PARALLEL_ITEMS
    """Fewer items than this are scored in this process: forking and collecting results costs
    about 0.1 s, worth it only when the items take longer than that."""

    def __init__(self, language: str = "en", **options: Any):
        if language not in LANGUAGES:
            raise InputError(f'{self.name}: unknown language "{language}" (expected one of {", ".join(LANGUAGES)})')
        allowed = dict(self.defaults)
        if self.parallel:
            allowed["workers"] = None
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            raise InputError(f"{self.name}: unknown option(s) {', '.join(unknown)} (known options: {known})")
        merged = {**{k: v for k, v in allowed.items() if k != "workers"}, **options}
        workers = merged.pop("workers", None)
        super().__init__(language, **merged)
        if workers is None:
            workers = default_workers()
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise InputError(f"{self.name}: option workers must be a positive integer, got {workers!r}")
        self.workers = workers

    def map_items(self, fn: Callable[[Sequence[MetricInput]], list], items: Sequence[MetricInput]) -> list:
        """`fn(items)`, split over `self.workers` processes when there are enough items."""
        return map_chunks(fn, items, self.workers, self.min_parallel_items)

    def check_references(self, items: Sequence[MetricInput]) -> None:
        """InputError naming the metric and the item position if any item lacks a reference."""
        if not self.needs_reference:
            return
        for i, item in enumerate(items):
            if not any(isinstance(r, str) and r.strip() for r in item.references):
                raise InputError(
                    f"{self.name}: item {i} has no non-empty reference; this metric compares the "
                    "answer with a reference (target) answer"
                )

    def describe(self, **fields: Any) -> dict[str, Any]:
        """Signature dict: the given fields plus a compact 'text' form, sacrebleu style."""
        sig: dict[str, Any] = {"metric": self.name, "language": self.language, **fields}
        parts = [self.name] + [f"{k}:{v}" for k, v in sig.items() if k not in ("metric",) and not isinstance(v, dict)]
        sig["text"] = "|".join(parts)
        return sig


class LastCall:
    """Remembers per-item statistics from the last `score` call, so that `aggregate` on the
    same items (the runner's usual order) sums them instead of computing them again."""

    def __init__(self) -> None:
        self._items: list[MetricInput] | None = None
        self._stats: list[Any] = []

    def store(self, items: Sequence[MetricInput], stats: list[Any]) -> None:
        self._items, self._stats = list(items), stats

    def get(self, items: Sequence[MetricInput]) -> list[Any] | None:
        last = self._items
        if last is not None and len(last) == len(items) and all(a is b or a == b for a, b in zip(last, items)):
            return self._stats
        return None
