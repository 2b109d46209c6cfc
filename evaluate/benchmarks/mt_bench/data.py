"""MT-bench's files as FastChat keeps them, read unchanged and checked before any judge is paid.

- `question.jsonl`: {question_id, category, turns: [user turn, ...]}.
- `model_answer/<model>.jsonl`: {question_id, model_id, choices: [{turns: [assistant turn, ...]}]};
  the model's name is the file's name without `.jsonl` (FastChat's `load_model_answers`), and
  only `choices[0]` is read, as FastChat does.
- `reference_answer/<judge>.jsonl`: the same shape; the references of the categories FastChat
  judges against a reference (`NEED_REF_CATS`).
- `judge_prompts.jsonl`: {name, type, system_prompt, prompt_template, output_format}.

FastChat finds a broken conversation only when a judge thread raises half-way through a paid run
(an IndexError on a missing turn) or never (an extra turn is silently ignored). Here every such
problem is an InputError naming the file, the line, the question_id and the turn, raised while
reading. A duplicated question_id (FastChat keeps the last one silently) is refused too.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...core.errors import InputError
from ...core.io import read_jsonl
from ...core.options import short
from ...core.registry import suggest

# FastChat's list (fastchat/llm_judge/common.py): these categories are judged against a reference.
NEED_REF_CATS = ("math", "reasoning", "coding", "arena-hard-200")

QuestionId = int | str


@dataclass(frozen=True)
class Question:
    question_id: QuestionId
    category: str
    turns: tuple[str, ...]
    line: int

    @property
    def needs_reference(self) -> bool:
        return self.category in NEED_REF_CATS


@dataclass(frozen=True)
class Conversation:
    """One model's (or the reference's) assistant turns for one question, and where they were read."""

    model: str
    question_id: QuestionId
    turns: tuple[str, ...]
    path: Path
    line: int

    def where(self, turn: int | None = None) -> str:
        at = f"{self.path}: line {self.line}: question_id {self.question_id}"
        return at + (f": turn {turn}" if turn is not None else "")


@dataclass(frozen=True)
class JudgePrompt:
    name: str
    type: str  # "single" or "pairwise"
    system_prompt: str
    prompt_template: str
    output_format: str  # "[[rating]]", "[[A]]" or "[[rating_a,rating_b]]"


OUTPUT_FORMATS = {"single": ("[[rating]]",), "pairwise": ("[[A]]", "[[rating_a,rating_b]]")}


def model_name(path: Path) -> str:
    """FastChat's model name of an answer file: its base name without the `.jsonl`."""
    name = Path(path).name
    return name[:-6] if name.endswith(".jsonl") else Path(path).stem


def _qid(path: Path, n: int, rec: dict[str, Any]) -> QuestionId:
    if "question_id" not in rec:
        raise InputError(f"{path}: line {n}: no question_id (expected FastChat's MT-bench format)")
    qid = rec["question_id"]
    if isinstance(qid, bool) or not isinstance(qid, (int, str)):
        raise InputError(f"{path}: line {n}: question_id must be an integer or a string, got {short(qid)}")
    return qid


