"""How well categorical verdicts agree with labels: raw agreement and Cohen's kappa, side by side.

Raw agreement (a tie counts half, as everywhere in this project) says how often the verdicts match;
it does not say how much of that a rule blind to the answers would get. A judge that calls the first
answer the winner every time agrees with labels as often as the labels say "a": 0.5 on a balanced
set, 0.9 on a set where the first answer is usually the better one. Cohen's kappa takes out what
the two sides' own label frequencies give by chance: 0 for any constant rule, 1 for perfect
agreement, below 0 worse than chance. Both are reported, with their intervals, for the judge and
for the trivial rules on the same items.

Kappa is over the categories A, B and tie: a label here is A or B (label ties are left out before),
so a verdict "tie" never matches and counts as a disagreement in kappa, where raw agreement gives it
half. (scikit-learn's `cohen_kappa_score` on the same two lists gives the same number.)
"""

from __future__ import annotations

from typing import Any, Sequence

from .agreement import cohen_kappa_interval, strength
from .intervals import wilson_interval

VERDICTS = ("A", "B", "tie")
KAPPA_NOTE = ("Cohen's kappa over A / B / tie (a verdict tie never matches a label), with a percentile bootstrap "
              "interval over items; 0 is chance (any constant rule), 1 perfect")


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def verdict_agreement(verdicts: Sequence[str | None], labels: Sequence[str], *, level: float = 0.95,
                      resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Agreement of `verdicts` ("A", "B", "tie"; None or "invalid": no verdict, left out and counted)
    with `labels` ("A" / "B", or "a" / "b"), item by item: accuracy with ties half and its Wilson
    interval, Cohen's kappa with its bootstrap interval, both at `level`, and Landis and Koch's word."""
    if len(verdicts) != len(labels):
        raise ValueError(f"verdict_agreement: {len(verdicts)} verdicts against {len(labels)} labels")
    pairs = [(str(v), str(lab).upper()) for v, lab in zip(verdicts, labels) if v in VERDICTS]
    n = len(pairs)
    right = sum(v == lab for v, lab in pairs)
    ties = sum(v == "tie" for v, _ in pairs)
    k = right + 0.5 * ties
    ci = wilson_interval(k, n, level) if n else None
    kap = cohen_kappa_interval([v for v, _ in pairs], [lab for _, lab in pairs], level=level,
                               resamples=resamples, seed=seed)
    return {"accuracy": _r(k / n) if n else None, "ci": [_r(ci[0]), _r(ci[1])] if ci else None, "n": n,
            "right": right, "wrong": n - right - ties, "ties": ties, "no_verdict": len(verdicts) - n,
            "kappa": _r(kap.kappa), "kappa_ci": [_r(kap.low), _r(kap.high)] if kap.low is not None else None,
            "kappa_strength": strength(kap.kappa), "level": level}


def agreement_text(block: dict[str, Any]) -> str:
    """"agreement 0.620 (95% CI 0.554-0.681), kappa 0.24 (fair, 95% CI 0.12-0.36)" from a block."""
    def ci(x: Any) -> str:
        return f"{x[0]:.3f}-{x[1]:.3f}" if x else "-"

    if block.get("accuracy") is None:
        return "no verdict"
    lvl = f"{block.get('level', 0.95):.0%}"
    kap = ("kappa undefined" if block.get("kappa") is None else
           f"kappa {block['kappa']:.2f} ({block['kappa_strength']}"
           + (f", {lvl} CI {block['kappa_ci'][0]:.2f} to {block['kappa_ci'][1]:.2f})" if block.get("kappa_ci") else ")"))
    return f"agreement {block['accuracy']:.3f} ({lvl} CI {ci(block.get('ci'))}), {kap}"
