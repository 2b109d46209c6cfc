"""PNG charts comparing every model found under a save_path.

- `charts/<Family>/<category>.png`: one group of bars per score, one bar per model, with the 95%
  confidence interval of the mean and the number of items; the value is written on each bar.
- `charts/<Family>/overview.png`: a table-like heatmap, one row per category and score, one column
  per model; each cell shows the mean, colour-scaled within its row (best model in the row is
  darkest), so "which model wins where" is visible at a glance.
- `charts/GPT/battle_<a>__vs__<b>.png`: drawn from `battles/<a>__vs__<b>.json`.

Charts know result files, not evaluators: a score's range comes from its signature (`scale`).
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..savepath.layout import chart_file
from ..savepath.read import battle_files as read_battle_files
from ..savepath.log import write_run_log
from ..savepath.records import Chart
from ..stats.scales import score_scale

if TYPE_CHECKING:  # the run's results, read for their signatures and aggregates: the report sits below the run
    from ..pipeline.results import ModelResults


def family_scale(results: list[ModelResults], family: str) -> tuple[float, float] | None:
    """The common scale of a family's scores (from their signatures); None when they differ or have none."""
    scales = {score_scale(key, sig) for res in results for key, sig in res.signatures.items()
              if key.partition("/")[0] == family}
    return scales.pop() if len(scales) == 1 else None


def scale_label(scale: tuple[float, float] | None) -> str:
    return f"score, {scale[0]:g}-{scale[1]:g}" if scale else "score (unbounded; higher is better)"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9, "axes.titlesize": 11, "figure.dpi": 110})
    return plt


def _collect(results: list[ModelResults]) -> dict[str, dict[str, dict[str, dict[str, dict[str, Any]]]]]:
    """family -> category -> score name -> model -> aggregate."""
    table: dict[str, dict[str, dict[str, dict[str, dict[str, Any]]]]] = {}
    for res in results:
        for cat, block in res.aggregates()["by_category"].items():
            for key, agg in block.items():
                if agg["mean"] is None:
                    continue
                family, _, name = key.partition("/")
                table.setdefault(family, {}).setdefault(cat, {}).setdefault(name, {})[res.model] = agg
    return table


def write_charts(save_path: Path, results: list[ModelResults], *,
                 battles: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """Bars per family and category, an overview per family, and a chart per battle (`battles`: stem ->
    battle file content; None: read from the save path's battles/)."""
    if not results:
        return []
    plt = _plt()
    models = [r.model for r in results]
    colors = plt.get_cmap("tab10")
    written: list[Path] = []
    for family, cats in _collect(results).items():
        scale = family_scale(results, family)
        for cat, by_name in sorted(cats.items()):
            written.append(_bars(plt, chart_file(save_path, family, cat), family, cat, by_name, models, colors, scale))
        written.append(_overview(plt, chart_file(save_path, family, "overview"), family, cats, models, scale))
    written.extend(write_battle_charts(save_path, battles))
    return written


def _fit_title(text: str, fig_width_in: float, fontsize: float = 10) -> str:
    """`text` wrapped to the width the axes get (about 70% of a figure whose legend sits beside it),
    at DejaVu Sans's average character width (~0.6 em): a narrow chart's note is never cut at its edges."""
    chars = max(24, int(fig_width_in * 0.7 * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.wrap(text, width=chars)) or text


def _bars(plt, path: Path, family: str, category: str, by_name: dict, models: list[str], colors,
          scale: tuple[float, float] | None) -> Path:
    names = list(by_name)
    n_models = len(models)
    width = 0.8 / n_models
    fig_w = max(5.0, 0.9 * len(names) * max(1, n_models / 2) + 2)
    fig, ax = plt.subplots(figsize=(min(fig_w, 18), 4.2))
    ns, with_ci, without_ci = set(), 0, 0
    for m_i, model in enumerate(models):
        xs, ys, errs, errs_hi = [], [], [], []
        for n_i, name in enumerate(names):
            agg = by_name[name].get(model)
            if agg is None:
                continue
            xs.append(n_i + (m_i - (n_models - 1) / 2) * width)
            ys.append(agg["mean"])
            ci = agg.get("ci95")
            if ci:
                with_ci += 1
                errs.append(max(0.0, agg["mean"] - ci[0]))  # intervals are asymmetric near a scale's end
                errs_hi.append(max(0.0, ci[1] - agg["mean"]))
            else:  # too few items for an interval (ci_note): no error bar, rather than a zero-width one
                without_ci += 1
                errs.append(math.nan)
                errs_hi.append(math.nan)
            ns.add(agg["n"])
        if not xs:
            continue
        bars = ax.bar(xs, ys, width, yerr=[errs, errs_hi], capsize=3, label=model, color=colors(m_i % 10))
        for bar, y in zip(bars, ys):
            ax.annotate(f"{y:.2f}", (bar.get_x() + bar.get_width() / 2, y), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    ax.set_ylabel(scale_label(scale))
    if scale and scale[0] >= 1:  # a rating scale: the bars start at its lowest score
        ax.set_ylim(scale[0], scale[1] + 0.1 * (scale[1] - scale[0]))
    elif scale:
        top = max((a["mean"] for d in by_name.values() for a in d.values()), default=scale[1])
        ax.set_ylim(scale[0], min(scale[1] * 1.1, max(0.1 * scale[1], top * 1.25)))
    n_text = f"n={min(ns)}" if len(ns) == 1 else f"n={min(ns)}-{max(ns)}" if ns else ""
    # two lines: on a one-metric chart the whole note does not fit in one line of the narrow figure
    kinds = {a.get("ci_method", "bootstrap") for d in by_name.values() for a in d.values() if a.get("ci95")}
    ci_text = ("Wilson interval of the pass rate" if kinds == {"wilson"} else
               "bootstrap CI of the mean" + ("; Wilson for pass rates" if "wilson" in kinds else ""))
    bars_note = ("no error bars: too few items (< 10) for a 95% interval" if not with_ci else
                 f"error bars: 95% {ci_text}" + ("; none below 10 items" if without_ci else ""))
    note = f"({n_text} items per model; {bars_note})"
    ax.set_title(f"{family} - {category}\n" + _fit_title(note, min(fig_w, 18)), fontsize=10)
    ax.legend(title="model", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    write_run_log(path.parent, [Chart(figure=fig, file=Path(path.name))])
    plt.close(fig)
    return path


def _overview(plt, path: Path, family: str, cats: dict, models: list[str], scale: tuple[float, float] | None) -> Path:
    rows = [(cat, name) for cat in sorted(cats) for name in cats[cat]]
    values = [[cats[c][n].get(m, {}).get("mean") for m in models] for c, n in rows]
    fig_h = max(2.5, 0.28 * len(rows) + 1.5)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(models) + 3.5), min(fig_h, 40)))
    shade = []
    for row in values:
        row = [round(v, 3) if v is not None else None for v in row]  # shade only what the cell shows
        present = [v for v in row if v is not None]
        lo, hi = (min(present), max(present)) if present else (0.0, 0.0)
        shade.append([(0.5 if hi == lo else (v - lo) / (hi - lo)) if v is not None else math.nan for v in row])
    ax.imshow(shade, cmap="Greens", vmin=-0.3, vmax=1.2, aspect="auto")
    for r, row in enumerate(values):
        for c, v in enumerate(row):
            ax.text(c, r, "-" if v is None else f"{v:.3f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{c} / {n}" for c, n in rows], fontsize=8)
    ax.set_title(f"{family}: mean per category and score ({scale_label(scale)}); darker = better in its row",
                 fontsize=9, pad=24)
    fig.tight_layout()
    write_run_log(path.parent, [Chart(figure=fig, file=Path(path.name))])
    plt.close(fig)
    return path


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.3f}"


