"""A person's verdicts on a run's items: `labels.jsonl` in the save path, one JSON line per label,
only ever appended (`eval.py view` writes them; `eval.py judge-check --labels` and the viewer read them).

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
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.clock import iso
from .layout import labels_file

LABEL_SCHEMA = "llm-eval-label/1"
VERDICTS = ("A", "B", "tie")  # model_a better, model_b better, a tie: as a battle's item verdicts
MAX_NOTE = 2000  # characters of a note; a longer one is refused, not cut
MAX_FIELD = 500  # characters of an id, a category or a model name


class LabelError(ValueError):
    """A label that cannot be stored (the message says which field and what was expected)."""


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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["run_id"] is None:
            del out["run_id"]
        return out


@dataclass
class LabelFile:
    """`labels.jsonl` as read: the labels in file order and a line per line that could not be read."""

    path: Path
    labels: list[Label] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _text(value: Any, name: str, *, empty: bool = False, limit: int = MAX_FIELD) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise LabelError(f'"{name}": expected {"a" if empty else "a non-empty"} string, got {value!r:.80}')
    if len(value) > limit:
        raise LabelError(f'"{name}": {len(value)} characters, at most {limit}')
    return value


def check_label(data: Any) -> Label:
    """A label from a JSON object, every field checked (LabelError naming the field otherwise)."""
    if not isinstance(data, dict):
        raise LabelError(f"expected a JSON object, got {type(data).__name__}")
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        raise LabelError(f'"verdict": expected one of {", ".join(VERDICTS)}, got {verdict!r:.40}')
    label = Label(id=_text(data.get("id"), "id"), category=_text(data.get("category", ""), "category", empty=True),
                  model_a=_text(data.get("model_a"), "model_a"), model_b=_text(data.get("model_b"), "model_b"),
                  verdict=verdict, time=_text(data.get("time", ""), "time", empty=True),
                  note=_text(data.get("note", "") or "", "note", empty=True, limit=MAX_NOTE),
                  run_id=data.get("run_id") if isinstance(data.get("run_id"), str) else None)
    if label.model_a == label.model_b:
        raise LabelError(f'"model_a" and "model_b" are both "{label.model_a}"; a label compares two models')
    return label


def append_label(root: Path, data: dict[str, Any]) -> Label:
    """Check `data`, stamp the time when it has none, and append it to `labels.jsonl` as one line:
    one os.write under an exclusive lock, then fsync. Returns the label as stored."""
    label = check_label({**data, "time": data.get("time") or iso()})
    line = (json.dumps(label.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n").encode(
        "utf-8", errors="backslashreplace")
    path = labels_file(root)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)  # read: the last byte
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a fragment without its line end: start afresh
            line = b"\n" + line
        written = os.write(fd, line)
        if written != len(line):  # a full disk: say so rather than leave a line that looks whole
            raise OSError(f"{path}: wrote {written} of {len(line)} bytes of a label (disk full?)")
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return label


def read_labels(root: Path) -> LabelFile:
    """Every label of `labels.jsonl` in file order (none when the file is absent); a line that is not a
    label (not JSON, cut short, a field missing or wrong) is named in `problems` and skipped."""
    path = labels_file(root)
    out = LabelFile(path=path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.problems.append(f"{path}: cannot be read ({type(exc).__name__}: {exc})")
        return out
    lines = raw.split(b"\n")
    for number, chunk in enumerate(lines, 1):
        if not chunk.strip():
            continue
        last = number == len(lines)  # no line end after it: a write cut short
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.problems.append(f"{path} line {number}: not UTF-8 ({exc.reason}); skipped")
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            why = ("cut short: the last line has no line end (a write was interrupted)" if last
                   else f"not JSON ({exc.msg} at column {exc.colno})")
            out.problems.append(f"{path} line {number}: {why}; skipped")
            continue
        try:
            out.labels.append(check_label(data))
        except LabelError as exc:
            out.problems.append(f"{path} line {number}: not a label: {exc}; skipped")
    return out
