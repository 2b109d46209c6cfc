"""A person's verdicts on a run's items: `labels.jsonl` in the save path, one JSON line per label,
only ever appended (`eval.py view` and `eval.py label` write them; `eval.py judge-check --labels`, the
label-corrected estimates and the viewer read them). The label queue's state (`labels/queue.jsonl`:
each queue's draws, each draw handed out) and the corrected result (`labels/corrected.json`) live beside.

Schema 2 (`llm-eval-label/2`; files of schema 1 are read as they are, annotator "anonymous", off the
queue): a battle label is {id, category, model_a, model_b, verdict A|B|tie, time, note, annotator,
queue}; a rating label is {"kind": "rating", id, category, model, metric, score, annotator, queue,
time}. `queue` is null for a label given off the queue, else the draw that handed the item out:
{"seed", "design": "uniform"|"active", "draw": its position in the queue's sequence, "p": that draw's
selection probability, "kind", "metric"}; the corrected estimate uses only labels of drawn items
(docs/labels.md says why).

Why appended and not rewritten through the atomic writer: two browser tabs (or two viewers) may label
the same run at once, and a rewrite would keep only one of them. Each label is one `os.write` of the
whole line on a descriptor opened with O_APPEND, under an exclusive lock on the file, then fsync: a
killed writer leaves either the whole line or none of it. A line that cannot be read (a partial
trailing line from an older writer or a copy cut short, a hand edit) is named with its line number and
skipped, never fatal; the next append starts on a fresh line so it is not glued to such a fragment.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Union

from ..core.clock import iso
from .layout import corrected_file, label_queue_file, labels_file
from .records import Corrected, JsonLines, register_record, stamp_schema
from .write import write_bytes

LABEL_SCHEMA = "llm-eval-label/2"
READ_SCHEMAS = ("llm-eval-label/1", LABEL_SCHEMA)
QUEUE_SCHEMA = "llm-eval-label-queue/1"
VERDICTS = ("A", "B", "tie")  # model_a better, model_b better, a tie: as a battle's item verdicts
DESIGNS = ("uniform", "active")
KINDS = ("battle", "rating")
ANONYMOUS = "anonymous"
MAX_NOTE = 2000  # characters of a note; a longer one is refused, not cut
MAX_FIELD = 500  # characters of an id, a category or a model name


class LabelError(ValueError):
    """A label that cannot be stored (the message says which field and what was expected)."""


@dataclass(frozen=True)
class QueueDraw:
    """The queue's draw that handed a label's item out: which queue (kind, design, seed, metric filter),
    its position in the queue's sequence and that draw's selection probability."""

    seed: int
    design: str
    draw: int
    p: float
    kind: str = "battle"
    metric: str | None = None

    @property
    def key(self) -> str:
        """The queue's name: one per kind, design, seed and metric filter."""
        return queue_key(self.kind, self.design, self.seed, self.metric)

    def to_dict(self) -> dict[str, Any]:
        out = {"seed": self.seed, "design": self.design, "draw": self.draw, "p": self.p, "kind": self.kind}
        if self.metric is not None:
            out["metric"] = self.metric
        return out


def queue_key(kind: str, design: str, seed: int, metric: str | None = None) -> str:
    return f"{kind}/{design}/{seed}" + (f"/{metric}" if metric else "")


@dataclass
class Label:
    """One verdict of a person on one item of a pair of models."""

    id: str
    category: str
    model_a: str
    model_b: str
    verdict: str  # "A", "B" or "tie", for model_a and model_b as named here
    time: str = ""
    note: str = ""
    run_id: str | None = None
    schema: str = LABEL_SCHEMA
    annotator: str = ANONYMOUS
    queue: QueueDraw | None = None

    kind = "battle"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["queue"] = self.queue.to_dict() if self.queue else None
        if out["run_id"] is None:
            del out["run_id"]
        return out


@dataclass
class RatingLabel:
    """One score of a person on one model's answer to one item, on a GPT metric's scale."""

    id: str
    category: str
    model: str
    metric: str  # the metric's name as the run's score keys have it after "GPT/" ("correctness")
    score: float
    time: str = ""
    note: str = ""
    run_id: str | None = None
    schema: str = LABEL_SCHEMA
    annotator: str = ANONYMOUS
    queue: QueueDraw | None = None

    kind = "rating"

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": "rating", **asdict(self)}
        out["queue"] = self.queue.to_dict() if self.queue else None
        if out["run_id"] is None:
            del out["run_id"]
        return out


AnyLabel = Union[Label, RatingLabel]


@dataclass
class LabelFile:
    """`labels.jsonl` as read: the battle labels and the rating labels, each in file order, and a line
    per line that could not be read."""

    path: Path
    labels: list[Label] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ratings: list[RatingLabel] = field(default_factory=list)


def _text(value: Any, name: str, *, empty: bool = False, limit: int = MAX_FIELD) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise LabelError(f'"{name}": expected {"a" if empty else "a non-empty"} string, got {value!r:.80}')
    if len(value) > limit:
        raise LabelError(f'"{name}": {len(value)} characters, at most {limit}')
    return value


