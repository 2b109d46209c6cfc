"""`write_report(save_path)`: one self-contained HTML page per save path.

The page holds everything it shows: CSS and JS inline, charts as data: URIs, forest plots as
inline SVG, and the item browser's data as one JSON block that the page's script renders a page
of items at a time (text through textContent, never as HTML). Viewing it makes no request.
"""

from __future__ import annotations

import base64
import json
from itertools import combinations
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from .analysis import (
    comparison_rows,
    families_of,
    finite,
    headline_key,
    confirmatory,
    interval,
    interval_label,
    judge_check_shown,
    judge_warnings,
    num,
    pct,
    pvalue,
    row_interval_text,
    row_sentence,
    significant,
    verdict_detail,
)
from ..savepath.labels import read_corrected
from ..savepath.manifest import iso
from ..savepath.log import RunLog, read_run_log, write_run_log
from ..savepath.records import Report

TEMPLATES = Path(__file__).with_name("templates")
MAX_TEXT = 4000  # judge replies, reasons and detail strings longer than this are cut in the browser data


def write_report(save_path: Path, out: Path | None = None, *, data: RunLog | None = None) -> Path:
    """Write `<save_path>/report.html` (or `out`) from `data` (a run's view, from memory) or from the
    files of `save_path`; returns the path written. Raises `NoResults` when there are no results."""
    save_path = Path(save_path)
    if data is None:
        data = read_run_log(save_path)
    html = render(data)
    # atomic, readable by all (umask): a report is for sharing
    return write_run_log(save_path, [Report(html=html, file=None if out is None else Path(out))])[0]


def render(data: RunLog) -> str:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=num, pct=pct, interval=interval, pvalue=pvalue, elo=_elo,
                       elo_interval=lambda iv: f"[{_elo(iv[0])}, {_elo(iv[1])}]" if iv else "–")
    ctx = context(data)
    return env.get_template("report.html.j2").render(**ctx)


# --- the page's sections --------------------------------------------------------------------------

def context(data: RunLog) -> dict[str, Any]:
    manifest = data.manifest or {}
    return {
        "title": (f"Two runs compared: A = {manifest['compared_runs']['A']}, B = {manifest['compared_runs']['B']}"
                  if manifest.get("compared_runs") else f"Evaluation report: {', '.join(data.models)}"),
        "save_path": str(data.path),
        "generated": iso(),
        "models": data.models,
        "categories": data.categories,
        "manifest": manifest,
        "pairs": pairs(data),
        "ranking": ranking_view(data.ranking),
        "judge": judge_panel(data),
        "people": people_view(read_corrected(data.path)),
        "warnings": judge_warnings(data),
        "sections": category_sections(data),
        "overall_charts": overall_charts(data),
        "run": run_panel(data),
        "problems": data.problems,
        **embed_browser_data(browser_data(data)),
    }


def _iv_text(block: dict[str, Any] | None) -> str:
    if not block or block.get("estimate") is None:
        return "–"
    lo, hi = block.get("low"), block.get("high")
    return f"{block['estimate']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")


def people_view(corrected: dict[str, Any] | None) -> dict[str, Any] | None:
    """"What people would say": the stored label-corrected verdicts (labels/corrected.json) as table rows;
    None when no pair has a label."""
    if not corrected:
        return None
    rows = []
    for p in corrected.get("pairs") or []:
        left = ", ".join(f"{n} {why}" for why, n in (p.get("left_out") or {}).items() if n)
        if not p.get("labels_used") and not left:
            continue
        eff, decide = p.get("effective_labels"), p.get("labels_to_decide")
        rows.append({"model_a": p["model_a"], "model_b": p["model_b"], "corrected": _iv_text(p.get("label_corrected")),
                     "labels_only": _iv_text(p.get("labels_only")), "judge_only": _iv_text(p.get("judge_only")),
                     "labels_used": p.get("labels_used", 0),
                     "effective": f"{eff:.0f}" if isinstance(eff, (int, float)) else "–",
                     "decide": "decided" if decide == 0 else "–" if decide is None else f"about {decide}",
                     "left_out": left or "none"})
    ratings = []
    for r in corrected.get("ratings") or []:
        block = r.get("difference") or r
        what = (f"{r['metric']}: {r['model_a']} − {r['model_b']} (mean difference)" if "difference" in r
                else f"{r['metric']}: mean of {r['model']}")
        eff = r.get("effective_labels")
        ratings.append({"what": what, "corrected": _iv_text(block.get("label_corrected")),
                        "labels_only": _iv_text(block.get("labels_only")), "judge_only": _iv_text(block.get("judge_only")),
                        "labels_used": r.get("labels_used", 0),
                        "effective": f"{eff:.0f}" if isinstance(eff, (int, float)) else "–"})
    if not rows and not ratings:
        return None
    lvl = f"{corrected.get('level', 0.95):.0%}"
    return {"pairs": rows, "ratings": ratings,
            "note": f"{lvl} intervals. Labels given off the queue (chosen by a person rather than drawn) are left out "
                    "of the estimate, counted under 'left out'; they still count for the judge's agreement with "
                    "you. 'worth': how many labels alone would give the label-corrected interval's width. "
                    "`eval.py label SAVE_PATH --next 10` hands out the next items to label."}