def write_battle_charts(save_path: Path, battles: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    """charts/GPT/battle_<a>__vs__<b>.png from each battles/<a>__vs__<b>.json.

    Two panels when the judge gave log-probabilities: the parsed verdicts (a verdict that flips
    with the order is a tie) and the probability-weighted ones (sign of the mean weighted score
    margin over both orders); a third with the position-calibrated ones (evaluate/stats/position.py)
    when the battle has two-order pairs. A small judge often ties nearly everything on the first and still
    separates the models on the second, so a chart of one alone would mislead."""
    if battles is None:
        battles = {Path(name).stem: data for name, data in read_battle_files(save_path, [])}
    written = []
    for stem, data in sorted(battles.items()):
        try:
            s, cats = data["summary"], data.get("by_category", {})
        except (KeyError, TypeError):
            continue
        written.append(_battle_chart(save_path, stem, s, cats))
    return written


def _battle_chart(save_path: Path, stem: str, s: dict, cats: dict) -> Path:
    plt = _plt()
    model_a, model_b = s["model_a"], s["model_b"]
    names = list(cats) + ["(all)"]
    summaries = list(cats.values()) + [s]
    panels = [("parsed verdicts", summaries, "judged in both orders; a verdict that flips is a tie")]
    if s.get("weighted"):
        panels.append(("probability-weighted verdicts",
                       [x.get("weighted") or {"items": 0, "wins": 0, "ties": 0, "losses": 0} for x in summaries],
                       "sign of the mean weighted score margin over both orders"))
    if s.get("calibrated"):
        panels.append(("position-calibrated verdicts",
                       [x.get("calibrated") or {"items": 0, "wins": 0, "ties": 0, "losses": 0} for x in summaries],
                       "the judge's lean to a position, fitted on the pairs, taken out"))
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 0.45 * len(names) + 1.9),
                             squeeze=False, sharey=True)
    for ax, (title, rows, xlabel) in zip(axes[0], panels):
        left = [0.0] * len(names)
        for key, color, label in (("wins", "#2ca02c", f"{model_a} wins"), ("ties", "#bbbbbb", "tie"),
                                  ("losses", "#d62728", f"{model_b} wins"), ("invalid", "#ffffff", "invalid")):
            vals = [r.get(key, 0) / max(1, r["items"]) for r in rows]
            ax.barh(names, vals, left=left, color=color, edgecolor="#666666", label=label)
            for i, (v, r) in enumerate(zip(vals, rows)):
                if v > 0.06:
                    ax.text(left[i] + v / 2, i, str(r.get(key, 0)), ha="center", va="center", fontsize=8)
            left = [a + b for a, b in zip(left, vals)]
        rate, ci = rows[-1].get("win_rate"), rows[-1].get("win_rate_ci95") or [None, None]
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"share of questions ({xlabel})", fontsize=8)
        ax.set_title(f"{title}: win rate of {model_a} {_fmt(rate)} (95% CI {_fmt(ci[0])}-{_fmt(ci[1])})",
                     fontsize=9)
    axes[0][0].invert_yaxis()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle(f"Battle: {model_a} vs {model_b}", fontsize=10)
    fig.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncol=4)
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    path = chart_file(save_path, "GPT", f"battle_{stem}")
    write_run_log(path.parent, [Chart(figure=fig, file=Path(path.name))])
    plt.close(fig)
    return path
