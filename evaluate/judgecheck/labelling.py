"""Storing a person's labels given outside the viewer (`eval.py label --set / --import`, the Python API's
`add_labels`): each label checked against the run, placed on the queue when the queue handed its item out,
all stored in one write or none, and the corrected result rewritten (`labels/corrected.json`).

Why all or none: a script that sends twenty labels and gets an error on the seventh must be able to fix
it and send the twenty again; a half-taken batch would leave it guessing which ones count. Every error
names the label (its position and id), its field and what was expected, and nothing is written.

A label is *on the queue* when the queue handed its item (and pair, or model and metric) out to its
annotator (`queue.queue_for`); otherwise it is stored off the queue and said so: it counts for agreement
and kappa, not in the corrected estimate. An imported label may say how its item was sampled, as a
`queue` object {seed, design, draw} (or CSV columns queue_seed, queue_design, queue_draw): the queue of that
seed and design draws the same sequence here, so a draw that names this label's item is a real draw and
the label is on the queue (the draw is recorded as handed out); a draw naming another item is refused.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import InputError
from ..savepath.labels import (ANONYMOUS, DESIGNS, VERDICTS, AnyLabel, LabelError, QueueDraw, RatingLabel,
                               append_labels, check_label, read_queues, record_handed, write_corrected)
from ..savepath.log import NoResults, RunLog, read_run_log
from .queue import battle_units, gpt_metrics, label_unit, open_queue, queue_for, rating_units, unit_key


@dataclass
class Stored:
    """What `add_labels` stored: the labels as written, and per label a line saying on or off the queue."""

    labels: list[AnyLabel] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    corrected: dict[str, Any] | None = None

    @property
    def on_queue(self) -> int:
        return sum(lab.queue is not None for lab in self.labels)


def _log(root: Path) -> RunLog:
    try:
        return read_run_log(root)
    except NoResults as exc:
        raise InputError(f"{root}: no run to label: {exc}") from None


def _name(i: int, data: Mapping[str, Any], source: str) -> str:
    return f"{source} {i}" + (f" (item {data.get('id')!r})" if isinstance(data, Mapping) and data.get("id") else "")


class _Run:
    """The run's items, for checking labels: battle items by pair, GPT scores by (model, metric)."""

    def __init__(self, log: RunLog):
        self.battles: dict[tuple[str, str], dict[str, list[str]]] = {}
        for unit, _ in battle_units(log):
            self.battles.setdefault((unit[2], unit[3]), {}).setdefault(unit[0], []).append(unit[1])
        self.scales = gpt_metrics(log)
        self.rated: dict[tuple[str, str], dict[str, list[str]]] = {}
        for unit, _ in rating_units(log):
            self.rated.setdefault((unit[2], unit[3]), {}).setdefault(unit[0], []).append(unit[1])
        self.models = sorted({*log.models, *(m for p in self.battles for m in p)})

    def battle(self, data: dict[str, Any]) -> dict[str, Any]:
        """The label with its pair and category filled in from the run (LabelError naming the field)."""
        item = str(data.get("id", ""))
        a, b = data.get("model_a"), data.get("model_b")
        if not self.battles:
            raise LabelError('"verdict": the run has no battle verdicts (battles/), so no battle label fits it')
        if a is None and b is None:
            having = [p for p, items in self.battles.items() if item in items]
            if len(having) != 1:
                raise LabelError('"pair": ' + (f"item {item!r} is in {len(having)} battles ("
                                 + "; ".join(f"{x},{y}" for x, y in having) + "); give --pair MODEL_A,MODEL_B"
                                 if having else f"no battle of the run has item {item!r}"))
            a, b = having[0]
        for name, m in (("model_a", a), ("model_b", b)):
            if m not in self.models:
                raise LabelError(f'"{name}": expected a model of the run ({", ".join(self.models)}), got {m!r:.80}')
        items = self.battles.get((a, b)) or self.battles.get((b, a))
        if items is None:
            raise LabelError(f'"pair": the run has no battle of {a!r} and {b!r} (it has '
                             + "; ".join(f"{x},{y}" for x, y in self.battles) + ")")
        return {**data, "model_a": a, "model_b": b, "category": self._category(data, items.get(item), item,
                                                                               f"the battle of {a!r} and {b!r}")}

    def rating(self, data: dict[str, Any]) -> dict[str, Any]:
        metric, model, score = data.get("metric"), data.get("model"), data.get("score")
        if metric not in self.scales:
            raise LabelError(f'"metric": expected a GPT metric of the run ({", ".join(sorted(self.scales)) or "none"}),'
                             f" got {metric!r:.80}")
        if model not in self.models:
            raise LabelError(f'"model": expected a model of the run ({", ".join(self.models)}), got {model!r:.80}')
        lo, hi = self.scales[metric]
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not lo <= float(score) <= hi:
            raise LabelError(f'"score": expected a number on {metric}\'s scale {lo:g}-{hi:g}, got {score!r:.40}')
        items = (self.rated.get((model, metric)) or {}).get(str(data.get("id", "")))
        return {**data, "category": self._category(data, items, str(data.get("id")),
                                                   f"{model!r}'s scores on {metric}")}

    @staticmethod
    def _category(data: Mapping[str, Any], cats: list[str] | None, item: str, where: str) -> str:
        if not cats:
            raise LabelError(f'"id": no item {item!r} in {where}')
        given = data.get("category")
        if given is not None and given != "":
            if given not in cats:
                raise LabelError(f'"category": item {item!r} of {where} is in {", ".join(map(repr, cats))}, '
                                 f"not {given!r:.80}")
            return str(given)
        if len(cats) > 1:
            raise LabelError(f'"category": item {item!r} is in several categories ({", ".join(map(repr, cats))}); '
                             "give the category")
        return cats[0]


