"""Answer and target files: ColossalAI's records `{category, instruction, input, output, target, id}`.

A file is a JSON list or JSON Lines (one object per line). Every problem names the file and the
record (its id, or its position when the id itself is the problem).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, InputError
from ..core.records import Record
from ..core.io import parse_jsonl, read_text

REQUIRED = {"category": str, "instruction": str, "output": str}
MAX_LISTED = 10


@dataclass
class AnswerSet:
    """One model's records, in file order, plus what loading noticed."""

    name: str
    path: Path
    records: list[Record]
    empty_output_ids: list[str] = field(default_factory=list)

    def by_id(self) -> dict[str, Record]:
        return {r.id: r for r in self.records}


def read_records_raw(path: Path) -> list[tuple[str, Any]]:
    """(location, object) pairs from a JSON list or a JSONL file; location is "record 3" or "line 7"."""
    text = read_text(path, "answer")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{path}: the file is empty; expected a JSON list of records or JSON Lines")
    if stripped[0] == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        return [(f"record {i}", obj) for i, obj in enumerate(data)]
    if stripped[0] == "{" and path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            raise InputError(f"{path}: expected a JSON list of records (or JSON Lines), found a single object")
    hint = "; expected one record per line (JSON Lines) or a JSON list"
    return [(f"line {n}", obj) for n, obj in parse_jsonl(text, path, hint)]


def _record_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def parse_record(obj: Any, where: str, *, need_output: bool) -> tuple[Record | None, list[str]]:
    """One record, or the problems with it (each prefixed by `where`)."""
    if not isinstance(obj, dict):
        return None, [f"{where}: expected an object with category, instruction, input, output, target, id"]
    rid = _record_id(obj.get("id"))
    label = f'{where} (id {rid})' if rid is not None else where
    problems = []
    if "id" not in obj:
        problems.append(f"{where}: missing field \"id\" (expected an integer or a non-empty string)")
    elif rid is None:
        problems.append(f"{where}: field \"id\" must be an integer or a non-empty string, got {obj.get('id')!r}")
    for key, typ in REQUIRED.items():
        if key == "output" and not need_output and key not in obj:
            continue
        if key not in obj:
            problems.append(f'{label}: missing field "{key}" (expected a string)')
        elif not isinstance(obj[key], typ):
            problems.append(f'{label}: field "{key}" must be a string, got {type(obj[key]).__name__}')
    inp = obj.get("input", "")
    if inp is None:
        inp = ""
    if not isinstance(inp, str):
        problems.append(f'{label}: field "input" must be a string, got {type(inp).__name__}')
    target = obj.get("target", "")
    if target is None:
        target = ""
    if isinstance(target, str):
        targets = (target,) if target.strip() else ()
    elif isinstance(target, list) and all(isinstance(t, str) for t in target):
        targets = tuple(t for t in target if t.strip())
    else:
        problems.append(f'{label}: field "target" must be a string or a list of strings')
        targets = ()
    if isinstance(obj.get("category"), str) and not obj["category"].strip():
        problems.append(f'{label}: field "category" is empty')
    if problems:
        return None, problems
    extra = {k: v for k, v in obj.items() if k not in ("id", "category", "instruction", "input", "output", "target")}
    return Record(id=rid, category=obj["category"], instruction=obj["instruction"], input=inp,
                  output=obj.get("output", ""), targets=targets, extra=extra), []


def load_records(path: Path, *, need_output: bool = True) -> list[Record]:
    """All records of one file; raises ConfigError with every problem found (file and id named)."""
    problems: list[str] = []
    records: list[Record] = []
    for where, obj in read_records_raw(path):
        rec, probs = parse_record(obj, where, need_output=need_output)
        problems.extend(probs)
        if rec is not None:
            records.append(rec)
    dupes = [rid for rid, n in Counter(r.id for r in records).items() if n > 1]
    if dupes:
        problems.append(f"duplicate ids: {_list(dupes)}")
    if not records and not problems:
        problems.append("no records")
    if problems:
        raise ConfigError(problems, str(path))
    return records


def _list(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else "")


def load_answer_sets(answers: list[tuple[str, Path]], target_file: Path | None) -> list[AnswerSet]:
    """Load each model's answers and merge the targets in, checking the files agree.

    The target file (when given) is the source of the references; ids and categories must agree
    between it and every answer file. Without a target file each record's own `target` is used.
    """
    targets: dict[str, Record] | None = None
    if target_file is not None:
        targets = {r.id: r for r in load_records(target_file, need_output=False)}
    sets: list[AnswerSet] = []
    problems: list[str] = []
    names = [n for n, _ in answers]
    dup_names = [n for n, c in Counter(names).items() if c > 1]
    if dup_names:
        raise InputError(f"model names must be unique; repeated: {', '.join(dup_names)}")
    for name, path in answers:
        records = load_records(path)
        if targets is not None:
            ids = {r.id for r in records}
            missing = [i for i in targets if i not in ids]
            extra = [r.id for r in records if r.id not in targets]
            if missing:
                problems.append(f"{path}: no answer for ids in the target file {target_file}: {_list(missing)}")
            if extra:
                problems.append(f"{path}: ids not in the target file {target_file}: {_list(extra)}")
            wrong_cat = [f"{r.id} ({r.category!r} vs {targets[r.id].category!r})" for r in records
                         if r.id in targets and r.category != targets[r.id].category]
            if wrong_cat:
                problems.append(f"{path}: category differs from the target file for ids: {_list(wrong_cat)}")
            records = [_with_targets(r, targets[r.id]) for r in records if r.id in targets]
        empty = [r.id for r in records if not r.output.strip()]
        sets.append(AnswerSet(name=name, path=path, records=records, empty_output_ids=empty))
    if targets is None and len(sets) > 1:
        first = {r.id: r.category for r in sets[0].records}
        for s in sets[1:]:
            other = {r.id: r.category for r in s.records}
            if set(other) != set(first):
                diff = sorted(set(other) ^ set(first))
                problems.append(f"{s.path}: ids differ from {sets[0].path}: {_list(diff)}")
            wrong = [i for i in other if i in first and other[i] != first[i]]
            if wrong:
                problems.append(f"{s.path}: category differs from {sets[0].path} for ids: {_list(wrong)}")
    if problems:
        raise ConfigError(problems)
    return sets


def _with_targets(answer: Record, target: Record) -> Record:
    return Record(id=answer.id, category=answer.category, instruction=answer.instruction, input=answer.input,
                  output=answer.output, targets=target.targets or answer.targets, extra=answer.extra)
