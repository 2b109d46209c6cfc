"""Arena-Hard's own files in a save path, as records of the run log (`evaluate.savepath.records`):
its judgment files (one JSON line per question, rewritten whole) and `leaderboard.csv`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...savepath.records import BenchmarkCsv, BenchmarkLines, register_record


@register_record
@dataclass
class ArenaHardJudgments(BenchmarkLines):
    """model_judgment/<judge>/<model>.jsonl: one JSON line per question, its two games (baseline as A,
    then swapped)."""

    kind: ClassVar[str] = "arena_hard_judgments"


@register_record
@dataclass
class ArenaHardLeaderboard(BenchmarkCsv):
    """leaderboard.csv: Arena-Hard's table, one line per model (the columns as the table prints them)."""

    kind: ClassVar[str] = "arena_hard_leaderboard"
    LINE_END: ClassVar[str] = "\r\n"  # csv's default, as the table was always written
