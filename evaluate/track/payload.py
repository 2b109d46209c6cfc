"""What a tracker is sent, read from a save path's run log (`evaluate.savepath.log.RunLog`): one
place decides it, so MLflow and W&B get the same numbers, and the numbers are the save path's.

Metrics (numbers; keys use `/` to group, as both trackers show them):
- `score/<model>/<Family>/<name>`: each model's mean over all items of every score without an `@`
  variant (the primary ones among them), with `.../ci_low`, `.../ci_high` (its 95% interval, where
  there is one) and `.../n`;
- `pair/<a> vs <b>/<Family>/<name>/diff` for each confirmatory row of each pair (the primary scores
  over all items): the difference A − B, `ci_low` / `ci_high` (the simultaneous interval), `p_adj`,
  and `verdict` (+1 A better, −1 B better, 0 no detectable difference; the words are a parameter);
- `battle/<a> vs <b>/win_rate` (model A's, ties half) with `ci_low` / `ci_high`, `lc_win_rate`
  (length-controlled) and the counts;
- `judge_check/trustworthy` (1, 0) where the run's judge was checked;
- `usage/<family>/<counter>`: requests, cache hits, tokens and cost from the manifest.

Parameters: the models and their answer files, the families, categories and primary scores, the
judge, each pair's verdict in words. Tags: the run id, the config's hash, the tool's version and
layout, the run's status and, per score, its signature (how it was made; sacrebleu-style: two runs'
numbers are comparable when these agree). Artifacts: report.html, summary.csv, manifest.json.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..savepath.layout import manifest_file, report_file, summary_csv
from ..savepath.log import RunLog

CONFIRMATORY = "confirmatory"
ALL = "(all)"
VERDICT_SIGN = {"A better": 1.0, "B better": -1.0}
_KEY = re.compile(r"[^\w\-./ :]+")  # what MLflow allows in a key; W&B takes the same


@dataclass
class Payload:
    """One run as a tracker takes it."""

    run_name: str
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


def key(*parts: Any) -> str:
    """A metric or parameter key from its parts, each cleaned of what trackers refuse."""
    return "/".join(_KEY.sub("_", str(p)).strip() or "_" for p in parts)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _put(metrics: dict[str, float], name: str, value: Any) -> None:
    number = _number(value)
    if number is not None:
        metrics[name] = number


def build(log: RunLog, *, status: str | None = None, run_name: str | None = None) -> Payload:
    """The payload of the run in `log` (`status`: the run's final word, gates included, where known)."""
    header = log.header
    run_id = log.run_id or "unknown-run"
    out = Payload(run_name=run_name or f"{log.path.name} {run_id}")
    _scores(log, out)
    _pairs(log, out)
    _battles(log, out)
    check = header.get("judge_check")
    if isinstance(check, dict) and check.get("checked"):
        _put(out.metrics, "judge_check/trustworthy", check.get("trustworthy"))
        out.params["judge_check/verdict"] = str(check.get("verdict") or "")
    for family, used in (header.get("usage") or {}).items():
        for counter, value in (used.items() if isinstance(used, dict) else []):
            _put(out.metrics, key("usage", family, counter), value)
    config = header.get("config") or {}
    out.params.update({
        "models": ", ".join(log.models),
        "families": ", ".join((log.plan or {}).get("families") or []),
        "categories": ", ".join(log.scored_categories),
        "judge": json.dumps(config.get("judge"), sort_keys=True, ensure_ascii=False, default=str),
        **{key("answer_file", m.get("name")): str(m.get("answer_file"))
           for m in header.get("models") or [] if isinstance(m, dict) and m.get("name")},
    })
    out.tags.update({"llm_eval.run_id": run_id, "llm_eval.config_hash": str(header.get("config_hash") or ""),
                     "llm_eval.version": str((header.get("versions") or {}).get("evaluate") or ""),
                     "llm_eval.layout": str(log.layout), "llm_eval.save_path": str(log.path),
                     "llm_eval.status": status or str(log.status or "")})
    for res in log.results[:1]:  # every model's signature of a score agrees where the pair compared it
        for score, sig in sorted((res.get("signatures") or {}).items()):
            if "@" not in score:
                out.tags[key("signature", score)] = json.dumps(sig, sort_keys=True, ensure_ascii=False, default=str)
    out.artifacts = [p for p in (report_file(log.path), summary_csv(log.path), manifest_file(log.path)) if p.is_file()]
    return out


def _scores(log: RunLog, out: Payload) -> None:
    primary = sorted({p for comp in log.comparisons for p in (comp.get("method") or {}).get("primary") or []})
    if primary:
        out.params["primary"] = ", ".join(primary)
    for res in log.results:
        overall = (res.get("aggregates") or {}).get("overall") or {}
        for score, agg in sorted(overall.items()):
            if "@" in score or not isinstance(agg, dict):
                continue
            base = key("score", res.get("model"), score)
            _put(out.metrics, base, agg.get("mean"))
            ci = agg.get("ci95")
            if isinstance(ci, list) and len(ci) == 2:
                _put(out.metrics, f"{base}/ci_low", ci[0])
                _put(out.metrics, f"{base}/ci_high", ci[1])
            _put(out.metrics, f"{base}/n", agg.get("n"))


def _pairs(log: RunLog, out: Payload) -> None:
    for comp in log.comparisons:
        a, b = comp.get("model_a"), comp.get("model_b")
        pair = f"{a} vs {b}"
        for row in comp.get("rows") or []:
            if row.get("role") != CONFIRMATORY or row.get("category") != ALL:
                continue
            base = key("pair", pair, row.get("score"))
            _put(out.metrics, f"{base}/diff", row.get("diff"))
            interval = row.get("interval")
            if isinstance(interval, list) and len(interval) == 2:
                _put(out.metrics, f"{base}/ci_low", interval[0])
                _put(out.metrics, f"{base}/ci_high", interval[1])
            _put(out.metrics, f"{base}/p_adj", row.get("p_adj"))
            _put(out.metrics, f"{base}/verdict", VERDICT_SIGN.get(str(row.get("verdict")), 0.0))
            better = row.get("better")
            out.params[f"{base}/verdict"] = f"{better} better" if better else str(row.get("verdict") or "")


def _battles(log: RunLog, out: Payload) -> None:
    for battle in log.battles:
        s = battle.get("summary") or {}
        base = key("battle", f"{s.get('model_a')} vs {s.get('model_b')}")
        _put(out.metrics, f"{base}/win_rate", s.get("win_rate"))
        ci = s.get("win_rate_ci95")
        if isinstance(ci, list) and len(ci) == 2:
            _put(out.metrics, f"{base}/ci_low", ci[0])
            _put(out.metrics, f"{base}/ci_high", ci[1])
        for counter in ("wins", "ties", "losses", "invalid"):
            _put(out.metrics, f"{base}/{counter}", s.get(counter))
        controlled = battle.get("controlled") or {}
        _put(out.metrics, f"{base}/lc_win_rate", controlled.get("lc_win_rate"))
