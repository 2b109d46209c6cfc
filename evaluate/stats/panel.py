"""A panel of judges: how their ratings and verdicts combine into the panel's, and how far they agree.

Combining (one item at a time, over the judges that gave a valid value; an item none of them gave
one is invalid, which the caller records with the judges' reasons):

- a rating: the mean of the judges' ratings (`weights`: a weighted mean), or their median (with
  weights: the weighted median, the value that halves the total weight; where a whole interval
  does, its midpoint, so equal weights give the ordinary median);
- a battle verdict: a vote, A +1, B -1, tie 0, each judge's vote times its weight; the panel's verdict
  is the sign of the sum: the side the judges prefer, an even split (or no preference) a tie;
- a probability that A is better: the (weighted) mean of the judges' probabilities; its verdict is
  A above 0.5, B below, a tie at 0.5.

Agreement (the panel's judges as raters of the same items; `evaluate.stats.agreement` computes each
figure and is checked there against scikit-learn, statsmodels and the krippendorff package):
ratings: Krippendorff's alpha at the interval level (continuous ratings, missing values allowed);
verdicts: Fleiss' kappa over A / B / tie on the items every judge decided; for both each pair of
judges' Spearman correlation and the effective number of judges, n / (1 + (n - 1) r) with r their
mean pairwise correlation (correlated judges weigh like fewer independent ones; a negative r counts
as 0, disagreement is not extra independence). Every figure is None where undefined, never 0.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

from ..core.records import judge_key, split_judge_key
from .agreement import (cohen_kappa, effective_raters, fleiss_kappa_labels, krippendorff_alpha,
                        pairwise_correlations, strength)

Rating = Literal["mean", "median"]
VOTE = {"A": 1.0, "B": -1.0, "tie": 0.0}
OUTCOME = {"A": 1.0, "tie": 0.5, "B": 0.0}  # a verdict as a number, for the judges' correlation

RATING_RULE = {"mean": "the mean of the judges' valid ratings", "median": "the median of the judges' valid ratings"}
WEIGHTED_RULE = {"mean": "the weighted mean of the judges' valid ratings",
                 "median": "the weighted median of the judges' valid ratings (the value that halves the weight)"}
VERDICT_RULE = ("the judges vote (A +1, B -1, tie 0, each times its weight) and the sign of the sum decides: the side "
                "more of the judges' weight prefers; an even split is a tie; invalid verdicts do not vote; no valid "
                "verdict: invalid")
PROBABILITY_RULE = ("the mean of the judges' probabilities that A is better (each from its log-probabilities, averaged "
                    "over both orders), A above 0.5, B below; only where every judge with a valid verdict gives one")
CALIBRATED_RULE = "the judges' position-calibrated verdicts, voted as the raw ones; only where every judge has one"


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value that halves the total weight (the midpoint where a whole interval does: with equal
    weights the ordinary median)."""
    if not values:
        raise ValueError("weighted_median: no values")
    pairs = sorted(zip(values, weights))
    total = sum(w for _, w in pairs)
    half, cum = total / 2.0, 0.0
    for i, (v, w) in enumerate(pairs):
        cum += w
        if math.isclose(cum, half, rel_tol=1e-12, abs_tol=1e-12) and i + 1 < len(pairs):
            return (v + pairs[i + 1][0]) / 2.0
        if cum > half:
            return v
    return pairs[-1][0]


def combine_rating(values: Sequence[float], weights: Sequence[float] | None = None, how: Rating = "mean") -> float:
    """The panel's rating of one item from its judges' valid ratings (see the module docstring)."""
    if not values:
        raise ValueError("combine_rating: no valid rating")
    w = list(weights) if weights is not None else [1.0] * len(values)
    if len(w) != len(values):
        raise ValueError(f"combine_rating: {len(values)} ratings and {len(w)} weights")
    if how == "median":
        return weighted_median(values, w)
    if how != "mean":
        raise ValueError(f'combine_rating: how "{how}" (expected mean or median)')
    return sum(v * x for v, x in zip(values, w)) / sum(w)


def vote(verdicts: Sequence[str], weights: Sequence[float] | None = None) -> str:
    """The panel's verdict from its judges' valid verdicts ("A" / "B" / "tie"): the sign of the weighted
    vote. No verdict: "invalid"."""
    if not verdicts:
        return "invalid"
    w = list(weights) if weights is not None else [1.0] * len(verdicts)
    total = sum(VOTE[v] * x for v, x in zip(verdicts, w))
    if math.isclose(total, 0.0, abs_tol=1e-12):
        return "tie"
    return "A" if total > 0 else "B"


