"""Read what a save path holds, as plain JSON: the report knows result files, not evaluators.

Nothing here imports an evaluator or a judge; every file is optional except `results/*.json`,
and an unreadable optional file is reported (`problems`) rather than fatal, so a half-finished
or older save path still gets a report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPARISON_SCHEMA = "llm-eval-comparison/2"


class NoResults(Exception):
    """The save path has no results/ folder with result files."""


@dataclass
class SaveData:
    """Everything a report shows, read from one save path."""

    path: Path
    results: list[dict[str, Any]]  # results/<model>.json, in name order
    battles: list[dict[str, Any]] = field(default_factory=list)  # battles/<a>__vs__<b>.json
    ranking: dict[str, Any] | None = None  # battles/ranking.json
    comparisons: list[dict[str, Any]] = field(default_factory=list)  # comparisons/<a>__vs__<b>.json
    judge_check: dict[str, Any] | None = None
    sageval: dict[str, dict[str, Any]] = field(default_factory=dict)  # model -> summary file
    manifest: dict[str, Any] | None = None
    charts: dict[str, dict[str, Path]] = field(default_factory=dict)  # family -> png stem -> path
    problems: list[str] = field(default_factory=list)  # files that could not be read

    @property
    def models(self) -> list[str]:
        return [r["model"] for r in self.results]

    @property
    def categories(self) -> list[str]:
        cats: dict[str, None] = {}
        for r in self.results:
            for it in r.get("items", []):
                cats.setdefault(it.get("category", ""), None)
        return sorted(cats)

    def battle_for(self, a: str, b: str) -> tuple[dict[str, Any], bool] | None:
        """The battle of a and b and whether it is stored the other way round (b as model A)."""
        for bt in self.battles:
            s = bt.get("summary", {})
            if (s.get("model_a"), s.get("model_b")) == (a, b):
                return bt, False
            if (s.get("model_a"), s.get("model_b")) == (b, a):
                return bt, True
        return None


def read_optional(path: Path, problems: list[str]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: {type(exc).__name__}: {exc}")
        return None


def load_save_path(save_path: Path) -> SaveData:
    save_path = Path(save_path)
    folder = save_path / "results"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise NoResults(f"{save_path}: no results/*.json here; is this the save_path of a finished run?")
    problems: list[str] = []
    results = []
    for f in files:
        data = read_optional(f, problems)
        if isinstance(data, dict) and "model" in data:
            results.append(data)
        elif data is not None:
            problems.append(f"{f}: not a result file (no \"model\")")
    if not results:
        raise NoResults(f"{save_path}: results/ holds no readable result file ({'; '.join(problems)})")
    out = SaveData(path=save_path, results=results, problems=problems)
    for f in sorted((save_path / "battles").glob("*.json")):
        data = read_optional(f, problems)
        if not isinstance(data, dict):
            continue
        if f.name == "ranking.json":
            out.ranking = data
        elif "summary" in data:
            out.battles.append(data)
    for f in sorted((save_path / "comparisons").glob("*.json")):
        data = read_optional(f, problems)
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            if data.get("schema") != COMPARISON_SCHEMA:
                problems.append(f"{f}: schema {data.get('schema')!r} of an older version, not shown; "
                                f"`eval.py report {save_path}` writes it again as {COMPARISON_SCHEMA}")
                continue
            out.comparisons.append(data)
    if (save_path / "judge_check.json").is_file():
        jc = read_optional(save_path / "judge_check.json", problems)
        out.judge_check = jc if isinstance(jc, dict) else None
    for f in sorted((save_path / "sageval").glob("*.json")):
        data = read_optional(f, problems)
        if isinstance(data, dict):
            out.sageval[data.get("model", f.stem)] = data
    if (save_path / "manifest.json").is_file():
        m = read_optional(save_path / "manifest.json", problems)
        out.manifest = m if isinstance(m, dict) else None
    for png in sorted((save_path / "charts").glob("*/*.png")):
        out.charts.setdefault(png.parent.name, {})[png.stem] = png
    return out
