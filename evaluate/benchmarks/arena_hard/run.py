"""Arena-Hard (lmarena/arena-hard-auto @ 196f6b8): judging by its protocol and its leaderboard.

Each question is judged twice against the baseline: game 1 with the baseline as assistant A, game 2
swapped, each with Arena-Hard's system prompt and user template; the verdict is read with the
config's patterns. A reply with no verdict is kept (score null, the raw reply in `judgment`) and the
question is left out of the scores, as show_result.py leaves it out. Files: files.py;
statistics: scores.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...backends.base import Backend, JudgeRequest
from ...core.errors import InputError
from .. import folders
from .files import judgment_dir
from .files import (Answers, JudgePrompt, parse_verdict, read_answer_dir, read_judge_prompt,  # noqa: F401
                               read_answers, read_judgments, read_questions, render, write_judgments)
from .scores import battle_outcomes, raw_scores, style_controlled, style_metadata, token_counter

DEFAULT_BASELINE = "gpt-4-0314"


@dataclass
class Game:
    """One judge call still to make: question `uid`, game 0 (baseline as A) or 1 (swapped)."""
    uid: str
    game: int
    messages: list[dict[str, str]]

    def request(self, prompt: JudgePrompt) -> JudgeRequest:
        return JudgeRequest.chat(self.messages[0]["content"], self.messages[1]["content"],
                                 max_tokens=prompt.max_tokens, temperature=prompt.temperature)


def missing_answers(questions: Sequence[dict[str, Any]], answers: Sequence[Answers]) -> dict[str, list[str]]:
    """Per answer file (model name), the ids of `questions` it holds no answer for."""
    out = {}
    for a in answers:
        gone = [q["uid"] for q in questions if q["uid"] not in a.text]
        if gone:
            out[a.model] = gone
    return out


def plan(questions: Sequence[dict[str, Any]], answers: Answers, baseline: Answers, prompt: JudgePrompt,
         done: dict[str, dict[str, Any]] | None = None) -> list[Game]:
    """The games still to judge: those absent from `done` (uid -> record) or without a verdict."""
    games = []
    for q in questions:
        if q["uid"] not in answers.text or q["uid"] not in baseline.text:
            continue
        prev = (done or {}).get(q["uid"])
        pair = [(baseline.text[q["uid"]], answers.text[q["uid"]]), (answers.text[q["uid"]], baseline.text[q["uid"]])]
        for i, (a, b) in enumerate(pair):
            g = prev["games"][i] if prev else None
            if g is None or g.get("score") is None:
                games.append(Game(q["uid"], i, render(prompt, q["prompt"], a, b)))
    return games


def judge(questions: Sequence[dict[str, Any]], answers: Answers, baseline: Answers, prompt: JudgePrompt,
          backend: Backend, judge_name: str, done: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Judgment records in Arena-Hard's schema, one per question both models answered, in question order.
    A failed call leaves its game null (judged again next time); a reply without a verdict keeps its text."""
    todo = plan(questions, answers, baseline, prompt, done)
    comps = backend.complete_many([g.request(prompt) for g in todo]) if todo else []
    new = {(g.uid, g.game): (g, c) for g, c in zip(todo, comps)}
    out = []
    for q in questions:
        if q["uid"] not in answers.text or q["uid"] not in baseline.text:
            continue
        prev = (done or {}).get(q["uid"])
        games: list[Any] = [prev["games"][i] if prev else None for i in range(2)]
        for i in range(2):
            if (q["uid"], i) in new:
                g, c = new[(q["uid"], i)]
                if c.error:
                    games[i] = None
                else:
                    games[i] = {"score": parse_verdict(c.text, prompt.regex_patterns), "judgment": {"answer": c.text},
                                "prompt": g.messages}
        out.append({"uid": q["uid"], "category": q["category"], "judge": judge_name, "model": answers.model,
                    "baseline": baseline.model, "games": games})
    return out


