"""The closing lines of a run: is B better than A, where, and by how much, in the terminal.

In this order, each line within `width` columns (80 by default) except a file path, which is never cut:

- each model's mean over all items of the shown scores (the config's `summary_scores`, else each
  pair's primary scores: metrics added through a prompt file are GPT scores like any other);
- per pair of models: the confirmatory verdict of each shown score with the difference, its
  interval (simultaneous over the pair's primary scores, or "too few items") and adjusted p, naming
  the model a verdict favours; the battle's win rate, saying whose, with the length-controlled one
  beside it, and the position-calibrated win rate with the judge's estimated lean to the first-shown
  answer; the exploratory rows whose interval excludes 0, as leads;
- a panel of judges: each judge's mean under the panel's in the table, then how far the judges agree
  (Krippendorff's alpha per panel score, Fleiss' kappa per battle, the effective number of judges);
- the ranking with its level, raw and style-controlled, when there are more than two models;
- the judge's requests, cache hits, tokens and cost (a panel's: per judge too), the judge cache,
  invalid scores per family;
- judge warnings, then where the files are, the report first.

Plain text unless `color` (default: stdout is a tty and NO_COLOR is unset).
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import unicodedata
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InputError
from ..core.records import split_judge_key
from ..core.registry import suggest
from ..stats.family import ALL, default_primary
from ..stats.intervals import MIN_INTERVAL_N
from ..stats.panel import agreement_sentence, items_rating_agreement
from .analysis import confirmatory, finite, judge_warnings, num, significant
from ..savepath import layout
from ..savepath.labels import read_corrected
from ..savepath.log import RunLog, read_run_log

BOLD, RED, GREEN, RESET = "\033[1m", "\033[31m", "\033[32m", "\033[0m"
SCORE_W = 22  # the score column at 80 columns; narrower terminals shrink it
MIN_WIDTH = 60
MAX_LEADS = 4  # exploratory rows named per pair; the rest are counted
NO_DIFFERENCE = "no detectable difference"  # never "no difference": few items can hide a large gap
PAIR_SCORE_W = 20  # the score column of a pair's rows at 80 columns: "no detectable difference" fits beside


def _row(name: str, w: int, rest: str, indent: str = "") -> list[str]:
    """A table row that starts with a name (a score, a model) in a column `w` wide. A name is never cut
    (issue: cut names read as other names): one that does not fit has the line to itself and the row's
    numbers follow on the next line, under their columns."""
    if len(name) <= w:
        return [f"{indent}{name:<{w}}{rest}"]
    return [f"{indent}{name}", f"{indent}{'':<{w}}{rest}"]


def _columns(text: str) -> int:
    """The terminal columns `text` takes: East Asian wide and full-width characters take two (`模型-α`: 6)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _heads(names: list[str], w: int) -> tuple[list[str], list[str]]:
    """Column headers for model names in columns `w` wide: the names where they all fit, else (1), (2),
    ... and a legend line per column naming it in full."""
    if all(_columns(n) <= w for n in names):
        return names, []
    return [f"({i})" for i in range(1, len(names) + 1)], [f"({i}) {n}" for i, n in enumerate(names, 1)]


def _est(block: dict[str, Any] | None) -> str:
    if not block or block.get("estimate") is None:
        return "-"
    lo, hi = block.get("low"), block.get("high")
    return f"{block['estimate']:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else "")


