"""Arena-Hard's files, read and written in its own formats (lmarena/arena-hard-auto @ 196f6b8).

question.jsonl: {uid, category, prompt, ...}; model_answer/<model>.jsonl: {uid, model, messages:
[..., {role: assistant, content: {answer}}], metadata?}; model_judgment/<judge>/<model>.jsonl:
{uid, category, judge, model, baseline, games: [{score, judgment, prompt}, {...}]} with game 1
judged baseline-as-A and game 2 swapped. The judge prompt file gathers the system prompt, the
user prompt template, the verdict patterns and the verdict weights (see judge_prompt_v0.1.json).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.errors import InputError
from ...core.io import read_jsonl, read_structured
from ...savepath.log import write_run_log
from .records import ArenaHardJudgments
from ..folders import model_judgment_dir



def judgment_dir(root: Path, judge: str) -> Path:
    """Arena-Hard's `model_judgment/<judge>/` (the judge's name as given: a folder Arena-Hard wrote)."""
    return model_judgment_dir(root) / judge


def judgment_file(root: Path, judge: str, model: str) -> Path:
    return judgment_dir(root, judge) / f"{model}.jsonl"


def leaderboard_csv(root: Path) -> Path:
    """Arena-Hard's leaderboard of the run, as its table shows it."""
    return Path(root) / "leaderboard.csv"


@dataclass
class JudgePrompt:
    path: Path
    system_prompt: str
    prompt_template: str
    regex_patterns: list[str]
    weights: dict[str, tuple[float, int]]  # label -> (score for A, how many battles it counts as)
    baseline: str | None = None
    judge_model: str | None = None
    temperature: float = 0.0
    max_tokens: int = 4096


@dataclass
class Answers:
    path: Path
    model: str
    text: dict[str, str]
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)


def _weight(path: Path, label: str, raw: Any) -> tuple[float, int]:
    """A weight is a list of equal scores (`[1]`) or, as show_result.py writes it, `"[1] * 3"`."""
    if isinstance(raw, list) and raw and all(isinstance(x, (int, float)) and x == raw[0] for x in raw):
        return float(raw[0]), len(raw)
    if isinstance(raw, str):
        m = re.fullmatch(r"\s*\[\s*([0-9.]+)\s*\]\s*\*\s*(\d+)\s*", raw)
        if m:
            return float(m.group(1)), int(m.group(2))
    raise InputError(f"{path}: label_to_score.{label}: expected a list of equal numbers or \"[x] * n\", got {raw!r}")


