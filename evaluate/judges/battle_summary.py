"""What a battle file says beyond its verdicts: the summary per category, the verdicts controlled for
length and style, and the one ranking of three models or more. The GPT family's battles, the three
benchmarks' battle files and `eval.py merge` all summarise battles here."""

from __future__ import annotations

from typing import Any

from ..core.io import clean_json

RANKING_SCHEMA = "llm-eval-ranking/2"


def controlled(battle: dict[str, Any], outputs_a: dict[str, str], outputs_b: dict[str, str]) -> dict[str, Any]:
    """The battle's verdicts controlled for length and style (evaluate.stats.battle), with the
    headline numbers first: the length-controlled win rate of model A, its interval, the length coefficient."""
    from ..stats.battle import battle_analysis

    analysis = battle_analysis(battle, outputs_a, outputs_b)
    lc = analysis["overall"]["length_controlled"]
    return {"lc_win_rate": lc.get("lc_win_rate"), "lc_ci": lc.get("lc_interval"), "level": lc.get("level"),
            "length_coef": lc.get("beta"), "longer_wins": analysis["overall"]["judge_bias"].get("longer_wins"),
            **analysis}


def battle_ranking(results, outputs: dict[str, dict[str, str]], *, resamples: int = 200,
                   seed: int = 0) -> dict[str, Any] | None:
    """The one ranking of a run with more than two models: Bradley-Terry over every pair's verdicts,
    raw and controlled for length and markdown style (headers, list items, bold) as Chatbot Arena and
    Arena-Hard do, side by side from the same bootstrap over questions at one level (95%), with whether
    the top model is clearly first. None when fewer than two verdicts were decided."""
    from ..stats.battle import OUTCOME, STYLE_FEATURES, style_features
    from ..stats.bradley_terry import bradley_terry

    battles, groups = [], []
    for res in results:
        for it in res.items:
            if it.verdict in OUTCOME or it.p_a is not None:  # a soft verdict is the outcome when there is one
                battles.append((res.model_a, res.model_b, OUTCOME[it.verdict] if it.p_a is None else it.p_a,
                                style_features(outputs[res.model_a].get(it.id, "")),
                                style_features(outputs[res.model_b].get(it.id, ""))))
                groups.append(f"{it.category}\x00{it.id}")
    if len(battles) < 2:
        return None
    out = bradley_terry(battles, features=list(STYLE_FEATURES), resamples=resamples, seed=seed, groups=groups)
    return {"schema": RANKING_SCHEMA, "n_items": len(set(groups)), **out}


def by_category(res) -> dict[str, Any]:
    """The battle's summary per category of its items."""
    cats: dict[str, list] = {}
    for it in res.items:
        cats.setdefault(it.category, []).append(it)
    return {cat: clean_json(res.part(items).summary()) for cat, items in sorted(cats.items())}
