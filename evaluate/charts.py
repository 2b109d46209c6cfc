"""PNG charts comparing every model found under a save_path.

- `charts/<Family>/<category>.png`: one group of bars per score, one bar per model, with the 95%
  confidence interval of the mean and the number of items; the value is written on each bar.
- `charts/<Family>/overview.png`: a table-like heatmap, one row per category and score, one column
  per model; each cell shows the mean, colour-scaled within its row (best model in the row is
  darkest), so "which model wins where" is visible at a glance.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .results import ModelResults, safe_name

SCALES = {"Metrics": "0-1", "UniEval": "P(Yes), 0-1", "GPT": "judge score, 1-5", "SAGEval": "score, 1-5",
          "RepEval": "projection (higher is better)"}


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


def write_charts(save_path: Path, results: list[ModelResults]) -> list[Path]:
    if not results:
        return []
    plt = _plt()
    models = [r.model for r in results]
    colors = plt.get_cmap("tab10")
    written: list[Path] = []
    for family, cats in _collect(results).items():
        folder = save_path / "charts" / safe_name(family)
        folder.mkdir(parents=True, exist_ok=True)
        for cat, by_name in sorted(cats.items()):
            written.append(_bars(plt, folder / f"{safe_name(cat)}.png", family, cat, by_name, models, colors))
        written.append(_overview(plt, folder / "overview.png", family, cats, models))
    return written


def _bars(plt, path: Path, family: str, category: str, by_name: dict, models: list[str], colors) -> Path:
    names = list(by_name)
    n_models = len(models)
    width = 0.8 / n_models
    fig_w = max(5.0, 0.9 * len(names) * max(1, n_models / 2) + 2)
    fig, ax = plt.subplots(figsize=(min(fig_w, 18), 4.2))
    ns = set()
    for m_i, model in enumerate(models):
        xs, ys, errs = [], [], []
        for n_i, name in enumerate(names):
            agg = by_name[name].get(model)
            if agg is None:
                continue
            xs.append(n_i + (m_i - (n_models - 1) / 2) * width)
            ys.append(agg["mean"])
            ci = agg.get("ci95") or [agg["mean"], agg["mean"]]
            errs.append(max(0.0, agg["mean"] - ci[0]))
            ns.add(agg["n"])
        if not xs:
            continue
        bars = ax.bar(xs, ys, width, yerr=errs, capsize=3, label=model, color=colors(m_i % 10))
        for bar, y in zip(bars, ys):
            ax.annotate(f"{y:.2f}", (bar.get_x() + bar.get_width() / 2, y), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30 if len(names) > 4 else 0, ha="right" if len(names) > 4 else "center")
    ax.set_ylabel(SCALES.get(family, "score"))
    if family in ("GPT", "SAGEval"):
        ax.set_ylim(1, 5.4)
    elif family in ("Metrics", "UniEval"):
        top = max((a["mean"] for d in by_name.values() for a in d.values()), default=1.0)
        ax.set_ylim(0, min(1.1, max(0.1, top * 1.25)))
    n_text = f"n={min(ns)}" if len(ns) == 1 else f"n={min(ns)}-{max(ns)}" if ns else ""
    # two lines: on a one-metric chart the whole note does not fit in one line of the narrow figure
    ax.set_title(f"{family} - {category}\n({n_text} items per model; error bars: 95% CI of the mean)", fontsize=10)
    ax.legend(title="model", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _overview(plt, path: Path, family: str, cats: dict, models: list[str]) -> Path:
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
    ax.set_title(f"{family}: mean per category and score ({SCALES.get(family, 'score')}); darker = better in its row",
                 fontsize=9, pad=24)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