def mean_probability(ps: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """The (weighted) mean of the judges' probabilities that A is better."""
    if not ps:
        raise ValueError("mean_probability: no probability")
    w = list(weights) if weights is not None else [1.0] * len(ps)
    return sum(p * x for p, x in zip(ps, w)) / sum(w)


def _mean_r(pairs: list[dict[str, Any]]) -> float | None:
    rs = [p["r"] for p in pairs if p.get("r") is not None]
    return sum(rs) / len(rs) if rs else None


def rating_agreement(ratings: Mapping[str, Sequence[float | None]]) -> dict[str, Any]:
    """How far the judges' ratings of the same items agree: Krippendorff's alpha (interval), each pair's
    Spearman correlation, the effective number of judges. `ratings`: judge -> one value per item (None:
    no valid rating)."""
    names = list(ratings)
    matrix = [list(ratings[n]) for n in names]
    alpha = krippendorff_alpha(matrix, "interval") if len(names) >= 2 else None
    units = sum(1 for col in zip(*matrix) if sum(v is not None for v in col) >= 2) if matrix else 0
    pairs = [{"judges": [a, b], **v} for (a, b), v in pairwise_correlations(dict(ratings), "spearman").items()]
    mean_r = _mean_r(pairs)
    return {"judges": len(names), "items": units, "alpha": alpha, "level": "interval", "strength": strength(alpha),
            "pairwise": pairs, "mean_r": mean_r, "effective_judges": effective_raters(len(names), mean_r)}


def verdict_agreement(verdicts: Mapping[str, Sequence[str | None]]) -> dict[str, Any]:
    """How far the judges' battle verdicts on the same items agree: Fleiss' kappa over A / B / tie on the
    items every judge decided, each pair's Cohen's kappa, share of identical verdicts and Spearman
    correlation (A 1, tie 0.5, B 0), the effective number of judges. `verdicts`: judge -> one per item
    ("A", "B", "tie"; None or "invalid": no verdict)."""
    names = list(verdicts)
    clean = {n: [v if v in OUTCOME else None for v in verdicts[n]] for n in names}
    rows = [list(col) for col in zip(*(clean[n] for n in names))] if names else []
    kappa, used = fleiss_kappa_labels(rows) if len(names) >= 2 else (None, 0)
    numeric = {n: [OUTCOME[v] if v is not None else None for v in clean[n]] for n in names}
    corr = pairwise_correlations(numeric, "spearman")
    pairs = []
    for (a, b), c in corr.items():
        both = [(x, y) for x, y in zip(clean[a], clean[b]) if x is not None and y is not None]
        pairs.append({"judges": [a, b], "n": len(both), "r": c["r"], "method": "spearman",
                      "cohen_kappa": cohen_kappa([x for x, _ in both], [y for _, y in both]) if both else None,
                      "same_verdict": sum(x == y for x, y in both) / len(both) if both else None})
    mean_r = _mean_r(pairs)
    return {"judges": len(names), "items": used, "fleiss_kappa": kappa, "strength": strength(kappa),
            "pairwise": pairs, "mean_r": mean_r, "effective_judges": effective_raters(len(names), mean_r)}


def agreement_sentence(value: float | None) -> str:
    """What an alpha or a kappa says about a panel, in words beside the number."""
    if value is None:
        return "agreement undefined (too few items, or no variation)"
    if value < 0:
        return "the judges disagree (worse than chance)"
    if value <= 0.2:
        return f"the judges barely agree ({strength(value)})"
    return f"the judges agree ({strength(value)})"


def panel_scores(items: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The panel scores found in result-file items: score key -> its judges (`GPT/correctness` ->
    [a, b] when items hold `GPT/correctness@a` and `@b`). A conversation's turn keys count under
    their own key (`GPT/relevance@turn2` -> the judges of `GPT/relevance@a@turn2`)."""
    out: dict[str, list[str]] = {}
    for it in items:
        for key in (*(it.get("scores") or {}), *(it.get("invalid") or {})):
            base, judge = split_judge_key(key)
            if judge is not None and judge not in out.setdefault(base, []):
                out[base].append(judge)
    return {k: v for k, v in out.items() if len(v) >= 2}


def items_rating_agreement(items: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per panel score of these result-file items (one model's, or every model's together), how far
    the judges' ratings agree (`rating_agreement`): an item's rating by a judge is its valid score
    under `<score>@<judge>`, missing where that judge's rating is invalid or absent."""
    out = {}
    for base, judges in panel_scores(items).items():
        ratings: dict[str, list[float | None]] = {j: [] for j in judges}
        for it in items:
            scores, invalid = it.get("scores") or {}, it.get("invalid") or {}
            keys = {j: judge_key(base, j) for j in judges}
            if not any(k in scores or k in invalid for k in keys.values()):
                continue  # an item this score does not cover
            for j, k in keys.items():
                v = scores.get(k)
                ratings[j].append(float(v) if isinstance(v, (int, float)) and k not in invalid
                                  and math.isfinite(v) else None)
        out[base] = rating_agreement(ratings)
    return out