def _sampled(root: Path, lab: AnyLabel, q: Mapping[str, Any]) -> tuple[Any, int, QueueDraw]:
    """An imported label's own draw, checked against the queue of that seed and design (built here when
    absent: the same seed draws the same sequence). LabelError when the draw is another item."""
    kind = "rating" if isinstance(lab, RatingLabel) else "battle"
    design, seed, draw = q.get("design"), q.get("seed"), q.get("draw")
    if design not in DESIGNS:
        raise LabelError(f'"queue.design": expected one of {", ".join(DESIGNS)}, got {design!r:.40}')
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise LabelError(f'"queue.seed": expected an integer, got {seed!r:.40}')
    if not isinstance(draw, int) or isinstance(draw, bool) or draw < 0:
        raise LabelError(f'"queue.draw": expected an integer >= 0, got {draw!r:.40}')
    queue = open_queue(root, kind=kind, design=design, seed=seed, metric=q.get("metric"))
    if draw >= len(queue.draws):
        raise LabelError(f'"queue.draw": the {design} queue of seed {seed} has {len(queue.draws)} draws, not {draw + 1}')
    unit = queue.units[queue.draws[draw]]
    if unit_key(kind, unit) != label_unit(lab):
        raise LabelError(f'"queue.draw": draw {draw} of the {design} queue of seed {seed} is item {unit[0]!r} '
                         f"({', '.join(unit[1:])}), not this label's item {lab.id!r}")
    return queue, draw, QueueDraw(seed=seed, design=design, draw=draw, p=queue.p[queue.draws[draw]], kind=kind,
                                  metric=queue.metric)


def add_labels(root: Path, labels: Iterable[Mapping[str, Any]], *, annotator: str | None = None,
               source: str = "label", log: RunLog | None = None, update: bool = True) -> Stored:
    """Check every label against the run, place each on the queue or off it, and store them all in one write
    (InputError naming the label, its field and what was expected: nothing written). `annotator` fills
    labels that name none; `source` names a label in errors ("label 3", "FILE line 3"). The corrected
    estimates are rewritten to `labels/corrected.json` unless `update` is False."""
    root = Path(root)
    run = _Run(log or _log(root))
    queues = read_queues(root)
    checked: list[tuple[AnyLabel, Any]] = []
    for i, raw in enumerate(labels, 1):
        data = dict(raw) if isinstance(raw, Mapping) else raw
        try:
            if not isinstance(data, dict):
                raise LabelError(f"expected a JSON object, got {type(data).__name__}")
            data.setdefault("annotator", annotator or ANONYMOUS)
            sampled = data.pop("queue", None)
            data = run.rating(data) if data.get("kind") == "rating" else run.battle(data)
            lab = check_label({**data, "queue": None, "time": data.get("time") or "-"})
            if sampled is not None:
                if not isinstance(sampled, Mapping):
                    raise LabelError(f'"queue": expected {{seed, design, draw}} or null, got {sampled!r:.60}')
                queue, draw, where = _sampled(root, lab, sampled)
                checked.append(({**data, "queue": where.to_dict()}, (queue, draw, lab.annotator)))
                continue
            where = queue_for(root, lab, queues=queues)
            checked.append(({**data, "queue": where.to_dict() if where else None}, None))
        except LabelError as exc:
            raise InputError(f"{_name(i, raw, source)}: {exc}; nothing was stored") from None
    try:
        stored = append_labels(root, [d for d, _ in checked])
    except LabelError as exc:
        raise InputError(f"{exc}; nothing was stored") from None
    for _, handed in checked:
        if handed is not None:
            queue, draw, who = handed
            if who not in queue.handed.get(draw, []):
                record_handed(root, queue, [draw], who)
    out = Stored(labels=stored, lines=[_line(lab) for lab in stored])
    if update:
        out.corrected = update_corrected(root)
    return out


