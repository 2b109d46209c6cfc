"""What the page and the terminal summary both say: verdict sentences, judge warnings, numbers.

Kept apart from the HTML so the closing summary of a run and the report never disagree.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..stats.family import CONFIRMATORY, EXPLORATORY, Decision
from ..core.verdicts import verdict_detail  # noqa: F401 (the pages import it from here too)
from ..savepath.log import RunLog

# a judge whose battle verdicts look like this is flagged, whatever judge_check.json says
TIE_SHARE_WARN = 0.8  # share of decided items that are ties
FLIP_RATE_WARN = 0.3  # share of items whose winner reverses with the order
FIRST_POSITION_WARN = (0.3, 0.7)  # share of decisive single-order verdicts won by the first answer
INVALID_SHARE_WARN = 0.2
MIN_ITEMS_FOR_BIAS = 10  # below this, rates are too noisy to warn on


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def num(x: Any, digits: int = 3) -> str:
    """A number for people: fixed decimals that shrink as the magnitude grows; '–' for none."""
    if not finite(x):
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:.0f}"
    if a >= 100:
        return f"{x:.1f}"
    if a >= 10:
        return f"{x:.2f}"
    return f"{x:.{digits}f}"


def pct(x: Any) -> str:
    return f"{100 * x:.0f}%" if finite(x) else "–"


def interval(ci: Any, digits: int = 3) -> str:
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not all(finite(v) for v in ci):
        return "–"
    return f"[{num(ci[0], digits)}, {num(ci[1], digits)}]"


def pvalue(p: Any) -> str:
    if not finite(p):
        return "–"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def interval_label(row: dict[str, Any]) -> str:
    """What the interval beside a verdict is: its level, and whether it is simultaneous (adjusted)."""
    lv, m = row.get("level"), row.get("m") or 1
    if not finite(lv):
        return "interval"
    if row.get("simultaneous"):
        return f"simultaneous {1 - (1 - lv) * m:.0%} interval (each at {lv:.4g})"
    return f"{lv:.0%} interval" + (", unadjusted" if row.get("role") == EXPLORATORY else "")


def row_interval_text(row: dict[str, Any]) -> str:
    """The interval of a row as the tables show it, or why there is none ("too few items", ...)."""
    if row.get("interval"):
        return interval(row["interval"])
    return "no interval" if not row.get("interval_note") else f"no interval: {row['interval_note']}"


def row_sentence(row: dict[str, Any], comp: dict[str, Any]) -> str:
    """One comparison row in words (`stats.family.Decision.sentence`): the interval, its level and whether
    it is adjusted are always named, e.g. 'model_b higher by 0.120 (simultaneous 95% interval ...)'."""
    if str(row.get("verdict", "")).startswith("not comparable"):
        return str(row["verdict"])
    d = Decision(key=row.get("score", ""), category=row.get("category", ""), role=row.get("role") or EXPLORATORY,
                 n=row.get("n") or 0, diff=row.get("diff"), p=row.get("p"), p_adj=row.get("p_adj"),
                 m=row.get("m") or 1, test=row.get("test"), verdict=row.get("verdict") or "no detectable difference",
                 interval=tuple(row["interval"]) if row.get("interval") else None, level=row.get("level") or 0.95,
                 simultaneous=bool(row.get("simultaneous")), interval_note=row.get("interval_note"),
                 detectable=row.get("detectable") or "")
    return d.sentence(comp.get("model_a", "A"), comp.get("model_b", "B"))


def significant(row: dict[str, Any]) -> bool:
    return row.get("verdict") in ("A better", "B better")


def confirmatory(row: dict[str, Any]) -> bool:
    return row.get("role") == CONFIRMATORY


def judge_check_shown(data: RunLog, labels: list[Any] | None = None) -> dict[str, Any] | None:
    """The judge check the report and the warnings speak of. A benchmark run's manifest names the stored
    check of its own judge (`judge_check` with a `scope`: it checked the judge with the project's prompts,
    not the benchmark's): that one, or None when that judge was never checked, whatever other judge
    judge_check.json describes. Otherwise judge_check.json. With neither, the verdict of the person's labels
    (`labels_check`; `labels`: as read now, else the run log's), or None."""
    run = (data.manifest or {}).get("judge_check")
    if isinstance(run, dict) and run.get("scope"):
        stored = {"trustworthy": run.get("trustworthy"), "verdict_text": run.get("verdict"), "scope": run["scope"],
                  "file": run.get("file"), "created": run.get("created")} if run.get("checked") else None
    else:
        stored = data.judge_check
    return stored if stored is not None else labels_check(data, labels)


# The verdict of a person's labels is the judge check's to compute (`judgecheck.labels.label_check_shown`); the
# report sits below the judge check (the run writes it), so the judge check hands its function in when it is
# loaded (`evaluate.judgecheck` loads it with the package) rather than this module reaching up for it.
_label_verdict: Callable[[Any, list[Any]], dict[str, Any] | None] | None = None


def use_label_verdicts(fn: Callable[[Any, list[Any]], dict[str, Any] | None]) -> None:
    """The function that gives a person's labels' verdict on a run's judge (called by `evaluate.judgecheck`)."""
    global _label_verdict
    _label_verdict = fn


def labels_check(data: RunLog, labels: list[Any] | None = None) -> dict[str, Any] | None:
    """Where no check is stored, the verdict of the person's labels on the run's battles
    (`judgecheck.labels.label_check_shown`, with a "source": "labels" and a note saying so), so that no
    page says "not checked" beside a label verdict; computed once per run log and set of labels."""
    if _label_verdict is None:  # the judge check is not loaded: nothing to say of the labels here
        return None
    labels = list(data.labels) if labels is None else list(labels)
    key = tuple(repr(lab) for lab in labels)
    cache = data.__dict__.setdefault("_labels_checks", {})
    if key not in cache:
        cache.clear()  # only the latest labels are asked for again
        cache[key] = _label_verdict(data, labels)
    return cache[key]


def judge_warnings(data: RunLog, labels: list[Any] | None = None) -> list[str]:
    """Plain reasons not to trust the judge; empty when nothing is known to be wrong. A panel inherits
    its judges' warnings: each judge's own battle summary is read as a single judge's is (position bias,
    ties, invalid verdicts), the judge named, beside what the panel's own verdicts show."""
    out: list[str] = []
    jc = judge_check_shown(data, labels)
    if jc is not None and jc.get("trustworthy") is False:
        out.append("judge check failed: " + (verdict_detail(str(jc.get("verdict_text") or ""))
                                             or "the judge is not trustworthy"))
    for bt in data.battles:
        s = bt.get("summary") or {}
        pair = f"{s.get('model_a')} vs {s.get('model_b')}"
        out += _battle_warnings(pair, s)
        for judge, own in ((bt.get("panel") or {}).get("judges") or {}).items():
            if isinstance(own, dict):
                out += _battle_warnings(f"{pair}, judge {judge}", own.get("summary") or {})
    return out


def _battle_warnings(name: str, s: dict[str, Any]) -> list[str]:
    """The warnings one battle summary gives (a judge's, or a panel's whose per-order fields are None)."""
    out: list[str] = []
    items = s.get("items") or 0
    decided = (s.get("wins") or 0) + (s.get("ties") or 0) + (s.get("losses") or 0)
    if items >= MIN_ITEMS_FOR_BIAS and finite(s.get("invalid")) and s["invalid"] / items > INVALID_SHARE_WARN:
        out.append(f"battle {name}: {s['invalid']} of {items} verdicts invalid ({pct(s['invalid'] / items)})")
    if decided >= MIN_ITEMS_FOR_BIAS and (s.get("ties") or 0) / decided >= TIE_SHARE_WARN:
        weighted = s.get("weighted")
        extra = (" (the probability-weighted verdicts do separate the models; read those)"
                 if weighted and weighted.get("items") and weighted.get("ties", 0) / weighted["items"] < 0.5 else "")
        why = "the judges split or called it even" if s.get("panel") else "mostly orders that disagree"
        out.append(f"battle {name}: {s['ties']} of {decided} verdicts are ties "
                   f"({pct(s['ties'] / decided)}), {why}{extra}")
    if (s.get("both_orders_valid") or 0) >= MIN_ITEMS_FOR_BIAS and finite(s.get("flip_rate")) \
            and s["flip_rate"] >= FLIP_RATE_WARN:
        out.append(f"battle {name}: the winner reverses with the order on {pct(s['flip_rate'])} of items "
                   "(position bias)")
    fp = s.get("first_position_win_rate")
    if decided >= MIN_ITEMS_FOR_BIAS and finite(fp) and not FIRST_POSITION_WARN[0] <= fp <= FIRST_POSITION_WARN[1]:
        out.append(f"battle {name}: the answer shown first wins {pct(fp)} of single-order verdicts "
                   "(0.5 is unbiased)")
    return out


# family -> preferred headline score names, best first; otherwise the first key of the family
HEADLINE = {
    "GPT": ("correctness", "relevance", "helpfulness"),
    "Metrics": ("ROUGE-L", "BERTScore-F1", "F1", "CHRF", "BLEU-4", "Distinct-2"),
    "UniEval": (),
    "RepEval": (),
    "SAGEval": (),
}


def headline_key(keys: list[str], family: str) -> str | None:
    """The score shown for a family where there is room for one."""
    fam_keys = [k for k in keys if k.split("/", 1)[0] == family and "@" not in k]
    if not fam_keys:
        return None
    names = {k.split("/", 1)[1]: k for k in fam_keys}
    for pref in HEADLINE.get(family, ()):
        if pref in names:
            return names[pref]
    return min(fam_keys)


def families_of(keys: list[str]) -> list[str]:
    order = ["GPT", "Metrics", "UniEval", "RepEval", "SAGEval"]
    fams = {k.split("/", 1)[0] for k in keys}
    return [f for f in order if f in fams] + sorted(fams - set(order))


def comparison_rows(data: RunLog, a: str, b: str) -> tuple[dict[str, Any], list[dict[str, Any]], bool] | None:
    """The comparison file of a and b, its rows, and whether it is stored as (b, a)."""
    for comp in data.comparisons:
        if (comp.get("model_a"), comp.get("model_b")) == (a, b):
            return comp, comp["rows"], False
        if (comp.get("model_a"), comp.get("model_b")) == (b, a):
            return comp, comp["rows"], True
    return None
