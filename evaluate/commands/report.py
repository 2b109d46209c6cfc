"""`eval.py report SAVE_PATH [--out FILE]`: write the HTML report of a save path.

Exit codes: 0 written, 2 the save path has no results or was written in a newer layout (the message
names it), 3 the report was written without a result file that could not be read (cut short, not
JSON): the page lacks that model, so the output is incomplete; the message names the file and why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_INPUT, EXIT_INCOMPLETE = 0, 2, 3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="eval.py report",
                                description="Write one self-contained HTML page for a save path: headline "
                                            "comparisons, judge panel, per-category charts, item browser, run.")
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/)")
    p.add_argument("--out", type=Path, help="where to write the page (default: SAVE_PATH/report.html)")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for bad flags, 0 for --help
        return int(exc.code or 0)
    from ..pipeline.comparisons import stale, write_comparisons
    from ..report.page import write_report
    from ..savepath import layout, read
    from ..savepath.log import NoResults, RunLog
    from .common import incomplete_line

    if not layout.results_dir(args.save_path).is_dir():
        print(f"error: {args.save_path}: no results/ folder here; give the save_path of a run "
              "(the folder that holds results/, manifest.json)", file=sys.stderr)
        return EXIT_INPUT
    try:
        log = RunLog.read(args.save_path)  # read once, for the comparisons and the page; a newer layout: exit 2
        if stale(args.save_path):  # written by an older version: decide them again, as a run does
            read.read_comparisons(args.save_path, before := [])  # what the log said of the old files
            write_comparisons(args.save_path, log=log)
            log.comparisons = read.read_comparisons(args.save_path, after := [])
            log.problems = [p for p in log.problems if p not in before] + after
        if layout.labels_file(args.save_path).is_file():  # the labels as they are now: "What people would say"
            from ..judgecheck.labelling import update_corrected

            update_corrected(args.save_path)
        out = write_report(args.save_path, args.out, data=log)
    except NoResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        print(f"error: cannot write the report: {exc}", file=sys.stderr)
        return EXIT_INPUT
    print(out)
    if log.unreadable:
        print(incomplete_line(log.unreadable, "the report"), file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