def _elo(x: Any) -> str:
    """A rating on the Elo scale: whole points (a decimal would claim a precision no ranking has)."""
    return f"{x:.0f}" if finite(x) else "–"


def ranking_view(ranking: dict[str, Any] | None) -> dict[str, Any] | None:
    """The one ranking (battles/ranking.json) with its models in raw-rating order; None when absent or
    written by an older version (no raw table)."""
    if not ranking or not isinstance(ranking.get("raw"), dict):
        return None
    order = sorted(ranking["raw"], key=lambda m: ranking["raw"][m].get("rank", 0))
    return {**ranking, "order": order}


def _aggs(res: dict[str, Any], category: str | None) -> dict[str, Any]:
    aggs = res.get("aggregates") or {}
    return (aggs.get("overall") or {}) if category is None else (aggs.get("by_category") or {}).get(category, {})


def pairs(data: RunLog) -> list[dict[str, Any]]:
    """Headline: per pair of models, who is better on what, and the battle. Two runs compared
    (`eval.py compare --report`) show only the pairs compared, each model across the two runs: the cross
    pairs (A:x vs B:y) have no comparison and no battle, nothing to show."""
    out = []
    compared_runs = bool((data.manifest or {}).get("compared_runs"))
    for a, b in combinations(data.models, 2):
        found = comparison_rows(data, a, b)
        if compared_runs and not found and not data.battle_for(a, b):
            continue
        entry: dict[str, Any] = {"a": a, "b": b, "comparison": None, "battle": None}
        if found:
            comp, rows, _swapped = found
            a, b = comp["model_a"], comp["model_b"]  # show the file's own orientation: diff = A - B
            entry.update(a=a, b=b)
            shown = []
            for r in rows:
                shown.append({**r, "sentence": row_sentence(r, comp), "sig": significant(r),
                              "ci_text": _short_interval(r), "ci_label": interval_label(r),
                              "p_text": pvalue(r.get("p_adj")), "short": _short_verdict(r, a, b),
                              "detect": _short_detectable(r)})
            shown.sort(key=lambda r: (not confirmatory(r), not r["sig"], r.get("category") != "(all)",
                                      r.get("category", ""), r.get("score", "")))
            conf = [r for r in shown if confirmatory(r)]
            explo = [r for r in shown if not confirmatory(r)]
            counts = {"a": sum(r.get("verdict") == "A better" for r in conf),
                      "b": sum(r.get("verdict") == "B better" for r in conf),
                      "none": sum(not r["sig"] for r in conf),
                      "explo_sig": sum(r["sig"] for r in explo)}
            entry["comparison"] = {"method": comp.get("method") or {}, "rows": shown, "counts": counts,
                                   "confirmatory": conf, "exploratory_sig": [r for r in explo if r["sig"]],
                                   "exploratory_other": [r for r in explo if not r["sig"]]}
        if not found:  # no tests: at least each model's headline scores with their own intervals
            res = {r["model"]: r for r in data.results}
            keys = sorted(set(_aggs(res[a], None)) & set(_aggs(res[b], None)))
            entry["means"] = [{"key": k, "a": _aggs(res[a], None)[k], "b": _aggs(res[b], None)[k]}
                              for k in (headline_key(keys, f) for f in families_of(keys)) if k]
        found_b = data.battle_for(entry["a"], entry["b"])
        if found_b:
            bt, swapped = found_b
            entry["battle"] = battle_view(bt, swapped)
        out.append(entry)
    return out


