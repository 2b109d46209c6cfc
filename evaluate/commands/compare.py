"""`eval.py compare SAVE_PATH_A SAVE_PATH_B`: the same models on the same items in two runs (e.g.
yesterday's checkpoint and today's), with the paired statistics of a run's comparisons."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

from ..core.errors import InputError
from ..core.io import atomic_write_json
from ..pipeline.comparisons import NOT_COMPARABLE
from ..compare.runs import compare_runs, refused_rows
from .common import EXIT_OK, Parser


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def comparison_lines(run_a: Path, run_b: Path, comps: list[dict], method: dict, *, every_row: bool,
                     width: int = 80) -> list[str]:
    """The comparison in `width` columns (at least 60): a heading per model and category, one row per
    score; names are never cut (the score column is as wide as the longest name shown), a verdict that
    does not fit goes on the next line, and the prose wraps."""
    width = max(60, width)
    wrap = lambda text, indent="  ": textwrap.wrap(text, width=width, subsequent_indent=indent) or [text]  # noqa: E731
    lines = [f"A = {run_a}", f"B = {run_b}"]  # a path is never cut
    lines += wrap(f"diff = B - A per model; {method['family']}")
    lines += wrap(f"primary ({method['primary_from']}): {', '.join(method['primary']) or 'none'}")
    blocks: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for comp in comps:
        for r in comp["rows"]:
            if r["verdict"] == NOT_COMPARABLE:
                continue
            if every_row or r["category"] == "(all)" or r["verdict"] in ("A better", "B better"):
                blocks.setdefault((comp["model_a"][2:], r["category"]), []).append((comp, r))
    sw = max([12] + [len(r["score"]) for rows in blocks.values() for _, r in rows])
    for (model, category), rows in blocks.items():
        lines += [""] + wrap(f"{model} · {category}")
        lines.append(f"  {'score':<{sw}} {'A':>6} {'B':>6} {'B-A':>7}  {'interval':<16} {'p_adj':>6}  verdict")
        for comp, r in rows:
            diff = 0.0 - r["diff"] if r["diff"] is not None else None  # B - A (0.0 - x: never "-0.000")
            ci = (f"[{_num(0.0 - r['interval'][1])}, {_num(0.0 - r['interval'][0])}]" if r.get("interval")
                  else "too few items" if r["n"] < comp["method"]["min_interval_n"] else "no interval")
            word = {"A better": "worse in B", "B better": "better in B"}.get(r["verdict"], "no detectable difference")
            word += "" if r["role"] == "confirmatory" else " (exploratory)"
            row = (f"  {r['score']:<{sw}} {_num(r['mean_a']):>6} {_num(r['mean_b']):>6} {_num(diff):>7}  {ci:<16} "
                   f"{_num(r['p_adj'], 3):>6}")
            if len(row) + 2 + len(word) <= width:
                lines.append(f"{row}  {word}")
            else:
                lines += [row, f"{'':>{max(4, width - len(word))}}{word}" if len(word) < width - 4 else f"    {word}"]
    lines += [""] + wrap("interval: simultaneous over the primary scores for confirmatory rows, 95% unadjusted for "
                         "exploratory ones; exploratory rows are leads, not findings")
    return lines


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py compare", description="Compare two runs of the same models on the same items: per "
                                                   "model, category and score, the paired difference B - A.")
    p.add_argument("run_a", type=Path, help="the earlier run's save path (A)")
    p.add_argument("run_b", type=Path, help="the later run's save path (B)")
    p.add_argument("--model", action="append", metavar="A_NAME:B_NAME",
                   help="compare these two models (repeatable); default: every model name in both runs")
    p.add_argument("--out", type=Path, help="also write the comparisons (JSON) here")
    p.add_argument("--all", action="store_true", help="every row, not only the '(all)' rows and significant ones")
    p.add_argument("--report", type=Path, metavar="FILE.html", help="also write the comparison as a report: each "
                   "model as A:<model> and B:<model>, the pairs' verdicts, forest plots and both runs' answers side by "
                   "side in the item browser")
    args = p.parse_args(argv)
    pairs = None
    if args.model:
        pairs = []
        for spec in args.model:
            if spec.count(":") != 1 or not all(spec.split(":")):
                raise InputError(f"--model {spec!r}: expected A_NAME:B_NAME")
            pairs.append(tuple(spec.split(":")))
    comps = compare_runs(args.run_a, args.run_b, models=pairs)
    refused = refused_rows(comps)
    compared = [r for c in comps for r in c["rows"] if r["verdict"] != NOT_COMPARABLE]
    for line in refused:
        print(f"not comparable (signatures differ): {line}", file=sys.stderr)
    if not compared:
        raise InputError("compare: no score of the two runs was made the same way (see the lines above); "
                         "nothing to compare")
    method = comps[0]["method"]
    for line in comparison_lines(args.run_a, args.run_b, comps, method, every_row=args.all,
                                 width=shutil.get_terminal_size((80, 24)).columns):
        print(line)
    if args.out:
        atomic_write_json(args.out, {"schema": "llm-eval-run-comparison/2", "comparisons": comps})
    if args.report:
        from ..compare.runs import comparison_view
        from ..report.page import write_report

        print(f"report: {write_report(args.run_b, args.report, data=comparison_view(args.run_a, args.run_b, comps))}")
    return EXIT_OK
