"""Every file of a save path as a typed record: what it holds, where it lives and its bytes.

The run log's content is declared here, as inspect_ai's `log/` declares `EvalLog` and `EvalSample`:
a writer elsewhere (a run's `SaveDir`, a merge, a family, generation, the judge check, a benchmark)
builds a record and hands it to `write_run_log` (`savepath.log`); it never names a path or
serialises a file itself. Each record knows

- its path under the save path (`paths(root)`, through `layout`'s functions; a record written to two
  places, the manifest and the judge check, names both),
- its bytes (`to_bytes()`), the same bytes the writers wrote before records existed (key order,
  indent, `ensure_ascii`, trailing newline), and
- its JSON Schema (`json_schema()`, through pydantic's `TypeAdapter`): `eval.py schema [KIND]`.

Top-level fields are typed; nested content that is open-ended (a result's items, a battle's games)
stays `dict[str, Any]`. A record built from a dict (`from_dict`) keeps the dict's key order and any
key it does not declare, so what is read and written again is unchanged. A benchmark's own files are
declared in its package and registered here (`register_record`), so this package names no benchmark.
`SCHEMA_VERSION` is the version of these declarations (printed in every schema).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..core import io as core_io
from .layout import (answers_manifest_file, battle_file, comparison_file, comparisons_csv,
                    corrected_file, judge_check_file, label_queue_file, manifest_file, pair_stem, ranking_file,
                    report_file, results_file, run_manifest_file, sageval_file, summary_csv)

SCHEMA_VERSION = 1

PATH_ONLY = {"path_only": True}  # a field that says where the record lives, not part of its content

R = TypeVar("R", bound="Record")

RECORD_KINDS: dict[str, type[Record]] = {}


def register_record(cls: type[R]) -> type[R]:
    """Make a record kind known to `eval.py schema` and the tests (a benchmark registers its own files)."""
    kind = cls.kind
    if kind in RECORD_KINDS and RECORD_KINDS[kind] is not cls:
        raise ValueError(f"record kind {kind!r} is declared twice: {RECORD_KINDS[kind].__qualname__} and "
                         f"{cls.__qualname__}")
    RECORD_KINDS[kind] = cls
    return cls


def json_bytes(data: Any) -> bytes:
    """A JSON file of the save path: two-space indent, UTF-8 (not escaped), a trailing newline; a lone
    surrogate written escaped rather than a crash."""
    return (json.dumps(core_io.clean_json(data), ensure_ascii=False, indent=2, default=core_io.json_default)
            + "\n").encode("utf-8", errors="backslashreplace")


def text_bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="backslashreplace")


@dataclass
class Record:
    """One file of a save path. Subclasses declare `kind`, their fields and `paths`."""

    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()  # keys left out of the file when their field is None
    APPEND: ClassVar[bool] = False  # lines appended to the file (FastChat's judgments), not the file replaced

    # ------------------------------------------------------------------ where and what
    def paths(self, root: Path) -> list[Path]:
        raise NotImplementedError

    def path(self, root: Path) -> Path:
        return self.paths(root)[0]

    def content(self) -> Any:
        """The file's JSON value: the fields in order (or the order of the dict it was built from),
        an optional field left out when None, then the keys it does not declare."""
        keys = self.__dict__.get("_keys")
        extra = self.__dict__.get("_extra") or {}
        own = [f.name for f in fields(self) if not f.metadata.get("path_only")]
        if keys is None:
            out = {n: getattr(self, n) for n in own if not (n in self.OPTIONAL and getattr(self, n) is None)}
            out.update(extra)
            return out
        return {k: (getattr(self, k) if k in own else extra[k]) for k in keys}

    def to_bytes(self) -> bytes:
        return json_bytes(self.content())

    # ------------------------------------------------------------------ from a file's value
    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any], **where: Any) -> R:
        """The record of a file's value (`where`: the path-only fields), keeping its key order and the
        keys it does not declare."""
        own = {f.name for f in fields(cls) if not f.metadata.get("path_only")}
        missing = [f.name for f in fields(cls) if f.name in own and f.name not in data
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"{cls.kind}: missing {', '.join(repr(m) for m in missing)}")
        rec = cls(**{k: v for k, v in data.items() if k in own}, **where)
        rec.__dict__["_keys"] = tuple(data)
        rec.__dict__["_extra"] = {k: v for k, v in data.items() if k not in own}
        return rec

    @classmethod
    def document(cls, data: bytes) -> Any:
        """A file's bytes as the value its JSON Schema describes."""
        return json.loads(data.decode("utf-8"))

    # ------------------------------------------------------------------ the schema
    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of the file (pydantic's, less the path-only fields)."""
        from pydantic import TypeAdapter

        schema = TypeAdapter(cls).json_schema()
        hidden = {f.name for f in fields(cls) if f.metadata.get("path_only")}
        for name in hidden:
            schema.get("properties", {}).pop(name, None)
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in hidden]
        return stamp_schema(cls, schema)