def _short_interval(row: dict[str, Any]) -> str:
    """The interval, or in two or three words why there is none (the full reason is in the row's sentence)."""
    if row.get("interval"):
        return interval(row["interval"])
    note = str(row.get("interval_note") or "")
    return "too few items" if note.startswith("too few") else "all equal" if note else row_interval_text(row)


def _short_verdict(row: dict[str, Any], a: str, b: str) -> str:
    if significant(row):
        return f"{a if row['verdict'] == 'A better' else b} better"
    return str(row.get("verdict") or "")


def _short_detectable(row: dict[str, Any]) -> str:
    """What the n could detect, short: 'detects ≥ 0.31', 'too few pairs for any test', ..."""
    text = str(row.get("detectable") or "")
    if "too few pairs" in text:
        return "too few pairs for any test"
    if " detects |A − B| of about " in text:
        return "detects ≥ " + text.split(" of about ", 1)[1].split(" ", 1)[0]
    return text


def battle_view(bt: dict[str, Any], swapped: bool) -> dict[str, Any]:
    """A battle's summary as the page shows it, from the side of the pair's model A."""
    s = dict(bt.get("summary") or {})

    def side(d: dict[str, Any] | None) -> dict[str, Any] | None:
        if not d:
            return None
        d = dict(d)
        d["n_items"] = d.pop("items", None)  # `items` would read as the dict method in the template
        if swapped:
            d["wins"], d["losses"] = d.get("losses"), d.get("wins")
            if finite(d.get("win_rate")):
                d["win_rate"] = 1 - d["win_rate"]
            ci = d.get("win_rate_ci95")
            if ci and all(finite(v) for v in ci):
                d["win_rate_ci95"] = [1 - ci[1], 1 - ci[0]]
        return d

    view = side(s) or {}
    view["weighted"] = side(s.get("weighted"))
    view["calibrated"] = side(s.get("calibrated"))  # its prior is about positions: the same from either side
    soft = side(s.get("soft"))
    if soft and swapped and finite(soft.get("discrete_win_rate")):
        soft["discrete_win_rate"] = 1 - soft["discrete_win_rate"]
    view["soft"] = soft
    ctrl = bt.get("controlled") or s.get("controlled")
    if ctrl:
        ctrl = dict(ctrl)
        if swapped and finite(ctrl.get("lc_win_rate")):
            ctrl["lc_win_rate"] = 1 - ctrl["lc_win_rate"]
            ci = ctrl.get("lc_ci")
            if ci and all(finite(v) for v in ci):
                ctrl["lc_ci"] = [1 - ci[1], 1 - ci[0]]
    view["controlled"] = ctrl
    view["by_category"] = {c: side(v) for c, v in (bt.get("by_category") or {}).items()}
    view["stored_as"] = f"{s.get('model_a')} vs {s.get('model_b')}"
    view["benchmark"] = benchmark_view(bt.get("benchmark"))
    return view


def benchmark_view(block: Any) -> dict[str, Any] | None:
    """A battle file's `benchmark` block (the benchmark's own numbers: evaluate.benchmarks.outputs)
    with each value and interval written as the benchmark's table writes them; None when absent or malformed."""
    if not isinstance(block, dict) or not isinstance(block.get("rows"), list):
        return None
    rows = []
    for r in block["rows"]:
        if not isinstance(r, dict):
            continue
        digits = r.get("digits") if isinstance(r.get("digits"), int) and 0 <= r["digits"] <= 6 else 2
        iv = r.get("interval")
        ok_iv = isinstance(iv, (list, tuple)) and len(iv) == 2 and all(finite(v) for v in iv)
        level = r.get("level")
        rows.append({"label": str(r.get("label", "")),
                     "value": f"{r['value']:.{digits}f}" if finite(r.get("value")) else "–",
                     "interval": f"[{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]" if ok_iv else "",
                     "level": f"{100 * level:.0f}%" if ok_iv and finite(level) else "",
                     "note": str(r.get("note") or "")})
    return {"name": str(block.get("name") or "benchmark"), "model": str(block.get("model") or ""),
            "baseline": str(block.get("baseline") or ""), "note": str(block.get("note") or ""), "rows": rows}


