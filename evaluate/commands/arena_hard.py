"""`eval.py arena-hard --bench DIR --judge-config C --model NAME [NAME...] [--baseline gpt-4-0314]
[--judge-prompt FILE] [--limit N] [--seed S] [--missing refuse|common] [--dry-run] --save_path OUT`

Arena-Hard as a registered benchmark (evaluate/benchmarks/arena_hard/outputs.py: ArenaHard), run by the
one benchmark driver (evaluate/benchmarks/driver.py: run_benchmark).
Exit codes: 0 done; 2 bad input (one `error:` line); 3 no judgment has a verdict, or the judge failed
on some calls (left null; run again to finish them).
"""
from __future__ import annotations

from .common import drive_benchmark


def main(argv: list[str]) -> int:
    return drive_benchmark("arena-hard", argv)
