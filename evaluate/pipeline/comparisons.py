"""Paired comparisons of every pair of models in a save path.

Reads result dicts (the JSON of ``results/<model>.json``) and writes, under the save path:

    comparisons/<a>__vs__<b>.json   schema "llm-eval-comparison/1": one row per category x score,
                                    plus "(all)" rows over every category
    comparisons/comparisons.csv     the same rows, one line per (pair, category, score)

Items are paired by id: a row uses the ids present in both models (same category) with a finite
score in both. An id whose score is invalid in either model is left out of the pair and counted in
``dropped``. Holm's adjustment runs over every row with a p-value in the save path (all pairs,
categories, scores, the "(all)" rows included), so the verdicts of a large table hold together at
``alpha``; this is conservative, which is the honest direction. Scores are higher-is-better.

Two models' scores of one key are compared only when their signatures agree (evaluator, judge,
prompt hash, tokenizer, options; `results.same_signature`): otherwise the row says "not
comparable", names both signatures (`signature_a`, `signature_b`) and has no test.
"""

from __future__ import annotations

import csv
import io
import json
import math
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable

from ..core.io import atomic_write_json, atomic_write_text, clean_json
from ..stats.paired import TEST_PERMUTATION, TEST_WILCOXON, holm, paired_compare, verdict
from ..stats.scales import score_scale
from .results import same_signature, signature_diff
from .savedir import battle_stem

SCHEMA = "llm-eval-comparison/1"
ALL = "(all)"
LEVEL, ALPHA, POWER = 0.95, 0.05, 0.8
CSV_FIELDS = ("model_a", "model_b", "category", "score", "scale_low", "scale_high", "n", "dropped", "mean_a",
              "mean_b", "diff", "ci95_low", "ci95_high", "p", "p_holm", "test", "mde", "effect_size", "verdict",
              "better")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _index(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(item["id"]): item for item in result.get("items", [])}


def _keys(items: Iterable[dict[str, Any]]) -> set[str]:
    return {k for it in items for k in (*it.get("scores", {}), *it.get("invalid", {}))}


def _pair_values(ids: list[str], ia: dict, ib: dict, key: str) -> tuple[list[float], list[float], int]:
    """Paired finite scores of `key` over `ids`, and how many shared ids were lost to an invalid score."""
    xa, xb, dropped = [], [], 0
    for i in ids:
        va, vb = ia[i].get("scores", {}).get(key), ib[i].get("scores", {}).get(key)
        if _finite(va) and _finite(vb):
            xa.append(float(va))
            xb.append(float(vb))
        elif key in ia[i].get("invalid", {}) or key in ib[i].get("invalid", {}):
            dropped += 1
    return xa, xb, dropped


NOT_COMPARABLE = "not comparable: the two models' scores were made differently (signatures differ)"


def _row(category: str, key: str, signature: dict, xa: list[float], xb: list[float], dropped: int,
         resamples: int, seed: int, signature_b: dict | None = None) -> dict[str, Any]:
    if signature_b is not None and not same_signature(signature, signature_b):
        return {"category": category, "score": key, "signature": signature, "signature_a": signature,
                "signature_b": signature_b, "scale": None, "n": len(xa), "dropped": dropped,
                "mean_a": sum(xa) / len(xa) if xa else None, "mean_b": sum(xb) / len(xb) if xb else None,
                "diff": None, "ci95": None, "p": None, "p_holm": None, "test": None, "mde": None,
                "effect_size": None, "verdict": NOT_COMPARABLE, "better": None}
    res = paired_compare(xa, xb, resamples=resamples, seed=seed, level=LEVEL, alpha=ALPHA, power=POWER)
    scale = score_scale(key, signature)
    return {"category": category, "score": key, "signature": signature, "scale": list(scale) if scale else None,
            "n": res.n, "dropped": dropped, "mean_a": res.mean_a, "mean_b": res.mean_b, "diff": res.diff,
            "ci95": list(res.ci) if res.ci else None, "p": res.p, "p_holm": None, "test": res.test,
            "mde": res.mde, "effect_size": res.effect_size, "verdict": None, "better": None}


def _pair_rows(ra: dict[str, Any], rb: dict[str, Any], resamples: int, seed: int) -> list[dict[str, Any]]:
    ia, ib = _index(ra), _index(rb)
    shared = [i for i in ia if i in ib and ia[i].get("category") == ib[i].get("category")]
    by_cat: dict[str, list[str]] = {}
    for i in shared:
        by_cat.setdefault(str(ia[i].get("category", "")), []).append(i)
    sigs = ra.get("signatures", {}) or {}
    sigs_b = rb.get("signatures", {}) or {}
    rows = []
    for cat in sorted(by_cat):
        ids = by_cat[cat]
        keys = _keys(ia[i] for i in ids) & _keys(ib[i] for i in ids)  # scored for both models
        for key in sorted(keys):
            xa, xb, dropped = _pair_values(ids, ia, ib, key)
            rows.append(_row(cat, key, sigs.get(key, {}), xa, xb, dropped, resamples, seed, sigs_b.get(key, {})))
    all_keys = _keys(ia[i] for i in shared) & _keys(ib[i] for i in shared)
    for key in sorted(all_keys):
        xa, xb, dropped = _pair_values(shared, ia, ib, key)
        rows.append(_row(ALL, key, sigs.get(key, {}), xa, xb, dropped, resamples, seed, sigs_b.get(key, {})))
    return rows


