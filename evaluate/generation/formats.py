"""Question files in, answer files out: each kind in the shape its own tools write and read.

A kind is one declaration, a `QuestionFormat`: how a file of it is recognised (its first record's
keys), read into `Question`s, and how an answered question is written back in the shape its own
tools read. This project's own target records (`{id, category, instruction, input}` or a
conversation; answers: the same records with `output`, or the assistant turns, filled) are declared
here; a benchmark declares its own in its package (`evaluate/benchmarks/<name>/formats.py`: FastChat's
MT-bench questions, Arena-Hard's, AlpacaEval's) and registers it with `register_format` when the
benchmark registry loads it.

A file of no known kind, or a record with no text to send, is refused (InputError: exit 2) naming the
file and the record before anything is sent.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..core.errors import ConfigError, InputError
from ..core.registry import Registry

@dataclass
class Question:
    """One question: its id (as a string, the key of answers and of the missing list), the user turns
    to send one after the other, and the record as read (what the answer file is written from)."""

    id: str
    category: str
    turns: tuple[str, ...]
    raw: dict[str, Any] = field(default_factory=dict)
    system: str | None = None  # the record's own setup (a conversation's instruction or system message)


@dataclass
class QuestionFile:
    path: Path
    kind: str
    questions: list[Question]
    jsonl: bool  # the questions were JSON Lines (a target file keeps that form)


def _greedy(category: str) -> float:
    return 0.0


@dataclass(frozen=True)
class QuestionFormat:
    """One kind of question file. `detect(keys)`: whether a first record with these keys is of this kind;
    `read(path, rows)`: its questions (InputError naming the record); `answer(q, turns, name, system, now)`:
    one answered question's record in the kind's answer file."""

    kind: str
    shape: str  # the records' shape, for the message when no kind fits: 'FastChat MT-bench {question_id, ...}'
    extension: str  # of a generated answer file: answers/<name>.<extension>
    detect: Callable[[set[str]], bool]
    read: Callable[[Path, list[tuple[str, Any]]], list[Question]]
    answer: Callable[[Question, list[str], str, "str | None", float], dict[str, Any]]
    jsonl: bool = False  # answers written as JSON Lines (else a JSON list)
    temperature: Callable[[str], float] = _greedy  # per category, when the model config sets none
    temperature_rule: Any = 0.0  # how the signature states that rule
    per_category_limit: bool = False  # a benchmark's `--limit N` keeps the first N of each category
    answers_flag: tuple[str, str] = ("", "")  # the benchmark command's answers: (args attribute, "path" | "name")


FORMATS: Registry[QuestionFormat] = Registry("question format")


def register_format(fmt: QuestionFormat) -> QuestionFormat:
    """Add a kind of question file (a benchmark's, at import); the same declaration twice is one."""
    if fmt.kind in FORMATS:
        FORMATS.remove(fmt.kind)
    FORMATS.add(fmt.kind, fmt)
    return fmt


def formats() -> Registry[QuestionFormat]:
    """Every kind: this project's target records and each installed benchmark's. The benchmarks are loaded
    as plugins are, by name, so that generation stays below them in the import graph."""
    importlib.import_module("evaluate.benchmarks.benchmark").benchmarks()
    return FORMATS


def question_format(kind: str) -> QuestionFormat:
    return formats().get(kind)


def _raw_records(path: Path) -> tuple[list[tuple[str, Any]], bool]:
    from ..pipeline.answers import read_records_raw

    rows = read_records_raw(path)
    return rows, not rows or not rows[0][0].startswith("record")


def detect(path: Path, rows: list[tuple[str, Any]]) -> str:
    """The kind of a question file from its first record's keys; InputError when none fits."""
    if not rows:
        raise InputError(f"{path}: no questions in the file")
    where, first = rows[0]
    if not isinstance(first, dict):
        raise InputError(f"{path}: {where}: expected an object, got {type(first).__name__}")
    keys = set(first)
    known = formats()
    for kind in [k for k in known if k != "target"] + ["target"]:  # a benchmark's shape is the narrower one
        if known.get(kind).detect(keys):
            return kind
    shapes = [known.get("target").shape] + [known.get(k).shape for k in known if k != "target"]
    raise InputError(
        f"{path}: {where}: no known kind of question file (keys: {', '.join(sorted(map(str, keys))) or 'none'}); "
        f"expected {', '.join(shapes[:-1])} or {shapes[-1]}")


def read_questions(path: Path) -> QuestionFile:
    """The questions of `path`, its kind recognised and every record checked (InputError/ConfigError: exit 2)."""
    path = Path(path)
    rows, jsonl = _raw_records(path)
    kind = detect(path, rows)
    questions = question_format(kind).read(path, rows)
    seen: dict[str, int] = {}
    for q in questions:
        seen[q.id] = seen.get(q.id, 0) + 1
    dupes = [i for i, n in seen.items() if n > 1]
    if dupes:
        raise InputError(f"{path}: ids given twice: {', '.join(dupes[:10])}")
    return QuestionFile(path, kind, questions, jsonl)


def _target(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    from ..pipeline.answers import parse_record

    out, problems = [], []
    for where, obj in rows:
        rec, probs = parse_record(obj, where, need_output=False)
        problems.extend(probs)
        if rec is None:
            continue
        if rec.turns:
            turns = tuple(t.user for t in rec.turns)
            system = rec.instruction or None
        else:
            text = "\n\n".join(t for t in (rec.instruction, rec.input) if t.strip())
            if not text.strip():
                problems.append(f'{where} (id {rec.id}): no text to send: "instruction" and "input" are both empty')
                continue
            turns, system = (text,), None
        out.append(Question(rec.id, rec.category, turns, obj, system))
    if problems:
        raise ConfigError(problems, str(path))
    return out


def default_temperature(kind: str, category: str) -> float:
    """The temperature when the model config sets none: the kind's rule (FastChat's per-category table for
    MT-bench questions), else 0 (greedy)."""
    return question_format(kind).temperature(category)


# ------------------------------------------------------------------------------------------ writing
def stable_id(*parts: str) -> str:
    """A stable 22-character id (FastChat and Arena-Hard write a random shortuuid; a stable one keeps a
    re-written file byte-identical apart from its timestamps)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:22]


def answer_rows(qf: QuestionFile, answers: dict[str, list[str]], name: str,
                system: str | None = None) -> list[dict[str, Any]]:
    """The answer file's records, in question order, for the questions answered in full."""
    rows = []
    now = time.time()
    fmt = question_format(qf.kind)
    for q in qf.questions:
        turns = answers.get(q.id)
        if turns is None or len(turns) != len(q.turns):
            continue
        rows.append(fmt.answer(q, turns, name, system, now))
    return rows


def _target_row(q: Question, turns: list[str], name: str, system: str | None, now: float) -> dict[str, Any]:
    row = dict(q.raw)
    if "turns" in row:
        row["turns"] = [{**t, "assistant": a} for t, a in zip(row["turns"], turns)]
    elif "messages" in row:
        msgs, k = [], 0
        for m in row["messages"]:
            if m.get("role") == "assistant":
                continue
            msgs.append(m)
            if m.get("role") == "user":
                msgs.append({"role": "assistant", "content": turns[k]})
                k += 1
        row["messages"] = msgs
    else:
        row["output"] = turns[0]
    return row


def serialise(kind: str, rows: list[dict[str, Any]], out: Path) -> str:
    """JSON Lines for a kind that writes them (FastChat's, Arena-Hard's; a target file written to .jsonl), else
    a JSON list."""
    if question_format(kind).jsonl or out.suffix.lower() == ".jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return json.dumps(rows, ensure_ascii=False, indent=2) + "\n"


def _is_target(keys: set[str]) -> bool:
    return "id" in keys and "category" in keys and bool(keys & {"instruction", "turns", "messages"})


register_format(QuestionFormat(
    kind="target", shape="this project's target records {id, category, instruction, input}", extension="json",
    detect=_is_target, read=_target, answer=_target_row))
