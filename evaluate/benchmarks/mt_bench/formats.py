"""MT-bench's question file as a kind `eval.py generate` and `--generate` read and answer: FastChat's
question.jsonl `{question_id, category, turns}` in, its model_answer/<name>.jsonl `{question_id,
answer_id, model_id, choices, tstamp}` out, sampled at FastChat's temperature for the category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...generation.formats import Question, QuestionFormat, register_format, stable_id

# FastChat's sampling temperature per MT-bench category (gen_model_answer.py / gen_api_answer.py,
# common.temperature_config); a category it does not list gets 0.7, as FastChat gives it.
FASTCHAT_TEMPERATURE = {"writing": 0.7, "roleplay": 0.7, "extraction": 0.0, "math": 0.0, "coding": 0.0,
                        "reasoning": 0.0, "stem": 0.1, "humanities": 0.1}
FASTCHAT_OTHER_TEMPERATURE = 0.7


def _read(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    from .data import read_questions

    by_id = {}
    for _, obj in rows:
        if isinstance(obj, dict):
            by_id.setdefault(str(obj.get("question_id")), obj)
    return [Question(str(q.question_id), q.category, q.turns, by_id.get(str(q.question_id), {}))
            for q in read_questions(path)]


def _answer(q: Question, turns: list[str], name: str, system: str | None, now: float) -> dict[str, Any]:
    return {"question_id": q.raw.get("question_id", q.id), "answer_id": stable_id(name, q.id, *turns),
            "model_id": name, "choices": [{"index": 0, "turns": list(turns)}], "tstamp": now}


QUESTIONS = register_format(QuestionFormat(
    kind="mt-bench", shape="FastChat MT-bench {question_id, category, turns}", extension="jsonl",
    detect=lambda keys: "question_id" in keys and "turns" in keys, read=_read, answer=_answer, jsonl=True,
    temperature=lambda category: FASTCHAT_TEMPERATURE.get(category, FASTCHAT_OTHER_TEMPERATURE),
    temperature_rule={"by_category": FASTCHAT_TEMPERATURE, "other": FASTCHAT_OTHER_TEMPERATURE,
                      "source": "FastChat temperature_config"},
    per_category_limit=True, answers_flag=("answers", "path")))