def _method(n_tests: int, resamples: int, seed: int) -> dict[str, Any]:
    return {"interval": "paired bootstrap, percentile", "level": LEVEL, "resamples": resamples, "seed": seed,
            "test": f"{TEST_WILCOXON} when n >= 10; {TEST_PERMUTATION} (all 2^n flips) when n < 10; "
                    "p = 1 when every difference is 0",
            "adjustment": f"Holm over {n_tests} comparisons in this save path",
            "alpha": ALPHA, "power": POWER,
            "mde": f"smallest |mean difference| detectable at alpha={ALPHA} (two-sided) with power {POWER}: "
                   "(z_{1-alpha/2} + z_power) * sd(diff) / sqrt(n), normal approximation"}


def compare_results(results: list[dict[str, Any]], *, resamples: int = 2000,
                    seed: int = 0) -> dict[tuple[str, str], dict[str, Any]]:
    """Every pair of models (a < b by name) -> its comparison dict (the JSON written per pair)."""
    by_model = {r["model"]: r for r in results}
    pairs = list(combinations(sorted(by_model), 2))
    tables = {(a, b): _pair_rows(by_model[a], by_model[b], resamples, seed) for a, b in pairs}
    flat = [row for rows in tables.values() for row in rows]
    adjusted = holm([row["p"] for row in flat])
    for row, p_adj in zip(flat, adjusted):
        row["p_holm"] = p_adj
    n_tests = sum(p is not None for p in adjusted)
    out = {}
    for (a, b), rows in tables.items():
        for row in rows:
            if row["verdict"] == NOT_COMPARABLE:
                continue
            row["verdict"] = verdict(row["p_holm"], row["diff"], ALPHA)
            row["better"] = {"A better": a, "B better": b}.get(row["verdict"])
        out[(a, b)] = {"schema": SCHEMA, "model_a": a, "model_b": b, "method": _method(n_tests, resamples, seed),
                       "rows": rows}
    return out


def load_results(save_path: Path) -> list[dict[str, Any]]:
    """Every readable results/*.json under save_path (models run one at a time are all found)."""
    out = []
    for path in sorted((Path(save_path) / "results").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "model" in data and "items" in data:
            out.append(data)
    return out


def _csv_text(comparisons: dict[tuple[str, str], dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for (a, b), comp in comparisons.items():
        for row in comp["rows"]:
            scale = row["scale"] or [None, None]
            ci = row["ci95"] or [None, None]
            line = {"model_a": a, "model_b": b, "scale_low": scale[0], "scale_high": scale[1], "ci95_low": ci[0],
                    "ci95_high": ci[1], **{k: row[k] for k in CSV_FIELDS if k in row}}
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else ("" if v is None else v))
                             for k, v in clean_json(line).items()})
    return buf.getvalue()


def not_comparable(comparisons: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """One line per (pair, score) refused because the signatures differ, naming both."""
    out = []
    for (a, b), comp in comparisons.items():
        seen = set()
        for row in comp["rows"]:
            if row["verdict"] == NOT_COMPARABLE and row["score"] not in seen:
                seen.add(row["score"])
                out.append(f"{a} vs {b}: {row['score']} not compared, the scores were made differently: "
                           + signature_diff(row["signature_a"], row["signature_b"], a, b))
    return out


def write_comparison_files(save_path: Path, comparisons: dict[tuple[str, str], dict[str, Any]]) -> list[Path]:
    """comparisons/<a>__vs__<b>.json and comparisons.csv."""
    folder = Path(save_path) / "comparisons"
    written = []
    for (a, b), comp in comparisons.items():
        path = folder / f"{battle_stem(a, b)}.json"
        atomic_write_json(path, comp)
        written.append(path)
    if comparisons:
        path = folder / "comparisons.csv"
        atomic_write_text(path, _csv_text(comparisons))
        written.append(path)
    return written


def write_comparisons(save_path: Path, results: list[dict[str, Any]] | None = None, *, resamples: int = 2000,
                      seed: int = 0) -> list[Path]:
    """Write comparisons/*.json and comparisons.csv; `results` defaults to every results/*.json found."""
    save_path = Path(save_path)
    if results is None:
        results = load_results(save_path)
    return write_comparison_files(save_path, compare_results(results, resamples=resamples, seed=seed))