def corrected_lines(corrected: dict[str, Any] | None, width: int = 100) -> list[str]:
    """What people would say, per pair with labels on the queue (or labels left out): the label-corrected
    win rate with its interval, labels only, judge only ("if the judge were right"), labels used and what
    they were worth, how many more would decide the pair, what was left out and why."""
    if not corrected:
        return []
    lines: list[str] = []
    lvl = f"{corrected.get('level', 0.95):.0%}"
    for p in corrected.get("pairs") or []:
        left = ", ".join(f"{n} {why}" for why, n in (p.get("left_out") or {}).items() if n)
        if not p.get("labels_used") and not left:
            continue
        eff = p.get("effective_labels")
        decide = p.get("labels_to_decide")
        text = (f"what people would say: {p['model_a']} vs {p['model_b']}: win rate of {p['model_a']} "
                f"label-corrected {_est(p.get('label_corrected'))} ({lvl}), labels only {_est(p.get('labels_only'))}, "
                f"judge only {_est(p.get('judge_only'))} (if the judge were right); {p.get('labels_used', 0)} labels"
                + (f", worth {eff:.0f} labels alone" if isinstance(eff, (int, float)) and p.get("labels_used") else "")
                + ("" if decide is None or (p.get("labels_used") or 0) < 2 else
                   "; decided" if decide == 0 else f"; about {decide} more labels would decide it")
                + (f"; left out: {left}" if left else ""))
        lines += _wrap(text, width)
    for r in corrected.get("ratings") or []:
        if "difference" in r:
            d = r["difference"]
            text = (f"what people would say: {r['metric']} {r['model_a']} - {r['model_b']}: label-corrected "
                    f"{_est(d.get('label_corrected'))}, labels only {_est(d.get('labels_only'))}, judge only "
                    f"{_est(d.get('judge_only'))}; {r.get('labels_used', 0)} items scored for both")
        else:
            text = (f"what people would say: {r['metric']} of {r['model']}: label-corrected "
                    f"{_est(r.get('label_corrected'))}, labels only {_est(r.get('labels_only'))}, judge only "
                    f"{_est(r.get('judge_only'))}; {r.get('labels_used', 0)} labels")
        lines += _wrap(text, width)
    return lines


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, width=width, subsequent_indent=indent) or [text]


def _overall(res: dict[str, Any]) -> dict[str, Any]:
    return (res.get("aggregates") or {}).get("overall") or {}


def resolve_scores(names: Sequence[str], known: Sequence[str]) -> list[str]:
    """Score names as a user writes them (`correctness`, `GPT/correctness`) -> full keys of this save
    path; InputError naming the unknown one with the closest known names."""
    out = []
    for name in names:
        hits = [k for k in known if k == name] or [k for k in known if k.split("/", 1)[-1] == name]
        if len(hits) != 1:
            why = f"is ambiguous ({', '.join(hits)})" if hits else "is not a score of this save path"
            raise InputError(f'--scores: "{name}" {why}{suggest(name, list(known))} (known: {", ".join(known)})')
        out.append(hits[0])
    return list(dict.fromkeys(out))


def shown_scores(data: RunLog, scores: Sequence[str] | None = None) -> list[str]:
    """The scores of the closing lines: `scores`, else the config's `summary_scores`, else the pairs'
    primary scores, else the default primary set of the models' overall scores."""
    known = sorted({k for r in data.results for k in _overall(r)})
    if scores:
        return resolve_scores(scores, known)
    configured = ((data.manifest or {}).get("config") or {}).get("summary_scores")
    if configured:
        return [k for k in configured if k in known]
    primary: dict[str, None] = {}
    for comp in data.comparisons:
        for k in (comp.get("method") or {}).get("primary") or []:
            primary.setdefault(k, None)
    if primary:
        return sorted(primary)
    by_family: dict[str, list[str]] = {}
    for k in known:
        by_family.setdefault(k.split("/", 1)[0], []).append(k)
    return sorted(default_primary(by_family))


def _means_table(data: RunLog, keys: list[str], width: int) -> list[str]:
    models = data.models
    col = max(7, min(12, max(_columns(m) for m in models)))
    score_w = max(12, min(SCORE_W, width - (col + 1) * len(models)))
    heads, legend = _heads(list(models), col)
    lines = legend + [f"{'mean, all items':<{score_w}}" + "".join(" " * (col + 1 - _columns(h)) + h for h in heads)]
    judged: dict[str, list[str]] = {}  # a panel score -> its judges' own keys, shown under it
    for k in sorted({k for r in data.results for k in _overall(r)}):
        base, judge = split_judge_key(k)
        if judge is not None:
            judged.setdefault(base, []).append(k)
    for k in keys:
        for shown in [k, *judged.get(k, [])]:
            cells = []
            for res in data.results:
                agg = _overall(res).get(shown) or {}
                cells.append(f" {num(agg.get('mean'), 3) if agg else '–':>{col}}")
            lines += _row(shown if shown == k else "  @" + str(split_judge_key(shown)[1]), score_w, "".join(cells))
    ns = sorted({(_overall(r).get(k) or {}).get("n") for r in data.results for k in keys} - {None})
    if ns:
        lines += _wrap(f"n = {ns[0]}" + (f" to {ns[-1]}" if len(ns) > 1 else "") + " items per score and model; "
                       "per category in the report", width)
    return [line.rstrip() for line in lines]


