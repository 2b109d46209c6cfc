"""The Python API, for notebooks and scripts (docs/api.md): run a config with overrides, open a save
path, read its scores as rows or a pandas DataFrame, its paired comparisons and battles, and gate
it as `eval.py summary SAVE --fail-under ...` does.

    from evaluate import api
    run = api.run("configs/example.yaml", overrides={"save_path": "results/nb", "limit": 5})
    run.scores()          # [ScoreRow(model, category, id, score, value, invalid), ...]
    run.frame()           # the same rows as a pandas DataFrame (pandas installed)
    run.comparisons()     # one row per pair, category and score: difference, interval, p, verdict
    run.battles()         # one dict per pair of models: wins, ties, losses, win rate, interval
    run.gate(fail_under=["F1=0.3"])   # [GateResult(...)], each .passed and .line()

Bad input raises evaluate.core.errors.InputError (ConfigError is one) with the message the command
line prints; nothing here prints or exits.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .core.errors import InputError
from .core.io import read_structured
from .pipeline.gates import GateResult, GateView, check_names, evaluate, parse_gates
from .report.data import NoResults, SaveData, load_save_path

__all__ = ["ScoreRow", "SavedRun", "open_run", "run", "InputError"]


@dataclass(frozen=True)
class ScoreRow:
    """One score of one item: `value` is None when the score is invalid (`invalid` then says why,
    e.g. the judge's reply that could not be parsed); an invalid score is never averaged in."""

    model: str
    category: str
    id: str
    score: str  # `Family/name`, e.g. GPT/correctness, Metrics/F1, GPT/relevance@turn2
    value: float | None
    invalid: str | None


class SavedRun:
    """A save path, read once from its files (results/, comparisons/, battles/, manifest.json)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.data: SaveData = load_save_path(self.path)
        except NoResults as exc:
            raise InputError(str(exc)) from None
        from .pipeline.comparisons import current

        fresh = current(self.path)  # comparison files of an older version: decided again in memory
        if fresh is not None:
            self.data.comparisons = fresh

    def __repr__(self) -> str:
        return f"SavedRun({str(self.path)!r}, models={self.models})"

    @property
    def models(self) -> list[str]:
        return list(self.data.models)

    @property
    def categories(self) -> list[str]:
        """The categories with scores (records of categories the config left out are kept, unscored)."""
        return sorted({c for r in self.data.results for c in ((r.get("aggregates") or {}).get("by_category") or {})})

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self.data.manifest or {})

    @property
    def status(self) -> str | None:
        """The run's own status (ok, finished with errors, failed); gates not included."""
        return (self.data.manifest or {}).get("status")

    def scores(self) -> list[ScoreRow]:
        """Every item's scores, valid and invalid, in model, item and score order."""
        rows = []
        for res in self.data.results:
            for it in res.get("items") or []:
                invalid = it.get("invalid") or {}
                for key in sorted({*(it.get("scores") or {}), *invalid}):
                    v = (it.get("scores") or {}).get(key)
                    bad = invalid.get(key)
                    value = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
                        and bad is None else None
                    why = (bad.get("reason") if isinstance(bad, dict) else str(bad)) if bad is not None else \
                        (None if value is not None else "no finite value")
                    rows.append(ScoreRow(res.get("model", ""), str(it.get("category", "")), str(it.get("id")),
                                         key, value, why))
        return rows

    def frame(self) -> Any:
        """The rows of `scores()` as a pandas DataFrame (columns model, category, id, score, value,
        invalid); ImportError naming the package when pandas is not installed."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("SavedRun.frame() needs pandas: pip install pandas (or the `api` extra); "
                              "SavedRun.scores() gives the same rows without it") from None
        return pd.DataFrame([asdict(r) for r in self.scores()],
                            columns=["model", "category", "id", "score", "value", "invalid"])

    def means(self) -> dict[str, dict[str, float | None]]:
        """model -> score -> its mean over all items (the closing lines' table)."""
        out = {}
        for res in self.data.results:
            overall = (res.get("aggregates") or {}).get("overall") or {}
            out[res.get("model", "")] = {k: v.get("mean") for k, v in overall.items() if isinstance(v, dict)}
        return out

    def comparisons(self) -> list[dict[str, Any]]:
        """One row per pair, category ("(all)" over every item) and score: model_a, model_b, mean_a,
        mean_b, diff (A - B), interval, level, p, p_adj, role (confirmatory or exploratory), verdict."""
        rows = []
        for comp in self.data.comparisons:
            for r in comp.get("rows") or []:
                rows.append({"model_a": comp.get("model_a"), "model_b": comp.get("model_b"), **r})
        return rows

    def battles(self) -> list[dict[str, Any]]:
        """One summary per battled pair: model_a, model_b, wins / ties / losses of model_a, invalid,
        win_rate of model_a (ties half) and its 95% interval."""
        return [dict(b.get("summary") or {}) for b in self.data.battles]

    def gate(self, fail_under: Iterable[str] = (), fail_if_worse: Iterable[str] = (),
             fail_under_win_rate: Iterable[str] = (), untrusted_judge: bool = False) -> list[GateResult]:
        """The gates of `eval.py summary SAVE --fail-under ...`, over the models the run scored;
        InputError for a gate naming what the run does not hold."""
        gates = parse_gates(list(fail_under), list(fail_if_worse), list(fail_under_win_rate), untrusted_judge)
        view = GateView.of(self.data)
        view.gated = [m for m in self.models if m in view.gated]
        check_names(gates, view.known())
        return evaluate(gates, view)


def open_run(save_path: str | Path) -> SavedRun:
    """A finished run's save path; InputError when it holds no results."""
    return SavedRun(save_path)


REPLACED = ("category",)  # top-level keys an override replaces whole: the categories are one choice


def _merge(base: dict[str, Any], over: dict[str, Any], top: bool = True) -> dict[str, Any]:
    """`over` into `base`: mappings merged key by key (except REPLACED at the top), anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        nested = isinstance(v, dict) and isinstance(out.get(k), dict) and not (top and k in REPLACED)
        out[k] = _merge(out[k], v, top=False) if nested else copy.deepcopy(v)
    return out


def run(config: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None, *,
        families: list[str] | None = None, charts: bool = False, log: Callable[[str], None] = lambda s: None,
        missing: str | None = None) -> SavedRun:
    """Run a config (a file, or a mapping as a config file would hold it) with `overrides` merged in
    (nested mappings key by key: {"judge": {"model": "x"}} keeps the rest of `judge`; `category`
    replaces the config's categories whole), then open its
    save path. Relative paths in a file are relative to the file, as on the command line.
    `families`: e.g. ["Metrics"]; default all. `log`: the progress lines (default: none)."""
    from .pipeline.config import parse_config
    from .pipeline.plan import select_families
    from .pipeline.run import run_job

    if isinstance(config, dict):
        raw, source = config, None
    else:
        source = Path(config)
        raw = read_structured(source, "config")
        if not isinstance(raw, dict):
            raise InputError(f"{source}: expected a mapping of config keys")
    cfg = parse_config(_merge(raw, overrides or {}), source=source)
    if missing is not None:
        cfg.missing = missing
    outcome = run_job(cfg, families=select_families(families, None), charts=charts, log=log)
    return SavedRun(cfg.save_path)
