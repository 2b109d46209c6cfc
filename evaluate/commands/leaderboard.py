"""`eval.py leaderboard --alpaca-eval PATH... [--out FILE.csv]` and
`eval.py leaderboard --arena-hard BENCH_DIR [--judge NAME] [--baseline NAME] [--seed S] [--out FILE.csv]`

AlpacaEval 2: every annotations file given (a file, a folder of them, or AlpacaEval's results
folder) is one model, and all of them together form the reference set the length-controlled win
rate is fitted on (see evaluate/stats/length_control.py). The CSV has AlpacaEval's leaderboard
layout: an unnamed first column with the model, then win_rate, standard_error, n_wins,
n_wins_base, n_draws, n_total, discrete_win_rate, avg_length, length_controlled_winrate,
lc_standard_error, then how the LC column was made (lc_method, lc_alignment, lc_reference_models,
lc_reference_set: a hash of the reference models' names). Rows sorted by LC win rate.

Arena-Hard: the rows of evaluate.benchmarks.arena_hard.leaderboard_table, written as they come; the
bootstrap draws are those of show_result.py after np.random.seed(S) (default 0). The baseline is
--baseline (the judgments must hold games against it), else the one their `baseline` field names.
When BENCH_DIR is the save path of `eval.py arena-hard` and holds a judge check of that judge
(judge_checks/, matched by the judge's name), its verdict is quoted.

Exit codes: 0 done; 2 bad input (one `error:` line).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InputError
from ..benchmarks.tables import wrap
from ..core.io import atomic_write_text
from .common import EXIT_OK, Parser, guarded

WIDTH = 80
SMALL_REFERENCE = 10  # below this many models, leave-out checks showed LC moving by several points


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py leaderboard",
               description="A benchmark's leaderboard from its judgment files: AlpacaEval 2 (win rate, length-"
                           "controlled win rate) or Arena-Hard.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--alpaca-eval", nargs="+", type=Path, metavar="PATH",
                     help="AlpacaEval annotations: files, folders of them, or AlpacaEval's results/ folder; "
                          "together they are the reference set of the length-controlled win rate")
    src.add_argument("--arena-hard", type=Path, metavar="BENCH_DIR", help="an Arena-Hard benchmark folder")
    p.add_argument("--judge", help="Arena-Hard: the judge whose judgments to read")
    p.add_argument("--baseline", help="Arena-Hard: the baseline model (default: the one the judgments' baseline "
                                      "field names)")
    p.add_argument("--lc-align", choices=("position", "instruction"), default="position",
                   help="AlpacaEval: which instruction difficulty a row gets in the LC fit: by row position "
                        "as AlpacaEval does (default; over AlpacaEval's 42 published annotation files its LC "
                        "differed from the published LC by 0.19 pp at the median, 2.19 pp at worst, and the raw "
                        "columns were equal: BENCHMARKS.md) or by instruction text")
    p.add_argument("--seed", type=int, default=0, help="Arena-Hard: bootstrap seed (show_result.py's draws after "
                                                      "np.random.seed(SEED))")
    p.add_argument("--out", type=Path, metavar="FILE.csv", help="write the leaderboard here (CSV)")
    return p


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)  # shortest round-trip form, as pandas writes it
    return str(value)


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(v) for v in row])
    return buf.getvalue()


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, fmt)


def alpaca_eval_table(board) -> str:
    """The leaderboard as an 80-column text table, with a footer that says how LC was obtained."""
    head = f"{'#':>3} {'model':<31} {'LC win':>7} {'(se)':>6} {'win rate':>8} {'(se)':>6} {'avg len':>7} {'n':>5}"
    lines = [head, "-" * len(head)]
    for i, r in enumerate(board.rows, 1):
        lines.append(f"{i:>3} {_fit(r['model'], 31):<31} {_num(r['length_controlled_winrate'], '7.2f')} "
                     f"{_num(r['lc_standard_error'], '6.2f')} {_num(r['win_rate'], '8.2f')} "
                     f"{_num(r['standard_error'], '6.2f')} {r['avg_length']:>7} {r['n_total']:>5}")
    k = len(board.reference_models)
    notes = [f"baseline {board.baseline}, annotator {board.annotator or '?'}; percentages.",
             f"LC: {board.lc_method}; difficulty by {board.alignment}; reference set: {k} model"
             f"{'' if k == 1 else 's'} (all files given, baseline excluded)."]
    if k < 2:
        notes.append("No reference set: the instruction difficulty and the slope prior need at least two "
                     "models, so LC is AlpacaEval's per-model GLM without them, unregularised (a model much "
                     "shorter than the baseline can get an inflated LC). Give more models.")
    elif k < SMALL_REFERENCE:
        notes.append(f"Small reference set (< {SMALL_REFERENCE} models): difficulty and slope prior are noisy; "
                     "LC may move by a few points as models are added.")
    out = "\n".join(lines) + "\n"
    for note in notes:
        out += wrap(note)
    return out


def _alpaca_eval(args: argparse.Namespace) -> int:
    from ..benchmarks.alpaca_eval.leaderboard import COLUMNS, EXTRA_COLUMNS, leaderboard, read_annotations

    if args.judge or args.baseline:
        raise InputError("--judge and --baseline apply to --arena-hard; AlpacaEval files name their baseline "
                         "(generator_1) and annotator themselves")
    models = [m for path in args.alpaca_eval for m in read_annotations(path)]
    board = leaderboard(models, alignment=args.lc_align)
    print(alpaca_eval_table(board), end="")
    if args.out:
        cols = ("model", *COLUMNS, *EXTRA_COLUMNS)
        text = _csv(("", *cols[1:]), [[r[c] for c in cols] for r in board.rows])
        atomic_write_text(args.out, text)
        print(f"wrote {args.out}")
    return EXIT_OK


def _arena_hard(args: argparse.Namespace) -> int:
    if args.lc_align != "position":
        raise InputError("--lc-align applies to --alpaca-eval")
    from ..benchmarks.arena_hard.run import baseline_of, judge_dir, leaderboard_table, lengths_note
    from ..benchmarks.tables import arena_hard_table, judge_check_line, stored_judge_check

    judge = judge_dir(args.arena_hard, args.judge).name
    base = baseline_of(args.arena_hard, args.judge, args.baseline)
    columns, rows = leaderboard_table(args.arena_hard, args.judge, baseline=base, seed=args.seed)
    print(arena_hard_table(rows, judge, base, lengths_note(args.arena_hard)), end="")
    if stored_judge_check(args.arena_hard, {"model": judge}, by_name=True):  # a save path of eval.py arena-hard
        print(judge_check_line(args.arena_hard, {"model": judge}, by_name=True), end="")
    if args.out:
        atomic_write_text(args.out, _csv(columns, [[r.get(c) for c in columns] for r in rows]))
        print(f"wrote {args.out}")
    return EXIT_OK


def _main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.out is not None and args.out.is_dir():
        raise InputError(f"--out {args.out}: is a folder; give a file name (FILE.csv)")
    return _alpaca_eval(args) if args.alpaca_eval else _arena_hard(args)


def main(argv: list[str]) -> int:
    """Entry point of `eval.py leaderboard`: bad input is one `error:` line and exit 2."""
    return guarded(_main, list(argv))
