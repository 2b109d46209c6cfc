"""`eval.py mt-bench --data DIR --answers FILE... --judge-config C --mode single|pairwise-baseline|pairwise-all
[--baseline MODEL] --save_path OUT [--judge-prompts FILE] [--limit N] [--dry-run]`

MT-bench from FastChat's own files (evaluate/benchmarks/mt_bench.py says how). Writes
OUT/model_judgment/<judge>_{single,pair}.jsonl (FastChat's files, appended), OUT/judge_cache.sqlite
and OUT/mt_bench_summary.json, and prints the tables.

Exit codes: 0 done; 2 bad input (one `error:` line, no judge call made); 3 the judge failed on some
calls (the rest is kept; run again to finish) or every judgment is invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..backends.options import JudgeOptions
from ..core.errors import InputError
from ..core.io import check_output_dir
from .common import EXIT_INPUT, EXIT_OK, EXIT_RUN_ERRORS, Parser, load_judge

EXIT_JUDGE = EXIT_RUN_ERRORS


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py mt-bench",
                description="MT-bench judged as FastChat's gen_judgment.py does, scored as its show_result.py does.")
    p.add_argument("--data", required=True, type=Path, help="FastChat's data/mt_bench folder (question.jsonl, "
                                                             "reference_answer/)")
    p.add_argument("--answers", required=True, nargs="+", type=Path, metavar="FILE",
                   help="model_answer/<model>.jsonl files; the file name names the model")
    p.add_argument("--judge-config", required=True, type=Path, help="YAML/JSON file with a judge: block")
    p.add_argument("--mode", required=True, choices=["single", "pairwise-baseline", "pairwise-all"])
    p.add_argument("--baseline", help="pairwise-baseline: the baseline model (default gpt-3.5-turbo, as FastChat)")
    p.add_argument("--save_path", required=True, type=Path, help="output folder")
    p.add_argument("--judge-prompts", type=Path, help="judge_prompts.jsonl (default: DIR/../judge_prompts.jsonl)")
    p.add_argument("--limit", type=int, help="only the first N questions of each category")
    p.add_argument("--dry-run", action="store_true", help="count the judge calls per prompt; contact nothing")
    return p


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return _run(args)
    except InputError as exc:
        print(f"error: {' '.join(str(exc).split(chr(10)))}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:  # a save path that cannot be written after all
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f) or "a file"
        print(f"error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT


def _run(args: argparse.Namespace) -> int:
    from ..benchmarks import mt_bench as bench
    from ..benchmarks.mt_bench_text import summary_text

    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive number of questions per category, got {args.limit}")
    opts = load_judge(args.judge_config)
    baseline = args.baseline
    if args.mode == "pairwise-baseline" and baseline is None:
        baseline = "gpt-3.5-turbo"
    check_output_dir(args.save_path, "--save_path", subdirs=("model_judgment",))
    inputs = bench.load_inputs(args.data, args.answers, judge_model=opts.model, mode=args.mode, baseline=baseline,
                               prompts_path=args.judge_prompts, limit=args.limit)
    if args.dry_run:
        return _dry_run(inputs, args.mode, baseline, opts, args.save_path)
    if opts.backend == "local" and opts.max_tokens < 2048:
        print(f"note: judge.max_tokens {opts.max_tokens} caps the local judge's replies (FastChat asks for 2048)",
              file=sys.stderr)
    from ..backends.pool import open_backend

    cache = (args.save_path / "judge_cache.sqlite" if opts.cache is True else
             Path(opts.cache) if isinstance(opts.cache, str) else None)
    args.save_path.mkdir(parents=True, exist_ok=True)
    backend = open_backend(opts, cache)
    try:
        result = bench.run_mt_bench(inputs, args.mode, backend, args.save_path, judge_model=opts.model,
                                    baseline=baseline)
    finally:
        backend.close()
    print(summary_text(result.summary))
    counts = result.summary["counts"]
    if counts["failed"]:
        print(f"error: the judge failed on {counts['failed']} match(es); they were not written: run again to "
              "judge them", file=sys.stderr)
        return EXIT_JUDGE
    if counts["matches"] and not counts["valid"]:
        print("error: no judgment could be read (every reply is invalid); see mt_bench_summary.json",
              file=sys.stderr)
        return EXIT_JUDGE
    return EXIT_OK


def _dry_run(inputs: Any, mode: str, baseline: str | None, opts: JudgeOptions, out: Path) -> int:
    from ..benchmarks import mt_bench as bench
    from ..benchmarks import mt_bench_files as files
    from ..benchmarks.mt_bench_judge import plan

    matches = bench.make_matches(inputs, mode, baseline)
    path = bench.judgment_file(out, opts.model, mode)
    resumed = bench.resume(matches, files.read_rows(path, "single" if mode == "single" else "pair"), opts.model)
    total, todo = plan(matches), plan([matches[i] for i in resumed.todo])
    print(f"MT-bench dry run: mode {mode}, judge {opts.model}, {len(inputs.questions)} questions, "
          f"models {', '.join(inputs.models)}")
    print(f"{'prompt':<30}{'judge calls':>14}{'in the file':>14}{'to send':>10}")
    for name, n in total.calls.items():
        left = todo.calls.get(name, 0)
        print(f"{name:<30}{n:>14}{n - left:>14}{left:>10}")
    print(f"{'total':<30}{total.total:>14}{total.total - todo.total:>14}{todo.total:>10}")
    return EXIT_OK
