"""`eval.py summary SAVE_PATH`: the closing lines of an earlier run, read from its save path."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..pipeline.comparisons import current
from ..report.data import NoResults, load_save_path
from ..report.terminal import closing_summary
from .common import EXIT_OK, Parser


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
    try:
        data = load_save_path(args.save_path)
    except NoResults as exc:
        raise InputError(str(exc)) from None
    fresh = current(args.save_path)  # files of an older version: decided again in memory, not rewritten
    if fresh is not None:
        data.comparisons = fresh
        data.problems = [x for x in data.problems if "comparisons" not in x]
    print(closing_summary(data, width=args.width, color=None, scores=args.scores))
    return EXIT_OK