def update_corrected(root: Path) -> dict[str, Any]:
    """Recompute the corrected estimates and write them to the save path (`labels/corrected.json`)."""
    from .corrected import corrected

    result = corrected(root)
    write_corrected(root, result)
    return result


def _line(lab: AnyLabel) -> str:
    what = (f"{lab.model} on {lab.metric} = {lab.score:g}" if isinstance(lab, RatingLabel)
            else f"{lab.model_a} vs {lab.model_b} = {lab.verdict}")
    head = f"stored: item {lab.id} ({lab.category}) {what}, by {lab.annotator}"
    if lab.queue is not None:
        q = lab.queue
        return f"{head}: on the queue ({q.design} draws, seed {q.seed}, draw {q.draw}, p {q.p:.4g})"
    return (f"{head}: off the queue (no queue handed this item out to {lab.annotator}); it counts for agreement "
            "and kappa, not in the corrected estimate")


# --- files made elsewhere ---------------------------------------------------------------------------------
CSV_QUEUE = {"queue_seed": "seed", "queue_design": "design", "queue_draw": "draw"}


def read_import(path: Path) -> list[dict[str, Any]]:
    """The labels of a CSV (a header row: id, category, model_a, model_b, verdict, or kind=rating, model, metric,
    score; annotator, note; queue_seed, queue_design, queue_draw where the file says how its items were
    sampled) or JSONL file (one label object a line, `queue` an object). A broken line: InputError naming it
    (nothing is taken)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--import {path}: not UTF-8 ({exc.reason}); nothing was taken") from None
    except OSError as exc:
        raise InputError(f"--import {path}: cannot be read ({exc.strerror or exc})") from None
    if path.suffix.lower() == ".csv":
        return _csv(path, text)
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"--import {path} line {number}: not JSON ({exc.msg} at column {exc.colno}); "
                             "nothing was taken") from None
        if not isinstance(data, dict):
            raise InputError(f"--import {path} line {number}: expected a JSON object (a label), got "
                             f"{type(data).__name__}; nothing was taken")
        out.append({**data, "_line": number})
    return out


def _csv(path: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    out = []
    for row in reader:
        number = reader.line_num
        if None in row or any(v is None for v in row.values()):
            raise InputError(f"--import {path} line {number}: {len(reader.fieldnames or [])} columns in the header, "
                             "a different number here; nothing was taken")
        data: dict[str, Any] = {k: v for k, v in row.items() if v != "" and k not in CSV_QUEUE}
        if "score" in data or data.get("kind") == "rating":
            data["kind"] = "rating"
            try:
                data["score"] = float(data.get("score", ""))
            except ValueError:
                raise InputError(f"--import {path} line {number}: \"score\": expected a number, got "
                                 f"{row.get('score')!r}; nothing was taken") from None
        q = {CSV_QUEUE[k]: row[k] for k in CSV_QUEUE if row.get(k)}
        if q:
            try:
                q["seed"], q["draw"] = int(q.get("seed", "")), int(q.get("draw", ""))
            except ValueError:
                raise InputError(f"--import {path} line {number}: queue_seed and queue_draw: expected whole numbers "
                                 "(both, with queue_design); nothing was taken") from None
            data["queue"] = q
        data["_line"] = number
        out.append(data)
    return out


def import_labels(root: Path, path: Path, *, annotator: str | None = None) -> Stored:
    """`--import FILE`: every label of the file, all or none (`add_labels`)."""
    rows = read_import(path)
    if not rows:
        raise InputError(f"--import {path}: no label in the file")
    lines = [r.pop("_line") for r in rows]

    try:
        return add_labels(root, rows, annotator=annotator, source=f"--import {path} label")
    except InputError as exc:
        msg = str(exc)
        # name the file's line, not the label's position
        prefix = f"--import {path} label "
        if msg.startswith(prefix):
            pos = int(msg[len(prefix):].split(" ", 1)[0].rstrip(":"))
            msg = f"--import {path} line {lines[pos - 1]}" + msg[len(prefix) + len(str(pos)):]
        raise InputError(msg) from None
