"""AlpacaEval 2 in its own file formats: annotations and model outputs in, leaderboard rows out.

An annotations file (`results/<model>/<annotator>/annotations.json`) is a list of
`{instruction, output_1, generator_1, dataset, output_2, generator_2, annotator, preference}`:
output_1 is the baseline's answer (generator_1, e.g. gpt4_1106_preview), output_2 the model's.
`preference` is 1 when the baseline wins, 2 when the model wins, in between the judge's
probability (weighted annotators), 0 or 1.5 a draw, null when the judge gave nothing.

The raw columns follow AlpacaEval's `metrics/winrate.py` exactly: win_rate is the mean of
preference - 1 over valid preferences (a draw counts 0.5), standard_error its standard error
(ddof 1), n_wins / n_wins_base count preferences above / below 1.5, discrete_win_rate rounds each
preference to the nearest verdict first. All in percent, as AlpacaEval writes them. avg_length
is the mean number of characters of the model's outputs (Python string length, as pandas counts):
AlpacaEval takes it over model_outputs.json, which has every instruction, while its annotations
lack the rows it did not judge (empty outputs); so an instruction of the reference set that a file
has no row for counts as an empty answer.
length_controlled_winrate comes from `evaluate.stats.length_control` over the reference set (all
models read together); see that module for the method and what the reference set is for.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

import numpy as np

from ...core.errors import InputError
from ...core.io import read_structured
from ...core.records import Record
from ...stats.length_control import length_controlled_win_rates

COLUMNS = ("win_rate", "standard_error", "n_wins", "n_wins_base", "n_draws", "n_total", "discrete_win_rate",
           "avg_length", "length_controlled_winrate", "lc_standard_error")
EXTRA_COLUMNS = ("lc_method", "lc_alignment", "lc_reference_models", "lc_reference_set")
ALIGNMENTS = ("position", "instruction")
_REQUIRED = {"instruction": str, "output_1": str, "generator_1": str, "output_2": str, "generator_2": str}
_OPTIONAL = {"dataset": str, "annotator": str}


@dataclass(frozen=True)
class Annotation:
    """One judged pair: the baseline's answer (output_1), the model's (output_2), the preference
    (None when the judge gave none)."""

    instruction: str
    output_1: str
    output_2: str
    preference: float | None
    dataset: str = ""


@dataclass
class ModelAnnotations:
    """All annotations of one model (generator_2) against one baseline (generator_1)."""

    model: str
    baseline: str
    annotator: str
    source: str
    rows: list[Annotation] = field(default_factory=list)

    @property
    def is_baseline(self) -> bool:
        """The baseline judged against itself (AlpacaEval lists it at 50% by construction)."""
        return self.model == self.baseline


@dataclass(frozen=True)
class Leaderboard:
    """Rows (one dict per model: "model", COLUMNS, EXTRA_COLUMNS), sorted by LC win rate, and how the
    LC column was made."""

    rows: list[dict[str, Any]]
    baseline: str
    annotator: str
    lc_method: str
    alignment: str
    reference_models: tuple[str, ...]


# --- reading ----------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _preference(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if not _is_number(value):
        raise InputError(f"{where}: key 'preference': expected a number (1 = baseline wins, 2 = model wins, "
                         f"0 or 1.5 = draw) or null, got {type(value).__name__} {value!r}"[:300])
    value = float(value)
    if math.isnan(value):
        return None
    if not (value == 0 or 1 <= value <= 2):
        raise InputError(f"{where}: key 'preference': expected 0 (draw), a number from 1 to 2, or null; "
                         f"got {value!r}")
    return value


def _parse_annotations(data: Any, path: Path) -> list[ModelAnnotations]:
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of AlpacaEval annotations "
                         f"({{instruction, output_1, generator_1, output_2, generator_2, preference}}), "
                         f"got {type(data).__name__}")
    if not data:
        raise InputError(f"{path}: the annotations list is empty")
    models: dict[str, ModelAnnotations] = {}
    for i, row in enumerate(data):
        where = f"{path}: annotation {i}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object, got {type(row).__name__}")
        for key, kind in _REQUIRED.items():
            if key not in row:
                raise InputError(f"{where}: missing key '{key}'")
            if not isinstance(row[key], kind):
                raise InputError(f"{where}: key '{key}': expected a string, got {type(row[key]).__name__}")
        if "preference" not in row:
            raise InputError(f"{where}: missing key 'preference'")
        for key, kind in _OPTIONAL.items():
            if row.get(key) is not None and not isinstance(row[key], kind):
                raise InputError(f"{where}: key '{key}': expected a string, got {type(row[key]).__name__}")
        model, baseline = row["generator_2"], row["generator_1"]
        entry = models.get(model)
        if entry is None:
            entry = models[model] = ModelAnnotations(model=model, baseline=baseline,
                                                     annotator=row.get("annotator") or "", source=str(path))
        elif entry.baseline != baseline:
            raise InputError(f"{where}: key 'generator_1': {baseline!r}, but earlier annotations of {model!r} in "
                             f"this file are against {entry.baseline!r}; one baseline per model")
        elif (row.get("annotator") or "") != entry.annotator:
            raise InputError(f"{where}: key 'annotator': {row.get('annotator')!r}, but earlier annotations of "
                             f"{model!r} in this file are by {entry.annotator!r}; one annotator per model")
        entry.rows.append(Annotation(instruction=row["instruction"], output_1=row["output_1"],
                                     output_2=row["output_2"], preference=_preference(row["preference"], where),
                                     dataset=row.get("dataset") or ""))
    return list(models.values())


def _annotation_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"{path}: no such file or folder (expected an AlpacaEval annotations file, a folder of "
                         "them, or AlpacaEval's results/<model>/<annotator>/annotations.json layout)")
    nested = sorted(p for p in path.rglob("annotations.json") if p.is_file())
    files = nested or sorted(p for p in path.glob("*.json") if p.is_file())
    if not files:
        raise InputError(f"{path}: no annotations found (expected *.json files, or annotations.json files "
                         "below it as in AlpacaEval's results/<model>/<annotator>/ layout)")
    return files


def read_annotations(path: str | Path) -> list[ModelAnnotations]:
    """Every model's annotations under `path`: one annotations JSON file, a folder of such files
    (any names; the model is each file's generator_2), or AlpacaEval's results folder (every
    results/<model>/<annotator>/annotations.json below it). A model found twice is refused."""
    out: list[ModelAnnotations] = []
    seen: dict[str, str] = {}
    for file in _annotation_files(Path(path)):
        for entry in _parse_annotations(read_structured(file, "AlpacaEval annotations"), file):
            if entry.model in seen:
                raise InputError(f"{file}: annotations of model {entry.model!r} are also in {seen[entry.model]}; "
                                 "give each model once")
            seen[entry.model] = entry.source
            out.append(entry)
    return out


def read_model_outputs(path: str | Path) -> list[Record]:
    """AlpacaEval's model_outputs.json (`[{instruction, output, generator, dataset}]`) as Records:
    id = the row's position, category = dataset, `extra["generator"]` = the generator."""
    path = Path(path)
    data = read_structured(path, "AlpacaEval model outputs")
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of {{instruction, output, generator, dataset}}, "
                         f"got {type(data).__name__}")
    records = []
    for i, row in enumerate(data):
        where = f"{path}: output {i}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object, got {type(row).__name__}")
        for key in ("instruction", "output", "generator"):
            if key not in row:
                raise InputError(f"{where}: missing key '{key}'")
            if not isinstance(row[key], str):
                raise InputError(f"{where}: key '{key}': expected a string, got {type(row[key]).__name__}")
        if row.get("dataset") is not None and not isinstance(row["dataset"], str):
            raise InputError(f"{where}: key 'dataset': expected a string, got {type(row['dataset']).__name__}")
        records.append(Record(id=str(i), category=row.get("dataset") or "", instruction=row["instruction"],
                              output=row["output"], extra={"generator": row["generator"]}))
    return records