def _pass_rate_lines(data: RunLog, keys: list[str], width: int) -> list[str]:
    """Pass/fail scores (rule checks; `ci_method: wilson` in their aggregates): each model's passes of n and
    the 95% Wilson interval of its pass rate, one line per score."""
    lines = []
    for k in keys:
        cells = []
        for res in data.results:
            agg = _overall(res).get(k) or {}
            if agg.get("ci_method") != "wilson" or not agg.get("n"):
                continue
            ci = agg.get("ci95") or [None, None]
            cells.append(f"{res.get('model', '?')} {round(agg['mean'] * agg['n'])}/{agg['n']} "
                         f"[{num(ci[0], 2)}, {num(ci[1], 2)}]")
        if cells:
            lines += _wrap(f"  {k}: " + "; ".join(cells), width, "    ")
    return (["pass rates, passed/n [95% Wilson interval]:"] + lines) if lines else []


def _mcnemar_used(data: RunLog) -> bool:
    """Whether a comparison row was decided by McNemar's exact test (a pass/fail score)."""
    return any("McNemar" in str(r.get("test")) for c in data.comparisons for r in c.get("rows") or [])


def _verdict_word(row: dict[str, Any], a: str, b: str) -> str:
    if str(row.get("verdict", "")).startswith("not comparable"):
        return "not comparable"
    if significant(row):
        return f"{a if row['verdict'] == 'A better' else b} better"
    return NO_DIFFERENCE


def _interval_cell(row: dict[str, Any]) -> str:
    iv = row.get("interval")
    if iv and all(finite(v) for v in iv):
        return f"[{num(iv[0])}, {num(iv[1])}]"
    if (row.get("n") or 0) < MIN_INTERVAL_N:
        return "too few items"
    return "all equal" if row.get("interval_note") else "–"


def _battle_side(data: RunLog, a: str, b: str) -> dict[str, Any] | None:
    """The pair's battle from the side of `a`: win rate and interval, length-controlled ones, counts."""
    found = data.battle_for(a, b)
    if not found:
        return None
    bt, swapped = found
    s = bt.get("summary") or {}
    wr, ci = s.get("win_rate"), s.get("win_rate_ci95")
    ctrl = bt.get("controlled") or {}
    lc, lc_ci = ctrl.get("lc_win_rate"), ctrl.get("lc_ci")
    if swapped:
        wr = 1 - wr if finite(wr) else wr
        ci = [1 - ci[1], 1 - ci[0]] if ci else ci
        lc = 1 - lc if finite(lc) else lc
        lc_ci = [1 - lc_ci[1], 1 - lc_ci[0]] if lc_ci else lc_ci
    judges = {n: j.get("summary") or {} for n, j in ((bt.get("panel") or {}).get("judges") or {}).items()
              if isinstance(j, dict)}
    return {"wr": wr, "ci": ci, "lc": lc, "lc_ci": lc_ci, "summary": s, "benchmark": bt.get("benchmark"),
            "swapped": swapped, "judges": judges}


def _battle_verdict(side: dict[str, Any] | None) -> str | None:
    """"A" / "B" when the battle's 95% interval on A's win rate excludes 0.5, "" when it does not, None
    without a battle or a valid verdict."""
    if not side or not finite(side["wr"]):
        return None
    ci = side["ci"]
    if ci and all(finite(v) for v in ci):
        return "A" if ci[0] > 0.5 else "B" if ci[1] < 0.5 else ""
    return ""


def _no_valid(row: dict[str, Any]) -> bool:
    return not row.get("n") and not finite(row.get("diff"))


