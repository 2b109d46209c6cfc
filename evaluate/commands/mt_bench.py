"""`eval.py mt-bench --data DIR --answers FILE... --judge-config C --mode single|pairwise-baseline|pairwise-all
[--baseline MODEL] --save_path OUT [--judge-prompts FILE] [--limit N] [--judge-check N] [--dry-run]`
or `eval.py mt-bench --config C.yaml` (an `mt_bench:` block with the same keys, `judge:`, `save_path:`;
a flag given beside it wins).

MT-bench from FastChat's own files (evaluate/benchmarks/mt_bench.py says how). Writes
OUT/model_judgment/<judge>_{single,pair}.jsonl (FastChat's files, appended), OUT/judge_cache.sqlite
and OUT/mt_bench_summary.json, prints show_result.py's tables, then the project's outputs of the run
(evaluate/pipeline/mt_bench_outputs.py: results/ or battles/, summary.csv, comparisons/, report.html,
manifest.json) and their closing lines. `--judge-check N`: the label-free judge check on N of the
run's judged turns (evaluate/judgecheck/mt_bench.py), stored and shown like a run's.

Exit codes: 0 done; 2 bad input (one `error:` line, no judge call made); 3 the judge failed on some
calls (the rest is kept; run again to finish), every judgment is invalid, the judge check could not
run, or an output was not written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..backends.options import JudgeOptions
from ..core.errors import InputError
from ..core.io import check_output_dir, ensure_dir
from ..core.lock import SaveLock
from ..generation.benchmark_flag import add_generate_argument, generate_for_benchmark
from .common import EXIT_INPUT, EXIT_OK, EXIT_RUN_ERRORS, Parser, judge_cache, load_judge

EXIT_JUDGE = EXIT_RUN_ERRORS


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py mt-bench",
                description="MT-bench judged as FastChat's gen_judgment.py does, scored as its show_result.py does.")
    p.add_argument("--config", type=Path, help="YAML/JSON file with an mt_bench: block (data, answers, mode, "
                                                "baseline, judge_prompts, limit, judge_check), judge: and save_path:")
    p.add_argument("--data", type=Path, help="FastChat's data/mt_bench folder (question.jsonl, reference_answer/)")
    p.add_argument("--answers", nargs="+", type=Path, metavar="FILE",
                   help="model_answer/<model>.jsonl files; the file name names the model")
    p.add_argument("--judge-config", type=Path, help="YAML/JSON file with a judge: block")
    p.add_argument("--mode", choices=["single", "pairwise-baseline", "pairwise-all"])
    p.add_argument("--baseline", help="pairwise-baseline: the baseline model (default gpt-3.5-turbo, as FastChat)")
    p.add_argument("--save_path", type=Path, help="output folder")
    p.add_argument("--judge-prompts", type=Path, help="judge_prompts.jsonl (default: DIR/../judge_prompts.jsonl)")
    p.add_argument("--limit", type=int, help="only the first N questions of each category")
    p.add_argument("--judge-check", type=int, metavar="N",
                   help="after judging, the label-free judge check on N of the run's judged turns")
    p.add_argument("--no-charts", action="store_true", help="no PNG charts (the report and the files as usual)")
    p.add_argument("--dry-run", action="store_true", help="count the judge calls per prompt; contact nothing")
    add_generate_argument(p)
    return p


def _settings(args: argparse.Namespace) -> tuple[argparse.Namespace, JudgeOptions]:
    """The run's settings from the flags, the config file filling what the flags leave out; the judge options."""
    from ..benchmarks.mt_bench_config import load_config

    judge = None
    if args.config is not None:
        cfg = load_config(args.config)
        o = cfg.options
        args.data = args.data or cfg.path(o.data)
        args.answers = args.answers or ([cfg.path(a) for a in o.answers] if o.answers else None)
        args.mode = args.mode or o.mode
        args.baseline = args.baseline if args.baseline is not None else o.baseline
        args.judge_prompts = args.judge_prompts or cfg.path(o.judge_prompts)
        args.limit = args.limit if args.limit is not None else o.limit
        args.judge_check = args.judge_check if args.judge_check is not None else o.judge_check
        args.save_path = args.save_path or cfg.save_path
        judge = cfg.judge
    where = f" (or mt_bench.{{}} in {args.config})" if args.config else ""
    missing = [f"--{flag}" + where.format(key) for flag, key, value in (
        ("data", "data", args.data), ("answers", "answers", args.answers or args.generate), ("mode", "mode", args.mode),
        ("save_path", "save_path", args.save_path)) if not value]
    if args.judge_config is None and judge is None:
        missing.append("--judge-config" + (f" (or a judge: block in {args.config})" if args.config else ""))
    if missing:
        raise InputError(f"missing: {', '.join(missing).replace('mt_bench.save_path', 'save_path')}")
    if args.judge_config is not None:
        judge = load_judge(args.judge_config)
    if args.judge_check is not None and args.judge_check < 1:
        raise InputError(f"--judge-check: expected a positive number of judged turns, got {args.judge_check}")
    return args, judge


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

    args, opts = _settings(args)
    if (code := generate_for_benchmark(args, "mt-bench", args.data / "question.jsonl",
                                       args.save_path / "model_answer")):
        return code
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive number of questions per category, got {args.limit}")
    baseline = args.baseline
    if args.mode == "pairwise-baseline" and baseline is None:
        baseline = "gpt-3.5-turbo"
    check_output_dir(args.save_path, "--save_path", subdirs=("model_judgment", "results", "battles", "runs"))
    inputs = bench.load_inputs(args.data, args.answers, judge_model=opts.model, mode=args.mode, baseline=baseline,
                               prompts_path=args.judge_prompts, limit=args.limit)
    if args.dry_run:
        return _dry_run(inputs, args.mode, baseline, opts, args.save_path, args.judge_check)
    if opts.backend == "local" and opts.max_tokens < 2048:
        print(f"note: judge.max_tokens {opts.max_tokens} caps the local judge's replies (FastChat asks for 2048)",
              file=sys.stderr)
    cache = judge_cache(opts, args.save_path, args.judge_config or args.config)
    ensure_dir(args.save_path, "--save_path")
    lock = SaveLock.acquire(args.save_path, "mt-bench")  # FastChat's files are appended: one run at a time
    try:
        return _judge_and_write(args, opts, inputs, baseline, cache)
    finally:
        lock.release()