# --- AlpacaEval's raw metrics -----------------------------------------------------------------------
def head_to_head(preferences: Iterable[float | None]) -> dict[str, Any]:
    """AlpacaEval's `get_winrate`: win_rate, standard_error, n_wins, n_wins_base, n_draws, n_total,
    discrete_win_rate (percent). A preference of 0 is a draw (1.5); None is left out."""
    prefs = np.array([np.nan if p is None else p for p in preferences], dtype=float)
    prefs = np.where(prefs == 0, 1.5, prefs)
    valid = prefs[(prefs >= 1) & (prefs <= 2)] - 1
    n = valid.size
    discrete = np.where(prefs == 1.5, 1.5, np.round(prefs))  # numpy rounds half to even, as pandas does
    discrete = discrete[(discrete >= 1) & (discrete <= 2)] - 1
    return {
        "win_rate": float(valid.mean() * 100) if n else math.nan,
        "standard_error": float(valid.std(ddof=1) / math.sqrt(n) * 100) if n > 1 else math.nan,
        "n_wins": int((valid > 0.5).sum()),
        "n_wins_base": int((valid < 0.5).sum()),
        "n_draws": int((prefs == 1.5).sum()),
        "n_total": int(n),
        "discrete_win_rate": float(discrete.mean() * 100) if discrete.size else math.nan,
    }


# --- the leaderboard --------------------------------------------------------------------------------
def _keys(rows: Sequence[Annotation]) -> list[tuple[str, int]]:
    """(instruction, occurrence) per row: a repeated instruction pairs with its n-th copy elsewhere."""
    count: dict[str, int] = {}
    out = []
    for r in rows:
        count[r.instruction] = count.get(r.instruction, 0) + 1
        out.append((r.instruction, count[r.instruction]))
    return out