def _pair_block(comp: dict[str, Any], keys: list[str], data: RunLog, width: int, color: bool) -> list[str]:
    a, b = comp.get("model_a", "A"), comp.get("model_b", "B")
    method = comp.get("method") or {}
    rows = comp.get("rows") or []
    conf = [r for r in rows if confirmatory(r)]
    side = _battle_side(data, a, b)
    battle = _battle_verdict(side)
    if conf and all(_no_valid(r) for r in conf) and battle is None:
        head = f"{a} vs {b}: no valid scores to compare (every primary score is invalid; see the invalid count below)"
    else:
        # the scores alone, as the report counts them: the battle is not in the Bonferroni family of the
        # primary scores (issue 39: the terminal said 9 primary comparisons where the report said 8)
        na, nb = (sum(r.get("verdict") == v for r in conf) for v in ("A better", "B better"))
        head = (f"{a} vs {b}: {a} better on {na}, {b} better on {nb}, no detectable difference on "
                f"{len(conf) - na - nb} of {len(conf)} primary score{'s' * (len(conf) != 1)}")
        if battle is not None:
            head += f"; battle: {({'A': a, 'B': b}[battle] + ' better') if battle else NO_DIFFERENCE}"
    lines = _wrap(head, width)
    m = method.get("confirmatory_tests") or len(conf)
    sw = max(10, min(PAIR_SCORE_W, width - 60))
    lines.append(f"  {'score':<{sw}} {'A − B':>7} {'interval':<16} {'p_adj':>6}  verdict")
    by_key = {r.get("score"): r for r in rows if r.get("category") == ALL}
    detect: list[str] = []
    for k in keys:
        r = by_key.get(k)
        if r is None:
            continue
        tag = "" if confirmatory(r) else " (expl.)"
        p = r.get("p_adj")
        word = ("no valid scores" if _no_valid(r) else _verdict_word(r, a, b)) + tag
        row = _row(k, sw, f" {num(r.get('diff')):>7} {_interval_cell(r):<16} "
                          f"{(f'{p:.3f}' if finite(p) else '–'):>6}  ", indent="  ")
        if len(row[-1]) + len(word) > width:  # a long model name: the verdict on a line of its own
            row.append(" " * max(4, width - len(word)))
        lines += row[:-1] + [row[-1] + (GREEN + word + RESET if color and significant(r) else word)]
        if not significant(r) and not _no_valid(r) and r.get("detectable"):
            detect.append(f"{k}{_detectable_short(str(r['detectable']))}")
    lines += _wrap(f"  A = {a}; intervals simultaneous 95% over the {m} primary scores"
                   if m > 1 else f"  A = {a}; 95% intervals", width, "    ")
    if detect:
        lines += _wrap("  where none was found, what the items could detect (|A − B|, 80% power): "
                       + "; ".join(detect), width, "    ")
    lines += _battle_lines(side, a, width)
    leads = [r for r in rows if not confirmatory(r) and significant(r)]
    if leads:
        named = [f"{r['better'] or '?'} on {r.get('category')} {r.get('score')}" for r in leads[:MAX_LEADS]]
        more = f"; {len(leads) - MAX_LEADS} more in the report" if len(leads) > MAX_LEADS else ""
        lines += _wrap("  leads (exploratory, unadjusted 95%; not findings): higher: " + "; ".join(named) + more,
                       width, "    ")
    return lines


def _detectable_short(text: str) -> str:
    """' ≥ 0.31', ': too few pairs for any test', ': identical scores on every item', from the row's words."""
    if " detects |A − B| of about " in text:
        return " ≥ " + text.split(" of about ", 1)[1].split(" ", 1)[0]
    if "too few pairs" in text:
        return ": too few pairs for any test"
    return ": " + text


def _battle_lines(side: dict[str, Any] | None, a: str, width: int) -> list[str]:
    if not side:
        return []
    s, wr, ci, lc, lc_ci = side["summary"], side["wr"], side["ci"], side["lc"], side["lc_ci"]

    def iv(x: Any) -> str:
        return f"[{num(x[0], 2)}, {num(x[1], 2)}]" if x and all(finite(v) for v in x) else "(too few items)"

    text = (f"  battle: win rate of {a} {num(wr, 2)} {iv(ci)}, length-controlled {num(lc, 2)} {iv(lc_ci)}"
            if finite(lc) else f"  battle: win rate of {a} {num(wr, 2)} {iv(ci)}")
    text += f"; {s.get('invalid', 0)} of {s.get('items', '?')} invalid"
    if side.get("judges"):  # a panel: each judge's own invalid verdicts (the panel's count only items none decided)
        text += " (per judge: " + ", ".join(f"{n} {js.get('invalid', 0)} of {js.get('items', '?')}"
                                            for n, js in side["judges"].items()) + ")"
    lines = _wrap(text + " (ties half, 95%)", width, "    ")
    cal = s.get("calibrated")
    if isinstance(cal, dict) and finite(cal.get("win_rate")):
        wr_c, ci_c = cal["win_rate"], cal.get("win_rate_ci95")
        if side["swapped"]:
            wr_c, ci_c = 1 - wr_c, ([1 - ci_c[1], 1 - ci_c[0]] if ci_c else ci_c)
        prior = (cal.get("prior") or {}).get("position_bias")
        lines += _wrap(f"  position-calibrated: win rate of {a} {num(wr_c, 2)} {iv(ci_c)}"
                       + (f"; the judge gives the first-shown answer {prior:+.2f} log-odds" if finite(prior) else ""),
                       width, "    ")
    return lines + _benchmark_lines(side["benchmark"], width)


