"""Agreement of categorical verdicts with labels: raw agreement and Cohen's kappa side by side
(evaluate/stats/label_agreement.py), checked against scikit-learn and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evaluate.stats.label_agreement import agreement_text, verdict_agreement


def test_a_hand_computed_case() -> None:
    """Verdicts A, B, tie, A against labels A, B, A, B: agreement (1 + 1 + .5) / 4 = .625; kappa: p_o =
    2/4, p_e = .5 * .5 (A) + .25 * .5 (B) + .25 * 0 (tie) = .375, kappa = (.5 - .375) / .625 = .2."""
    out = verdict_agreement(["A", "B", "tie", "A", None, "invalid"], ["a", "b", "a", "b", "a", "b"])
    assert out["accuracy"] == 0.625 and out["n"] == 4 and out["no_verdict"] == 2
    assert (out["right"], out["wrong"], out["ties"]) == (2, 1, 1)
    assert out["kappa"] == pytest.approx(0.2) and out["kappa_strength"] == "slight"
    assert out["kappa_ci"] is None  # 4 items: no interval
    assert agreement_text(out).startswith("agreement 0.625 (95% CI ") and "kappa 0.20 (slight)" in agreement_text(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kappa_matches_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.choice(["A", "B"], 200).tolist()
    verdicts = [lab if rng.random() < 0.6 else rng.choice(["A", "B", "tie"]) for lab in labels]
    out = verdict_agreement(verdicts, labels)
    assert out["kappa"] == pytest.approx(cohen_kappa_score(verdicts, labels), abs=1e-4)
    lo, hi = out["kappa_ci"]
    assert lo < out["kappa"] < hi and -1 <= lo and hi <= 1 and out["level"] == 0.95


def test_a_constant_rule_has_kappa_zero_whatever_its_agreement() -> None:
    labels = ["A"] * 90 + ["B"] * 10
    out = verdict_agreement(["A"] * 100, labels)
    assert out["accuracy"] == 0.9 and out["kappa"] == 0.0
    assert verdict_agreement(["tie"] * 100, labels)["kappa"] == 0.0
