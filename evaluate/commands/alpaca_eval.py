"""`eval.py alpaca-eval --model-outputs FILE [FILE...] --reference-outputs FILE --evaluator-config DIR_OR_YAML
--judge-config C --save_path OUT [--limit N] [--seed S] [--dry-run]`

AlpacaEval 2 as a registered benchmark (evaluate/benchmarks/alpaca_eval/outputs.py: AlpacaEval), run by the
one benchmark driver (evaluate/benchmarks/driver.py: run_benchmark). Writes
OUT/<model>/<annotator>/annotations.json (AlpacaEval's results layout) with judge_run.json beside it,
and OUT/judge_cache.sqlite; a re-run is answered from the cache.

Exit codes: 0 done; 2 bad input (one `error:` line, no judge call made); 3 the judge failed on some
calls (written with preference null; run again to finish them) or every annotation is invalid.
"""

from __future__ import annotations

from .common import drive_benchmark


def main(argv: list[str]) -> int:
    return drive_benchmark("alpaca-eval", argv)