def stamp_schema(cls: type[Record], schema: dict[str, Any]) -> dict[str, Any]:
    schema["title"] = cls.kind
    schema["description"] = cls.description or " ".join((cls.__doc__ or "").split())
    schema["x-schema-version"] = SCHEMA_VERSION
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


@dataclass
class Rows(Record):
    """A file that is a list of rows (a JSON array, JSON lines or a CSV): `rows` is its content."""

    ROW: ClassVar[Any] = dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def content(self) -> Any:
        return list(self.rows)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        from pydantic import TypeAdapter

        return stamp_schema(cls, TypeAdapter(list[cls.ROW]).json_schema())  # type: ignore[name-defined]


@dataclass
class JsonLines(Rows):
    """One JSON value a line."""

    ENSURE_ASCII: ClassVar[bool] = False

    def to_bytes(self) -> bytes:
        return text_bytes("".join(json.dumps(r, ensure_ascii=self.ENSURE_ASCII) + "\n" for r in self.rows))

    @classmethod
    def document(cls, data: bytes) -> Any:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def csv_cell(value: Any) -> Any:
    """A number as the CSV files write it (6 significant digits); anything else as it is."""
    return f"{value:.6g}" if isinstance(value, float) else value


@dataclass
class CsvRows(Rows):
    """A CSV file: a header line, then one line per row (`FIELDS`, or `columns` when given)."""

    ROW: ClassVar[Any] = dict[str, Any]
    FIELDS: ClassVar[tuple[str, ...]] = ()
    LINE_END: ClassVar[str] = "\n"
    columns: list[str] | None = field(default=None, metadata=PATH_ONLY)

    def to_bytes(self) -> bytes:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(self.columns or self.FIELDS), lineterminator=self.LINE_END)
        writer.writeheader()
        for row in self.rows:
            writer.writerow(row)
        return text_bytes(buf.getvalue())

    @classmethod
    def document(cls, data: bytes) -> Any:
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        cell = {"anyOf": [{"type": "string"}, {"type": "null"}]}
        props = {name: cell for name in cls.FIELDS}
        return stamp_schema(cls, {"type": "array", "items": {"type": "object", "properties": props,
                                                        "additionalProperties": cell}})


# ---------------------------------------------------------------------- the run's files
@register_record
@dataclass
class ModelResults(Record):
    """results/<model>.json: one model's items, their scores, the signatures and the aggregates."""

    kind: ClassVar[str] = "results"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("panel",)
    schema: str
    model: str
    answer_file: str | None
    runs: list[str]
    signatures: dict[str, Any]
    aggregates: dict[str, Any]
    skipped_categories: dict[str, Any] | list[Any]
    panel: dict[str, Any] | None = None
    items: list[dict[str, Any]] = field(default_factory=list)

    def paths(self, root: Path) -> list[Path]:
        return [results_file(root, self.model)]


@register_record
@dataclass
class Battle(Record):
    """battles/<a>__vs__<b>.json: two models' battle, its games and its summary."""

    kind: ClassVar[str] = "battle"
    summary: dict[str, Any]  # model_a, model_b, wins / ties / losses of model_a, invalid, win_rate and its interval
    signature: dict[str, Any] | None = None  # how the verdicts were made (judge, prompt, orders)
    items: list[dict[str, Any]] = field(default_factory=list)  # each item's verdicts
    stem: str = field(default="", metadata=PATH_ONLY)

    def paths(self, root: Path) -> list[Path]:
        s = self.summary
        return [battle_file(root, self.stem or pair_stem(s["model_a"], s["model_b"]))]


@register_record
@dataclass
class Ranking(Record):
    """battles/ranking.json: the models ranked from their battles (Bradley-Terry)."""

    kind: ClassVar[str] = "ranking"
    schema: str
    n_items: int | None = None

    def paths(self, root: Path) -> list[Path]:
        return [ranking_file(root)]


@register_record
@dataclass
class Comparison(Record):
    """comparisons/<a>__vs__<b>.json: two models' scores compared, one row per category and score."""

    kind: ClassVar[str] = "comparison"
    schema: str
    model_a: str
    model_b: str
    method: dict[str, Any] | str | None
    rows: list[dict[str, Any]]

    def paths(self, root: Path) -> list[Path]:
        return [comparison_file(root, self.model_a, self.model_b)]


