"""MT-bench's tables as text, 80 columns wide: one number per quantity (show_result.py's counting, the
interval beside it), each labelled with how it was counted; where the project's number differs from
what show_result.py would print (a rating outside the scale), both are shown and the line says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tables import column_heads, name_row

WIDTH = 80


def _short_path(summary: dict[str, Any]) -> str:
    """model_judgment/<file>: the save path is the user's own, and too long for a table's width."""
    return "model_judgment/" + Path(summary["files"]["judgments"]).name


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(cell: dict[str, Any], digits: int = 2) -> str:
    if cell.get("mean", cell.get("win_rate_adjusted")) is None:
        return "-"
    mean = cell.get("mean", cell.get("win_rate_adjusted"))
    if not cell.get("ci"):  # below 10 questions a bootstrap interval would claim more than it knows
        return f"{mean:.{digits}f} (n={cell.get('n', '?')})"
    lo, hi = cell["ci"]
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def single_text(summary: dict[str, Any]) -> str:
    """One table, one number per quantity, each labelled with how it was counted."""
    judge = summary["judge"]["name"]
    stats = summary["stats"]
    level = int(stats["level"] * 100)
    lines = [f"MT-bench single-answer grading, judge {judge} ({_short_path(summary)})",
             f"{'model':<22}{'turn 1':>19}{'turn 2':>19}{'average':>10}{'n':>6}"]
    for m, e in stats["models"].items():
        avg = e.get("average", {})
        lines.append(name_row(m, 22, f"{_ci(e['turn_1']):>19}{_ci(e['turn_2']):>19}{_num(avg.get('mean')):>10}"
                                     f"{avg.get('n', 0):>6}"))
        bad = [f"{e[k]} {k}" for k in ("invalid", "failed") if e[k]]
        if bad:
            lines.append(f"{'':<2}left out: {', '.join(bad)}")
        if e.get("out_of_scale"):
            lines.append(f"{'':<2}{e['out_of_scale']} of them outside the prompt's 1-10 scale; show_result.py "
                         f"averages {'it' if e['out_of_scale'] == 1 else 'them'}: {_num(e['fastchat_average'])}")
    lines += _wrap_lines(f"turn k: the mean of turn k's valid ratings [{level}% bootstrap interval over questions; "
                         "(n=N) below 10]. average: every valid rating of both turns pooled, as show_result.py "
                         "counts it. By category below: the mean over questions of each question's mean turn "
                         "score, a question counted only when all its turns are valid (MT-bench/score in "
                         "results/, the report and the closing lines).")
    models = list(stats["models"])
    for start in range(0, len(models), 3):
        chunk = models[start:start + 3]
        heads, legend = column_heads(chunk, 22)
        lines += ["", *legend, f"{'category':<14}" + heads]
        cats = dict.fromkeys(c for m in chunk for c in stats["models"][m]["categories"])
        for cat in cats:
            cells = [_ci(stats["models"][m]["categories"].get(cat, {"mean": None})) for m in chunk]
            lines.append(f"{cat:<14}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def pairwise_text(summary: dict[str, Any]) -> str:
    """show_result.py's counts and rates with the interval beside the adjusted win rate: one number
    per quantity, each counted per judged (question, turn) as show_result.py counts."""
    table = {r["model"]: r for r in summary["fastchat"]["pairwise"]}
    base = summary.get("baseline")
    stats = summary["stats"]
    level = int(stats["level"] * 100)
    lines = [f"MT-bench pairwise {'against ' + base if base else 'between all pairs'}, judge {summary['judge']['name']}",
             f"({_short_path(summary)}):",
             f"{'model':<22}{'win':>5}{'loss':>5}{'tie':>5}{'win rate':>9}{'loss rate':>10}{'adjusted':>24}"]
    for m, e in stats["models"].items():
        r = table.get(m)
        rates = f"{r['win_rate']:>9.4f}{r['loss_rate']:>10.4f}" if r else f"{'-':>9}{'-':>10}"
        lines.append(name_row(m, 22, f"{e['win']:>5}{e['loss']:>5}{e['tie']:>5}{rates}{_ci(e, 4):>24}"))
        lines.append(f"{'':<2}turn 1 {_ci(e['turn_1'], 4)}, turn 2 {_ci(e['turn_2'], 4)}")
        lines.append(f"{'':<2}inconsistent orders (ties): {e['inconsistent']}, invalid: {e['invalid']}")
    for p in stats["pairs"]:
        lines += _wrap_lines(f"{p['model_a']} vs {p['model_b']}")
        lines.append(f"{'':<4}win-loss-tie {p['win']}-{p['loss']}-{p['tie']} (first model), adjusted {_ci(p, 4)}")
    lines += _wrap_lines(f"Counted per judged (question, turn), as show_result.py counts; a pair with an \"error\" "
                         f"game left out. adjusted: (win + tie/2) / n [{level}% Wilson interval]. The battles/ files, "
                         "the report and the closing lines count per question instead (its turns judged together), "
                         "so their win rate may differ.")
    return "\n".join(lines)


def summary_text(summary: dict[str, Any]) -> str:
    text = single_text(summary) if summary["mode"] == "single" else pairwise_text(summary)
    c = summary["counts"]
    foot = (f"{c['matches']} matches: {c['reused']} read from the judgment file, {c['judged']} judged now "
            f"({c['judge_calls']} calls); {c['valid']} valid, {c['invalid']} invalid, {c['failed']} failed")
    if c["stale"]:
        foot += f"; {c['stale']} kept judgments were made on different prompts (remove the file to judge again)"
    if summary.get("unjudged_turns"):
        foot += ". " + summary["unjudged_turns"]["note"]
    return text + "\n\n" + _wrap(foot)


def _wrap(text: str) -> str:
    return "\n".join(_wrap_lines(text))


def _wrap_lines(text: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, WIDTH)