def _benchmark_lines(block: Any, width: int) -> list[str]:
    """A battle's `benchmark` block (the benchmark's own numbers, always the block's model's), as its
    table writes them."""
    if not isinstance(block, dict) or not isinstance(block.get("rows"), list):
        return []
    parts = []
    for r in block["rows"]:
        if not isinstance(r, dict) or not finite(r.get("value")):
            continue
        d = r.get("digits") if isinstance(r.get("digits"), int) and 0 <= r["digits"] <= 6 else 2
        iv = r.get("interval")
        lv = f"{100 * r['level']:.0f}% " if finite(r.get("level")) else ""
        ivt = f" ({lv}[{iv[0]:.{d}f}, {iv[1]:.{d}f}])" if isinstance(iv, list) and len(iv) == 2 and all(
            finite(v) for v in iv) else ""
        parts.append(f"{r.get('label')} {r['value']:.{d}f}{ivt}")
    if not parts:
        return []
    return _wrap(f"  {block.get('name', 'benchmark')}, {block.get('model', '')}: " + "; ".join(parts),
                 width, "    ")


def _ranking_lines(ranking: dict[str, Any] | None, width: int) -> list[str]:
    if not ranking or not isinstance(ranking.get("raw"), dict):
        return []
    raw, sc = ranking["raw"], ranking.get("style_controlled") or {}
    level = ranking.get("level") or 0.95
    order = sorted(raw, key=lambda m: raw[m].get("rank", 0))
    head = (f"ranking (Bradley-Terry, {level:.0%} intervals, {ranking.get('n_items', '?')} questions):"
            if "no intervals" not in str(ranking.get("interval")) else f"ranking (Bradley-Terry; {ranking['interval']}):")
    mw = max(8, min(16, width - 47))
    lines = _wrap(head, width) + [f"  {'model':<{mw}} {'raw':>6} {'interval':<13} {'style-ctl':>9} interval"]

    def elo(x: Any) -> str:
        return f"{x:.0f}" if finite(x) else "–"

    def iv(x: Any) -> str:
        return f"[{elo(x[0])}, {elo(x[1])}]" if x and all(finite(v) for v in x) else "–"

    for m in order:
        c = sc.get(m) or {}
        lines += [x.rstrip() for x in _row(m, mw, f" {elo(raw[m].get('rating')):>6} {iv(raw[m].get('interval')):<13} "
                                            f"{elo(c.get('rating')):>9} {iv(c.get('interval')):<13}", indent="  ")]
    first = (ranking.get("first") or {})
    for name, label in (("raw", ""), ("style_controlled", "style-controlled: ")):
        if first.get(name):
            lines += _wrap(f"  {label}{first[name].get('text')}", width, "    ")
    return lines


def _panel_lines(data: RunLog, keys: Sequence[str], width: int) -> list[str]:
    """How far a panel's judges agree: per shown panel score over every model's items, per battle."""
    ratings = items_rating_agreement([it for res in data.results for it in res.get("items") or []])
    battles = [(bt.get("summary") or {}, bt["panel"]["agreement"]) for bt in data.battles
               if isinstance((bt.get("panel") or {}).get("agreement"), dict)]
    shown = [(k, a) for k, a in ratings.items() if k in keys] or list(ratings.items())
    if not shown and not battles:
        return []

    def eff(a: dict[str, Any]) -> str:
        return f"effective judges {num(a.get('effective_judges'), 1)} of {a.get('judges')}"

    lines = ["panel of judges: agreement (1 full, 0 chance, below 0 worse than chance)"]
    for k, a in shown:
        lines += _wrap(f"  {k}: Krippendorff's alpha {num(a.get('alpha'), 2)}, {agreement_sentence(a.get('alpha'))}; "
                       f"{a.get('items')} items; {eff(a)}", width, "    ")
    for s, a in battles:
        lines += _wrap(f"  battle {s.get('model_a')} vs {s.get('model_b')}: Fleiss' kappa {num(a.get('fleiss_kappa'), 2)}, "
                       f"{agreement_sentence(a.get('fleiss_kappa'))}; {a.get('items')} items; {eff(a)}", width, "    ")
    return lines