def judge_panel(data: RunLog) -> dict[str, Any]:
    """Which judge, which prompts, how it behaved."""
    sigs: dict[str, dict[str, Any]] = {}
    for res in data.results:
        for key, sig in (res.get("signatures") or {}).items():
            if isinstance(sig, dict) and ("judge" in sig or key.startswith(("GPT/", "SAGEval/"))):
                sigs.setdefault(key, sig)
    for bt in data.battles:
        if bt.get("signature"):
            s = bt.get("summary") or {}
            sigs.setdefault(f"battle {s.get('model_a')} vs {s.get('model_b')}", bt["signature"])
    cfg_judge = ((data.manifest or {}).get("config") or {}).get("judge")
    used = bool(sigs) or bool(data.battles)
    biases = []
    for bt in data.battles:
        s = bt.get("summary") or {}
        own = {n: j.get("summary") or {} for n, j in ((bt.get("panel") or {}).get("judges") or {}).items()}
        for label, js in (own.items() if own else [(None, s)]):  # a panel's: each judge's own bias
            biases.append({"pair": f"{s.get('model_a')} vs {s.get('model_b')}" + (f" (judge {label})" if label else ""),
                           "n_items": js.get("items"), "first": js.get("first_position_win_rate"),
                           "flip": js.get("flip_rate"), "inconsistency": js.get("inconsistency_rate"),
                           "invalid": js.get("invalid"), "one_order_invalid": js.get("one_order_invalid"),
                           "ties": js.get("ties"), "controlled": None if label else (bt.get("controlled") or s.get("controlled"))})
    check = judge_check_shown(data)
    run_check = (data.manifest or {}).get("judge_check")
    unchecked = (str(run_check.get("verdict") or "") if isinstance(run_check, dict) and run_check.get("scope")
                 else None)
    if isinstance(cfg_judge, list):  # a panel: each judge's block in one line
        policy = ((data.manifest or {}).get("config") or {}).get("panel")
        config = {f"judge {b.get('name')}": readable(judge_options_shown({k: v for k, v in b.items() if k != "name"}))
                  for b in cfg_judge if isinstance(b, dict)} | ({"panel": readable(policy)} if policy else {})
    else:
        config = readable_settings(judge_options_shown(cfg_judge))
    return {"used": used, "config": config if used else None, "panel": panel_agreement(data),
            "members": panel_members(data),
            "signatures": {k: readable_settings(v) for k, v in sigs.items()},
            "check": check, "check_detail": _check_detail(check), "unchecked": unchecked,
            "biases": biases, "invalid": invalid_reasons(data)}


def panel_members(data: RunLog) -> list[dict[str, Any]]:
    """Each judge of a panel from the manifest: its requests and how many failed (its meters
    `<family>@<judge>`), its scores and battle verdicts valid and invalid (`invalid.<family>.judges`)."""
    manifest = data.manifest or {}
    out: dict[str, dict[str, Any]] = {}
    for fam, u in (manifest.get("usage") or {}).items():
        _, at, judge = str(fam).partition("@")
        if at and isinstance(u, dict):
            row = out.setdefault(judge, {"name": judge, "requests": 0, "failures": 0})
            row["requests"] += int(u.get("requests") or 0)
            row["failures"] += int(u.get("failures") or 0)
    for fam, v in (manifest.get("invalid") or {}).items():
        for judge, c in ((v.get("judges") if isinstance(v, dict) else None) or {}).items():
            row = out.setdefault(judge, {"name": judge, "requests": None, "failures": None})
            part = "battles" if fam.endswith(" battles") else "scores"
            row[f"{part}_valid"] = (row.get(f"{part}_valid") or 0) + int(c.get("valid") or 0)
            row[f"{part}_invalid"] = (row.get(f"{part}_invalid") or 0) + int(c.get("invalid") or 0)
    return list(out.values())


def _pairs_text(pairs: Any) -> str:
    out = []
    for p in pairs or []:
        r, k = p.get("r"), p.get("cohen_kappa")
        out.append(f"{' / '.join(p.get('judges') or [])}: r {'–' if r is None else f'{r:.2f}'}"
                   + ("" if "cohen_kappa" not in p else f", Cohen's kappa {'–' if k is None else f'{k:.2f}'}"))
    return "; ".join(out)


def panel_agreement(data: RunLog) -> dict[str, Any] | None:
    """A panel of judges' agreement: per panel score over every model's items (Krippendorff's alpha), per
    battle (Fleiss' kappa), each with the pairwise figures and the effective number of judges."""
    from ..stats.panel import items_rating_agreement

    ratings = items_rating_agreement([it for res in data.results for it in res.get("items") or []])
    battles = [(f"{(bt.get('summary') or {}).get('model_a')} vs {(bt.get('summary') or {}).get('model_b')}",
                bt["panel"]["agreement"]) for bt in data.battles
               if isinstance((bt.get("panel") or {}).get("agreement"), dict)]
    if not ratings and not battles:
        return None
    def row(label: str, a: dict[str, Any], key: str) -> dict[str, Any]:
        return {"label": label, "value": a.get(key), "strength": a.get("strength"), "n_items": a.get("items"),
                "judges": a.get("judges"), "effective": a.get("effective_judges"), "pairs": _pairs_text(a.get("pairwise"))}
    return {"ratings": [row(k, a, "alpha") for k, a in ratings.items()],
            "battles": [row(k, a, "fleiss_kappa") for k, a in battles]}


