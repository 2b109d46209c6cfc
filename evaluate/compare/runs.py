"""Two runs of the same models on the same items, compared over time (yesterday's checkpoint against
today's): per model, category and score, the paired difference with its interval, test and verdict,
exactly as two models of one run are compared (evaluate.pipeline.comparisons): each model's two runs
are one pair, its primary scores over all items confirmatory (run A's `primary`, else the default),
the rest exploratory.

Refused (InputError) when the runs share no model, or a shared model shares no item (same id and
category); rows whose signatures differ (another judge, prompt, tokenizer or metric option) are
marked "not comparable" with the differing fields named, and the command says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..savepath.log import NoResults, RunLog
from ..pipeline.comparisons import NOT_COMPARABLE, compare_pair, configured_primary
from ..pipeline.results import signature_diff


def _read(save_path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = RunLog.read(save_path)
    except NoResults as exc:
        raise InputError(str(exc)) from None
    return {r["model"]: r for r in data.results}


def compare_runs(path_a: Path, path_b: Path, *, models: list[tuple[str, str]] | None = None,
                 resamples: int = 2000, seed: int = 0) -> list[dict[str, Any]]:
    """One comparison (as in comparisons/<a>__vs__<b>.json) per model pair; model_a is run A's.

    models: (name in A, name in B) pairs; default: every model name found in both runs."""
    ra, rb = _read(path_a), _read(path_b)
    if models is None:
        models = [(m, m) for m in sorted(set(ra) & set(rb))]
        if not models:
            raise InputError(f"compare: {path_a} ({', '.join(sorted(ra))}) and {path_b} ({', '.join(sorted(rb))}) "
                             "share no model name; name the pairs with --model A_NAME:B_NAME")
    out = []
    primary = configured_primary(path_a)
    for ma, mb in models:
        if ma not in ra or mb not in rb:
            missing = f"{ma} in {path_a}" if ma not in ra else f"{mb} in {path_b}"
            raise InputError(f"compare: no model {missing} (known: {', '.join(sorted(ra if ma not in ra else rb))})")
        a, b = dict(ra[ma], model=f"A:{ma}"), dict(rb[mb], model=f"B:{mb}")
        ids_a = {(str(i["id"]), i.get("category")) for i in a.get("items", [])}
        ids_b = {(str(i["id"]), i.get("category")) for i in b.get("items", [])}
        if not ids_a & ids_b:
            raise InputError(f"compare: {ma} in {path_a} and {mb} in {path_b} share no item (same id and category): "
                             "compare runs of the same answer files' items")
        comp = compare_pair(a, b, primary=primary, resamples=resamples, seed=seed)
        comp["run_a"], comp["run_b"] = str(path_a), str(path_b)
        comp["items_only_in_a"], comp["items_only_in_b"] = len(ids_a - ids_b), len(ids_b - ids_a)
        out.append(comp)
    return out


def comparison_view(path_a: Path, path_b: Path, comparisons: list[dict[str, Any]]) -> Any:
    """The two runs as one report's content (a RunLog): each compared model once
    per run, named `A:<model>` and `B:<model>` as in the comparisons, so the report's pairs, forest
    plots and item browser show run A's and run B's answers and scores side by side."""
    ra, rb = _read(path_a), _read(path_b)
    results: dict[str, dict[str, Any]] = {}
    for comp in comparisons:
        for name, runs in ((comp["model_a"], ra), (comp["model_b"], rb)):
            results.setdefault(name, dict(runs[name[2:]], model=name))
    return RunLog(path=Path(path_b), results=list(results.values()), comparisons=comparisons,
                    manifest={"compared_runs": {"A": str(path_a), "B": str(path_b)}})


def refused_rows(comparisons: list[dict[str, Any]]) -> list[str]:
    """A line per (model, score) that could not be compared, naming the differing signature fields."""
    lines, seen = [], set()
    for comp in comparisons:
        for row in comp["rows"]:
            key = (comp["model_a"], row["score"])
            if row["verdict"] == NOT_COMPARABLE and key not in seen:
                seen.add(key)
                lines.append(f"{comp['model_a'][2:]}: {row['score']}: "
                             + signature_diff(row["signature_a"], row["signature_b"], "run A", "run B"))
    return lines