COMPARISON_FIELDS = ("model_a", "model_b", "category", "score", "role", "scale_low", "scale_high", "n", "dropped",
                     "mean_a", "mean_b", "diff", "interval_low", "interval_high", "level", "simultaneous",
                     "interval_note", "p", "p_adj", "m", "test", "detectable", "effect_size", "verdict", "better")


@register_record
@dataclass
class ComparisonsCsv(CsvRows):
    """comparisons/comparisons.csv: every comparison's rows, one line per pair, category and score."""

    kind: ClassVar[str] = "comparisons_csv"
    FIELDS: ClassVar[tuple[str, ...]] = COMPARISON_FIELDS

    def to_bytes(self) -> bytes:  # a missing value is an empty cell
        return CsvRows(rows=[{k: "" if v is None else csv_cell(v) for k, v in r.items()} for r in self.rows],
                       columns=list(self.FIELDS)).to_bytes()

    def paths(self, root: Path) -> list[Path]:
        return [comparisons_csv(root)]


SUMMARY_FIELDS = ("model", "category", "family", "metric", "mean", "std", "ci95_low", "ci95_high", "n", "invalid",
                  "corpus")


@register_record
@dataclass
class SummaryCsv(CsvRows):
    """summary.csv: one line per model, category (and "(all)") and score: mean, std, interval, n."""

    kind: ClassVar[str] = "summary_csv"
    FIELDS: ClassVar[tuple[str, ...]] = SUMMARY_FIELDS

    def to_bytes(self) -> bytes:
        return CsvRows(rows=[{k: csv_cell(v) for k, v in r.items()} for r in self.rows],
                       columns=list(self.FIELDS)).to_bytes()

    def paths(self, root: Path) -> list[Path]:
        return [summary_csv(root)]


@register_record
@dataclass
class JudgeCheck(Record):
    """judge_checks/<key>.json (the store, one per judge and prompts) and judge_check.json (the last check)."""

    kind: ClassVar[str] = "judge_check"
    schema: str
    key: str
    judge: dict[str, Any]
    prompts: dict[str, Any]
    labelled: dict[str, Any] | None = None
    sanity: dict[str, Any] | None = None
    trustworthy: bool | None = None
    verdict_text: str | None = None
    created: str | None = None

    def paths(self, root: Path) -> list[Path]:
        return [judge_check_file(root, self.key), judge_check_file(root)]


@register_record
@dataclass
class SagevalSummary(Record):
    """sageval/<model>.json: SAGEval's summary by category (a merge keeps each shard's, with a note)."""

    kind: ClassVar[str] = "sageval"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("model", "by_category", "shards", "note")
    model: str | None = None
    by_category: dict[str, Any] | None = None
    shards: dict[str, Any] | None = None
    note: str | None = None
    name: str = field(default="", metadata=PATH_ONLY)  # the file's stem when `model` is not in the content

    def paths(self, root: Path) -> list[Path]:
        return [sageval_file(root, self.model or self.name)]


