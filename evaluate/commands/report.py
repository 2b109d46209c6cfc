"""`eval.py report SAVE_PATH [--out FILE]`: write the HTML report of a save path.

Exit codes: 0 written, 2 the save path has no results (the message names it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_INPUT = 0, 2


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
    from ..report.data import NoResults
    from ..report.page import write_report

    if not (args.save_path / "results").is_dir():
        print(f"error: {args.save_path}: no results/ folder here; give the save_path of a run "
              "(the folder that holds results/, manifest.json)", file=sys.stderr)
        return EXIT_INPUT
    try:
        if stale(args.save_path):  # written by an older version: decide them again, as a run does
            write_comparisons(args.save_path)
        out = write_report(args.save_path, args.out)
    except NoResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        print(f"error: cannot write the report: {exc}", file=sys.stderr)
        return EXIT_INPUT
    print(out)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
