"""MT-bench's tables as text, 80 columns wide: show_result.py's numbers first, the intervals after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WIDTH = 80


def _name(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


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
    table = summary["fastchat"]["single"]
    judge = summary["judge"]["name"]
    lines = [f"MT-bench single-answer grading, judge {judge}",
             f"show_result.py over {_short_path(summary)} (score -1 left out):",
             f"{'model':<40}{'turn 1':>9}{'turn 2':>9}{'average':>9}{'n':>7}"]
    t1 = {r["model"]: r for r in table["turn_1"]}
    t2 = {r["model"]: r for r in table["turn_2"]}
    for row in table["average"]:
        m = row["model"]
        lines.append(f"{_name(m, 39):<40}{_num(t1.get(m, {}).get('score')):>9}{_num(t2.get(m, {}).get('score')):>9}"
                     f"{_num(row['score']):>9}{row['n']:>7}")
    stats = summary["stats"]
    level = int(stats["level"] * 100)
    lines += ["", f"This run: mean [{level}% bootstrap interval over questions], (n=N) below 10:",
              f"{'model':<23}{'turn 1':>19}{'turn 2':>19}{'overall':>19}"]
    for m, e in stats["models"].items():
        lines.append(f"{_name(m, 22):<23}{_ci(e['turn_1']):>19}{_ci(e['turn_2']):>19}{_ci(e['overall']):>19}")
        bad = [f"{e[k]} {k}" for k in ("invalid", "failed") if e[k]]
        if bad:
            lines.append(f"{'':<23}left out: {', '.join(bad)}")
    models = list(stats["models"])
    for start in range(0, len(models), 3):
        chunk = models[start:start + 3]
        lines += ["", f"{'category':<14}" + "".join(f"{_name(m, 21):>22}" for m in chunk)]
        cats = dict.fromkeys(c for m in chunk for c in stats["models"][m]["categories"])
        for cat in cats:
            cells = [_ci(stats["models"][m]["categories"].get(cat, {"mean": None})) for m in chunk]
            lines.append(f"{_name(cat, 13):<14}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def pairwise_text(summary: dict[str, Any]) -> str:
    table = summary["fastchat"]["pairwise"]
    base = summary.get("baseline")
    lines = [f"MT-bench pairwise {'against ' + base if base else 'between all pairs'}, judge {summary['judge']['name']}",
             f"show_result.py over {_short_path(summary)}", "(pairs with an \"error\" game left out):",
             f"{'model':<33}{'win':>6}{'loss':>6}{'tie':>6}{'win rate':>10}{'loss rate':>10}{'adjusted':>9}"]
    for r in table:
        lines.append(f"{_name(r['model'], 32):<33}{r['win']:>6}{r['loss']:>6}{r['tie']:>6}{r['win_rate']:>10.4f}"
                     f"{r['loss_rate']:>10.4f}{r['win_rate_adjusted']:>9.4f}")
    stats = summary["stats"]
    level = int(stats["level"] * 100)
    lines += ["", f"This run: adjusted win rate [{level}% Wilson interval, ties count half]:",
              f"{'model':<24}{'overall':>19}{'turn 1':>19}{'turn 2':>18}"]
    for m, e in stats["models"].items():
        lines.append(f"{_name(m, 23):<24}{_ci(e):>19}{_ci(e['turn_1']):>19}{_ci(e['turn_2']):>18}")
        lines.append(f"{'':<24}inconsistent orders (ties): {e['inconsistent']}, invalid: {e['invalid']}")
    for p in stats["pairs"]:
        lines.append(f"{_name(p['model_a'], 37)} vs {_name(p['model_b'], 37)}")
        lines.append(f"{'':<4}win-loss-tie {p['win']}-{p['loss']}-{p['tie']} (first model), adjusted {_ci(p)}")
    return "\n".join(lines)


def summary_text(summary: dict[str, Any]) -> str:
    text = single_text(summary) if summary["mode"] == "single" else pairwise_text(summary)
    c = summary["counts"]
    foot = (f"{c['matches']} matches: {c['reused']} read from the judgment file, {c['judged']} judged now "
            f"({c['judge_calls']} calls); {c['valid']} valid, {c['invalid']} invalid, {c['failed']} failed")
    if c["stale"]:
        foot += f"; {c['stale']} kept judgments were made on different prompts (remove the file to judge again)"
    return text + "\n\n" + _wrap(foot)


def _wrap(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, WIDTH))