def judge_dir(bench_dir: Path, judge: str | None) -> Path:
    """The folder of `judge`'s judgment files; without a name, the one judge's folder (the leaderboard
    reads it too). InputError when it is missing or, unnamed, when there are several."""
    root = folders.model_judgment_dir(bench_dir)
    if judge is not None:
        if not judgment_dir(bench_dir, judge).is_dir():
            raise InputError(f"{judgment_dir(bench_dir, judge)}: no such judgment folder")
        return judgment_dir(bench_dir, judge)
    found = sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []
    if not found:
        raise InputError(f"{root}: expected one folder of judgments per judge, found none")
    if len(found) > 1:
        raise InputError(f"{root}: several judges ({', '.join(p.name for p in found)}); name one with --judge")
    return found[0]


def _baseline(jdir: Path, records: Sequence[dict[str, Any]], baseline: str | None) -> str:
    """The baseline named, which the judgments must have been made against; else the one their
    `baseline` field names."""
    if not records:
        raise InputError(f"{jdir}: no judgment records")
    found = sorted({str(r.get("baseline")) for r in records if r.get("baseline") is not None})
    if baseline is not None:
        if baseline not in found:
            raise InputError(f"{jdir}: no judgment against baseline {baseline!r} (their baseline field names "
                             f"{', '.join(found) or 'none'})")
        return baseline
    if len(found) != 1:
        raise InputError(f"{jdir}: judgments against " + (f"several baselines ({', '.join(found)}); name one with "
                                                          "--baseline" if found else "no named baseline (no "
                                                          "'baseline' field); name it with --baseline"))
    return found[0]


def read_judgment_dir(jdir: Path) -> list[dict[str, Any]]:
    """Every judgment record of a judge's folder; a (model, baseline, question) judged twice (a copied
    .jsonl, a line repeated) is refused with both places named, since its games would count twice."""
    seen: dict[tuple[str, str, str], str] = {}
    out = []
    for p in sorted(Path(jdir).glob("*.jsonl")):
        for n, r in enumerate(read_judgments(p), 1):
            key = (str(r["model"]).split("/")[-1], str(r.get("baseline")), r["uid"])
            where = f"{p}, record {n}"
            if key in seen:
                raise InputError(f"{jdir}: question {key[2]} of model {key[0]!r} against {key[1]!r} is judged twice "
                                 f"({seen[key]} and {where}); its games would count twice: remove one of them")
            seen[key] = where
            out.append(r)
    return out


def baseline_of(bench_dir: Path, judge: str | None, baseline: str | None = None) -> str:
    """The baseline leaderboard_table scores against: `baseline` when the judgments hold games against
    it, else the one baseline their `baseline` field names; InputError otherwise."""
    jdir = judge_dir(Path(bench_dir), judge)
    return _baseline(jdir, read_judgment_dir(jdir), baseline)


COLUMNS = ["model", "score", "lower", "upper", "sc_score", "sc_lower", "sc_upper", "avg_tokens",
           "n_questions", "n_invalid"]


