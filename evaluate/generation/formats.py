"""Question files in, answer files out: each kind in the shape its own tools write and read.

| kind        | questions                                   | answers written                                  |
|-------------|---------------------------------------------|--------------------------------------------------|
| target      | this project's / ColossalAI's records        | the same records with `output` (a conversation:  |
|             | `{id, category, instruction, input}`         | its assistant turns) filled                      |
| mt-bench    | FastChat's question.jsonl                    | FastChat's model_answer/<name>.jsonl             |
|             | `{question_id, category, turns}`             | `{question_id, answer_id, model_id, choices,     |
|             |                                              | tstamp}`                                         |
| arena-hard  | Arena-Hard's question.jsonl `{uid, prompt}`  | its model_answer/<name>.jsonl `{uid, ans_id,     |
|             |                                              | model, messages, tstamp, metadata}`              |
| alpaca-eval | a list of `{instruction, dataset}` (any      | model_outputs.json `{instruction, output,         |
|             | model_outputs.json)                          | generator, dataset}`                             |

The kind is recognised from the records' keys; a file of no known kind, or a record with no text
to send, is refused (InputError: exit 2) naming the file and the record before anything is sent.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, InputError
from ..core.options import short

KINDS = ("target", "mt-bench", "arena-hard", "alpaca-eval")
# the answer file's extension for each kind (the run's save path: answers/<name>.<ext>)
EXTENSIONS = {"target": "json", "mt-bench": "jsonl", "arena-hard": "jsonl", "alpaca-eval": "json"}

# FastChat's sampling temperature per MT-bench category (gen_model_answer.py / gen_api_answer.py,
# common.temperature_config); a category it does not list gets 0.7, as FastChat gives it.
FASTCHAT_TEMPERATURE = {"writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0,
                        "reasoning": 0.0, "stem": 0.1, "humanities": 0.1}
FASTCHAT_OTHER_TEMPERATURE = 0.7


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
    if "question_id" in keys and "turns" in keys:
        return "mt-bench"
    if "uid" in keys and "prompt" in keys:
        return "arena-hard"
    if "id" in keys and "category" in keys and keys & {"instruction", "turns", "messages"}:
        return "target"
    if "instruction" in keys and "id" not in keys:
        return "alpaca-eval"
    raise InputError(
        f"{path}: {where}: no known kind of question file (keys: {', '.join(sorted(map(str, keys))) or 'none'}); "
        "expected this project's target records {id, category, instruction, input}, FastChat MT-bench "
        "{question_id, category, turns}, Arena-Hard {uid, prompt} or AlpacaEval {instruction, dataset}")


def read_questions(path: Path) -> QuestionFile:
    """The questions of `path`, its kind recognised and every record checked (InputError/ConfigError: exit 2)."""
    path = Path(path)
    rows, jsonl = _raw_records(path)
    kind = detect(path, rows)
    reader = {"target": _target, "mt-bench": _mt_bench, "arena-hard": _arena_hard, "alpaca-eval": _alpaca}[kind]
    questions = reader(path, rows)
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


def _mt_bench(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    from ..benchmarks.mt_bench.data import read_questions as read_mt

    by_id = {}
    for _, obj in rows:
        if isinstance(obj, dict):
            by_id.setdefault(str(obj.get("question_id")), obj)
    return [Question(str(q.question_id), q.category, q.turns, by_id.get(str(q.question_id), {}))
            for q in read_mt(path)]


def _arena_hard(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    from ..benchmarks.arena_hard.files import read_questions as read_ah

    out = []
    for q in read_ah(path):
        if not q["prompt"].strip():
            raise InputError(f"{path}: uid {q['uid']}: no text to send: the prompt is empty")
        out.append(Question(q["uid"], q["category"], (q["prompt"],), q))
    return out


def _alpaca(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    out = []
    for i, (where, obj) in enumerate(rows):
        label = f"{path}: {where} (instruction {i})"
        if not isinstance(obj, dict):
            raise InputError(f"{label}: expected an object {{instruction, dataset}}, got {type(obj).__name__}")
        text = obj.get("instruction")
        if not isinstance(text, str):
            raise InputError(f'{label}: "instruction": expected a string, got {short(text)}')
        if not text.strip():
            raise InputError(f'{label}: no text to send: "instruction" is empty')
        dataset = obj.get("dataset")
        if dataset is not None and not isinstance(dataset, str):
            raise InputError(f'{label}: "dataset": expected a string, got {short(dataset)}')
        out.append(Question(str(i), dataset or "", (text,), obj))
    return out


def default_temperature(kind: str, category: str) -> float:
    """The temperature when the model config sets none: FastChat's per-category table for MT-bench
    questions, else 0 (greedy)."""
    if kind == "mt-bench":
        return FASTCHAT_TEMPERATURE.get(category, FASTCHAT_OTHER_TEMPERATURE)
    return 0.0


# ------------------------------------------------------------------------------------------ writing
def _short_id(*parts: str) -> str:
    """A stable 22-character id (FastChat and Arena-Hard write a random shortuuid; a stable one keeps a
    re-written file byte-identical apart from its timestamps)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:22]


def answer_rows(qf: QuestionFile, answers: dict[str, list[str]], name: str,
                system: str | None = None) -> list[dict[str, Any]]:
    """The answer file's records, in question order, for the questions answered in full."""
    rows = []
    now = time.time()
    for q in qf.questions:
        turns = answers.get(q.id)
        if turns is None or len(turns) != len(q.turns):
            continue
        if qf.kind == "target":
            rows.append(_target_row(q, turns))
        elif qf.kind == "mt-bench":
            rows.append({"question_id": q.raw.get("question_id", q.id),
                         "answer_id": _short_id(name, q.id, *turns), "model_id": name,
                         "choices": [{"index": 0, "turns": list(turns)}], "tstamp": now})
        elif qf.kind == "arena-hard":
            from ..benchmarks.arena_hard.scores import style_metadata

            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": q.turns[0]}, {"role": "assistant", "content": {"answer": turns[0]}}]
            rows.append({"uid": q.id, "ans_id": _short_id(name, q.id, turns[0]), "model": name,
                         "messages": messages, "tstamp": now, "metadata": style_metadata(turns[0])})
        else:
            rows.append({"instruction": q.turns[0], "output": turns[0], "generator": name,
                         "dataset": q.raw.get("dataset")})
    return rows


def _target_row(q: Question, turns: list[str]) -> dict[str, Any]:
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
    """JSON Lines for FastChat's and Arena-Hard's files (and a target file written to .jsonl), else a JSON list."""
    if kind in ("mt-bench", "arena-hard") or out.suffix.lower() == ".jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return json.dumps(rows, ensure_ascii=False, indent=2) + "\n"
