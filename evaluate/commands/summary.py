"""`eval.py summary SAVE_PATH`: the closing lines of an earlier run, read from its save path; with
gates (`--fail-under ...`), the verdict of the run that made it, read from its files: the same gate
lines, `status:` line and exit code, scoring nothing and asking no judge (a CI job gates a run it
already paid for).

Exit codes: 0 printed (and every gate passed); 1 a gate failed; 2 bad input: no readable result file,
a save path of a newer layout, a bad gate, or gates over a result file that cannot be read; 3 the
stored run failed, or (without gates) printed without a result file that could not be read (named,
with why), so the lines are incomplete."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import InputError
from ..pipeline.comparisons import current
from ..report.terminal import MIN_WIDTH, closing_summary
from ..savepath.log import NoResults, RunLog
from .common import (EXIT_CODES, EXIT_FAIL_UNDER, EXIT_INPUT, EXIT_OK, EXIT_RUN_ERRORS, Parser, incomplete_line,
                     run_errors, worst)


def _width(value: str) -> int:
    """--width: a whole number of columns, at least the closing lines' minimum."""
    try:
        n = int(value)
    except ValueError:
        raise InputError(f'--width "{value}": expected a whole number of columns (at least {MIN_WIDTH})') from None
    if n < MIN_WIDTH:
        raise InputError(f"--width {n}: the closing lines need at least {MIN_WIDTH} columns; "
                         f"give --width {MIN_WIDTH} or more, or leave it out for the terminal's width")
    return n


def build_parser() -> Parser:
    p = Parser(prog="eval.py summary", description="Print the closing lines of a run (per pair: the confirmatory "
                                                   "verdicts with difference, interval and adjusted p; battles, "
                                                   "ranking, judge usage, warnings, where the files are) from its "
                                                   "save path. With gates: the run's verdict from its stored "
                                                   "results, exit 0/1/2/3 as the run did, nothing scored.",
               epilog=EXIT_CODES)
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/)")
    p.add_argument("--width", help=f"columns (at least {MIN_WIDTH}; default: the terminal's)")
    p.add_argument("--scores", nargs="+", metavar="SCORE", help="the scores to show (e.g. GPT/correctness "
                   "ROUGE-L); default: the config's summary_scores, else each pair's primary scores")
    p.add_argument("--fail-under", action="append", default=[], metavar="[[MODEL:]CATEGORY:]SCORE=VALUE",
                   help="as on a run: exit 1 when an aggregate is below VALUE (repeatable)")
    p.add_argument("--fail-if-worse", action="append", default=[], metavar="CANDIDATE:BASELINE:[CATEGORY:]SCORE",
                   help="as on a run: exit 1 when the stored paired comparison finds CANDIDATE worse than BASELINE")
    p.add_argument("--fail-under-win-rate", action="append", default=[], metavar="CANDIDATE:BASELINE[:label-corrected]=VALUE",
                   help="as on a run: exit 1 when CANDIDATE's stored battle win rate against BASELINE is below VALUE "
                        "(with :label-corrected, the label-corrected win rate from the labels as they are now)")
    p.add_argument("--fail-on-untrusted-judge", action="store_true",
                   help="as on a run: exit 1 unless the stored judge check of this run passed")
    p.add_argument("--junit", metavar="FILE.xml", help="also write the gates and rule checks as JUnit XML")
    p.add_argument("--markdown", metavar="FILE.md", help="also write the closing lines as Markdown tables")
    return p


def _gated(data: RunLog) -> list[str]:
    """The models the run that made this save path scored (the manifest's); the others came from
    earlier runs and are not gated, as in the run."""
    manifest = data.manifest or {}
    named = [m.get("name") for m in manifest.get("models") or [] if isinstance(m, dict) and m.get("name")]
    return [m for m in data.models if m in named] if named else list(data.models)


def _corrected(save_path: Path) -> dict | None:
    """The label-corrected verdicts from the labels as they are now (None without labels)."""
    from ..judgecheck.corrected import current

    return current(save_path)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    width = _width(args.width) if args.width is not None else None
    from ..ci.gates import check_names, parse_gates

    gates = parse_gates(args.fail_under, args.fail_if_worse, args.fail_under_win_rate, args.fail_on_untrusted_judge)
    ci_files = None
    if args.junit or args.markdown:
        from ..ci.reports import CIFiles

        ci_files = CIFiles.at(args.junit, args.markdown)
    try:
        data = RunLog.read(args.save_path)  # read once, for the lines and the comparisons
    except NoResults as exc:
        raise InputError(str(exc)) from None
    fresh = current(data)  # files of an older version: decided again in memory, not rewritten
    if fresh is not None:
        data.comparisons = fresh
        data.problems = [x for x in data.problems if "comparisons" not in x]
    verdict = bool(gates) or ci_files is not None
    if verdict:
        unread = [str(u) for u in data.unreadable]
        if unread:  # a gate over a model whose file cannot be read would pass or fail on nothing
            raise InputError(f"{args.save_path}: a result file cannot be read, so the run cannot be gated: "
                             + "; ".join(unread))
        if gates:
            from ..ci.gates import GateView

            check_names(gates, GateView.of(data, _gated(data)).known())
    print(closing_summary(data, width=width, color=None, scores=args.scores, corrected=_corrected(args.save_path)))
    if not verdict:
        if data.unreadable:  # the lines above lack those models: say so, and never exit 0
            print(incomplete_line(data.unreadable, "this summary"), file=sys.stderr)
            return EXIT_RUN_ERRORS
        return EXIT_OK
    return _verdict(data, gates, args.save_path, ci_files)


def _verdict(data: RunLog, gates, save_path: Path, ci_files) -> int:
    """The gate lines, the status line and the exit code of the stored run, as the run printed them."""
    from ..ci.gates import GateView, evaluate, failure_reason, needs_labels, outcome_lines, status_word

    manifest = data.manifest or {}
    codes: list[tuple[int, str]] = []
    if (failed_run := run_errors(manifest)) is not None:
        codes.append(failed_run)
    results = []
    if gates:
        try:
            view = GateView.of(data, _gated(data))
            if needs_labels(gates):
                view.corrected = _corrected(save_path)
            results = evaluate(gates, view)
        except InputError as exc:
            codes.append((EXIT_INPUT, str(exc)))
        else:
            for line in outcome_lines(results):
                print(line)
            if any(not r.passed for r in results):
                codes.append((EXIT_FAIL_UNDER, failure_reason(results)))
    code, why = worst(codes)
    status = status_word(code, manifest.get("status"))
    print(f"status: {status}")
    if ci_files is not None:
        ci_files.add(str(save_path), data, results, code, why, status, _gated(data))
        for path in ci_files.write():
            print(f"wrote {path}", file=sys.stderr)
    if code:
        print(f"exit {code}: {why}", file=sys.stderr)
    return code