def _judge_and_write(args: argparse.Namespace, opts: JudgeOptions, inputs: Any, baseline: str | None,
                     cache: Path | None) -> int:
    from ..backends.pool import open_backend
    from ..benchmarks import mt_bench as bench
    from ..benchmarks.mt_bench_config import config_dict
    from ..benchmarks.mt_bench_text import summary_text
    from ..judgecheck import mt_bench as check
    from ..pipeline.checkstore import lookup
    from ..pipeline.config import scrubbed_judge
    from ..pipeline.mt_bench_outputs import write_run
    from ..report.terminal import closing_summary

    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    backend = open_backend(opts, cache)
    code = EXIT_OK
    try:
        result = bench.run_mt_bench(inputs, args.mode, backend, args.save_path, judge_model=opts.model,
                                    baseline=baseline)
        print(summary_text(result.summary))
        _, _, key = check.identity(backend.signature(), inputs, args.mode)
        record = None
        if args.judge_check:
            try:
                record, key = check.run_check(args.save_path, backend, inputs, result.matches, result.records,
                                              args.mode, n=args.judge_check, log=log)
                print("\n" + check.report_text(record))
            except InputError:
                raise
            except Exception as exc:  # a check that fails to run is reported; the run's files are still written
                log(f"exit 3: the judge check could not run: {type(exc).__name__}: {exc}")
                code = EXIT_JUDGE
    finally:
        backend.close()
    record = record or lookup(args.save_path, key)
    jc = _check_summary(record, key)
    config = config_dict(args.data, args.answers, args.mode, baseline, args.judge_prompts, args.limit,
                         args.judge_check, args.save_path, scrubbed_judge(opts))
    view = write_run(args.save_path, inputs, result, mode=args.mode, config=config, judge_check=jc,
                     charts=not args.no_charts, log=log)
    if view is not None:
        print("\n" + closing_summary(view))
    errors = [e for e in ((view.manifest or {}).get("errors") or [] if view else [])
              if e.get("family") != "MT-bench"]
    counts = result.summary["counts"]
    if counts["failed"]:
        print(f"error: the judge failed on {counts['failed']} match(es); they were not written: run again to "
              "judge them", file=sys.stderr)
        return EXIT_JUDGE
    if counts["matches"] and not counts["valid"]:
        print("error: no judgment could be read (every reply is invalid); see mt_bench_summary.json",
              file=sys.stderr)
        return EXIT_JUDGE
    if errors:
        print(f"exit 3: {errors[0].get('error')}", file=sys.stderr)
        return EXIT_JUDGE
    return code


def _check_summary(record: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """What the manifest and each signature say of the judge check of this judge and these prompts."""
    from ..pipeline.checkstore import summary_of

    if record is None:
        return {"checked": False, "trustworthy": None, "key": key,
                "verdict": "not checked: no judge check for this judge and these prompts (add --judge-check N)"}
    return summary_of(record, key, None)


def _dry_run(inputs: Any, mode: str, baseline: str | None, opts: JudgeOptions, out: Path,
             judge_check: int | None) -> int:
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
    if inputs.unjudged:
        from ..benchmarks.tables import wrap

        print(wrap(bench.unjudged_note(inputs.unjudged)), end="")
    if judge_check:
        from ..judgecheck.mt_bench import most_calls

        print(f"judge check: at most {most_calls(matches, inputs.models, mode, judge_check)} more calls "
              f"({judge_check} judged turns x each corruption that applies; the cache may hold some)")
    return EXIT_OK
