"""A run in progress: the writer of a save path's run log (docs/save-path.md lists its files).

A run, a merge or a benchmark command holds every model's results, battles and ranking here, in
memory, with its run id, its start and a benchmark's manifest entries (`header`); each file is written
once, at the end (also when the run fails or is interrupted: what was computed is kept), through
`evaluate.savepath` (where each file lives, the one writer, the layout version in the manifest).
Aggregates are computed once per model. Two scores meet only when their signatures agree: a score
whose signature changed since an earlier run into the same save path replaces the earlier scores of
that key (the change is named, with both signatures); a comparison of two models whose signatures
differ is refused row by row (`evaluate.pipeline.comparisons`). Earlier result files are read once
per run (`earlier_files`). What was written comes back as the run's `RunLog`
(`evaluate.pipeline.outputs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from ..core.records import Record
from ..core.scores import ItemScores
from ..savepath import layout, read
from ..savepath import records as log_records
from ..savepath.layout import pair_stem as battle_stem
from ..savepath.log import write_run_log
from ..savepath.manifest import iso, new_run_id, stamp_layout
from .results import ModelResults, signature_diff


class SaveDir:
    """Results, battles and the ranking of one save path, held in memory and written once."""

    def __init__(self, path: Path, log: Callable[[str], None] = lambda s: None, *, run_id: str | None = None,
                 started: str | None = None):
        """Raises LayoutError (bad input) when the save path was written in a newer layout. `run_id`,
        `started`: the run in progress (a new id and now when not given), for its manifest."""
        read.check(path)
        self.path = Path(path)
        self.log = log
        self.run_id = run_id or new_run_id()
        self.started = started or iso()
        self.header: dict[str, Any] = {}  # manifest entries of the run a benchmark adds (its models, its block)
        self.models: dict[str, ModelResults] = {}
        self.battles: dict[str, dict[str, Any]] = {}  # stem -> battle file content
        self.ranking: dict[str, Any] | None = None
        self.signature_changes: list[dict[str, Any]] = []
        self.opened: set[str] = set()  # models this run scores (the others come from earlier runs)
        self._dicts: tuple[str | None, list[dict[str, Any]]] | None = None
        self._files: tuple[list[tuple[Path, dict[str, Any]]], list[read.Unreadable]] | None = None
        self.unreadable: list[read.Unreadable] = []  # earlier result files that could not be read
        self.writes: dict[str, int] = {}  # path -> times written by this object (tests read it)

    # ------------------------------------------------------------------ filling
    def open_model(self, name: str, answer_file: str, records: Iterable[Record],
                   skipped: dict[str, int] | None = None) -> ModelResults:
        """The model's results, starting from its earlier file in this save path (if any)."""
        path = layout.results_file(self.path, name)
        found, bad = self.earlier_files()
        old: Any = next((d for p, d in found if p == path), None)
        if old is None:
            old = next((u for u in bad if u.path == path), None)
        res = self.models[name] = ModelResults.open(self.path, name, answer_file, records, earlier=old)
        res.skipped_categories = dict(skipped or {})
        self.opened.add(name)
        return res

    def add(self, model: str, family: str, category: str, records: list[Record], items: list[ItemScores],
            signatures: dict[str, dict[str, Any]], corpus: dict[str, float]) -> None:
        self.models[model].add(family, category, records, items, signatures, corpus)

    def add_battle(self, model_a: str, model_b: str, data: dict[str, Any]) -> Path:
        stem = battle_stem(model_a, model_b)
        self.battles[stem] = data
        return layout.battle_file(self.path, stem)

    def set_ranking(self, data: dict[str, Any]) -> Path:
        self.ranking = data
        return layout.ranking_file(self.path)

    def earlier_files(self) -> tuple[list[tuple[Path, dict[str, Any]]], list[read.Unreadable]]:
        """The result files the save path held before this run, parsed once per run: (those read with
        their content, those that could not be read)."""
        if self._files is None:
            self._files = read.read_results(self.path)
        return self._files

    def include_earlier(self) -> list[str]:
        """Models with a result file here that this run did not open (runs of one model at a time
        share a save path), so every output shows every model; a file that cannot be read is named
        in the log (and `unreadable`), never dropped silently. Returns the names added."""
        found = []
        files, unreadable = self.earlier_files()
        for path, data in files:
            if data["model"] in self.models:
                continue
            try:
                self.models[data["model"]] = ModelResults.from_dict(data)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                unreadable.append(read.Unreadable(path, f"{type(exc).__name__}: {exc}"))
                continue
            found.append(data["model"])
        files[:] = [(p, d) for p, d in files if not any(u.path == p for u in unreadable)]
        opened = {layout.results_file(self.path, m) for m in self.opened}
        for bad in unreadable:
            if bad.path not in opened and bad not in self.unreadable:
                self.unreadable.append(bad)
                self.log(f"warning: {bad}: not read, so not in this run's outputs (summary, comparisons, report)")
        return found

    def stamp(self, prefix: str, field: str, value: Any) -> None:
        """Add `field` to every signature whose key starts with `prefix` (results and battles), e.g.
        the judge check's verdict beside every GPT score."""
        for res in self.models.values():
            for key, sig in res.signatures.items():
                if key.startswith(prefix) and isinstance(sig, dict):
                    sig[field] = value
        for data in self.battles.values():
            if isinstance(data.get("signature"), dict):
                data["signature"][field] = value

    def check_signatures(self) -> list[dict[str, Any]]:
        """Drop earlier scores made another way (see ModelResults.signature_changes); log each change."""
        for res in self.models.values():
            for change in res.signature_changes():
                self.signature_changes.append(change)
                self.log(f"warning: {change['model']} {change['score']}: signature changed since an earlier run in "
                         f"this save path; {change['dropped_items']} earlier score(s) dropped, not mixed ("
                         + signature_diff(change["earlier"], change["now"], "earlier", "now") + ")")
        return self.signature_changes

    # ------------------------------------------------------------------ reading
    def results(self) -> list[ModelResults]:
        """Every model, in name order."""
        return [self.models[m] for m in sorted(self.models)]

    def result_dicts(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The result files' content, in name order (aggregates computed once per model); built once
        per run id: what the files hold is what every output reads."""
        if self._dicts is None or self._dicts[0] != run_id:
            self._dicts = (run_id, [res.to_dict(run_id if res.model in self.opened else None)
                                    for res in self.results()])
        return self._dicts[1]

    # ------------------------------------------------------------------ writing
    def _write(self, record: log_records.Record) -> Path:
        paths = write_run_log(self.path, [record])
        for path in paths:
            self.writes[str(path)] = self.writes.get(str(path), 0) + 1
        return paths[0]

    def write(self, run_id: str | None = None) -> dict[str, list[str]]:
        """Every result file, battle and the ranking, once. Returns the paths written."""
        files: dict[str, list[str]] = {"results": [], "battles": []}
        for res, data in zip(self.results(), self.result_dicts(run_id)):
            res.runs = data["runs"]
            files["results"].append(str(self._write(log_records.ModelResults.from_dict(data))))
        for stem, data in self.battles.items():
            files["battles"].append(str(self._write(log_records.Battle.from_dict(data, stem=stem))))
        if self.ranking is not None:
            files["ranking"] = [str(self._write(log_records.Ranking.from_dict(self.ranking)))]
        return files

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """manifest.json and runs/<run_id>.json, stamped with the layout version."""
        stamp_layout(manifest)
        self._write(log_records.Manifest.from_dict(manifest))