def _judge_usage_lines(usage: dict[str, Any], width: int) -> list[str]:
    """A panel's usage per judge (the meters `<family>@<judge>`): requests, tokens, cost, failures."""
    per: dict[str, dict[str, Any]] = {}
    for fam, u in usage.items():
        _, at, judge = fam.partition("@")
        if not at:
            continue
        mine = per.setdefault(judge, {})
        for k, v in u.items():
            mine[k] = (mine.get(k) or 0) + v if finite(v) else mine.get(k)
    parts = [f"{j} {u.get('requests', 0):,} requests, {u.get('cache_hits', 0):,} cache hits, {u.get('failures', 0):,} "
             f"failed, {(u.get('prompt_tokens') or 0) + (u.get('completion_tokens') or 0):,} tokens, "
             + (f"${u['cost_usd']:.4f}" if finite(u.get("cost_usd")) else "cost unknown") for j, u in per.items()]
    return _wrap("  per judge: " + "; ".join(parts), width, "    ") if parts else []


def _run_lines(manifest: dict[str, Any] | None, width: int, keys: Sequence[str] = ()) -> list[str]:
    """Judge usage, cost, cache hits and invalid counts, from the manifest; the plan's notes about the
    shown scores `keys` (what the judge was not shown, the calls a rule saved)."""
    if not manifest:
        return []
    lines = []
    usage = {k: v for k, v in (manifest.get("usage") or {}).items() if isinstance(v, dict) and k != "(judge)"}
    if usage:
        tot = {k: sum((u.get(k) or 0) for u in usage.values())
               for k in ("requests", "cache_hits", "prompt_tokens", "completion_tokens", "failures")}
        costs = [u.get("cost_usd") for u in usage.values() if finite(u.get("cost_usd"))]
        hits = f" ({tot['cache_hits'] / tot['requests']:.0%})" if tot["requests"] else ""
        lines += _wrap(f"judge: {tot['requests']:,} requests, {tot['cache_hits']:,} cache hits{hits}, "
                       f"{tot['failures']:,} failed; {tot['prompt_tokens'] + tot['completion_tokens']:,} tokens"
                       + (f", ${sum(costs):.4f}" if costs else ", cost unknown (no judge.price)"), width)
        lines += _judge_usage_lines(usage, width)
    for note in (manifest.get("plan") or {}).get("notes") or []:  # what the judge was shown, what rules decided
        if isinstance(note, dict) and (not note.get("scores") or set(note["scores"]) & set(keys)):
            lines += _wrap(str(note.get("text", "")), width, "    ")
    caches: dict[str, dict[str, Any]] = {}  # a panel's judges may share one cache file: one line for it
    for c in manifest.get("judge_cache") or []:
        if c["path"] in caches:
            caches[c["path"]] = {**caches[c["path"]], "hits": caches[c["path"]]["hits"] + c["hits"],
                                 "misses": caches[c["path"]]["misses"] + c["misses"]}
        else:
            caches[c["path"]] = c
    for c in caches.values():
        asked = c["hits"] + c["misses"]
        lines.append(f"judge cache: {c['path']}")  # a path is never cut
        lines.append(f"  {c['entries']:,} entries, {c['bytes'] / 1e6:.1f} MB; this run {c['hits']:,} hits, "
                     f"{c['misses']:,} misses" + (f" ({c['hits'] / asked:.0%} hits)" if asked else ""))
    left = [(m.get("name"), m.get("missing_ids")) for m in manifest.get("models") or []
            if isinstance(m, dict) and m.get("missing_ids")]
    if left:  # `missing: common`: what was left out, per model
        named = "; ".join(f"{name} did not answer {len(ids)}: {', '.join(map(str, ids[:10]))}"
                          + (f" and {len(ids) - 10} more" if len(ids) > 10 else "") for name, ids in left)
        lines += _wrap(f"left out (missing: common, every model scored on the same items): {named}", width)
    inv = manifest.get("invalid") or {}
    if inv:
        parts = [f"{fam} {v.get('invalid', 0)} of {v.get('valid', 0) + v.get('invalid', 0)}"
                 + _per_judge_invalid(v.get("judges")) for fam, v in inv.items() if isinstance(v, dict)]
        lines += _wrap("invalid scores: " + ", ".join(parts), width)
    return lines


