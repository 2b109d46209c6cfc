"""The project's intervals over one MT-bench run, beside show_result.py's plain means and rates.

Single-answer grading: per model, the mean score of each turn (one score per question: a
bootstrap over questions), and per category and overall the mean over questions of each question's
mean turn score, a question counted only when every judged turn of it is valid (the two turns of a
question move together, so the question is the unit resampled; a question with one readable turn
would bring a turn-1-only mean into a two-turn average). These are the means of `MT-bench/score@turn1`,
`@turn2` and `MT-bench/score` in the save path's results (evaluate.benchmarks.mt_bench.outputs). With
no invalid judgment the overall mean equals show_result.py's pooled average. Paired comparisons of
the models are the save path's own (comparisons/, per category and per turn), not computed here.

Pairwise: per model, win / loss / tie and the adjusted win rate (win + 0.5 tie) / n with a Wilson
interval (ties count half, which makes it slightly conservative), overall, per turn and per
category; each judged (question, turn) is one item. Inconsistent pairs (the two orders disagree,
counted as ties by FastChat) are counted apart: they measure the judge's position bias.

Invalid and failed judgments are never averaged: they are counted, and left out. `average` is every
valid rating of both turns pooled, as show_result.py counts it (no interval: a question's two turns
are not independent); a rating outside the prompt's scale is invalid here, and `fastchat_average`
says what show_result.py, which averages it, would print.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

from ...stats import bootstrap_mean_ci, wilson_interval
from ...stats.intervals import MIN_INTERVAL_N
from .judge import PairJudgment, SingleJudgment

LEVEL = 0.95


def _mean_ci(values: Sequence[float]) -> dict[str, Any]:
    ci = bootstrap_mean_ci(values, level=LEVEL, min_n=MIN_INTERVAL_N) if values else None  # none below 10
    return {"mean": sum(values) / len(values) if values else None, "ci": list(ci) if ci else None, "n": len(values)}


def _question_means(records: Iterable[SingleJudgment]) -> dict[Any, float]:
    """Each question's mean over its judged turns; a question with an invalid or failed turn is left out."""
    per_q: dict[Any, list[float | None]] = {}
    for r in records:
        per_q.setdefault(r.question_id, []).append(float(r.score) if r.valid else None)  # type: ignore[arg-type]
    return {q: sum(v) / len(v) for q, v in per_q.items() if None not in v}  # type: ignore[arg-type]


def single_stats(records: Sequence[SingleJudgment], models: Sequence[str]) -> dict[str, Any]:
    per_model: dict[str, Any] = {}
    for model in models:
        mine = [r for r in records if r.model == model]
        entry: dict[str, Any] = {"invalid": sum(1 for r in mine if not r.valid and not r.game.failed),
                                 "failed": sum(1 for r in mine if r.game.failed)}
        for turn in (1, 2):
            entry[f"turn_{turn}"] = _mean_ci([float(r.score) for r in mine if r.turn == turn and r.valid])  # type: ignore[arg-type]
        entry["overall"] = _mean_ci(list(_question_means(mine).values()))
        valid = [float(r.score) for r in mine if r.valid]  # type: ignore[arg-type]
        entry["average"] = {"mean": sum(valid) / len(valid) if valid else None, "ci": None, "n": len(valid)}
        scale = [r.fastchat_score for r in mine if r.fastchat_score is not None]
        entry["out_of_scale"] = len(scale)
        if scale:  # what show_result.py averages: the out-of-scale ratings too
            entry["fastchat_average"] = (sum(valid) + sum(scale)) / (len(valid) + len(scale))
        entry["categories"] = {cat: _mean_ci(list(_question_means(r for r in mine if r.category == cat).values()))
                               for cat in dict.fromkeys(r.category for r in mine)}
        per_model[model] = entry
    return {"level": LEVEL, "unit": "question", "models": per_model}


def _rate(win: int, loss: int, tie: int) -> dict[str, Any]:
    n = win + loss + tie
    adj = (win + 0.5 * tie) / n if n else None
    ci = wilson_interval(win + 0.5 * tie, n, LEVEL) if n else None
    return {"win": win, "loss": loss, "tie": tie, "n": n, "win_rate_adjusted": adj, "ci": list(ci) if ci else None}


def _outcomes(records: Iterable[PairJudgment], model: str) -> dict[str, Any]:
    win = loss = tie = inconsistent = invalid = 0
    for r in records:
        if not r.valid:
            invalid += 1
            continue
        w = r.winner
        mine = "model_1" if r.model_1 == model else "model_2"
        if w == "tie":
            tie += 1
            inconsistent += int(r.g1_winner != r.g2_winner)
        elif w == mine:
            win += 1
        else:
            loss += 1
    return {**_rate(win, loss, tie), "inconsistent": inconsistent, "invalid": invalid}


def pair_stats(records: Sequence[PairJudgment], models: Sequence[str], baseline: str | None) -> dict[str, Any]:
    per_model: dict[str, Any] = {}
    for model in models:
        if model == baseline:
            continue
        mine = [r for r in records if model in (r.model_1, r.model_2)]
        entry = _outcomes(mine, model)
        for turn in (1, 2):
            entry[f"turn_{turn}"] = _outcomes([r for r in mine if r.turn == turn], model)
        entry["categories"] = {cat: _outcomes([r for r in mine if r.category == cat], model)
                               for cat in dict.fromkeys(r.category for r in mine)}
        per_model[model] = entry
    pairs = []
    if baseline is None:
        for a, b in itertools.combinations(models, 2):
            mine = [r for r in records if {r.model_1, r.model_2} == {a, b}]
            pairs.append({"model_a": a, "model_b": b, **_outcomes(mine, a)})
    return {"level": LEVEL, "unit": "judged (question, turn)", "interval": "Wilson, ties count half",
            "models": per_model, "pairs": pairs}
