"""Paired comparisons of every pair of models in a save path.

Reads result dicts (the JSON of ``results/<model>.json``) and writes, under the save path:

    comparisons/<a>__vs__<b>.json   schema "llm-eval-comparison/2": one row per category x score,
                                    plus "(all)" rows over every category
    comparisons/comparisons.csv     the same rows, one line per (pair, category, score)

Items are paired by id: a row uses the ids present in both models (same category) with a finite
score in both. An id whose score is invalid in either model is left out of the pair and counted in
``dropped``.

The multiple-comparison family is one pair of models (`evaluate.stats.family`): the pair's primary
scores over all items are confirmatory, one Bonferroni family whose intervals are simultaneous;
every other row is exploratory, unadjusted, and says so. Each pair is decided from its own rows
only, so adding a model to the save path never changes the verdicts of another pair. The primary
scores are the config's `primary` list, else `default_primary` of the scores both models have.
Scores are higher-is-better.

Two models' scores of one key are compared only when their signatures agree (evaluator, judge,
prompt hash, tokenizer, options; `results.same_signature`): otherwise the row says "not
comparable", names both signatures (`signature_a`, `signature_b`) and has no test.
"""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.io import clean_json
from ..savepath import layout, read
from ..savepath import records as log_records
from ..savepath.log import RunLog, write_run_log
from ..stats.family import ALL, EXPLORATORY, RowInput, decide_pair, default_primary, family_method
from ..stats.scales import pass_fail, score_scale
from .results import same_signature, signature_diff

SCHEMA = read.COMPARISON_SCHEMA  # "llm-eval-comparison/2"
ALPHA, POWER = 0.05, 0.8
ROW_FIELDS = ("category", "score", "role", "signature", "scale", "n", "dropped", "mean_a", "mean_b", "diff",
              "interval", "level", "simultaneous", "interval_note", "p", "p_adj", "m", "test", "detectable",
              "effect_size", "verdict", "better")
CSV_FIELDS = log_records.COMPARISON_FIELDS
NOT_COMPARABLE = "not comparable: the two models' scores were made differently (signatures differ)"


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


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _effect(xa: list[float], xb: list[float]) -> float | None:
    """Paired Cohen's d_z (mean difference / sd of differences); None when undefined."""
    d = [a - b for a, b in zip(xa, xb)]
    if len(d) < 2:
        return None
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    return m / sd if sd > 0 else None


def _raw_rows(ra: dict[str, Any], rb: dict[str, Any]) -> list[dict[str, Any]]:
    """The pair's rows before any test: category, score, both signatures, paired values."""
    ia, ib = _index(ra), _index(rb)
    shared = [i for i in ia if i in ib and ia[i].get("category") == ib[i].get("category")]
    by_cat: dict[str, list[str]] = {}
    for i in shared:
        by_cat.setdefault(str(ia[i].get("category", "")), []).append(i)
    sigs, sigs_b = ra.get("signatures", {}) or {}, rb.get("signatures", {}) or {}
    groups = [(cat, by_cat[cat]) for cat in sorted(by_cat)] + [(ALL, shared)]
    rows = []
    for cat, ids in groups:
        keys = _keys(ia[i] for i in ids) & _keys(ib[i] for i in ids)  # scored for both models
        for key in sorted(keys):
            xa, xb, dropped = _pair_values(ids, ia, ib, key)
            rows.append({"category": cat, "score": key, "signature": sigs.get(key, {}),
                         "signature_b": sigs_b.get(key, {}), "xa": xa, "xb": xb, "dropped": dropped})
    return rows


def pair_primary(configured: Sequence[str] | None, keys: Iterable[str]) -> tuple[list[str], str]:
    """The pair's primary scores and where they come from ("config" or "default"): the configured
    keys the pair has, else `default_primary` of the pair's own keys (another model cannot move it)."""
    keys = set(keys)
    if configured:
        return [k for k in configured if k in keys], "config"
    by_family: dict[str, list[str]] = {}
    for k in keys:
        by_family.setdefault(k.split("/", 1)[0], []).append(k)
    return sorted(default_primary(by_family)), "default"