def _per_judge_invalid(judges: Any) -> str:
    """` (judge a 0 of 12, judge b 12 of 12)`: a panel's judges' own invalid counts in one family."""
    if not isinstance(judges, dict) or not judges:
        return ""
    return " (" + ", ".join(f"judge {j} {c.get('invalid', 0)} of {c.get('valid', 0) + c.get('invalid', 0)}"
                            for j, c in judges.items() if isinstance(c, dict)) + ")"


def _not_scored_lines(data: RunLog, width: int) -> list[str]:
    """Records no config entry covers, named again at the end (the plan named them before the run)."""
    skipped: dict[str, int] = {}
    for res in data.results:
        for cat, n in (res.get("skipped_categories") or {}).items():
            skipped[cat] = max(skipped.get(cat, 0), n if isinstance(n, int) else 0)
    if not skipped:
        return []
    return _wrap(f"not scored: {sum(skipped.values())} records per model in categories no config entry covers: "
                 + ", ".join(f"{c} ({n})" for c, n in sorted(skipped.items())), width, "  ")


def closing_summary(source: Path | RunLog, *, width: int | None = None, color: bool | None = None,
                    scores: Sequence[str] | None = None, corrected: dict[str, Any] | None = None) -> str:
    """The closing lines of a save path (its files) or of a run's view (`RunLog`, from memory).
    `scores`: the scores to show (default: see `shown_scores`). `corrected`: the label-corrected verdicts
    (`judgecheck.corrected`; default: the ones stored in the save path, `labels/corrected.json`)."""
    data = source if isinstance(source, RunLog) else read_run_log(Path(source))
    save_path = data.path
    if width is None:
        width = shutil.get_terminal_size((80, 24)).columns
    width = max(MIN_WIDTH, width)
    if color is None:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    keys = shown_scores(data, scores)
    lines = _means_table(data, keys, width) if keys else ["no scores"]
    lines += _pass_rate_lines(data, keys, width)
    panel = _panel_lines(data, keys, width)
    if panel:
        lines += [""] + panel
    if len(data.models) > 1 and not data.comparisons:
        lines.append("no comparisons/: differences untested")
    for comp in data.comparisons:
        lines.append("")
        lines += _pair_block(comp, keys, data, width, color)
    if data.comparisons:
        lines += [""] + _wrap("verdicts: per pair, the primary scores over all items are one family; a difference "
                              "is called when its simultaneous 95% interval excludes 0 (Bonferroni); 'too few "
                              "items': below 10 pairs no interval, an exact test decides"
                              + ("; pass/fail scores: exact McNemar test and its exact interval, at any n"
                                 if _mcnemar_used(data) else ""), width)
    if len(data.models) > 2:
        lines += [""] + (_ranking_lines(data.ranking, width) or ["ranking: none (no battles between the models)"])
    run = _run_lines(data.manifest, width, keys)
    if run:
        lines += [""] + run
    lines += _not_scored_lines(data, width)
    for w in judge_warnings(data):
        text = "\n".join(_wrap("judge warning: " + w, width))
        lines.append(RED + text + RESET if color else text)
    people = corrected_lines(corrected if corrected is not None else read_corrected(save_path), width)
    if people:
        lines += [""] + people
    report = layout.report_file(save_path)
    lines.append("")
    lines.append(f"report:   {report}" if report.exists() else f"report:   (not written) eval.py report {save_path}")
    for label, p in (("manifest", layout.manifest_file(save_path)), ("results", layout.results_dir(save_path)),
                     ("summary", layout.summary_csv(save_path)), ("battles", layout.battles_dir(save_path)),
                     ("compare", layout.comparisons_dir(save_path)), ("charts", layout.charts_dir(save_path))):
        if p.exists():
            lines.append(f"{label + ':':<9} {p}")
    if color and lines:
        lines[0] = BOLD + lines[0] + RESET
    return "\n".join(lines)