def readable(value: Any) -> str:
    """A setting as a person reads it, in the config's own words: true / false, `prompt: 0.15, completion:
    0.6` for a mapping, items joined by "; " for a list; never a Python repr ({'backend': ...}, None, True)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "–"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {readable(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return "; ".join(readable(v) for v in value)
    return str(value)


def readable_settings(settings: dict[str, Any] | None) -> dict[str, str] | None:
    """Each setting that is set, as `readable` writes it (a setting left at None is left out)."""
    if not isinstance(settings, dict):
        return settings
    return {k: readable(v) for k, v in settings.items() if v is not None}


def judge_options_shown(cfg: Any) -> dict[str, Any] | None:
    """The judge options that matter for its backend (an HTTP judge has no dtype; a local one no base_url):
    each backend kind declares the keys it reads (evaluate/backends/registry.py)."""
    if not isinstance(cfg, dict):
        return None
    from ..backends.options import shown_options

    return shown_options(cfg)


def _check_detail(check: dict[str, Any] | None) -> str | None:
    return verdict_detail(str(check.get("verdict_text") or "")) if check else None


def invalid_reasons(data: RunLog) -> list[dict[str, Any]]:
    """Invalid scores and battle verdicts, counted by (source, reason)."""
    counts: dict[tuple[str, str], int] = {}
    for res in data.results:
        for it in res.get("items", []):
            for key, inv in (it.get("invalid") or {}).items():
                reason = (inv or {}).get("reason", "") if isinstance(inv, dict) else str(inv)
                k = (f"{res['model']}: {key}", reason[:200])
                counts[k] = counts.get(k, 0) + 1
    for bt in data.battles:
        s = bt.get("summary") or {}
        for it in bt.get("items", []):
            for o in it.get("orders", []):
                if o.get("verdict") == "invalid":
                    k = (f"battle {s.get('model_a')} vs {s.get('model_b')} ({o.get('order')})",
                         (o.get("reason") or "")[:200])
                    counts[k] = counts.get(k, 0) + 1
    return [{"source": s, "reason": r, "count": n} for (s, r), n in sorted(counts.items(), key=lambda x: -x[1])]


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def overall_charts(data: RunLog) -> list[dict[str, str]]:
    out = []
    for fam, charts in sorted(data.charts.items()):
        for stem, path in charts.items():
            if stem == "overview" or stem.startswith("battle_"):
                out.append({"title": f"{fam}: {stem.replace('_', ' ')}", "src": _data_uri(path)})
    return out


def category_sections(data: RunLog) -> list[dict[str, Any]]:
    cats = ["(all)"] + data.categories
    sections = []
    for cat in cats:
        keys: dict[str, None] = {}
        for res in data.results:
            keys.update(dict.fromkeys(_aggs(res, None if cat == "(all)" else cat)))
        table = []
        for key in sorted(keys, key=lambda k: (families_of([k]), k)):
            cells = []
            for res in data.results:
                agg = _aggs(res, None if cat == "(all)" else cat).get(key)
                cells.append(agg or {})
            table.append({"key": key, "cells": cells})
        charts = [{"title": f"{fam}: {cat}", "src": _data_uri(p)} for fam, ch in sorted(data.charts.items())
                  for stem, p in ch.items() if stem == cat]
        forests = []
        for a, b in combinations(data.models, 2):
            found = comparison_rows(data, a, b)
            if found:
                comp, rows, _ = found
                mine = [r for r in rows if r.get("category") == cat]
                if mine:
                    forests.append({"a": comp["model_a"], "b": comp["model_b"], "level": _levels(mine),
                                    "svg": Markup(forest_svg(mine, comp["model_a"], comp["model_b"]))})
        sage = {m: s["by_category"][cat] for m, s in data.sageval.items()
                if cat in (s.get("by_category") or {})}
        if table or charts or forests:
            sections.append({"name": cat, "table": table, "charts": charts, "forests": forests, "sage": sage,
                             "anchor": "cat-" + "".join(ch if ch.isalnum() else "-" for ch in cat)})
    return sections


def _levels(rows: list[dict[str, Any]]) -> str:
    """The interval levels of a set of rows, in words (one level for a category's exploratory rows)."""
    labels = sorted({interval_label(r) for r in rows if r.get("interval")})
    return "; ".join(labels) or "no intervals (too few items)"


def forest_svg(rows: list[dict[str, Any]], a: str, b: str) -> str:
    """Paired differences A − B with their intervals around zero, one line per score.

    Scores on different scales share one axis as a share of each score's scale ([lo, hi]); a
    score without a known scale is drawn on its own axis (its largest |CI end| = the half width)
    and marked †. The numbers beside each line are in the score's own units."""
    rows = [r for r in rows if all(finite(v) for v in (r.get("interval") or [None, None])) and finite(r.get("diff"))]
    if not rows:
        return ""
    label_w, text_w, plot_w, row_h, top = 170, 250, 300, 22, 30
    width = label_w + plot_w + text_w
    height = top + row_h * len(rows) + 40

    def norm(r: dict[str, Any]) -> tuple[float, float, float, bool]:
        lo, hi = r["interval"]
        sc = r.get("scale")
        if isinstance(sc, (list, tuple)) and len(sc) == 2 and finite(sc[0]) and finite(sc[1]) and sc[1] > sc[0]:
            w = sc[1] - sc[0]
            return r["diff"] / w, lo / w, hi / w, False
        half = max(abs(lo), abs(hi), abs(r["diff"]), 1e-12)
        return r["diff"] / half * 0.5, lo / half * 0.5, hi / half * 0.5, True

    normed = [norm(r) for r in rows]
    span = max([max(abs(lo), abs(hi)) for _, lo, hi, own in normed if not own] + [0.05])
    span = min(1.0, span * 1.15) if span < 1 else span

    def x(v: float, own: bool) -> float:
        s = 0.5 if own else span
        return label_w + plot_w / 2 + max(-1.0, min(1.0, v / s)) * (plot_w / 2 - 6)

    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" class="forest" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="paired differences {escape(a)} minus {escape(b)}">'),
             f'<line x1="{x(0, False):.1f}" y1="{top - 8}" x2="{x(0, False):.1f}" y2="{height - 24}" class="zero"/>',
             f'<text x="{label_w + 4}" y="14" class="ax">← {escape(b)} higher</text>',
             f'<text x="{label_w + plot_w - 4}" y="14" class="ax" text-anchor="end">{escape(a)} higher →</text>']
    for i, (r, (d, lo, hi, own)) in enumerate(zip(rows, normed)):
        y = top + i * row_h + row_h / 2
        cls = "sig" if significant(r) else "ns"
        name = r.get("score", "")
        label = name if len(name) <= 26 else name[:25] + "…"
        parts.append(f'<text x="{label_w - 6}" y="{y + 4:.1f}" text-anchor="end" class="lab">'
                     f'{escape(label)}{" †" if own else ""}<title>{escape(name)}</title></text>')
        parts.append(f'<line x1="{x(lo, own):.1f}" y1="{y:.1f}" x2="{x(hi, own):.1f}" y2="{y:.1f}" class="ci {cls}"/>')
        parts.append(f'<circle cx="{x(d, own):.1f}" cy="{y:.1f}" r="4" class="pt {cls}"/>')
        parts.append(f'<text x="{label_w + plot_w + 8}" y="{y + 4:.1f}" class="num">'
                     f'{escape(num(r["diff"]))} {escape(interval(r["interval"]))}'
                     f'{" *" if significant(r) else ""}</text>')
    for t in (-span, -span / 2, span / 2, span):  # ticks of the shared axis, as a share of the scale
        tx = x(t, False)
        parts.append(f'<line x1="{tx:.1f}" y1="{height - 24}" x2="{tx:.1f}" y2="{height - 20}" class="zero"/>'
                     f'<text x="{tx:.1f}" y="{height - 12}" text-anchor="middle" class="ax">{t:+.2g}</text>')
    parts.append(f'<text x="{x(0, False):.1f}" y="{height - 12}" text-anchor="middle" class="ax">0</text>')
    axis = "share of the score's scale" if any(not own for *_, own in normed) else "own scale per row"
    parts.append(f'<text x="{label_w + plot_w / 2:.1f}" y="{height - 1}" text-anchor="middle" class="ax">'
                 f'A − B, {escape(axis)} (±{span:.2g}); † own axis; * interval excludes 0</text>')
    parts.append("</svg>")
    return "".join(parts)


