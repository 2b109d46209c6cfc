"""`eval.py mt-bench --data DIR --answers FILE... --judge-config C --mode single|pairwise-baseline|pairwise-all
[--baseline MODEL] --save_path OUT [--judge-prompts FILE] [--limit N] [--judge-check N] [--dry-run]`
or `eval.py mt-bench --config C.yaml` (an `mt_bench:` block with the same keys, `judge:`, `save_path:`;
a flag given beside it wins).

MT-bench as a registered benchmark (evaluate/benchmarks/mt_bench/outputs.py: MTBench), run by the one
benchmark driver (evaluate/benchmarks/driver.py: run_benchmark).
Exit codes: 0 done; 2 bad input (one `error:` line, no judge call made); 3 the judge failed on some
calls (the rest is kept; run again to finish), every judgment is invalid, the judge check could not
run, or an output was not written.
"""
from __future__ import annotations

from .common import drive_benchmark


def main(argv: list[str]) -> int:
    return drive_benchmark("mt-bench", argv)
