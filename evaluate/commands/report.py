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
    from ..report.data import NoResults, load_save_path
    from ..report.page import write_report
    from ..savepath import read
    from .common import incomplete_line

    if not (args.save_path / "results").is_dir():
        print(f"error: {args.save_path}: no results/ folder here; give the save_path of a run "
              "(the folder that holds results/, manifest.json)", file=sys.stderr)
        return EXIT_INPUT
    try:
        read.check(args.save_path)  # a newer layout: refused (exit 2) before anything is written
        files = read.read_results(args.save_path)  # read once, for the comparisons and the page
        if stale(args.save_path):  # written by an older version: decide them again, as a run does
            write_comparisons(args.save_path, files=files)
        out = write_report(args.save_path, args.out, data=load_save_path(args.save_path, files))
    except NoResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        print(f"error: cannot write the report: {exc}", file=sys.stderr)
        return EXIT_INPUT
    print(out)
    if files.unreadable:
        print(incomplete_line(files.unreadable, "the report"), file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