def compare_pair(ra: dict[str, Any], rb: dict[str, Any], *, primary: Sequence[str] | None = None,
                 resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """One pair's comparison dict (the JSON written per pair); model_a = ra's model."""
    raw = _raw_rows(ra, rb)
    comparable = [r for r in raw if same_signature(r["signature"], r["signature_b"])]
    used, source = pair_primary(primary, {r["score"] for r in comparable if r["category"] == ALL})
    inputs = [RowInput(r["score"], r["category"], r["xa"], r["xb"], score_scale(r["score"], r["signature"]),
                       binary=pass_fail(r["signature"])) for r in comparable]
    decisions = decide_pair(inputs, used, alpha=ALPHA, power=POWER, resamples=resamples, seed=seed)
    m = sum(d.role != EXPLORATORY for d in decisions)
    a, b = ra["model"], rb["model"]
    rows, it = [], iter(decisions)
    for r in raw:
        base = {"category": r["category"], "score": r["score"], "signature": r["signature"], "n": len(r["xa"]),
                "dropped": r["dropped"], "mean_a": _mean(r["xa"]), "mean_b": _mean(r["xb"])}
        if not same_signature(r["signature"], r["signature_b"]):
            rows.append({**dict.fromkeys(ROW_FIELDS), **base, "role": EXPLORATORY, "verdict": NOT_COMPARABLE,
                         "signature_a": r["signature"], "signature_b": r["signature_b"]})
            continue
        d = next(it).to_dict()
        scale = score_scale(r["score"], r["signature"])
        row = {**base, "role": d["role"], "scale": list(scale) if scale else None,
               "effect_size": _effect(r["xa"], r["xb"]),
               "better": {"A better": a, "B better": b}.get(d["verdict"]),
               **{k: d[k] for k in ("diff", "interval", "level", "simultaneous", "interval_note", "p", "p_adj", "m",
                                    "test", "detectable", "verdict")}}
        rows.append({k: row[k] for k in ROW_FIELDS})
    method = {**family_method(m, ALPHA), "primary": used, "primary_from": source, "resamples": resamples,
              "seed": seed, "power": POWER}
    return {"schema": SCHEMA, "model_a": a, "model_b": b, "method": method, "rows": rows}


def compare_results(results: list[dict[str, Any]], *, primary: Sequence[str] | None = None, resamples: int = 2000,
                    seed: int = 0) -> dict[tuple[str, str], dict[str, Any]]:
    """Every pair of models (a < b by name) -> its comparison dict, each decided on its own rows."""
    by_model = {r["model"]: r for r in results}
    return {(a, b): compare_pair(by_model[a], by_model[b], primary=primary, resamples=resamples, seed=seed)
            for a, b in combinations(sorted(by_model), 2)}


def load_results(save_path: Path, log: RunLog | None = None) -> list[dict[str, Any]]:
    """Every readable results/*.json under save_path (models run one at a time are all found);
    `log`: the save path's run log as already read (else its result files are read here)."""
    results = log.results if log is not None else [d for _, d in read.read_results(save_path)[0]]
    return [data for data in results if "items" in data]


def configured_primary(save_path: Path) -> list[str] | None:
    """The `primary` list of the config of the save path's last run (manifest.json), if any."""
    try:
        manifest = read.read_json(layout.manifest_file(save_path))
    except (OSError, ValueError):
        return None
    value = ((manifest or {}).get("config") or {}).get("primary") if isinstance(manifest, dict) else None
    return [str(k) for k in value] if isinstance(value, list) and value else None


def csv_rows(comparisons: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """comparisons.csv's lines: one per pair, category and score (scale and interval as two cells each)."""
    out = []
    for (a, b), comp in comparisons.items():
        for row in comp["rows"]:
            scale = row["scale"] or [None, None]
            ci = row["interval"] or [None, None]
            out.append(clean_json({"model_a": a, "model_b": b, "scale_low": scale[0], "scale_high": scale[1],
                                   "interval_low": ci[0], "interval_high": ci[1],
                                   **{k: row[k] for k in CSV_FIELDS if k in row}}))
    return out


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
    files: list[log_records.Record] = [log_records.Comparison.from_dict(comp) for comp in comparisons.values()]
    if comparisons:
        files.append(log_records.ComparisonsCsv(rows=csv_rows(comparisons)))
    return write_run_log(save_path, files)


def write_comparisons(save_path: Path, results: list[dict[str, Any]] | None = None, *,
                      primary: Sequence[str] | None = None, resamples: int = 2000, seed: int = 0,
                      log: RunLog | None = None) -> list[Path]:
    """Write comparisons/*.json and comparisons.csv; `results` defaults to every results/*.json found,
    `primary` to the save path's configured one (manifest.json), else each pair's default."""
    save_path = Path(save_path)
    if results is None:
        results = load_results(save_path, log)
    if primary is None:
        primary = configured_primary(save_path)
    return write_comparison_files(save_path, compare_results(results, primary=primary, resamples=resamples,
                                                             seed=seed))


def stale(save_path: Path) -> bool:
    """The save path's comparison files are missing (two or more models) or were written under another
    schema: their verdicts would follow another family and must be computed again."""
    return read.comparisons_stale(save_path)


def current(log: RunLog) -> list[dict[str, Any]] | None:
    """The comparisons of a run log as this version decides them, in memory, when its files are stale
    (`stale`); None when the files are current."""
    if not stale(log.path):
        return None
    comps = compare_results(load_results(log.path, log), primary=configured_primary(log.path))
    return list(comps.values())
