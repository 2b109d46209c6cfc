"""Agreement statistics against hand-computed cases and reference implementations: scikit-learn's
`cohen_kappa_score`, statsmodels' `fleiss_kappa`, the `krippendorff` package, and Krippendorff's own
worked example (K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", 2011)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluate.stats.agreement import (cohen_kappa, cohen_kappa_interval, effective_raters, fleiss_kappa,
                                      fleiss_kappa_labels, krippendorff_alpha, pairwise_correlations, strength)


def test_cohen_kappa_hand_computed():
    # 10 items; A says x on 6, B says x on 5; they agree on 7: x x (4 times), y y (3 times)
    a = ["x"] * 6 + ["y"] * 4
    b = ["x"] * 4 + ["y"] * 2 + ["x"] + ["y"] * 3
    p_o = 7 / 10
    p_e = 0.6 * 0.5 + 0.4 * 0.5
    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))


def test_cohen_kappa_against_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(5, 200))
        a = rng.choice(["A", "B", "tie"], size=n, p=[0.5, 0.3, 0.2])
        flip = rng.random(n) < rng.random()
        b = np.where(flip, rng.choice(["A", "B", "tie"], size=n), a)
        want = cohen_kappa_score(a, b)
        got = cohen_kappa(list(a), list(b))
        if math.isnan(want):
            assert got is None
        else:
            assert got == pytest.approx(want, abs=1e-12), trial


def test_cohen_kappa_undefined_and_missing():
    assert cohen_kappa(["A"] * 5, ["A"] * 5) is None  # chance agreement is 1: undefined, not 1 or 0
    assert cohen_kappa([], []) is None
    # a missing label drops its pair
    assert cohen_kappa(["A", "B", None, "A"], ["A", "B", "B", "A"]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        cohen_kappa(["A"], ["A", "B"])


def test_cohen_kappa_interval_contains_estimate_and_stays_in_range():
    rng = np.random.default_rng(0)
    a = list(rng.choice(["A", "B"], size=200))
    b = [x if rng.random() < 0.8 else ("A" if x == "B" else "B") for x in a]
    est = cohen_kappa_interval(a, b, resamples=500)
    assert est.low is not None and est.high is not None
    assert -1 <= est.low <= est.kappa <= est.high <= 1
    assert est.level == 0.95 and est.n == 200
    assert cohen_kappa_interval(a[:5], b[:5]).low is None  # too few items for an interval


def test_fleiss_kappa_against_statsmodels():
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa as sm_fleiss

    rng = np.random.default_rng(7)
    for _ in range(20):
        items, raters = int(rng.integers(3, 60)), int(rng.integers(2, 6))
        truth = rng.integers(0, 3, size=items)
        labels = np.where(rng.random((items, raters)) < 0.7, truth[:, None], rng.integers(0, 3, size=(items, raters)))
        table, _ = aggregate_raters(labels)
        want = sm_fleiss(table, method="fleiss")
        assert fleiss_kappa(table) == pytest.approx(want, abs=1e-12)
        got, used = fleiss_kappa_labels([list(r) for r in labels])
        assert used == items and got == pytest.approx(want, abs=1e-12)


def test_fleiss_kappa_hand_computed_and_edges():
    # two raters who disagree on every item, two categories: P_i = 0, p = (0.5, 0.5), kappa = -1
    assert fleiss_kappa([[1, 1]] * 4) == pytest.approx(-1.0)
    assert fleiss_kappa([[3, 0]] * 4) is None  # one category: undefined
    kappa, used = fleiss_kappa_labels([["A", "B"], ["A", None], ["B", "A"]])
    assert used == 2 and kappa == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 0]])


# Krippendorff (2011), section C: 4 observers, 12 units, values 1-5, missing as None
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def test_krippendorff_alpha_published_example():
    # the paper's results: nominal 0.743, interval 0.849 (ordinal 0.815, ratio 0.797)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "ratio") == pytest.approx(0.797, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_against_the_krippendorff_package(level):
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(11)
    for _ in range(10):
        raters, units = int(rng.integers(2, 5)), int(rng.integers(5, 80))
        truth = rng.integers(1, 6, size=units).astype(float)
        m = truth[None, :] + rng.integers(-1, 2, size=(raters, units))
        m[rng.random((raters, units)) < 0.15] = np.nan
        want = krippendorff.alpha(reliability_data=m, level_of_measurement=level)
        assert krippendorff_alpha(m, level) == pytest.approx(want, abs=1e-9)


def test_krippendorff_alpha_continuous_ratings_and_edges():
    krippendorff = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(5)
    truth = rng.uniform(1, 5, size=300)
    m = np.vstack([truth + rng.normal(0, 0.5, 300), truth + rng.normal(0, 0.5, 300), rng.uniform(1, 5, 300)])
    want = krippendorff.alpha(reliability_data=m, level_of_measurement="interval")
    assert krippendorff_alpha(m, "interval") == pytest.approx(want, abs=1e-9)
    assert krippendorff_alpha([[1, None], [None, 2]]) is None  # no unit with two values
    assert krippendorff_alpha([[3, 3], [3, 3]]) is None  # no variation: undefined
    with pytest.raises(ValueError):
        krippendorff_alpha([[1, 2]], "cardinal")


def test_complete_disagreement_reads_as_disagreement():
    # two judges who rate exactly opposite ends: alpha well below 0, correlation -1
    a = [1, 5, 1, 5, 1, 5]
    b = [5, 1, 5, 1, 5, 1]
    alpha = krippendorff_alpha([a, b], "interval")
    assert alpha is not None and alpha < -0.5
    assert strength(alpha) == "worse than chance"
    corr = pairwise_correlations({"j1": a, "j2": b}, "pearson")
    assert corr[("j1", "j2")]["r"] == pytest.approx(-1.0)


def test_pairwise_correlations_against_scipy_and_missing():
    from scipy.stats import spearmanr

    x = [1.0, 2.5, 3.0, None, 4.0, 2.0]
    y = [2.0, 2.0, 3.5, 1.0, 5.0, None]
    got = pairwise_correlations({"a": x, "b": y})[("a", "b")]
    assert got["n"] == 4
    assert got["r"] == pytest.approx(spearmanr([1.0, 2.5, 3.0, 4.0], [2.0, 2.0, 3.5, 5.0])[0])
    assert pairwise_correlations({"a": [1, 1, 1], "b": [1, 2, 3]})[("a", "b")]["r"] is None


def test_effective_raters():
    assert effective_raters(3, 0.0) == 3
    assert effective_raters(3, 1.0) == 1
    assert effective_raters(4, 0.5) == pytest.approx(4 / 2.5)
    assert effective_raters(3, -0.4) == 3  # anti-correlation is not counted as extra independence
    assert effective_raters(3, None) is None
