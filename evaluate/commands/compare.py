"""`eval.py compare SAVE_PATH_A SAVE_PATH_B`: the same models on the same items in two runs (e.g.
yesterday's checkpoint and today's), with the paired statistics of a run's comparisons."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import InputError
from ..core.io import atomic_write_json
from ..pipeline.comparisons import NOT_COMPARABLE
from ..pipeline.runs_compare import compare_runs, refused_rows
from .common import EXIT_OK, Parser


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py compare", description="Compare two runs of the same models on the same items: per "
                                                   "model, category and score, the paired difference B - A.")
    p.add_argument("run_a", type=Path, help="the earlier run's save path (A)")
    p.add_argument("run_b", type=Path, help="the later run's save path (B)")
    p.add_argument("--model", action="append", metavar="A_NAME:B_NAME",
                   help="compare these two models (repeatable); default: every model name in both runs")
    p.add_argument("--out", type=Path, help="also write the comparisons (JSON) here")
    p.add_argument("--all", action="store_true", help="every row, not only the '(all)' rows and significant ones")
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
    print(f"A = {args.run_a}\nB = {args.run_b}\ndiff = B - A per model; {method['family']}\n"
          f"primary ({method['primary_from']}): {', '.join(method['primary']) or 'none'}")
    print(f"{'model':<12} {'category':<12} {'score':<18} {'A':>6} {'B':>6} {'B-A':>7} {'interval':>16} "
          f"{'p_adj':>6}  verdict")
    for comp in comps:
        model = comp["model_a"][2:]
        for r in comp["rows"]:
            if r["verdict"] == NOT_COMPARABLE:
                continue
            significant = r["verdict"] in ("A better", "B better")
            if not (args.all or r["category"] == "(all)" or significant):
                continue
            diff = 0.0 - r["diff"] if r["diff"] is not None else None  # B - A (0.0 - x: never "-0.000")
            ci = (f"[{_num(0.0 - r['interval'][1])}, {_num(0.0 - r['interval'][0])}]" if r.get("interval")
                  else "too few items" if r["n"] < comp["method"]["min_interval_n"] else "no interval")
            word = {"A better": "worse in B", "B better": "better in B"}.get(r["verdict"], "no detectable difference")
            tag = "" if r["role"] == "confirmatory" else " (exploratory)"
            print(f"{model[:12]:<12} {r['category'][:12]:<12} {r['score'][:18]:<18} {_num(r['mean_a']):>6} "
                  f"{_num(r['mean_b']):>6} {_num(diff):>7} {ci:>16} {_num(r['p_adj'], 3):>6}  {word}{tag}")
    print("interval: simultaneous over the primary scores for confirmatory rows, 95% unadjusted for exploratory "
          "ones; exploratory rows are leads, not findings")
    if args.out:
        atomic_write_json(args.out, {"schema": "llm-eval-run-comparison/2", "comparisons": comps})
    return EXIT_OK
