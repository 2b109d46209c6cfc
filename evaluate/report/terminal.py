"""The closing summary of a run: one compact table that fits the terminal, then where to look.

Rows are category x family (the family's headline score), columns the models; `*` marks the
better model where the paired comparison (comparisons/) is significant after Holm. With two
models a battle column gives the judge's win rate of the first model. Plain text unless `color`
(default: stdout is a tty and NO_COLOR is unset).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .analysis import families_of, finite, headline_key, interval, judge_warnings, num
from .data import SaveData, load_save_path

BOLD, RED, GREEN, RESET = "\033[1m", "\033[31m", "\033[32m", "\033[0m"


def _fit(text: str, w: int) -> str:
    return text if len(text) <= w else text[: max(1, w - 1)] + "…"


def _significant_better(data: SaveData, category: str, key: str) -> set[str]:
    """Models that are significantly better than some other model on (category, key)."""
    out = set()
    for comp in data.comparisons:
        for r in comp.get("rows", []):
            if r.get("category") == category and r.get("score") == key and r.get("verdict") in ("A better", "B better"):
                out.add(r.get("better") or (comp.get("model_a") if r["verdict"] == "A better" else comp.get("model_b")))
    return out


def closing_summary(source: Path | SaveData, *, width: int | None = None, color: bool | None = None) -> str:
    """The closing lines of a save path (its files) or of a run's view (`SaveData`, from memory)."""
    data = source if isinstance(source, SaveData) else load_save_path(Path(source))
    save_path = data.path
    if width is None:
        width = shutil.get_terminal_size((80, 24)).columns
    width = max(40, width)
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    models = data.models
    battle = data.battle_for(models[0], models[1]) if len(models) == 2 else None

    rows: list[list[str]] = []
    marks: list[list[bool]] = []
    for cat in data.categories + ["(all)"]:
        keys: set[str] = set()
        for res in data.results:
            aggs = res.get("aggregates") or {}
            block = aggs.get("overall", {}) if cat == "(all)" else aggs.get("by_category", {}).get(cat, {})
            keys.update(block)
        for fam in families_of(sorted(keys)):
            key = headline_key(sorted(keys), fam)
            if key is None:
                continue
            better = _significant_better(data, cat, key)
            cells, mk = [], []
            for res in data.results:
                aggs = res.get("aggregates") or {}
                block = aggs.get("overall", {}) if cat == "(all)" else aggs.get("by_category", {}).get(cat, {})
                agg = block.get(key) or {}
                cells.append(num(agg.get("mean"), 3) + ("*" if res["model"] in better else ""))
                mk.append(res["model"] in better)
            b = ""
            if battle and fam == "GPT":
                bt, swapped = battle
                s = bt.get("summary") if cat == "(all)" else (bt.get("by_category") or {}).get(cat)
                if s and finite(s.get("win_rate")):
                    b = num(1 - s["win_rate"] if swapped else s["win_rate"], 2)
            rows.append([cat, key, *cells] + ([b] if battle else []))
            marks.append(mk)

    head = ["category", "score", *models] + (["battle"] if battle else [])
    lines: list[str] = []
    if rows:
        n_models = len(models)
        model_w = [max(7, min(12, len(m))) for m in models]
        fixed = sum(model_w) + (7 if battle else 0) + 2 * (len(head) - 1)
        cat_w = max(len(r[0]) for r in rows + [head])
        key_w = max(len(r[1]) for r in rows + [head])
        spare = width - fixed
        if cat_w + key_w > spare:  # shrink the two text columns, the longer first
            cat_w, key_w = min(cat_w, max(8, spare // 2)), min(key_w, max(10, spare - min(cat_w, max(8, spare // 2))))
        widths = [cat_w, key_w, *model_w] + ([7] if battle else [])
        while sum(widths) + 2 * (len(widths) - 1) > width and n_models and min(model_w) > 5:
            model_w = [w - 1 for w in model_w]
            widths = [cat_w, key_w, *model_w] + ([7] if battle else [])

        def line(cells: list[str], bold: bool = False, mk: list[bool] | None = None) -> str:
            parts = []
            for i, (c, w) in enumerate(zip(cells, widths)):
                t = _fit(c, w)
                t = t.ljust(w) if i < 2 else t.rjust(w)
                if color and mk and 2 <= i < 2 + n_models and mk[i - 2]:
                    t = GREEN + t + RESET
                parts.append(t)
            out = "  ".join(parts).rstrip()
            return BOLD + out + RESET if color and bold else out

        lines.append(line(head, bold=True))
        prev = None
        for r, mk in zip(rows, marks):
            shown = [r[0] if r[0] != prev else "", *r[1:]]
            prev = r[0]
            lines.append(line(shown, mk=mk))
        notes = ["mean per model"]
        if data.comparisons:
            notes.append("* better, paired test significant after Holm")
        else:
            notes.append("no comparisons/: differences untested")
        if battle:
            notes.append(f"battle = judge win rate of {_fit(models[0], 20)}")
        lines.append(_wrap("; ".join(notes), width))
    if len(models) > 2:
        for bt in data.battles:
            s = bt.get("summary") or {}
            lines.append(_fit(f"battle {s.get('model_a')} vs {s.get('model_b')}: win rate {num(s.get('win_rate'), 2)} "
                              f"95% CI {interval(s.get('win_rate_ci95'), 2)}", width))
    for w in judge_warnings(data):
        text = _wrap("judge warning: " + w, width)
        lines.append(RED + text + RESET if color else text)
    report = save_path / "report.html"
    lines.append("")
    lines.append(_fit(f"report:   {report}" if report.exists() else f"report:   (not written) eval.py report {save_path}",
                      width))
    for label, p in (("manifest", save_path / "manifest.json"), ("results", save_path / "results"),
                     ("summary", save_path / "summary.csv"), ("battles", save_path / "battles"),
                     ("compare", save_path / "comparisons"), ("charts", save_path / "charts")):
        if p.exists():
            lines.append(_fit(f"{label + ':':<9} {p}", width))
    return "\n".join(lines)


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent="  ")) or text
