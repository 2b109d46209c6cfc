"""MT-bench's own files in a save path, as records of the run log (`evaluate.savepath.records`):
FastChat's judgment files (one JSON line per judgment, appended) and `mt_bench_summary.json`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...savepath.records import BenchmarkFile, BenchmarkLines, register_record


@register_record
@dataclass
class MtBenchJudgments(BenchmarkLines):
    """model_judgment/<judge>_<single|pair>.jsonl: FastChat's judgments, one JSON line each, appended
    (a re-run keeps what was judged)."""

    kind: ClassVar[str] = "mt_bench_judgments"
    APPEND: ClassVar[bool] = True
    ENSURE_ASCII: ClassVar[bool] = True  # as FastChat writes them


@register_record
@dataclass
class MtBenchSummary(BenchmarkFile):
    """mt_bench_summary.json: the judge, the files' hashes, counts, FastChat's tables and the statistics."""

    kind: ClassVar[str] = "mt_bench_summary"
    benchmark: str = "mt_bench"
    mode: str = ""
    baseline: str | None = None
    judge: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    questions: int = 0
    models: list[str] | None = None
    counts: dict[str, Any] | None = None
