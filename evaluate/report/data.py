"""Read what a save path holds, as plain JSON: the report knows result files, not evaluators.

Nothing here imports an evaluator or a judge; every file is optional except `results/*.json`,
and an unreadable optional file is reported (`problems`) rather than fatal, so a half-finished
or older save path still gets a report. A result file that cannot be read is also in `unreadable`:
the report and `eval.py summary` then say the output lacks that model and exit 3. The files are
read through `evaluate.savepath.read`, the save path's one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..savepath import read
from ..savepath.read import ResultFiles


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
    unreadable: list[str] = field(default_factory=list)  # result files among them: the view lacks their model

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


def load_save_path(save_path: Path, files: ResultFiles | None = None) -> SaveData:
    """Everything the report shows, through the save path's one reader (`evaluate.savepath.read`);
    `files`: the result files as already read. Raises NoResults when no result file is readable,
    LayoutError (bad input) when the save path was written in a newer layout."""
    save_path = Path(save_path)
    problems: list[str] = []
    manifest_problems: list[str] = []  # listed last, as the manifest is the last file a run writes
    manifest = read.read_manifest(save_path, manifest_problems)
    files = files if files is not None else read.read_results(save_path)
    if not files.found and not files.unreadable:
        raise NoResults(f"{save_path}: no results/*.json here; is this the save_path of a finished run?")
    problems.extend(str(u) for u in files.unreadable)
    if not files.found:
        raise NoResults(f"{save_path}: results/ holds no readable result file ({'; '.join(problems)})")
    out = SaveData(path=save_path, results=[d for _, d in files.found], problems=problems,
                   unreadable=[str(u) for u in files.unreadable])
    out.battles, out.ranking = read.read_battles(save_path, problems)
    out.comparisons = read.read_comparisons(save_path, problems)
    out.judge_check = read.read_judge_check(save_path, problems)
    out.sageval = read.read_sageval(save_path, problems)
    out.manifest = manifest
    problems.extend(manifest_problems)
    out.charts = read.chart_files(save_path)
    return out