def run_panel(data: RunLog) -> dict[str, Any]:
    m = data.manifest or {}
    skipped: dict[str, int] = {}
    for res in data.results:
        for c, n in (res.get("skipped_categories") or {}).items():
            skipped[c] = max(skipped.get(c, 0), n)
    return {"run_id": m.get("run_id"), "status": m.get("status"), "config_hash": m.get("config_hash"),
            "config_file": m.get("config_file"), "started": m.get("started"), "finished": m.get("finished"),
            "versions": m.get("versions") or {}, "usage": m.get("usage") or {}, "errors": m.get("errors") or [],
            "skipped": skipped or (m.get("plan") or {}).get("skipped_categories") or {},
            "models": m.get("models") or [], "argv": m.get("argv"),
            "config_json": json.dumps(m.get("config"), indent=2, ensure_ascii=False) if m.get("config") else None}


# --- the item browser's data ----------------------------------------------------------------------

def _cut(value: Any) -> Any:
    """Long strings in judge replies and details are cut; the result files keep them whole."""
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + f" … [cut: {len(value)} characters in the result file]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    if isinstance(value, float) and not finite(value):
        return None
    return value


def browser_data(data: RunLog) -> dict[str, Any]:
    """Compact, because a 10,000-item run must stay a file people can open and mail: categories,
    score keys and the key sets of detail objects by index; empty parts left out.

    scored_cats = indices of the categories with a scored or invalid item (the filter offers only those)
    item = {"id", "c": category index, "q": instruction (a conversation's setup), "in": input (if any),
            "t": targets (if any; a conversation's: the last turn's),
            "o": [output per model or null] (a conversation's: the last reply),
            "u": [user message per turn] and "r": [[reply per turn] per model or null] (conversations only),
            "tr": [[reference, ...] per turn] (conversations with a reference on some turn),
            "s": [{key index: value} per model],
            "v": [{key index: [reason, raw]} per model] (if any invalid),
            "d": [{key index: [shape index, value, ...]} per model] (if any details),
            "f": [flags per model] (if any)}
    shapes[i] = the keys of a details object, whose values follow its shape index in order.
    battles = [{"a": model index, "b": model index, "items": {id: [verdict, weighted verdict,
               weighted margin, [verdict, scores, weighted scores, raw, reason?] for AB, then for BA,
               and for a conversation [[turn, verdict, weighted verdict, weighted margin, AB, BA] per turn]]}}]
    """
    models = data.models
    cats = data.categories
    cat_ix = {c: i for i, c in enumerate(cats)}
    keys: dict[str, None] = {}
    for res in data.results:
        for it in res.get("items", []):
            keys.update(dict.fromkeys(it.get("scores") or {}))
            keys.update(dict.fromkeys(it.get("invalid") or {}))
            keys.update(dict.fromkeys(it.get("details") or {}))
    key_list = sorted(keys, key=lambda k: (families_of([k]), k))
    key_ix = {k: i for i, k in enumerate(key_list)}
    shapes: dict[tuple[str, ...], int] = {}
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    items: dict[str, dict[str, Any]] = {}
    n = len(models)

    def slot(entry: dict[str, Any], part: str) -> list[dict[Any, Any]]:
        if part not in entry:
            entry[part] = [{} for _ in range(n)]
        return entry[part]

    for mi, res in enumerate(data.results):
        for it in res.get("items", []):
            iid = str(it.get("id"))
            entry = items.get(iid)
            if entry is None:
                entry = items[iid] = {"id": iid, "c": cat_ix.get(it.get("category", ""), 0),
                                      "q": it.get("instruction", ""), "o": [None] * n, "s": [{} for _ in range(n)]}
                if it.get("input"):
                    entry["in"] = it["input"]
                if it.get("targets"):
                    entry["t"] = it["targets"]
            entry["o"][mi] = it.get("output", "")
            if isinstance(it.get("turns"), list) and it["turns"]:
                _conversation(entry, mi, n, it["turns"])
            for k, v in (it.get("scores") or {}).items():
                if finite(v):
                    entry["s"][mi][key_ix[k]] = round(v, 4)
                    lo[k] = min(lo.get(k, v), v)
                    hi[k] = max(hi.get(k, v), v)
            for k, inv in (it.get("invalid") or {}).items():
                inv = inv if isinstance(inv, dict) else {"reason": str(inv)}
                slot(entry, "v")[mi][key_ix[k]] = [_cut(inv.get("reason", "")), _cut(inv.get("raw", ""))]
            for k, det in (it.get("details") or {}).items():
                if isinstance(det, dict):
                    shape = tuple(det)
                    si = shapes.setdefault(shape, len(shapes))
                    slot(entry, "d")[mi][key_ix[k]] = [si, *(_cut(det[f]) for f in shape)]
                elif det not in (None, "", [], {}):
                    slot(entry, "d")[mi][key_ix[k]] = [-1, _cut(det)]
            if it.get("flags"):
                flags = entry.setdefault("f", [[] for _ in range(n)])  # lists: the page joins them
                flags[mi] = list(it["flags"]) if isinstance(it["flags"], (list, tuple)) else [str(it["flags"])]
    battles = []
    pos = {m: i for i, m in enumerate(models)}
    for bt in data.battles:
        s = bt.get("summary") or {}
        if s.get("model_a") not in pos or s.get("model_b") not in pos:
            continue
        b_items = {}
        for it in bt.get("items", []):
            row: list[Any] = [it.get("verdict"), it.get("weighted_verdict"), it.get("weighted_margin"),
                              *_order_cells(it)]
            if it.get("turns"):
                row.append([[t.get("turn"), t.get("verdict"), t.get("weighted_verdict"), t.get("weighted_margin"),
                             *_order_cells(t)] for t in it["turns"]])
            b_items[str(it.get("id"))] = row
        battles.append({"a": pos[s["model_a"]], "b": pos[s["model_b"]], "items": b_items})
    ranges = [[lo.get(k), hi.get(k)] for k in key_list]
    # an item with no score, no invalid score and no battle verdict was not evaluated (its category was
    # skipped, or its families not run): the browser leaves it out, and its category out of the filter
    battled = {iid for bt in battles for iid in bt["items"]}
    shown = [e for e in items.values() if any(e["s"]) or any(e.get("v") or []) or e["id"] in battled]
    scored = sorted({e["c"] for e in shown})
    return {"models": models, "cats": cats, "scored_cats": scored, "keys": key_list, "ranges": ranges,
            "shapes": [list(sh) for sh in shapes], "items": shown, "battles": battles,
            "unscored": len(items) - len(shown)}