def read_judge_prompt(path: Path) -> JudgePrompt:
    raw = read_structured(path, "judge prompt")
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping with system_prompt, prompt_template, regex_patterns")
    for key in ("system_prompt", "prompt_template"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise InputError(f"{path}: {key}: expected a non-empty string")
    for slot in ("{QUESTION}", "{ANSWER_A}", "{ANSWER_B}"):
        if slot not in raw["prompt_template"]:
            raise InputError(f"{path}: prompt_template: expected the slot {slot}")
    pats = raw.get("regex_patterns")
    if not isinstance(pats, list) or not pats or not all(isinstance(p, str) for p in pats):
        raise InputError(f"{path}: regex_patterns: expected a non-empty list of regular expressions")
    for i, p in enumerate(pats):
        try:
            re.compile(p)
        except re.error as exc:
            raise InputError(f"{path}: regex_patterns[{i}]: not a regular expression ({exc})") from None
    l2s = raw.get("label_to_score", {"A>B": [1], "A>>B": "[1] * 3", "A=B": [0.5], "A<<B": "[0] * 3", "A<B": [0],
                                     "B>A": [0], "B>>A": "[0] * 3", "B=A": [0.5], "B<<A": "[1] * 3", "B<A": [1]})
    if not isinstance(l2s, dict) or not l2s:
        raise InputError(f"{path}: label_to_score: expected a mapping verdict label -> weight")
    return JudgePrompt(path, raw["system_prompt"], raw["prompt_template"], pats,
                       {str(k): _weight(path, k, v) for k, v in l2s.items()},
                       raw.get("baseline"), raw.get("judge_model"),
                       float(raw.get("temperature", 0.0)), int(raw.get("max_tokens", 4096)))


def read_questions(path: Path) -> list[dict[str, Any]]:
    out, seen = [], set()
    for line, rec in read_jsonl(path, "Arena-Hard questions"):
        if not isinstance(rec, dict):
            raise InputError(f"{path}:{line}: expected an object {{uid, category, prompt}}")
        for key in ("uid", "prompt"):
            if not isinstance(rec.get(key), str):
                raise InputError(f"{path}:{line}: {key}: expected a string")
        if rec["uid"] in seen:
            raise InputError(f"{path}:{line}: uid {rec['uid']!r} appears twice")
        seen.add(rec["uid"])
        out.append({"uid": rec["uid"], "category": str(rec.get("category", "")), "prompt": rec["prompt"]})
    if not out:
        raise InputError(f"{path}: no questions")
    return out


def read_answers(path: Path) -> Answers:
    model, text, meta = None, {}, {}
    for line, rec in read_jsonl(path, "Arena-Hard model answers"):
        where = f"{path}:{line}"
        if not isinstance(rec, dict) or not isinstance(rec.get("uid"), str):
            raise InputError(f"{where}: uid: expected a string")
        if not isinstance(rec.get("model"), str):
            raise InputError(f"{where}: model: expected a string")
        if model is not None and rec["model"] != model:
            raise InputError(f"{where}: model: {rec['model']!r} differs from {model!r} earlier in the file")
        model = rec["model"]
        msgs = rec.get("messages")
        try:
            answer = msgs[-1]["content"]["answer"]
        except (TypeError, KeyError, IndexError):
            answer = None
        if not isinstance(answer, str):
            raise InputError(f"{where}: messages[-1].content.answer: expected a string")
        text[rec["uid"]] = answer
        if isinstance(rec.get("metadata"), dict):
            meta[rec["uid"]] = rec["metadata"]
    if model is None:
        raise InputError(f"{path}: no answers")
    return Answers(path, model, text, meta)


def read_answer_dir(folder: Path) -> dict[str, Answers]:
    if not folder.is_dir():
        raise InputError(f"{folder}: expected a folder of <model>.jsonl answer files")
    out = {}
    for p in sorted(folder.glob("*.jsonl")):
        a = read_answers(p)
        out[a.model] = a
    return out


def render(prompt: JudgePrompt, question: str, answer_a: str, answer_b: str) -> list[dict[str, str]]:
    """The two messages Arena-Hard's gen_judgment sends (str.format of the template, as it does)."""
    user = prompt.prompt_template.format(QUESTION=question, ANSWER_A=answer_a, ANSWER_B=answer_b)
    return [{"role": "system", "content": prompt.system_prompt}, {"role": "user", "content": user}]


def parse_verdict(text: str, patterns: list[str]) -> str | None:
    """The last match of the first pattern that matches the upper-cased reply, as gen_judgment reads it."""
    for pattern in patterns:
        found = [m for m in re.findall(pattern, text.upper()) if m != ""]
        if found:
            return found[-1].strip("\n")
    return None


def read_judgments(path: Path) -> list[dict[str, Any]]:
    out = []
    for line, rec in read_jsonl(path, "Arena-Hard judgments"):
        where = f"{path}:{line}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected an object {{uid, model, baseline, games}}")
        for key in ("uid", "model"):
            if not isinstance(rec.get(key), str):
                raise InputError(f"{where}: {key}: expected a string")
        games = rec.get("games")
        if not isinstance(games, list) or len(games) != 2:
            raise InputError(f"{where}: games: expected a list of two games (baseline as A, then swapped)")
        for i, g in enumerate(games):
            if g is not None and (not isinstance(g, dict) or not (g.get("score") is None or isinstance(g["score"], str))):
                raise InputError(f"{where}: games[{i}].score: expected a verdict label or null")
        out.append(rec)
    return out


def write_judgments(path: Path, records: list[dict[str, Any]]) -> None:
    """The judgment file, whole (atomically, through the save path's writer: a killed run never leaves
    half a file)."""
    write_run_log(Path(path).parent, [ArenaHardJudgments(rows=list(records), file=Path(Path(path).name))])
