"""AlpacaEval's instructions as a kind `eval.py generate` and `--generate` read and answer: a list of
`{instruction, dataset}` (any model_outputs.json) in, model_outputs.json `{instruction, output,
generator, dataset}` out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.errors import InputError
from ...core.options import short
from ...generation.formats import Question, QuestionFormat, register_format


def _read(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
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


def _answer(q: Question, turns: list[str], name: str, system: str | None, now: float) -> dict[str, Any]:
    return {"instruction": q.turns[0], "output": turns[0], "generator": name, "dataset": q.raw.get("dataset")}


QUESTIONS = register_format(QuestionFormat(
    kind="alpaca-eval", shape="AlpacaEval {instruction, dataset}", extension="json",
    detect=lambda keys: "instruction" in keys and "id" not in keys, read=_read, answer=_answer,
    answers_flag=("model_outputs", "path")))