def _conversation(entry: dict[str, Any], mi: int, n: int, turns: list[Any]) -> None:
    """A conversation's turns in the browser data: the user's messages once (the models share
    them, checked at load), each model's replies, each turn's references."""
    turns = [t for t in turns if isinstance(t, dict)]
    entry.setdefault("u", [str(t.get("user", "")) for t in turns])
    entry.setdefault("r", [None] * n)[mi] = [str(t.get("assistant", "")) for t in turns]
    refs = [list(t.get("references") or []) for t in turns]
    if any(refs) and "tr" not in entry:
        entry["tr"] = refs


def _order_cells(it: dict[str, Any]) -> list[Any]:
    """An item's (or a turn's) AB and BA orders: [verdict, scores, weighted scores, raw, reason?] or None."""
    orders = {o.get("order"): o for o in it.get("orders", [])}
    cells: list[Any] = []
    for name in ("AB", "BA"):
        o = orders.get(name)
        if o is None:
            cells.append(None)
            continue
        cell = [o.get("verdict"), o.get("scores"), o.get("weighted_scores"), _cut(o.get("raw", ""))]
        if o.get("reason"):
            cell.append(_cut(o["reason"]))
        cells.append(cell)
    return cells


COMPRESS_ABOVE = 2_000_000  # bytes of JSON: larger item data is embedded gzip + base64 (about a third the size)


def embed_browser_data(obj: Any) -> dict[str, Any]:
    """The template's data block: plain JSON, or gzip + base64 for large runs (base64 holds no '<')."""
    text = embed_json(obj)
    if len(text) <= COMPRESS_ABOVE:
        return {"browser_json": Markup(text), "browser_gz": None}
    import base64
    import gzip

    packed = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
    return {"browser_json": None, "browser_gz": Markup(base64.b64encode(packed).decode("ascii"))}


def embed_json(obj: Any) -> str:
    """JSON for a <script type="application/json"> block: every '<' escaped as \\u003c, so no text
    (an answer holding '</script>' or '<!--') can end the block or change how it is parsed."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
