"""The project's statistics over one MT-bench run, on top of show_result.py's plain means and rates.

Single-answer grading: per model, the mean score of each turn (one score per question: a
bootstrap over questions), and per category and overall the mean over questions of each question's
mean valid turn score (the two turns of a question move together, so the question is the unit
resampled). With no invalid judgment the overall mean equals show_result.py's pooled average.
Paired comparisons of every two models on the questions both have a valid score for, per turn and
overall, Holm-adjusted over all of them.

Pairwise: per model, win / loss / tie and the adjusted win rate (win + 0.5 tie) / n with a Wilson
interval (ties count half, which makes it slightly conservative), overall, per turn and per
category; each judged (question, turn) is one item. Inconsistent pairs (the two orders disagree,
counted as ties by FastChat) are counted apart: they measure the judge's position bias.

Invalid and failed judgments are never averaged: they are counted, and left out.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

from ..stats import bootstrap_mean_ci, holm, paired_compare, verdict, wilson_interval
from .mt_bench_judge import PairJudgment, SingleJudgment

LEVEL = 0.95


def _mean_ci(values: Sequence[float]) -> dict[str, Any]:
    ci = bootstrap_mean_ci(values, level=LEVEL) if values else None
    return {"mean": sum(values) / len(values) if values else None, "ci": list(ci) if ci else None, "n": len(values)}


def _question_means(records: Iterable[SingleJudgment]) -> dict[Any, float]:
    per_q: dict[Any, list[float]] = {}
    for r in records:
        if r.valid:
            per_q.setdefault(r.question_id, []).append(float(r.score))  # type: ignore[arg-type]
    return {q: sum(v) / len(v) for q, v in per_q.items()}


def single_stats(records: Sequence[SingleJudgment], models: Sequence[str]) -> dict[str, Any]:
    per_model: dict[str, Any] = {}
    for model in models:
        mine = [r for r in records if r.model == model]
        entry: dict[str, Any] = {"invalid": sum(1 for r in mine if not r.valid and not r.game.failed),
                                 "failed": sum(1 for r in mine if r.game.failed)}
        for turn in (1, 2):
            entry[f"turn_{turn}"] = _mean_ci([float(r.score) for r in mine if r.turn == turn and r.valid])  # type: ignore[arg-type]
        entry["overall"] = _mean_ci(list(_question_means(mine).values()))
        entry["categories"] = {cat: _mean_ci(list(_question_means(r for r in mine if r.category == cat).values()))
                               for cat in dict.fromkeys(r.category for r in mine)}
        per_model[model] = entry
    return {"level": LEVEL, "unit": "question", "models": per_model, "paired": _paired(records, models)}


def _paired(records: Sequence[SingleJudgment], models: Sequence[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for a, b in itertools.combinations(models, 2):
        for part in ("turn_1", "turn_2", "overall"):
            def scores(model: str) -> dict[Any, float]:
                mine = [r for r in records if r.model == model]
                if part == "overall":
                    return _question_means(mine)
                return {r.question_id: float(r.score) for r in mine  # type: ignore[arg-type]
                        if r.valid and r.turn == int(part[-1])}
            sa, sb = scores(a), scores(b)
            common = [q for q in sa if q in sb]
            res = paired_compare([sa[q] for q in common], [sb[q] for q in common], level=LEVEL)
            rows.append({"model_a": a, "model_b": b, "part": part, **res.to_dict()})
    for row, p_adj in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = p_adj
        row["verdict"] = verdict(p_adj, row["diff"])
    return rows


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
