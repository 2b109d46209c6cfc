"""What the viewer says about whole runs: a run's headline (the report's own pairs, from
`evaluate.report.page`), the trend of each primary score across runs of the same models with the paired
verdict between consecutive runs (`eval.py compare`'s statistics, `compare.runs`), and two runs
compared item by item, largest change first. No statistic is computed here that the project does not
already compute; the item-by-item changes are plain differences, sorted."""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Iterable

from ..core.errors import InputError
from ..judgecheck import labels as _labels  # noqa: F401 (loaded, it hands report.analysis the labels' verdict)
from ..report.analysis import interval_label, judge_check_shown, judge_warnings, num, verdict_detail
from ..report.page import pairs
from .items import RunView, finite

WORDS = {"A better": "worse", "B better": "better"}  # run A = the earlier run, B = the later one


def headline(view: RunView, labels: list[Any] | None = None) -> dict[str, Any]:
    """The run's headline as the report shows it: per pair the confirmatory verdicts and the battle,
    then the judge, its check and the warnings against it. `labels`: the labels as read now (the view is
    kept while the results do not change; labels come after), for the labels' verdict where no check is stored."""
    data = view.data
    out = []
    for p in pairs(data):
        comp = p.get("comparison")
        entry: dict[str, Any] = {"a": p["a"], "b": p["b"], "comparison": None, "battle": None, "means": []}
        if comp:
            keep = ("score", "n", "mean_a", "mean_b", "diff", "ci_text", "ci_label", "p_text", "sig", "sentence",
                    "short", "detect", "category")
            entry["comparison"] = {
                "counts": comp["counts"], "family": (comp["method"] or {}).get("family"),
                "adjustment": (comp["method"] or {}).get("adjustment"),
                "primary_from": (comp["method"] or {}).get("primary_from"),
                "confirmatory": [{k: r.get(k) for k in keep} for r in comp["confirmatory"]],
                "leads": [{k: r.get(k) for k in keep} for r in comp["exploratory_sig"]]}
        for m in p.get("means") or []:
            entry["means"].append({"key": m["key"], "a": (m["a"] or {}).get("mean"), "b": (m["b"] or {}).get("mean"),
                                   "n": (m["a"] or {}).get("n")})
        bt = p.get("battle")
        if bt:
            ctrl = bt.get("controlled") or {}
            entry["battle"] = {k: bt.get(k) for k in ("wins", "ties", "losses", "invalid", "n_items", "win_rate",
                                                       "win_rate_ci95", "flip_rate", "both_orders")}
            entry["battle"]["lc_win_rate"] = ctrl.get("lc_win_rate")
            entry["battle"]["lc_ci"] = ctrl.get("lc_ci")
        out.append(entry)
    check = judge_check_shown(data, labels)
    # the verdict without its leading "NOT trustworthy: ": the page says that word itself (it read twice)
    # "source": "labels" where the verdict is the person's labels' (no check stored), its note saying so
    return {"pairs": out, "judge_check": {"trustworthy": check.get("trustworthy"),
                                          "verdict": verdict_detail(str(check.get("verdict_text") or "")),
                                          "source": check.get("source", "judge_check"), "note": check.get("note")}
            if check else None,
            "warnings": judge_warnings(data, labels), "problems": list(data.problems)}


# --- runs of the same models over time ------------------------------------------------------------

def trend_groups(headers: Iterable[Any], compare: Callable[[Any, Any], list[dict[str, Any]]],
                 rid: Callable[[Any], str], name: Callable[[Any], str]) -> list[dict[str, Any]]:
    """Runs with the same set of models and categories whose scores are made the same way (`Header.basis`: the
    config's language, lists, options, prompts and judge), oldest first; each primary score of each model as a
    series of means, and between each two consecutive runs the paired verdict (`compare(header_a, header_b)`:
    the comparisons of `eval.py compare`, run A the earlier). Each series carries the scale its sparkline is
    drawn on (`series_scales`). Groups of one run are left out."""
    groups: dict[tuple[tuple[str, ...], tuple[str, ...], str], list[Any]] = {}
    for h in headers:  # the same models on the same categories, scored alike: a nightly job's runs
        if h.models:
            groups.setdefault((tuple(sorted(h.models)), tuple(sorted(h.categories)), getattr(h, "basis", "")),
                              []).append(h)
    out = []
    for (models, categories, _), runs in groups.items():
        if len(runs) < 2:
            continue
        runs = sorted(runs, key=when)
        series: dict[tuple[str, str], dict[str, Any]] = {}
        errors = []
        for i, (ha, hb) in enumerate(zip(runs, runs[1:])):
            try:
                comps = compare(ha, hb)
            except InputError as exc:
                errors.append(f"{name(ha)} → {name(hb)}: {exc}")
                continue
            for comp in comps:
                model = str(comp["model_a"])[2:]
                for r in comp["rows"]:
                    if r.get("category") != "(all)" or r.get("role") != "confirmatory":
                        continue
                    s = series.setdefault((model, r["score"]), {"model": model, "score": r["score"],
                                                                "values": [None] * len(runs),
                                                                "steps": [None] * (len(runs) - 1),
                                                                "scale": r.get("scale")})
                    if s["values"][i] is None:
                        s["values"][i] = r.get("mean_a")
                    s["values"][i + 1] = r.get("mean_b")
                    s["steps"][i] = step(r, name(ha), name(hb), model)
        out.append({"models": list(models), "categories": list(categories),
                    "language": getattr(runs[-1], "language", None), "judge": getattr(runs[-1], "judge", None),
                    "runs": [{"rid": rid(h), "name": name(h), "time": when(h)} for h in runs],
                    "series": series_scales(sorted(series.values(), key=lambda s: (s["model"], s["score"]))),
                    "errors": errors})
    return out


