"""The one benchmark driver: any registered benchmark (evaluate.benchmarks.benchmark) run the same way, from
its parsed flags to its exit code, for `eval.py NAME` (evaluate/commands/common.py parses the flags) and for
the Python API (`evaluate.api.benchmark`).

Its steps: the benchmark's checks, its judge (`--judge-config`'s `judge:` block, checked as a run checks
it; the one judge-cache rule; metered for the manifest), the answers generated first where it asks
(`--generate`), its files read and checked, `--dry-run` (the requests counted and priced, nothing
contacted), the judge, its table, the stored judge check of this judge, its files and the project's
outputs (results, battles, summary.csv, report.html, manifest), the exit code: 0 done, 3 the judge failed
on some calls or nothing could be scored, or the benchmark's own (the judge check's). Bad input raises
InputError before any judge call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from ..backends.base import CHARS_PER_TOKEN, JudgeRequest, cost_usd, estimate_tokens
from ..backends.cache_path import cache_file, relative_to
from ..backends.options import JudgeOptions
from ..backends.preflight import check_model
from ..core.errors import InputError
from ..core.io import read_structured
from ..core.options import parse_options

EXIT_OK, EXIT_FAILED = 0, 3  # the command line's exit codes (evaluate/commands/common.py: EXIT_CODES)

# generate(args, format, questions, answers_dir) -> exit code: the answers a benchmark's `--generate`
# asks for (evaluate.generation.benchmark_flag.generate_for_benchmark; handed in, as generation reads
# the benchmarks' own question files and so builds on them)
Generate = Callable[[argparse.Namespace, str, Path, Path], int]


def cost_line(requests: Sequence[JudgeRequest], price: dict[str, float]) -> str:
    """A benchmark dry run's cost line: the most `requests` can cost at `price`."""
    prompt, completion = estimate_tokens(requests)
    return (f"cost: at most about ${cost_usd(prompt, completion, price):.2f} ({prompt:,} prompt tokens at "
            f"{CHARS_PER_TOKEN} characters a token, {completion:,} completion tokens at max_tokens; calls already "
            "in the cache cost nothing)")


def load_judge(path: Path) -> JudgeOptions:
    """The `judge:` block of a YAML/JSON file (a run config's works as it is), checked as a run checks it."""
    raw = read_structured(path, "judge config")
    if isinstance(raw, dict) and isinstance(raw.get("judge"), list):
        raise InputError(f"{path}: judge: is a panel of {len(raw['judge'])} judges; the benchmark commands "
                         "(mt-bench, alpaca-eval, arena-hard) take one judge: write judge: as one block "
                         "(backend, model, base_url, ...), one benchmark run per judge; a panel is taken by "
                         "eval.py run")
    if not isinstance(raw, dict) or not isinstance(raw.get("judge"), dict):
        raise InputError(f"{path}: expected a mapping with a judge: block (backend, model, base_url, ...)")
    opts, problems = parse_options(JudgeOptions, raw["judge"], f"{path}: judge")
    if not problems:
        problems = [f"{path}: judge.{key}: {msg}" for key, msg in opts.problems()]
    if problems:
        raise InputError("; ".join(problems))
    check_model(opts, [Path(path).resolve().parent], f"{path}: judge.model")
    return opts


def judge_cache(opts: JudgeOptions, save_path: Path, config: Path | None) -> Path | None:
    """A benchmark's judge cache by the run's one rule (evaluate.backends.cache_path): `judge.cache`
    relative to the file that holds the judge: block, else EVAL_JUDGE_CACHE, else OUT/judge_cache.sqlite."""
    return cache_file(opts.cache, save_path, relative_to(config))


def run_benchmark(bench: Any, args: argparse.Namespace, *, generate: Generate | None = None) -> int:
    """Run `bench` (a Benchmark) on its parsed flags; prints what `eval.py NAME` prints, returns its exit code.
    `generate`: how its `--generate` answers are made (required when the benchmark generates)."""
    from ..core.io import ensure_dir

    bench.check(args)
    opts = bench.judge_options(args, load_judge)
    if bench.generates:
        if generate is None:
            raise InputError(f"{bench.name}: its answers may be generated, and no generator was handed to the driver")
        questions, answers_dir = bench.generation(args)
        if (code := generate(args, bench.generates, questions, answers_dir)):
            return code
    inputs = bench.read(args, opts)
    requests = bench.requests(inputs)
    if args.dry_run:
        print(bench.dry_run_text(inputs, requests, opts), end="")
        if opts.price and bench.dry_run_cost:
            print(cost_line([r for rs in requests.values() for r in rs], opts.price))
        return EXIT_OK
    if (note := bench.notes(inputs, opts)):
        print(note, file=sys.stderr)
    cache = judge_cache(opts, args.save_path, bench.judge_file(args))
    ensure_dir(args.save_path, "--save_path")
    with bench.lock(args):
        return _judge_and_write(bench, args, opts, inputs, cache)


def _judge_and_write(bench: Any, args: argparse.Namespace, opts: JudgeOptions, inputs: Any, cache: Path | None) -> int:
    from ..backends.pool import MeteredBackend, open_backend
    from ..pipeline.savedir import SaveDir
    from ..savepath.write import server_logs
    from . import outputs as bo
    from .benchmark import ScoringFailed

    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    save = SaveDir(args.save_path, log=log)  # the run in progress: its id and start time
    inner = open_backend(opts, cache, server_log=server_logs(args.save_path))
    # what this run asked of the judge, for the manifest
    backend = MeteredBackend(inner, opts.price) if bench.metered else inner
    try:
        judged = bench.judge(inputs, backend)
        signature = backend.signature()
        try:
            scored = bench.scores(inputs, judged)
        except ScoringFailed as exc:
            print(f"exit 3: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(scored.text, end="")
        text, check_code = bench.check_judge(args, inputs, judged, backend, signature, log)
        print(text, end="")
    finally:
        inner.close()
    bench.save(save, inputs, judged, scored, signature)
    run = bo.write_run(save, benchmark=bench.key, family=bench.family, judge_opts=opts, judge=signature,
                       usage=backend.usage() if bench.metered else None,
                       errors=[{"family": bench.family, "error": e} for e in scored.errors],
                       charts=not getattr(args, "no_charts", False))  # the run's log, as written
    report = (run.header.get("outputs_files") or {}).get("report")
    print(bench.closing(run, Path(report) if report else None), end="")
    if (line := bench.exit_line(run, scored)):
        print(line, file=sys.stderr)
        return EXIT_FAILED
    return check_code or EXIT_OK
