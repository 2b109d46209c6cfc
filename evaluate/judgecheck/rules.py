"""The judge check's verdict rules and the proportions they are applied to."""

from __future__ import annotations

from typing import Any

CORRUPTIONS = ("shuffle", "truncate", "other_answer", "swap")
CORRUPTION_TEXT = {
    "shuffle": "sentences shuffled",
    "truncate": "truncated to its first third",
    "other_answer": "the answer to a different question of the same category",
    "swap": "a number or named entity swapped",
}
NEAR_CHANCE_POINT = 0.6
# the trivial rules a labelled judge check compares the judge with (judgecheck.labelled.baselines)
RULE_NAMES = {"longer": "pick the longer answer", "shorter": "pick the shorter answer",
              "first": "always the first (response_a)", "second": "always the second (response_b)",
              "tie": "always a tie"}
POSITION_FLIP_RATE = 0.5
RULES = {
    "labelled": "does not beat the trivial rules when the lower end of the judge's 95% Wilson interval of "
                "agreement is not above the accuracy of the best of 'pick the longer answer', 'pick the shorter "
                "answer', 'always the first', 'always the second' (and 'always a tie' where the file labels ties); "
                "no better than chance when the lower end of the 95% interval of its Cohen's kappa is not above 0; "
                "decides by position when "
                f">= {POSITION_FLIP_RATE:.0%} of the items valid in both orders flip with the order. Agreement: "
                "a judge tie counts half; label ties are left out (counted in 'label_ties_left_out'). Judged on "
                "the parsed verdicts; the probability-weighted and position-calibrated ones are reported beside.",
    "sanity": f"near chance when the preference for the intact text is below {NEAR_CHANCE_POINT} or its 95% "
              "Wilson interval includes 0.5; applied to all pairs pooled (battle and rating separately) and to "
              "the 'other_answer' pairs alone. Ties count half.",
}
# what never changes a reply, as for the judge cache: the server URL too, so replicas of one model
# share one check (and a run on two endpoints finds the check made on one)


def _wilson(k: float, n: float) -> list[float] | None:
    from ..stats.intervals import wilson_interval

    ci = wilson_interval(k, n)
    return [round(ci[0], 4), round(ci[1], 4)] if ci else None


def _prop(k: float, n: int) -> dict[str, Any]:
    return {"rate": round(k / n, 4) if n else None, "n": n, "ci95": _wilson(k, n)}


def near_chance(k: float, n: int) -> bool:
    """The sanity rule: point below 0.6, or a 95% Wilson interval that includes 0.5 (or no data)."""
    if n <= 0:
        return True
    ci = _wilson(k, n)
    return k / n < NEAR_CHANCE_POINT or ci[0] <= 0.5
