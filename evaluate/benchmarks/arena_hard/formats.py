"""Arena-Hard's question file as a kind `eval.py generate` and `--generate` read and answer: its
question.jsonl `{uid, category, prompt}` in, its model_answer/<name>.jsonl `{uid, ans_id, model,
messages, tstamp, metadata}` out (the metadata its style control reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.errors import InputError
from ...generation.formats import Question, QuestionFormat, register_format, stable_id


def _read(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    from .files import read_questions

    out = []
    for q in read_questions(path):
        if not q["prompt"].strip():
            raise InputError(f"{path}: uid {q['uid']}: no text to send: the prompt is empty")
        out.append(Question(q["uid"], q["category"], (q["prompt"],), q))
    return out


def _answer(q: Question, turns: list[str], name: str, system: str | None, now: float) -> dict[str, Any]:
    from .scores import style_metadata

    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": q.turns[0]}, {"role": "assistant", "content": {"answer": turns[0]}}]
    return {"uid": q.id, "ans_id": stable_id(name, q.id, turns[0]), "model": name, "messages": messages,
            "tstamp": now, "metadata": style_metadata(turns[0])}


QUESTIONS = register_format(QuestionFormat(
    kind="arena-hard", shape="Arena-Hard {uid, prompt}", extension="jsonl",
    detect=lambda keys: "uid" in keys and "prompt" in keys, read=_read, answer=_answer, jsonl=True,
    answers_flag=("model", "name")))