def check_reference_set(models: Sequence[ModelAnnotations]) -> None:
    """One baseline and one annotator across the set, each model once: LC pools the models' fits,
    which only means something against one baseline judged by one annotator."""
    if not models:
        raise InputError("no AlpacaEval annotations given")
    first = models[0]
    seen: dict[str, str] = {}
    for m in models:
        if m.model in seen:
            raise InputError(f"{m.source}: annotations of model {m.model!r} are also in {seen[m.model]}; "
                             "give each model once")
        seen[m.model] = m.source
        if m.baseline != first.baseline:
            raise InputError(f"{m.source}: model {m.model!r} is judged against {m.baseline!r}, but {first.source} "
                             f"against {first.baseline!r}: a leaderboard compares models against one baseline")
        if m.annotator != first.annotator:
            raise InputError(f"{m.source}: model {m.model!r} is judged by {m.annotator!r}, but {first.source} by "
                             f"{first.annotator!r}: a leaderboard compares models judged by one annotator")
        if not any(r.preference is not None for r in m.rows):
            raise InputError(f"{m.source}: model {m.model!r} has no usable preference (all null)")


def leaderboard(models: Sequence[ModelAnnotations], *, alignment: str = "position",
                reference: Collection[str] | None = None) -> Leaderboard:
    """AlpacaEval's leaderboard rows for `models`, which together form the LC reference set
    (`reference`: only these model names form it, the others are scored with its difficulty and
    slope prior without taking part in the fit: a leave-out check).

    alignment: which instruction difficulty a model's annotation gets in its LC fit.
    "position" (AlpacaEval's behaviour, default): AlpacaEval keys its difficulty by row position in
    the annotations file, so in a file that lacks a row (AlpacaEval does not annotate empty
    outputs) every later row gets its predecessor's difficulty; this is kept so that the numbers
    match the published ones. It applies only to files in the reference set's instruction order.
    "instruction": by instruction text, the corrected variant.
    """
    if alignment not in ALIGNMENTS:
        raise InputError(f"LC alignment: expected one of {', '.join(ALIGNMENTS)}, got {alignment!r}")
    check_reference_set(models)
    keys = [_keys(m.rows) for m in models]
    order: dict[tuple[str, int], int] = {}
    for ks in sorted(keys, key=len, reverse=True):  # the most complete file sets the instruction order
        for key in ks:
            order.setdefault(key, len(order))
    k, n = len(models), len(order)
    y = np.full((k, n), np.nan)
    len_model, len_base = np.full((k, n), np.nan), np.full((k, n), np.nan)
    item = np.tile(np.arange(n), (k, 1))
    for i, (m, ks) in enumerate(zip(models, keys)):
        cols = np.array([order[key] for key in ks])
        y[i, cols] = [np.nan if r.preference is None else (1.5 if r.preference == 0 else r.preference) - 1
                      for r in m.rows]
        len_model[i, cols] = [len(r.output_2) for r in m.rows]
        len_base[i, cols] = [len(r.output_1) for r in m.rows]
        if alignment == "position" and np.all(np.diff(cols) > 0):
            item[i, cols] = np.arange(len(cols))
    if reference is not None:
        unknown = sorted(set(reference) - {m.model for m in models})
        if unknown:
            raise InputError(f"reference models not among the annotations: {', '.join(unknown)}")
    ref = None if reference is None else np.array([m.model in set(reference) for m in models])
    lc = length_controlled_win_rates(y, len_model, len_base, is_baseline=np.array([m.is_baseline for m in models]),
                                     difficulty_item=item, reference=ref)
    names = tuple(models[i].model for i in lc.reference)
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12] if names else ""
    rows = []
    for i, m in enumerate(models):
        row: dict[str, Any] = {"model": m.model}
        row.update(head_to_head(r.preference for r in m.rows))
        row["avg_length"] = int(sum(len(r.output_2) for r in m.rows) / max(n, len(m.rows)))
        row["length_controlled_winrate"] = float(lc.win_rate[i])
        row["lc_standard_error"] = float(lc.standard_error[i])
        row.update(lc_method="baseline (50% by construction)" if m.is_baseline else lc.method,
                   lc_alignment=alignment, lc_reference_models=len(names), lc_reference_set=digest)
        rows.append(row)
    rows.sort(key=lambda r: -r["length_controlled_winrate"] if math.isfinite(r["length_controlled_winrate"])
              else math.inf)
    return Leaderboard(rows=rows, baseline=models[0].baseline, annotator=models[0].annotator, lc_method=lc.method,
                       alignment=alignment, reference_models=names)
