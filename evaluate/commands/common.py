"""What the commands share: the exit-code contract, an argument parser that never echoes a secret,
and the one place where bad input becomes a one-line error and exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from ..backends import vllm_server
from ..core.errors import InputError
from ..core.secrets import secret_values
from ..core.version import SCRIPT, program

EXIT_OK, EXIT_FAIL_UNDER, EXIT_INPUT, EXIT_RUN_ERRORS = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # what a shell reports for a job stopped by Ctrl-C (128 + SIGINT)
EXIT_CODES = (
    "exit codes: 0 all good; 1 a gate failed (--fail-under, --fail-if-worse, --fail-under-win-rate, "
    "--fail-on-untrusted-judge); 2 bad input (config, answer or prompt files, flags, a gate naming an unknown "
    "model, category or score), nothing paid; 3 the judge or scoring failed (the judge unreachable, an "
    "evaluator failed, invalid scores or battle verdicts above max_invalid_share, the report or another output "
    "not written), which wins over 1; 130 stopped by Ctrl-C (what was computed is kept: run the same command "
    "again to resume). Every non-zero exit ends with one line on stderr saying why: `error: ...` for 2, "
    "`exit N: ...` for 1 and 3, `interrupted: ...` for 130.")
INTERRUPTED = ("interrupted: what was computed is kept (every judge reply and generated answer already received "
               "is in its cache; a run's results so far are in its save path, its manifest says \"interrupted\"); "
               "run the same command again to resume: only what is missing is asked")
# the order in which codes win when several apply: the judge or scoring failing says more than a gate
_PRECEDENCE = (EXIT_RUN_ERRORS, EXIT_INPUT, EXIT_FAIL_UNDER, EXIT_OK)


def worst(results: list[tuple[int, str]]) -> tuple[int, str]:
    """The exit code that wins (3 over 2 over 1 over 0) and the reason given with it first."""
    for code in _PRECEDENCE:
        for c, why in results:
            if c == code:
                return c, why
    return EXIT_OK, ""


def run_errors(manifest: dict | None) -> tuple[int, str] | None:
    """Exit 3 and its reason when a run's manifest holds errors (the judge or scoring failed), read
    the same way by the run and by `eval.py summary SAVE` on its save path."""
    errors = (manifest or {}).get("errors") or []
    if not errors:
        return None
    first = errors[0] if isinstance(errors[0], dict) else {"error": errors[0]}
    where = " / ".join(str(first[k]) for k in ("model", "category", "family") if first.get(k))
    more = f" (and {len(errors) - 1} more errors in the manifest)" if len(errors) > 1 else ""
    return EXIT_RUN_ERRORS, (f"{where}: " if where else "") + str(first.get("error")) + more


class Parser(argparse.ArgumentParser):
    """Exact flag names only (allow_abbrev=False: `--openai KEY` must not be read as --openai_key and
    then written unscrubbed); an error message never echoes a key-shaped value; exit code 2."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        prog = kwargs.get("prog")
        if isinstance(prog, str) and prog.startswith(SCRIPT):  # usage lines name the tool as it was started
            kwargs["prog"] = program() + prog[len(SCRIPT):]
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        for secret in secret_values(sys.argv[1:] + self._argv):
            message = message.replace(secret, "***")
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_INPUT)

    _argv: list[str] = []

    def parse_args(self, args=None, namespace=None):  # remember argv, so error() can hide its secrets
        self._argv = list(args or [])
        return super().parse_args(args, namespace)


def guarded(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command's `main`; bad input (InputError, a file that cannot be read or written) becomes
    one `error: ...` line on stderr and exit 2, without a traceback; Ctrl-C one `interrupted: ...` line
    (what is kept, how to resume) and exit 130 (the commands keep what they computed as they go:
    the caches store each reply as it comes, a run writes its outputs and manifest on the way out). A
    model server the command starts (backend: vllm) serves it to the end and is stopped then, whatever
    happened."""
    try:
        with vllm_server.hold():
            return main(argv)
    except KeyboardInterrupt:
        # on a terminal the ^C it echoed (or a progress bar) is still on the line
        print(("\n" if sys.stderr.isatty() else "") + INTERRUPTED, file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f) or "a file"
        print(f"error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT


def incomplete_line(unreadable: Sequence[object], what: str) -> str:
    """`exit 3: ...` for an output made without the result files that could not be read (each names
    its file and why): the output lacks those models, so it is incomplete, not wrong input to refuse."""
    return (f"exit 3: {what} is incomplete: {len(unreadable)} result file(s) could not be read and were left out: "
            + "; ".join(str(u) for u in unreadable) + " (fix the file or move it away; a run of that model into "
            "this save path writes it again)")


def parse_and_run(parser: argparse.ArgumentParser, argv: list[str],
                  run: Callable[[argparse.Namespace], int]) -> int:
    """A command's `main` when it may be called directly (tests, scripts): argparse's exit (2 for bad
    flags, 0 for --help) as a return value, then `run(args)` under `guarded`."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return guarded(lambda _: run(args), argv)


def drive_benchmark(name: str, argv: list[str]) -> int:
    """`eval.py NAME ...` for any registered benchmark (evaluate.benchmarks.benchmark): its flags parsed here,
    the rest by the one driver (evaluate.benchmarks.driver.run_benchmark), bad input on one line."""
    from ..benchmarks.benchmark import benchmarks
    from ..benchmarks.driver import run_benchmark

    bench = benchmarks().get(name)()
    p = Parser(prog=f"eval.py {bench.name}", description=bench.description or bench.summary)
    bench.add_arguments(p)
    generate = None
    if bench.generates:
        from ..generation.benchmark_flag import add_generate_argument, generate_for_benchmark

        add_generate_argument(p)
        generate = generate_for_benchmark
    return parse_and_run(p, argv, lambda args: _one_line(lambda: run_benchmark(bench, args, generate=generate)))


def _one_line(run: Callable[[], int]) -> int:
    """Bad input's message on one line (the exit-code contract: one line on stderr says why)."""
    try:
        return run()
    except InputError as exc:
        raise InputError(" ".join(str(exc).split("\n"))) from None
