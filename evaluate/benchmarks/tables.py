"""What the benchmark commands print at the end: an 80-column table with the raw and the controlled
score side by side (AlpacaEval: win rate and length-controlled win rate; Arena-Hard: score and
style-controlled score with their 90% intervals), and the judge check's verdict for the judge when
one is stored under the save path. Kept apart from the commands so `eval.py alpaca-eval`,
`eval.py arena-hard` and `eval.py leaderboard` print the same table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from ..core.io import safe_name
from ..savepath import layout, read

WIDTH = 80


def _num(x: Any, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def name_row(name: str, width: int, rest: str) -> str:
    """A table row that starts with a name in a column `width` wide: a name that does not fit is never
    cut; it has the line to itself and the row's numbers follow on the next line, under their columns."""
    if len(name) < width:
        return f"{name:<{width}}{rest}"
    return f"{name}\n{'':<{width}}{rest}"


def column_heads(names: list[str], width: int) -> tuple[str, list[str]]:
    """Column headers for `names` in columns `width` wide: the names themselves where they fit, else
    (1), (2), ... with one legend line per column naming it in full (never cut)."""
    if all(len(n) < width for n in names):
        return "".join(f"{n:>{width}}" for n in names), []
    return ("".join(f"{f'({i})':>{width}}" for i in range(1, len(names) + 1)),
            [f"({i}) {n}" for i, n in enumerate(names, 1)])


def wrap(text: str, width: int = WIDTH) -> str:
    words, line, out = text.split(), "", ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            out += line + "\n"
            line = w
        else:
            line = f"{line} {w}" if line else w
    return out + (line + "\n" if line else "")


def arena_hard_table(rows: Iterable[dict[str, Any]], judge: str, baseline: str, lengths: str) -> str:
    """Arena-Hard's leaderboard: raw and style-controlled scores, each with its 90% interval."""
    head = (f"{'model':<22}{'score':>6} {'90% interval':>13} {'style':>6} {'90% interval':>13}"
            f"{'tokens':>7}{'n':>5}{'inv':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        raw = f"({_num(r['lower'], '.1f')}, {_num(r['upper'], '.1f')})"
        sc = f"({_num(r['sc_lower'], '.1f')}, {_num(r['sc_upper'], '.1f')})"
        lines.append(name_row(str(r["model"]), 22, f"{_num(r['score'], '6.1f')} {raw:>13} "
                              f"{_num(r['sc_score'], '6.1f')} {sc:>13}{_num(r['avg_tokens'], '7.0f')}"
                              f"{r['n_questions']:>5}{r['n_invalid']:>5}"))
    out = "\n".join(lines) + "\n"
    out += wrap(f"Arena-Hard, judge {judge}, baseline {baseline} (50 by definition). score: win rate against "
                "the baseline, %, as show_result.py computes it (a strong verdict counts three times; 100 "
                "bootstrap rounds, 5th-95th percentile); style: the same controlled for answer length and "
                "markdown density (headers, lists, bold; code blocks removed). n: questions scored; inv: "
                f"questions left out because a game had no verdict (kept in the judgment files). {lengths}")
    if any(r.get("sc_score") is None for r in rows):
        out += wrap("style '-': no style-controlled score (answers missing beside the judgments).")
    return out


def alpaca_eval_table(rows: Iterable[dict[str, Any]]) -> str:
    """A run's AlpacaEval results: raw win rate and length-controlled win rate side by side."""
    head = (f"{'model':<22}{'win rate':>9}{'(se)':>6}{'LC win':>8}{'(se)':>6}{'discrete':>9}{'len':>6}"
            f"{'n':>5}{'inv':>4}{'fail':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(name_row(str(r["model"]), 22, f"{_num(r.get('win_rate'), '9.2f')}"
                              f"{_num(r.get('standard_error'), '6.2f')}{_num(r.get('length_controlled_winrate'), '8.2f')}"
                              f"{_num(r.get('lc_standard_error'), '6.2f')}{_num(r.get('discrete_win_rate'), '9.2f')}"
                              f"{_num(r.get('avg_length'), '6.0f')}{r.get('n_total', 0):>5}{r.get('n_invalid', 0):>4}"
                              f"{r.get('n_failed', 0):>5}"))
    return "\n".join(lines) + "\n"


def _same_judge(stored: dict[str, Any], judge: dict[str, Any]) -> bool:
    """Same backend, model and (local judges) weights; decoding and server settings do not matter here."""
    return all(stored.get(k) == judge.get(k) for k in ("backend", "model", "weights_sha256"))


JUDGE_CHECK_SCOPE = "the project's battle and rating prompts with this judge, not this benchmark's prompt"


def _named(stored: dict[str, Any], judge: dict[str, Any]) -> bool:
    """The judge of a judgment folder, known by its name only (Arena-Hard's model_judgment/<judge>/)."""
    name = str(judge.get("model"))
    return stored.get("model") is not None and name in (str(stored["model"]), safe_name(str(stored["model"])))


def stored_judge_check(save_path: Path, judge: dict[str, Any], *,
                       by_name: bool = False) -> tuple[dict[str, Any], Path] | None:
    """The newest judge check under save_path/judge_checks/ of this judge (same backend, model and
    weights; `by_name`: a judge known by its model name only) and its file, or None."""
    match = _named if by_name else _same_judge
    found = []
    for p, rec in read.stored_checks(save_path):
        sigs = [s.get("judge", {}) for s in (rec.get("judge") or {}).values() if isinstance(s, dict)]
        if any(match(s, judge) for s in sigs):
            found.append((rec.get("created") or "", rec, p))
    if not found:
        return None
    _, rec, p = max(found, key=lambda t: t[0])
    return rec, p


def judge_check_line(save_path: Path, judge: dict[str, Any], *, by_name: bool = False) -> str:
    """The stored judge check of this judge under save_path, said as what it is: a check of the judge
    with the project's battle and rating prompts, not with this benchmark's prompt."""
    found = stored_judge_check(save_path, judge, by_name=by_name)
    if found is None:
        return wrap(not_checked_text(save_path, judge))
    rec, p = found
    return wrap(f"judge check ({p.name}, {JUDGE_CHECK_SCOPE}): {rec.get('verdict_text')}")


def not_checked_text(save_path: Path, judge: dict[str, Any]) -> str:
    return (f"judge check: not checked for judge {judge.get('model')} (none stored in "
            f"{layout.judge_checks_dir(save_path)}; `eval.py judge-check --config CFG` with this judge "
            "and this save_path stores one)")
