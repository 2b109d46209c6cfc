"""The run log: what a save path holds, as one typed object (as inspect_ai's `EvalLog` is its log's).

A run, a merge, each benchmark command and generation leave a save path; everything after them reads
it back as a `RunLog`: `eval.py summary` and `report`, `compare`, the gates, the Python API
(`evaluate.api`) and the viewer. Two ways in:

- `read_run_header(path)`: the manifest only (its layout checked), cheap enough for a list of a
  thousand runs: id, status, times, models, versions, usage, errors, the judge check's verdict;
  `find_run_headers(folder, ...)`: the header of every save path under the folders, newest first.
- `read_run_log(path)` (or `RunLog.read`): everything: the result files (`results`, each model's
  items, scores, signatures and aggregates), battles and ranking, comparisons, the judge check,
  SAGEval's summaries, the charts, the labels; `header.full()` reads the rest of a header.

The log says its own layout (`layout`, manifest.json's `"layout"`): a save path written in a newer
layout is refused (LayoutError, exit 2) before anything else is read. Result files are required (a
full read of a save path with none raises NoResults); a result file that cannot be read is never
dropped silently (`unreadable`, each naming the file and why); any other file that cannot be read is a
line in `problems`, so a half-finished or older save path still reads.

Every file enters a save path through `write_run_log(root, records)`: each a typed record of
`savepath.records` (its path and bytes declared there), never a path and a dict.

A run in progress is held and written by `evaluate.pipeline.savedir.SaveDir` (the writer: results in
memory, aggregated once), through this package's writer; its outputs build the finished run's RunLog
from memory (`evaluate.pipeline.outputs`) rather than reading the files back.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, TypeVar

from .layout import LayoutError, layout_of, manifest_file, results_dir
from .write import append_text, write_bytes
from .manifest import model_names
from .read import (Unreadable, chart_files, read_battles, read_comparisons, read_judge_check, read_labels,
                   read_manifest, read_results, read_sageval)
from .records import (Battle, Comparison, JudgeCheck, Manifest, ModelResults, Ranking, Record,
                      SagevalSummary)


class NoResults(Exception):
    """The save path has no results/ folder with result files."""


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


L = TypeVar("L", bound="RunLog")


@dataclass
class RunLog:
    """A save path's content, read once; the manifest is the header (every manifest has the keys of
    `evaluate.savepath.manifest.HEADER_KEYS`)."""

    path: Path
    results: list[dict[str, Any]] = field(default_factory=list)  # results/<model>.json, in name order
    battles: list[dict[str, Any]] = field(default_factory=list)  # battles/<a>__vs__<b>.json
    ranking: dict[str, Any] | None = None  # battles/ranking.json
    comparisons: list[dict[str, Any]] = field(default_factory=list)  # comparisons/<a>__vs__<b>.json
    judge_check: dict[str, Any] | None = None  # judge_check.json
    sageval: dict[str, dict[str, Any]] = field(default_factory=dict)  # model -> sageval/<model>.json
    manifest: dict[str, Any] | None = None  # manifest.json: the header
    charts: dict[str, dict[str, Path]] = field(default_factory=dict)  # family -> png stem -> path
    labels: list[Any] = field(default_factory=list)  # labels.jsonl: savepath.labels.Label, one person's verdict a line
    problems: list[str] = field(default_factory=list)  # files that could not be read
    unreadable: list[Unreadable] = field(default_factory=list)  # result files among them: the log lacks their model
    header_only: bool = False  # read by read_run_header: the manifest alone

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls: type[L], path: str | Path, *, header_only: bool = False) -> L:
        """The save path's log (see the module docstring); NoResults when a full read finds no readable
        result file, LayoutError (bad input) when it was written in a newer layout."""
        path = Path(path)
        manifest_problems: list[str] = []  # listed last, as the manifest is the last file a run writes
        manifest = read_manifest(path, manifest_problems)
        if header_only:
            return cls(path=path, manifest=manifest, problems=manifest_problems, header_only=True)
        found, bad = read_results(path)
        problems = [str(u) for u in bad]
        if not found and not bad:
            raise NoResults(f"{path}: no results/*.json here; is this the save_path of a finished run?")
        if not found:
            raise NoResults(f"{path}: results/ holds no readable result file ({'; '.join(problems)})")
        log = cls(path=path, results=[d for _, d in found], manifest=manifest, problems=problems, unreadable=bad)
        log.battles, log.ranking = read_battles(path, problems)
        log.comparisons = read_comparisons(path, problems)
        log.judge_check = read_judge_check(path, problems)
        log.sageval = read_sageval(path, problems)
        log.labels = read_labels(path, problems)
        problems.extend(manifest_problems)
        log.charts = chart_files(path)
        return log

    def records(self) -> list[Record]:
        """The log as the records `write_run_log` takes (results, battles, ranking, comparisons, the judge
        check, SAGEval's summaries, the manifest): written again, each file has the bytes it was read from."""
        out: list[Record] = [ModelResults.from_dict(r) for r in self.results]
        out += [Battle.from_dict(b) for b in self.battles]
        out += [Ranking.from_dict(self.ranking)] if self.ranking else []
        out += [Comparison.from_dict(c) for c in self.comparisons]
        out += [JudgeCheck.from_dict(self.judge_check)] if self.judge_check else []
        out += [SagevalSummary.from_dict(d, name=m) for m, d in self.sageval.items()]
        out += [Manifest.from_dict(self.manifest)] if self.manifest else []
        return out

    def full(self: L) -> L:
        """This run's whole log (itself when it is one already)."""
        return type(self).read(self.path) if self.header_only else self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, models={self.models})"

    # ------------------------------------------------------------------ the header
    @property
    def header(self) -> dict[str, Any]:
        return self.manifest or {}

    @property
    def layout(self) -> int:
        """The layout the save path was written in (1 for a manifest that does not say)."""
        return layout_of(self.manifest)

    @property
    def run_id(self) -> str | None:
        return self.header.get("run_id")

    @property
    def status(self) -> str | None:
        """The run's own status (ok, finished with errors, failed, interrupted); gates not included."""
        return self.header.get("status")

    @property
    def started(self) -> str | None:
        return self.header.get("started")

    @property
    def finished(self) -> str | None:
        return self.header.get("finished")

    @property
    def versions(self) -> dict[str, str]:
        return dict(self.header.get("versions") or {})

    @property
    def plan(self) -> dict[str, Any] | None:
        return self.header.get("plan")

    @property
    def usage(self) -> dict[str, Any]:
        return dict(self.header.get("usage") or {})

    @property
    def errors(self) -> list[Any]:
        return list(self.header.get("errors") or [])

    @property
    def benchmark(self) -> str | None:
        """The benchmark command that made it (mt_bench, arena_hard, alpaca_eval), None for a run or a merge."""
        return self.header.get("benchmark")

    # ------------------------------------------------------------------ the content
    @property
    def models(self) -> list[str]:
        """The models, in name order (a header: the manifest's)."""
        if self.header_only:
            return model_names(self.manifest)
        return [r["model"] for r in self.results]

    @property
    def categories(self) -> list[str]:
        """Every category of the models' items (scored or not), in name order."""
        cats: dict[str, None] = {}
        for r in self.results:
            for it in r.get("items", []):
                cats.setdefault(it.get("category", ""), None)
        return sorted(cats)

    @property
    def scored_categories(self) -> list[str]:
        """The categories with scores (records of categories the config left out are kept, unscored)."""
        return sorted({c for r in self.results for c in ((r.get("aggregates") or {}).get("by_category") or {})})

    def battle_for(self, a: str, b: str) -> tuple[dict[str, Any], bool] | None:
        """The battle of a and b and whether it is stored the other way round (b as model A)."""
        for bt in self.battles:
            s = bt.get("summary", {})
            if (s.get("model_a"), s.get("model_b")) == (a, b):
                return bt, False
            if (s.get("model_a"), s.get("model_b")) == (b, a):
                return bt, True
        return None

    def scores(self) -> list[ScoreRow]:
        """Every item's scores, valid and invalid, in model, item and score order."""
        rows = []
        for res in self.results:
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
            raise ImportError(f"{type(self).__name__}.frame() needs pandas: pip install pandas (or the `api` extra); "
                              f"{type(self).__name__}.scores() gives the same rows without it") from None
        return pd.DataFrame([asdict(r) for r in self.scores()],
                            columns=["model", "category", "id", "score", "value", "invalid"])

    def means(self) -> dict[str, dict[str, float | None]]:
        """model -> score -> its mean over all items (the closing lines' table)."""
        out = {}
        for res in self.results:
            overall = (res.get("aggregates") or {}).get("overall") or {}
            out[res.get("model", "")] = {k: v.get("mean") for k, v in overall.items() if isinstance(v, dict)}
        return out

    def comparison_rows(self) -> list[dict[str, Any]]:
        """One row per pair, category ("(all)" over every item) and score: model_a, model_b, mean_a,
        mean_b, diff (A - B), interval, level, p, p_adj, role (confirmatory or exploratory), verdict."""
        return [{"model_a": comp.get("model_a"), "model_b": comp.get("model_b"), **r}
                for comp in self.comparisons for r in comp.get("rows") or []]

    def battle_summaries(self) -> list[dict[str, Any]]:
        """One summary per battled pair: model_a, model_b, wins / ties / losses of model_a, invalid,
        win_rate of model_a (ties half) and its 95% interval."""
        return [dict(b.get("summary") or {}) for b in self.battles]