def leaderboard_table(bench_dir: Path, judge: str | None, *, baseline: str | None = None,
                      seed: int = 0) -> tuple[list[str], list[dict]]:
    """Arena-Hard's leaderboard of the judgments under bench_dir/model_judgment/<judge>/: raw score
    (win rate against the baseline, %) and style-controlled score (length and markdown controlled),
    each with its 90% bootstrap interval; avg_tokens is the mean answer length (tokens, see
    scores.token_len) over the questions judged for that model (the baseline: over every
    question judged), so that --limit limits it too; n_invalid counts questions left out for a missing
    verdict."""
    bench_dir = Path(bench_dir)
    jdir = judge_dir(bench_dir, judge)
    records = read_judgment_dir(jdir)
    base = _baseline(jdir, records, baseline)
    folder = folders.model_answer_dir(bench_dir)
    answers = read_answer_dir(folder) if folder.is_dir() else {}
    battles: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    questions: dict[str, set[str]] = {}
    judged: dict[str, set[str]] = {base: set()}
    rows_model, rows_out, rows_uid = [], [], []
    for r in records:
        if r.get("baseline", base) != base:
            continue
        model = r["model"].split("/")[-1]
        judged.setdefault(model, set()).add(r["uid"])
        judged[base].add(r["uid"])
        outs = battle_outcomes(r, SHOW_RESULT_WEIGHTS)
        battles.setdefault(model, [])
        if outs is None:
            invalid[model] = invalid.get(model, 0) + 1
            continue
        questions.setdefault(model, set()).add(r["uid"])
        battles[model].extend(outs)
        rows_model += [r["model"]] * len(outs)
        rows_out += outs
        rows_uid += [r["uid"]] * len(outs)
    if not rows_out:
        raise InputError(f"{jdir}: no judgment has a verdict in both games; nothing to score")
    raw = raw_scores({m: xs for m, xs in battles.items() if xs}, seed)
    sc: dict[str, Any] = {}
    meta = {m: _metadata(a) for m, a in answers.items()}
    if base in meta and all(m in meta for m in rows_model):
        try:
            mm = [meta[m][u] for m, u in zip(rows_model, rows_uid)]
            bm = [meta[base][u] for u in rows_uid]
        except KeyError as exc:
            raise InputError(f"{folder}: no answer for question {exc.args[0]} judged in {jdir}")
        sc, _ = style_controlled([m.split("/")[-1] for m in rows_model], rows_out, mm, bm, base, seed)
    rows = []
    for m in sorted(set(battles) | {base}):
        r_ = raw.get(m) if m != base else None
        s_ = sc.get(m)
        toks = [d["token_len"] for u, d in meta.get(m, {}).items() if u in judged.get(m, ())]
        rows.append({"model": m,
                     "score": 50.0 if m == base else (r_.score if r_ else None),
                     "lower": 50.0 if m == base else (r_.lower if r_ else None),
                     "upper": 50.0 if m == base else (r_.upper if r_ else None),
                     "sc_score": 50.0 if m == base and sc else (s_.score if s_ else None),
                     "sc_lower": 50.0 if m == base and sc else (s_.lower if s_ else None),
                     "sc_upper": 50.0 if m == base and sc else (s_.upper if s_ else None),
                     "avg_tokens": round(float(np.mean(toks)), 1) if toks else None,
                     "n_questions": len(questions.get(m, ())), "n_invalid": invalid.get(m, 0)})
    rows.sort(key=lambda r: -(r["score"] if r["score"] is not None else -1))
    return list(COLUMNS), rows


def lengths_note(bench_dir: Path) -> str:
    """Where the style fit's token lengths come from: the answer files' own metadata (written by
    Arena-Hard's add_markdown_info.py) or this project's count."""
    folder = folders.model_answer_dir(bench_dir)
    answers = read_answer_dir(folder) if folder.is_dir() else {}
    if answers and all(len(a.metadata) == len(a.text) for a in answers.values()):
        return "Token lengths and markdown counts: the answer files' metadata."
    return f"Token lengths: {token_counter()}; markdown counted as add_markdown_info.py counts it."


def _metadata(a: Answers) -> dict[str, dict[str, Any]]:
    """Style metadata per answer: the file's own (written by add_markdown_info.py) where present."""
    return {uid: a.metadata.get(uid) or style_metadata(t) for uid, t in a.text.items()}


# show_result.py's verdict weights: a strong verdict counts as three battles.
SHOW_RESULT_WEIGHTS: dict[str, tuple[float, int]] = {
    "A>B": (1, 1), "A>>B": (1, 3), "A=B": (0.5, 1), "A<<B": (0, 3), "A<B": (0, 1),
    "B>A": (0, 1), "B>>A": (0, 3), "B=A": (0.5, 1), "B<<A": (1, 3), "B<A": (1, 1)}