def _objects(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    rows = read_jsonl(path, what)
    for n, rec in rows:
        if not isinstance(rec, dict):
            raise InputError(f"{path}: line {n}: expected a JSON object, got {short(rec)}")
    return rows


def _turns(path: Path, n: int, qid: QuestionId, value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{path}: line {n}: question_id {qid}: {key} must be a non-empty list of strings, "
                         f"got {short(value)}")
    for t, text in enumerate(value, 1):
        if not isinstance(text, str):
            raise InputError(f"{path}: line {n}: question_id {qid}: turn {t}: expected a string, got {short(text)}")
        if not text.strip():
            raise InputError(f"{path}: line {n}: question_id {qid}: turn {t}: the turn is empty")
    return tuple(value)


def read_questions(path: Path) -> list[Question]:
    """The questions in file order."""
    path = Path(path)
    out: list[Question] = []
    seen: dict[QuestionId, int] = {}
    for n, rec in _objects(path, "MT-bench question"):
        qid = _qid(path, n, rec)
        if qid in seen:
            raise InputError(f"{path}: line {n}: question_id {qid} is given twice (line {seen[qid]} and line {n})")
        seen[qid] = n
        category = rec.get("category")
        if not isinstance(category, str) or not category:
            raise InputError(f"{path}: line {n}: question_id {qid}: category must be a non-empty string, "
                             f"got {short(category)}")
        out.append(Question(qid, category, _turns(path, n, qid, rec.get("turns"), "turns"), n))
    if not out:
        raise InputError(f"{path}: no questions in the file")
    return out


def _choice_turns(path: Path, n: int, qid: QuestionId, rec: dict[str, Any]) -> tuple[str, ...]:
    choices = rec.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise InputError(f"{path}: line {n}: question_id {qid}: choices must be a non-empty list of "
                         f"{{turns: [...]}}, got {short(choices)}")
    return _turns(path, n, qid, choices[0].get("turns"), "choices[0].turns")


def read_answers(path: Path, questions: Mapping[QuestionId, Question], *,
                 what: str = "model answer") -> dict[QuestionId, Conversation]:
    """A model's conversations by question_id, each checked against its question: one assistant turn
    per user turn, none empty, and only questions that question.jsonl has."""
    path = Path(path)
    model = model_name(path)
    out: dict[QuestionId, Conversation] = {}
    for n, rec in _objects(path, what):
        qid = _qid(path, n, rec)
        if qid in out:
            raise InputError(f"{path}: line {n}: question_id {qid} is answered twice (line {out[qid].line} and "
                             f"line {n})")
        if qid not in questions:
            raise InputError(f"{path}: line {n}: question_id {qid}: an answer to a question that question.jsonl "
                             "does not have")
        turns = _choice_turns(path, n, qid, rec)
        asked = len(questions[qid].turns)
        if len(turns) < asked:
            raise InputError(f"{path}: line {n}: question_id {qid}: turn {len(turns) + 1}: missing (the question "
                             f"has {asked} user turns, the answer {len(turns)} assistant turns)")
        if len(turns) > asked:
            raise InputError(f"{path}: line {n}: question_id {qid}: turn {asked + 1}: more assistant turns "
                             f"({len(turns)}) than user turns ({asked})")
        out[qid] = Conversation(model, qid, turns, path, n)
    return out


def read_references(path: Path, questions: Mapping[QuestionId, Question]) -> dict[QuestionId, Conversation]:
    """Reference conversations by question_id. Records of questions not in question.jsonl are kept
    (FastChat ignores them); the turns of each are checked like a model's."""
    path = Path(path)
    known = {**questions}
    for n, rec in _objects(path, "reference answer"):
        qid = _qid(path, n, rec)
        if qid not in known:
            turns = _choice_turns(path, n, qid, rec)
            known[qid] = Question(qid, "", turns, 0)
    return read_answers(path, known, what="reference answer")


def check_coverage(selected: Iterable[Question], answers: Mapping[str, Mapping[QuestionId, Conversation]],
                   paths: Mapping[str, Path]) -> None:
    """Every selected question must be answered by every model (FastChat's `check_data` refuses a gap
    too): a mean over a different set of questions is not the same benchmark."""
    ids = [q.question_id for q in selected]
    for model, by_id in answers.items():
        missing = [qid for qid in ids if qid not in by_id]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            raise InputError(f"{paths[model]}: model {model} has no answer to question_id {shown} "
                             f"({len(missing)} of {len(ids)} questions); answer them or leave the file out")


def check_references(selected: Iterable[Question], refs: Mapping[QuestionId, Conversation], path: Path) -> None:
    for q in selected:
        if not q.needs_reference:
            continue
        if q.question_id not in refs:
            raise InputError(f"{path}: no reference answer to question_id {q.question_id} (category {q.category}, "
                             f"judged against a reference)")


def read_judge_prompts(path: Path) -> dict[str, JudgePrompt]:
    path = Path(path)
    out: dict[str, JudgePrompt] = {}
    lines: dict[str, int] = {}
    for n, rec in _objects(path, "judge prompt"):
        for key in ("name", "type", "system_prompt", "prompt_template", "output_format"):
            if not isinstance(rec.get(key), str):
                raise InputError(f"{path}: line {n}: {key} must be a string, got {short(rec.get(key))}")
        name = rec["name"]
        if name in out:
            raise InputError(f"{path}: line {n}: judge prompt {name!r} is given twice (line {lines[name]} and line {n})")
        if rec["type"] not in OUTPUT_FORMATS:
            raise InputError(f"{path}: line {n}: judge prompt {name!r}: type must be single or pairwise, "
                             f"got {short(rec['type'])}")
        if rec["output_format"] not in OUTPUT_FORMATS[rec["type"]]:
            raise InputError(f"{path}: line {n}: judge prompt {name!r}: output_format must be one of "
                             f"{', '.join(OUTPUT_FORMATS[rec['type']])} for type {rec['type']}, "
                             f"got {short(rec['output_format'])}")
        lines[name] = n
        out[name] = JudgePrompt(name, rec["type"], rec["system_prompt"], rec["prompt_template"], rec["output_format"])
    return out


def template_fields(template: str) -> set[str]:
    """The names `str.format` will look up in a template; ValueError for a malformed one (a lone brace)."""
    out = set()
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is not None:
            out.add(field.split(".")[0].split("[")[0])
            if spec:
                out |= template_fields(spec)
    return out


def require_prompt(prompts: Mapping[str, JudgePrompt], name: str, kind: str, fields: set[str], path: Path) -> JudgePrompt:
    """The prompt named `name`, checked to be of `kind` and to use only the `fields` FastChat fills for it
    (an unknown name or a stray `{field}` would otherwise fail in the middle of a paid run)."""
    if name not in prompts:
        raise InputError(f"{path}: no judge prompt named {name!r}{suggest(name, list(prompts))} "
                         f"(the file has: {', '.join(prompts) or 'none'})")
    prompt = prompts[name]
    if prompt.type != kind:
        raise InputError(f"{path}: judge prompt {name!r}: type {prompt.type!r}, but it is used as {kind!r}")
    try:
        used = template_fields(prompt.prompt_template)
    except ValueError as exc:
        raise InputError(f"{path}: judge prompt {name!r}: prompt_template is not a valid str.format template "
                         f"({exc}); write a literal brace as {{{{ or }}}}") from None
    unknown = sorted(used - fields)
    if unknown:
        raise InputError(f"{path}: judge prompt {name!r}: prompt_template uses {', '.join('{' + u + '}' for u in unknown)}"
                         f", which FastChat does not fill for it (it fills {', '.join(sorted(fields))})")
    return prompt