def read_run_log(path: str | Path, *, header_only: bool = False) -> RunLog:
    """Everything a save path holds (RunLog.read), or its manifest alone with `header_only` (a list of runs)."""
    return RunLog.read(path, header_only=header_only)


def write_run_log(root: str | Path, records: Iterable[Record]) -> list[Path]:
    """The one way a file enters a save path: each record at its paths under `root`, as its bytes
    (atomically; appended for a record of lines, such as FastChat's judgments). Returns the paths written."""
    written = []
    for record in records:
        data = record.to_bytes()
        for target in record.paths(Path(root)):
            if record.APPEND:
                if data:
                    append_text(target, data.decode("utf-8"))
            else:
                write_bytes(target, data)
            written.append(target)
    return written


def read_run_header(path: str | Path) -> RunLog:
    """A save path's manifest alone, as a RunLog whose `header_only` is set (`.full()` reads the rest)."""
    return RunLog.read(path, header_only=True)


def find_run_headers(*folders: str | Path) -> list[RunLog]:
    """The header of every save path under `folders` (each folder that holds manifest.json or a results/
    folder, the given folders included, a sharded run's shards too), newest first (by `finished`, else
    `started`). A save path of a newer layout is left out: a list of runs does not stop at one it
    cannot read (opening it says why)."""
    found: dict[Path, RunLog] = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        marks = [manifest_file(folder), *folder.rglob(manifest_file(Path(".")).name),
                 *folder.rglob(results_dir(Path(".")).name)]
        for path in sorted({m.parent for m in marks if m.exists()}):
            if path not in found and (manifest_file(path).is_file() or results_dir(path).is_dir()):
                try:
                    found[path] = read_run_header(path)
                except LayoutError:
                    continue
    return sorted(found.values(), key=lambda h: str(h.finished or h.started or ""), reverse=True)