def check_queue(value: Any) -> QueueDraw | None:
    """The `queue` field: null (off the queue) or a draw of a queue, every key checked."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise LabelError(f'"queue": expected null (off the queue) or an object {{seed, design, draw, p}}, '
                         f'got {value!r:.80}')
    seed, draw, p = value.get("seed"), value.get("draw"), value.get("p")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise LabelError(f'"queue.seed": expected an integer, got {seed!r:.40}')
    if value.get("design") not in DESIGNS:
        raise LabelError(f'"queue.design": expected one of {", ".join(DESIGNS)}, got {value.get("design")!r:.40}')
    if not isinstance(draw, int) or isinstance(draw, bool) or draw < 0:
        raise LabelError(f'"queue.draw": expected an integer >= 0, got {draw!r:.40}')
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 < float(p) <= 1.0:
        raise LabelError(f'"queue.p": expected the draw\'s probability, a number in (0, 1], got {p!r:.40}')
    kind = value.get("kind", "battle")
    if kind not in KINDS:
        raise LabelError(f'"queue.kind": expected one of {", ".join(KINDS)}, got {kind!r:.40}')
    metric = value.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise LabelError(f'"queue.metric": expected a metric name or null, got {metric!r:.40}')
    return QueueDraw(seed=seed, design=value["design"], draw=draw, p=float(p), kind=kind, metric=metric)


def _common(data: dict[str, Any]) -> dict[str, Any]:
    schema = data.get("schema", LABEL_SCHEMA)
    if schema not in READ_SCHEMAS:
        raise LabelError(f'"schema": expected one of {", ".join(READ_SCHEMAS)}, got {schema!r:.60}')
    annotator = data.get("annotator", ANONYMOUS)
    return {"id": _text(data.get("id"), "id"), "category": _text(data.get("category", ""), "category", empty=True),
            "time": _text(data.get("time", ""), "time", empty=True),
            "note": _text(data.get("note", "") or "", "note", empty=True, limit=MAX_NOTE),
            "run_id": data.get("run_id") if isinstance(data.get("run_id"), str) else None,
            "annotator": _text(ANONYMOUS if annotator is None else annotator, "annotator"),
            "queue": check_queue(data.get("queue")), "schema": LABEL_SCHEMA}


def check_label(data: Any) -> AnyLabel:
    """A label from a JSON object, every field checked (LabelError naming the field otherwise): a rating
    label when `"kind": "rating"`, else a battle label (schema 1 lines have no kind, annotator or queue)."""
    if not isinstance(data, dict):
        raise LabelError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind", "battle")
    if kind not in KINDS:
        raise LabelError(f'"kind": expected one of {", ".join(KINDS)}, got {kind!r:.40}')
    if kind == "rating":
        score = data.get("score")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(float(score)):
            raise LabelError(f'"score": expected a number on the metric\'s scale, got {score!r:.40}')
        return RatingLabel(model=_text(data.get("model"), "model"), metric=_text(data.get("metric"), "metric"),
                           score=float(score), **_common(data))
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        raise LabelError(f'"verdict": expected one of {", ".join(VERDICTS)}, got {verdict!r:.40}')
    label = Label(model_a=_text(data.get("model_a"), "model_a"), model_b=_text(data.get("model_b"), "model_b"),
                  verdict=verdict, **_common(data))
    if label.model_a == label.model_b:
        raise LabelError(f'"model_a" and "model_b" are both "{label.model_a}"; a label compares two models')
    return label


def _append_lines(path: Path, lines: Iterable[dict[str, Any]]) -> None:
    """Append JSON lines to `path` as one os.write under an exclusive lock, then fsync (the module
    docstring says why); a fragment without its line end before them gets one first."""
    data = b"".join((json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
        "utf-8", errors="backslashreplace") for x in lines)
    if not data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)  # read: the last byte
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a fragment without its line end: start afresh
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):  # a full disk: say so rather than leave a line that looks whole
            raise OSError(f"{path}: wrote {written} of {len(data)} bytes of labels (disk full?)")
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock


def append_labels(root: Path, items: Iterable[dict[str, Any]]) -> list[AnyLabel]:
    """Check every label first (LabelError naming the label's position and field: nothing written),
    stamp the time where there is none, then append them all in one write. Returns them as stored."""
    stamp = iso()
    out = []
    for i, data in enumerate(items, 1):
        try:
            out.append(check_label({**data, "time": data.get("time") or stamp}))
        except LabelError as exc:
            raise LabelError(f"label {i}: {exc}") from None
    _append_lines(labels_file(root), (lab.to_dict() for lab in out))
    return out


def append_label(root: Path, data: dict[str, Any]) -> AnyLabel:
    """Check `data`, stamp the time when it has none, and append it to `labels.jsonl` as one line:
    one os.write under an exclusive lock, then fsync. Returns the label as stored."""
    label = check_label({**data, "time": data.get("time") or iso()})
    _append_lines(labels_file(root), [label.to_dict()])
    return label


def _json_lines(path: Path, problems: list[str]) -> Iterable[tuple[int, Any]]:
    """(line number, parsed JSON) of each readable line of a JSONL file; what cannot be read is named."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        problems.append(f"{path}: cannot be read ({type(exc).__name__}: {exc})")
        return
    lines = raw.split(b"\n")
    for number, chunk in enumerate(lines, 1):
        if not chunk.strip():
            continue
        last = number == len(lines)  # no line end after it: a write cut short
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{path} line {number}: not UTF-8 ({exc.reason}); skipped")
            continue
        try:
            yield number, json.loads(text)
        except json.JSONDecodeError as exc:
            why = ("cut short: the last line has no line end (a write was interrupted)" if last
                   else f"not JSON ({exc.msg} at column {exc.colno})")
            problems.append(f"{path} line {number}: {why}; skipped")


def read_labels(root: Path) -> LabelFile:
    """Every label of `labels.jsonl` in file order (none when the file is absent): battle labels in
    `labels`, rating labels in `ratings`; a line that is not a label (not JSON, cut short, a field
    missing or wrong) is named in `problems` and skipped."""
    path = labels_file(root)
    out = LabelFile(path=path)
    for number, data in _json_lines(path, out.problems):
        try:
            label = check_label(data)
        except LabelError as exc:
            out.problems.append(f"{path} line {number}: not a label: {exc}; skipped")
            continue
        (out.ratings if isinstance(label, RatingLabel) else out.labels).append(label)
    return out


# --- the label queue's state -------------------------------------------------------------------------
@dataclass
class QueueState:
    """One queue as stored: its units (battle: [id, category, model_a, model_b]; rating: [id, category,
    model, metric]), each unit's selection probability `p`, the drawn sequence of unit indices and the
    draws handed out so far (draw position -> annotator)."""

    kind: str
    design: str
    seed: int
    metric: str | None
    units: list[list[str]]
    p: list[float]
    draws: list[int]
    handed: dict[int, list[str]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return queue_key(self.kind, self.design, self.seed, self.metric)

    def definition(self) -> dict[str, Any]:
        return {"schema": QUEUE_SCHEMA, "queue": self.key, "kind": self.kind, "design": self.design,
                "seed": self.seed, "metric": self.metric, "units": self.units, "p": self.p, "draws": self.draws}


def read_queues(root: Path, problems: list[str] | None = None) -> dict[str, QueueState]:
    """Every queue of the save path, by key, with the draws handed out ({} when there is none)."""
    problems = [] if problems is None else problems
    path = label_queue_file(root)
    out: dict[str, QueueState] = {}
    for number, data in _json_lines(path, problems):
        if not isinstance(data, dict) or not isinstance(data.get("queue"), str):
            problems.append(f"{path} line {number}: not a queue line; skipped")
            continue
        key = data["queue"]
        if "draws" in data:
            if key in out:
                continue  # the first definition holds: a second writer's copy of the same queue
            try:
                out[key] = QueueState(kind=data["kind"], design=data["design"], seed=int(data["seed"]),
                                      metric=data.get("metric"), units=[list(map(str, u)) for u in data["units"]],
                                      p=[float(x) for x in data["p"]], draws=[int(x) for x in data["draws"]])
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(f"{path} line {number}: a queue definition without {exc}; skipped")
        elif isinstance(data.get("handed"), int) and key in out:
            out[key].handed.setdefault(data["handed"], []).append(str(data.get("annotator") or ANONYMOUS))
        else:
            problems.append(f"{path} line {number}: not a queue line; skipped")
    return out


def write_queue(root: Path, queue: QueueState) -> None:
    """A new queue's definition, appended (the first definition of a key is the one that holds)."""
    _append_lines(label_queue_file(root), [queue.definition()])


def record_handed(root: Path, queue: QueueState, draws: Iterable[int], annotator: str) -> None:
    """Note that these draws of the queue were handed out to `annotator` (their labels are then on the queue)."""
    stamp = iso()
    _append_lines(label_queue_file(root), ({"queue": queue.key, "handed": int(d), "annotator": annotator,
                                            "time": stamp} for d in draws))
    for d in draws:
        queue.handed.setdefault(int(d), []).append(annotator)


def write_corrected(root: Path, result: dict[str, Any]) -> Path:
    """The label-corrected estimates (`judgecheck.corrected`), rewritten whenever labels change."""
    record = Corrected.from_dict(result)
    return write_bytes(record.path(root), record.to_bytes())


@register_record
@dataclass
class LabelLines(JsonLines):
    """labels.jsonl: a person's verdicts (battle) and scores (rating), one JSON line each (appended by
    `append_labels` under a lock, each label checked first)."""

    kind: ClassVar[str] = "labels"
    APPEND: ClassVar[bool] = True

    def paths(self, root: Path) -> list[Path]:
        return [labels_file(root)]

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        from pydantic import TypeAdapter

        return stamp_schema(cls, TypeAdapter(list[AnyLabel]).json_schema())


def read_corrected(root: Path) -> dict[str, Any] | None:
    """The stored label-corrected estimates (None when absent or unreadable: they are recomputed from the labels)."""
    try:
        data = json.loads(corrected_file(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