@dataclass
class Header(Record):
    """The keys of every manifest (`manifest.HEADER_KEYS`); what else a manifest says comes after."""

    run_id: str
    status: str
    config: dict[str, Any] | None = None
    config_hash: str | None = None
    config_file: str | None = None
    argv: list[str] | None = None
    versions: dict[str, str] | None = None
    started: str | None = None
    finished: str | None = None
    models: list[dict[str, Any] | str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    layout: int | None = None


@register_record
@dataclass
class Manifest(Header):
    """manifest.json and runs/<run_id>.json: the run log's header (who ran what, when, with which versions)."""

    kind: ClassVar[str] = "manifest"
    plan: dict[str, Any] | None = None

    def paths(self, root: Path) -> list[Path]:
        return [manifest_file(root), run_manifest_file(root, self.run_id)]


@dataclass
class ManifestCopy(Record):
    """A shard's runs/<run_id>.json in the merged save path, byte for byte (a `manifest` record as written)."""

    kind: ClassVar[str] = "manifest"
    source: Path = field(default=Path(), metadata=PATH_ONLY)

    def paths(self, root: Path) -> list[Path]:
        return [run_manifest_file(root, Path(self.source).stem)]

    def to_bytes(self) -> bytes:
        return Path(self.source).read_bytes()


@register_record
@dataclass
class GenerationManifest(Header):
    """<answer file>.generation.json: a generation's manifest beside its answer file (signature, counts,
    usage, the ids missing with why)."""

    kind: ClassVar[str] = "generation"
    name: str | None = None
    answers: str = ""  # the answer file (root: its folder)
    signature: dict[str, Any] | None = None
    counts: dict[str, Any] | None = None
    unreachable: Any = None
    missing: list[dict[str, Any]] = field(default_factory=list)

    def paths(self, root: Path) -> list[Path]:
        return [answers_manifest_file(Path(root) / Path(self.answers).name)]


@register_record
@dataclass
class GeneratedAnswers(Rows):
    """A generated answer file (answers/<name>.jsonl, a benchmark's model_answer/ or model_outputs/): the
    model's answers in the question file's own format (`text`, as the benchmark's format serialised it),
    a JSON list or one JSON line per answer."""

    kind: ClassVar[str] = "answers"
    text: str = field(default="", metadata=PATH_ONLY)
    name: str = field(default="", metadata=PATH_ONLY)  # the file's name (root: its folder)
    source: Path | None = field(default=None, metadata=PATH_ONLY)  # an answer file kept as given, byte for byte

    def paths(self, root: Path) -> list[Path]:
        return [Path(root) / self.name]

    def to_bytes(self) -> bytes:
        return Path(self.source).read_bytes() if self.source is not None else text_bytes(self.text)

    @classmethod
    def document(cls, data: bytes) -> Any:
        text = data.decode("utf-8")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return [json.loads(line) for line in text.splitlines() if line.strip()]


@register_record
@dataclass
class Report(Record):
    """report.html: the run's report, one page (data inlined)."""

    kind: ClassVar[str] = "report"
    html: str = ""
    file: Path | None = field(default=None, metadata=PATH_ONLY)  # `eval.py report --out`: elsewhere

    def paths(self, root: Path) -> list[Path]:
        return [Path(self.file) if self.file is not None else report_file(root)]

    def to_bytes(self) -> bytes:
        return text_bytes(self.html)

    @classmethod
    def document(cls, data: bytes) -> Any:
        return {"html": data.decode("utf-8")}


@register_record
@dataclass
class Chart(Record):
    """charts/<family>/<name>.png: a chart of the run (a category's bars, the overview, a battle), as PNG."""

    kind: ClassVar[str] = "chart"
    figure: Any = field(default=None, metadata=PATH_ONLY)  # a matplotlib figure
    file: Path = field(default=Path(), metadata=PATH_ONLY)  # chart_file's path

    def paths(self, root: Path) -> list[Path]:
        return [Path(root) / self.file]

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png")
        return buf.getvalue()

    @classmethod
    def document(cls, data: bytes) -> Any:
        import base64

        return base64.b64encode(data).decode("ascii")

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return stamp_schema(cls, {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png"})


# ---------------------------------------------------------------------- the labels (savepath.labels writes them)
# labels.jsonl's record, `LabelLines`, is declared beside the labels it holds (`savepath.labels`)


@register_record
@dataclass
class LabelQueue(JsonLines):
    """labels/queue.jsonl: each label queue's definition (its drawn sequence) and the draws handed out."""

    kind: ClassVar[str] = "label_queue"
    APPEND: ClassVar[bool] = True

    def paths(self, root: Path) -> list[Path]:
        return [label_queue_file(root)]


@register_record
@dataclass
class Corrected(Record):
    """labels/corrected.json: the label-corrected estimates, rewritten whenever labels change."""

    kind: ClassVar[str] = "corrected"

    def paths(self, root: Path) -> list[Path]:
        return [corrected_file(root)]


# ---------------------------------------------------------------------- a benchmark's own files
@dataclass
class BenchmarkFile(Record):
    """A file a benchmark keeps in its own layout (FastChat's, Arena-Hard's, AlpacaEval's): the benchmark
    declares the record in its package and names the file (`file`, under the save path)."""

    file: Path = field(default=Path(), metadata=PATH_ONLY, kw_only=True)

    def paths(self, root: Path) -> list[Path]:
        return [Path(root) / self.file]


@dataclass
class BenchmarkLines(BenchmarkFile, JsonLines):
    """A benchmark's JSON-lines file (its judgments), at `file`."""


@dataclass
class BenchmarkCsv(BenchmarkFile, CsvRows):
    """A benchmark's CSV file (its leaderboard), at `file`."""


@dataclass
class BenchmarkRows(BenchmarkFile, Rows):
    """A benchmark's JSON file that is a list of rows (AlpacaEval's annotations), at `file`."""


def record_kinds() -> dict[str, type[Record]]:
    """Every kind declared so far, by name (a benchmark's once its package is loaded: `eval.py schema`
    loads them first)."""
    return dict(sorted(RECORD_KINDS.items()))