def series_scales(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One honest scale per score for its sparklines: the score's own (its signature's: 0-1, 1-5), shared by
    every model's row; where it has none, the range of every value of that score in the group. Before, each
    row scaled to its own values, and 3.477 -> 3.480 looked as steep as 0.833 -> 1.000 (issue 47)."""
    spans: dict[str, list[float]] = {}
    for s in series:
        spans.setdefault(s["score"], []).extend(v for v in s["values"] if finite(v))
    for s in series:
        scale = s.get("scale")
        if not (isinstance(scale, list) and len(scale) == 2 and all(finite(v) for v in scale) and scale[1] > scale[0]):
            vals = spans[s["score"]]
            scale = [min(vals), max(vals)] if vals else None
            s["scale_from"] = "the values of this score in these runs"
        else:
            s["scale_from"] = "the score's scale"
        s["scale"] = scale
    return series


def when(h: Any) -> str:
    """A run's time for ordering: when it finished, else started, else its folder's modification time."""
    from ..core.clock import iso

    return h.finished or h.started or iso(h.modified)


def step(row: dict[str, Any], run_a: str, run_b: str, model: str) -> dict[str, Any]:
    """The paired verdict of one score between two runs, from the later run's side (B − A)."""
    verdict = str(row.get("verdict") or "")
    word = WORDS.get(verdict, "not comparable" if verdict.startswith("not comparable") else "no detectable difference")
    diff = 0.0 - row["diff"] if finite(row.get("diff")) else None
    iv = row.get("interval")
    interval = [0.0 - iv[1], 0.0 - iv[0]] if iv and all(finite(v) for v in iv) else None
    how = (f"B − A {num(diff)}, "
           + (f"{interval_label(row)} [{num(interval[0])}, {num(interval[1])}]" if interval
              else str(row.get("interval_note") or "no interval"))
           + f", n = {row.get('n')}")
    if word in ("better", "worse"):
        text = f"{run_b} {word} than {run_a} on {row['score']} for {model} ({how})"
    elif word == "not comparable":
        text = f"{run_b} and {run_a}: {row['score']} for {model} is {verdict}"
    else:
        text = f"{run_b} against {run_a} on {row['score']} for {model}: no detectable difference ({how})"
    return {"word": word, "diff": diff, "interval": interval, "n": row.get("n"), "p_adj": row.get("p_adj"),
            "text": text}


# --- two runs, item by item ------------------------------------------------------------------------

def item_changes(va: RunView, vb: RunView) -> list[dict[str, Any]]:
    """Per item both runs hold (same id and category): each score of each shared model that changed
    (B − A) and each battle verdict of a shared pair that changed; largest change first. A change is
    measured as a share of the score's scale (its signature's; else the range of its values in both
    runs); a verdict turned from one model to the other counts 1, to or from a tie or invalid 0.5."""
    shared = [m for m in va.models if m in vb.models]
    ia = {m: va.models.index(m) for m in shared}
    ib = {m: vb.models.index(m) for m in shared}
    widths = _widths(va, vb)
    out = []
    for ea in va.entries:
        eb = vb.by_id.get(ea.id)
        if eb is None or eb.category != ea.category:
            continue
        scores, size = [], 0.0
        for m in shared:
            xa, xb = ea.items[ia[m]], eb.items[ib[m]]
            if xa is None or xb is None:
                continue
            sa, sb = xa.get("scores") or {}, xb.get("scores") or {}
            for k in sa:
                if k in sb and finite(sa[k]) and finite(sb[k]) and sa[k] != sb[k]:
                    d = sb[k] - sa[k]
                    rel = abs(d) / widths.get(k, 1.0)
                    size = max(size, rel)
                    scores.append({"model": m, "key": k, "a": sa[k], "b": sb[k], "d": d, "rel": round(rel, 4)})
            for k in set(xa.get("invalid") or {}) ^ set(xb.get("invalid") or {}):
                scores.append({"model": m, "key": k, "a": "invalid" if k in (xa.get("invalid") or {}) else None,
                               "b": "invalid" if k in (xb.get("invalid") or {}) else None, "d": None, "rel": 0.5})
                size = max(size, 0.5)
        verdicts = []
        for a, b in combinations(shared, 2):
            va_, _ = va.judge(ea, (ia[a], ia[b]))
            vb_, _ = vb.judge(eb, (ib[a], ib[b]))
            if va_ != vb_ and (va_ is not None or vb_ is not None):
                rel = 1.0 if {va_, vb_} == {"A", "B"} else 0.5
                size = max(size, rel)
                verdicts.append({"pair": [a, b], "a": va_, "b": vb_})
        if scores or verdicts:
            scores.sort(key=lambda s: -s["rel"])
            q = ea.question()
            out.append({"id": ea.id, "c": ea.category, "q": q[:180] + ("…" if len(q) > 180 else ""),
                        "change": round(size, 4), "scores": scores, "verdicts": verdicts})
    out.sort(key=lambda r: -r["change"])
    return out


def _widths(va: RunView, vb: RunView) -> dict[str, float]:
    """Each score's scale width (signature), else the range of its values in both runs (1 when flat)."""
    out: dict[str, float] = {}
    for k in set(va.keys) | set(vb.keys):
        sc = va.scales.get(k) or vb.scales.get(k)
        if sc and all(finite(v) for v in sc) and sc[1] > sc[0]:
            out[k] = float(sc[1] - sc[0])
            continue
        vals = [v for view in (va, vb) for e in view.entries for it in e.items if it
                for v in [(it.get("scores") or {}).get(k)] if finite(v)]
        span = (max(vals) - min(vals)) if vals else 0.0
        out[k] = span if span > 0 else 1.0
    return out
