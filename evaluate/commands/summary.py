"""`eval.py summary SAVE_PATH`: the closing lines of an earlier run, read from its save path."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..report.data import NoResults, load_save_path
from ..report.terminal import closing_summary
from .common import EXIT_OK, Parser


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py summary", description="Print the closing lines of a run (verdicts, ranking, "
                                                   "battles, judge warnings, where the files are) from its save path.")
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/)")
    p.add_argument("--width", type=int, help="columns (default: the terminal's)")
    args = p.parse_args(argv)
    try:
        data = load_save_path(args.save_path)
    except NoResults as exc:
        raise InputError(str(exc)) from None
    print(closing_summary(data, width=args.width, color=None))
    return EXIT_OK
