"""`eval.py summary SAVE_PATH`: the closing lines of an earlier run, read from its save path.

Exit codes: 0 printed; 2 no readable result file, or a save path of a newer layout; 3 printed
without a result file that could not be read (named, with why), so the lines are incomplete."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import InputError
from ..pipeline.comparisons import current
from ..report.data import NoResults, load_save_path
from ..report.terminal import closing_summary
from ..savepath import read
from .common import EXIT_OK, EXIT_RUN_ERRORS, Parser, incomplete_line


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py summary", description="Print the closing lines of a run (per pair: the confirmatory "
                                                   "verdicts with difference, interval and adjusted p; battles, "
                                                   "ranking, judge usage, warnings, where the files are) from its "
                                                   "save path.")
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/)")
    p.add_argument("--width", type=int, help="columns (default: the terminal's)")
    p.add_argument("--scores", nargs="+", metavar="SCORE", help="the scores to show (e.g. GPT/correctness "
                   "ROUGE-L); default: the config's summary_scores, else each pair's primary scores")
    args = p.parse_args(argv)
    files = read.read_results(args.save_path)  # read once, for the view and the comparisons
    try:
        data = load_save_path(args.save_path, files)
    except NoResults as exc:
        raise InputError(str(exc)) from None
    fresh = current(args.save_path, files)  # files of an older version: decided again in memory, not rewritten
    if fresh is not None:
        data.comparisons = fresh
        data.problems = [x for x in data.problems if "comparisons" not in x]
    print(closing_summary(data, width=args.width, color=None, scores=args.scores))
    if files.unreadable:  # the lines above lack those models: say so, and never exit 0
        print(incomplete_line(files.unreadable, "this summary"), file=sys.stderr)
        return EXIT_RUN_ERRORS
    return EXIT_OK
