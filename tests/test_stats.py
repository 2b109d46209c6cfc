"""evaluate.stats: intervals, the exact paired test and detectable sizes, scales, length/style control, judge bias.

Simulated data with planted answers; the expected values are either planted or computed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluate.stats import bootstrap_mean_ci, score_scale, wilson_interval
from evaluate.stats.battle import (battle_analysis, bradley_terry, judge_bias, length_controlled_win_rate,
                                   style_features)
from evaluate.stats.paired import detectability, mde, min_attainable_p, sign_flip_p


# --- intervals ----------------------------------------------------------------------------------
@pytest.mark.parametrize("values", [[0.98, 1.0], [0.0, 0.03], [0.0, 1.0], [1.0, 1.0]])
def test_bootstrap_ci_stays_on_a_0_1_scale_with_two_values(values):
    lo, hi = bootstrap_mean_ci(values, bounds=(0.0, 1.0))
    assert 0.0 <= lo <= np.mean(values) <= hi <= 1.0
    assert min(values) <= lo and hi <= max(values)


@pytest.mark.parametrize("values", [[4.9, 5.0], [1.0, 1.2], [1.0, 5.0], [5.0, 5.0, 4.0]])
def test_bootstrap_ci_stays_on_a_1_5_rating_scale(values):
    lo, hi = bootstrap_mean_ci(values, bounds=(1.0, 5.0))
    assert 1.0 <= lo <= hi <= 5.0


def test_bootstrap_ci_edge_cases_and_seed():
    assert bootstrap_mean_ci([]) is None
    assert bootstrap_mean_ci([0.7]) == (0.7, 0.7)
    x = np.random.default_rng(3).normal(size=100)
    assert bootstrap_mean_ci(x, seed=1) == bootstrap_mean_ci(x, seed=1)
    lo, hi = bootstrap_mean_ci(x, level=0.95)
    lo90, hi90 = bootstrap_mean_ci(x, level=0.90)
    assert lo < lo90 < x.mean() < hi90 < hi
    # close to the normal-theory half-width 1.96 * sd / sqrt(n) for a large, symmetric sample
    half = 1.96 * x.std(ddof=1) / 10
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.15)
    with pytest.raises(ValueError):
        bootstrap_mean_ci([1.0, float("nan")])


def test_wilson_interval_matches_the_hand_formula_and_allows_half_ties():
    # k=7, n=10, z=1.959964: centre (0.7 + z^2/20) / (1 + z^2/10); half-width z*sqrt(.21/10 + z^2/400)/(1 + z^2/10)
    z = 1.959963984540054
    denom = 1 + z * z / 10
    centre = (0.7 + z * z / 20) / denom
    half = z * math.sqrt(0.021 + z * z / 400) / denom
    lo, hi = wilson_interval(7, 10)
    assert (lo, hi) == pytest.approx((centre - half, centre + half))
    lo2, hi2 = wilson_interval(6.5, 10)  # 6 wins and a tie
    assert lo2 < lo and hi2 < hi
    assert wilson_interval(0, 0) is None
    assert wilson_interval(7, 10, level=0.5)[0] > lo


# --- paired comparison: the exact test and what an n can detect ------------------------------------
def test_exact_sign_flip_p_by_hand():
    # d = [1, 2, 3]: the 8 sums +-1+-2+-3 are 6, 4, 2, 0, 0, -2, -4, -6; |sum| >= 6 in 2 of 8
    assert sign_flip_p(np.array([1.0, 2.0, 3.0])) == 0.25
    # d = [2, -1, 3] (observed 4): sums 6, 4, 0, -2, 2, 0, -4, -6; |sum| >= 4 in 4 of 8
    assert sign_flip_p(np.array([2.0, -1.0, 3.0])) == 0.5


def test_mde_by_hand():
    # d = [1, 2, 3, 4]: sd = sqrt(5/3) = 1.290994; (z_.975 + z_.8) = 1.959964 + 0.841621 = 2.801585
    assert mde(math.sqrt(5 / 3), 4) == pytest.approx(2.801585 * 1.290994 / 2, rel=1e-5)
    assert mde(1.0, 1) is None and mde(0.0, 10) is None


def test_what_many_differences_can_detect():
    # 2 / 2^k by hand for small k; above k = 1024, 2 / 2^k overflowed a float (a run of 10,000 items crashed)
    assert min_attainable_p(3) == 0.25 and min_attainable_p(0) == 1.0
    assert min_attainable_p(5000) == 0.0
    rng = np.random.default_rng(0)
    assert detectability(rng.normal(0.1, 1.0, 10_000)).startswith("n = 10000 detects |A − B| of about 0.028")


def test_score_scale():
    """The scale is the signature's (a run writes its family's declared scale there); nothing else."""
    assert score_scale("GPT/relevance", {"evaluator": "rating", "scale": [1, 5]}) == (1.0, 5.0)
    assert score_scale("GPT/relevance", {"evaluator": "rating", "scale": [1, 10]}) == (1.0, 10.0)
    assert score_scale("GPT/relevance", {"evaluator": "battle", "scale": [1, 10]}) is None  # the reply's, not a rating's
    assert score_scale("Metrics/BLEU-4", {"scale": "0-1"}) == (0.0, 1.0)
    assert score_scale("Metrics/BERTScore-F1", {"rescaled": "yes (base.tsv)", "scale": None}) is None
    assert score_scale("SAGEval/accuracy", None) is None
    assert score_scale("RepEval/fluency", {"evaluator": "RepEval", "scale": None}) is None
    assert score_scale("Other/x", {"scale": "0 to 100"}) == (0.0, 100.0)


# --- length-controlled win rate ------------------------------------------------------------------
def _lengths_and_outcomes(rng, n, mean_a, mean_b, theta, beta):
    la, lb = rng.normal(mean_a, 60, n), rng.normal(mean_b, 60, n)
    d = la - lb
    p = 1 / (1 + np.exp(-(theta + beta * np.tanh(d / d.std()))))
    u = rng.random(n)
    y = np.where(u < p - 0.05, 1.0, np.where(u < p + 0.05, 0.5, 0.0))  # some ties
    return y, la, lb


def test_lc_equals_raw_when_lengths_are_equal():
    rng = np.random.default_rng(1)
    y = rng.choice([0.0, 0.5, 1.0], 300, p=[0.3, 0.1, 0.6])
    lens = rng.normal(200, 50, 300)
    r = length_controlled_win_rate(y, lens, lens, resamples=100)
    assert r["lc_win_rate"] == pytest.approx(r["raw_win_rate"], abs=1e-3)
    assert r["raw_win_rate"] == pytest.approx(y.mean())
    assert r["lc_interval"][0] < r["lc_win_rate"] < r["lc_interval"][1]


def test_lc_removes_a_planted_length_preference():
    # no true difference (theta = 0); the judge likes length and A writes longer answers
    y, la, lb = _lengths_and_outcomes(np.random.default_rng(2), 1500, 300, 220, 0.0, 2.0)
    r = length_controlled_win_rate(y, la, lb, resamples=100)
    assert r["raw_win_rate"] > 0.65
    assert abs(r["lc_win_rate"] - 0.5) < 0.05
    assert r["lc_interval"][0] < 0.5 < r["lc_interval"][1]
    assert r["beta"] > 1.0


def test_lc_keeps_a_true_preference_with_random_lengths():
    y, la, lb = _lengths_and_outcomes(np.random.default_rng(3), 1500, 250, 250, 1.0, 0.0)
    r = length_controlled_win_rate(y, la, lb, resamples=100)
    expected = 1 / (1 + math.exp(-1.0))
    assert r["lc_win_rate"] == pytest.approx(expected, abs=0.04)
    assert r["lc_interval"][0] > 0.6
    assert abs(r["beta"]) < 0.3


def test_lc_all_wins_stays_finite():
    r = length_controlled_win_rate([1.0] * 20, list(range(20)), [10] * 20, resamples=20)
    assert 0.95 < r["lc_win_rate"] <= 1.0 and math.isfinite(r["theta"])
    assert length_controlled_win_rate([], [], [])["lc_win_rate"] is None


# --- style-controlled Bradley-Terry --------------------------------------------------------------
def test_style_features():
    text = "# Title\n\nSome text with **bold** words.\n\n- one\n- two\n1. three\n中文"
    f = style_features(text)
    # words: Title / Some text with bold words / one two / 1 three / 中 文 = 1 + 5 + 2 + 2 + 2
    assert f == {"length": 12, "headers": 1, "list_items": 3, "bold": 1}
    assert style_features("") == {"length": 0, "headers": 0, "list_items": 0, "bold": 0}


def test_style_controlled_bt_recovers_planted_strengths():
    rng = np.random.default_rng(0)
    strength = {"m0": 0.0, "m1": 0.5, "m2": 1.0, "m3": 1.5, "m4": 2.0}  # true order: m4 > m3 > ... > m0
    base_len = {"m0": 600, "m1": 200, "m2": 200, "m3": 200, "m4": 200}   # the weakest model is verbose
    names = list(strength)
    battles = []
    for _ in range(3000):
        a, b = (str(m) for m in rng.choice(names, 2, replace=False))
        la, lb = base_len[a] * rng.lognormal(0, 0.3), base_len[b] * rng.lognormal(0, 0.3)
        z = strength[a] - strength[b] + 3.0 * (la - lb) / (la + lb)  # the judge likes length
        battles.append((a, b, float(rng.random() < 1 / (1 + math.exp(-z))), {"length": la}, {"length": lb}))
    r = bradley_terry(battles, resamples=30)
    true_rank = {m: 5 - i for i, m in enumerate(names)}
    assert r["raw"]["m0"]["rank"] < true_rank["m0"] - 1  # the verbose model is ranked too high
    assert {m: v["rank"] for m, v in r["style_controlled"].items()} == true_rank
    coef = r["style_coefficients"]["length"]
    assert coef["coef"] > 0 and coef["interval"][0] > 0
    ratings = [v["rating"] for v in r["style_controlled"].values()]
    assert np.mean(ratings) == pytest.approx(1000.0)
    # m4 - m0 is 2 logits = 347 Elo points
    gap = r["style_controlled"]["m4"]["rating"] - r["style_controlled"]["m0"]["rating"]
    assert gap == pytest.approx(2.0 * 400 / math.log(10), rel=0.2)
    for v in r["style_controlled"].values():
        assert v["interval"][0] <= v["rating"] <= v["interval"][1]
    assert r["interval"].startswith("95% percentile interval") and r["level"] == 0.95  # one level, stated once
    assert r["first"]["style_controlled"]["model"] == "m4" and r["first"]["style_controlled"]["clearly"]


def test_bradley_terry_first_place_and_question_bootstrap():
    """Three models of equal strength: none is 'clearly first'; a far stronger one is. Resampling
    questions keeps a question's verdicts together (the raw and controlled tables share the resamples)."""
    rng = np.random.default_rng(3)
    names = ["a", "b", "c"]

    def battles(strength, questions=60):
        out, groups = [], []
        for q in range(questions):
            for x, y in (("a", "b"), ("a", "c"), ("b", "c")):
                z = strength[x] - strength[y]
                out.append((x, y, float(rng.random() < 1 / (1 + math.exp(-z))), {"length": 100.0 + rng.random()},
                            {"length": 100.0 + rng.random()}))
                groups.append(f"q{q}")
        return out, groups

    even, groups = battles({m: 0.0 for m in names})
    r = bradley_terry(even, resamples=100, groups=groups)
    assert not r["first"]["raw"]["clearly"] and r["first"]["raw"]["tied_with"]
    assert "no model is clearly first" in r["first"]["raw"]["text"] and "60 questions" in r["interval"]
    strong, groups = battles({"a": 3.0, "b": 0.0, "c": 0.0})
    r = bradley_terry(strong, resamples=100, groups=groups)
    assert r["first"]["raw"]["model"] == "a" and r["first"]["raw"]["clearly"]
    assert all(v["interval"][0] > 0 for v in r["first"]["raw"]["margins"].values())
    with pytest.raises(ValueError):
        bradley_terry(strong, groups=groups[:-1])


def test_bt_without_features_is_raw_only():
    battles = [("x", "y", 1.0, None, None), ("x", "y", 0.5, None, None), ("y", "x", 0.0, None, None)]
    r = bradley_terry(battles, resamples=10)
    assert r["style_controlled"] is None and r["raw"]["x"]["rank"] == 1


# --- judge bias and a battle file ----------------------------------------------------------------
def _item(i, verdict_, ab, ba, category="qa"):
    orders = [{"order": "AB", "verdict": ab}] + ([{"order": "BA", "verdict": ba}] if ba else [])
    return {"id": str(i), "category": category, "verdict": verdict_, "orders": orders,
            "weighted_verdict": None}


def test_judge_bias_by_hand():
    items = [
        _item(1, "A", "A", "A"),        # consistent
        _item(2, "tie", "A", "B"),      # first position wins both times: a flip
        _item(3, "tie", "B", "A"),      # second position wins both times: a flip
        _item(4, "invalid", "A", "invalid"),
        _item(5, "B", "B", "B"),
    ]
    lengths = {"1": (100, 50), "2": (10, 10), "3": (5, 50), "4": (1, 2), "5": (300, 20)}
    r = judge_bias(items, lengths)
    # decisive orders: 1 AB:A(first) 1 BA:A(second) 2 AB:A(first) 2 BA:B(first) 3 AB:B(second)
    # 3 BA:A(second) 4 AB:A(first) 5 AB:B(second) 5 BA:B(first) -> 5 of 9 won by the first shown
    assert r["first_position_wins"]["rate"] == pytest.approx(5 / 9)
    assert r["flip_rate"]["rate"] == pytest.approx(2 / 4) and r["flip_rate"]["n"] == 4
    assert r["invalid_rate"]["rate"] == pytest.approx(1 / 5)
    assert r["invalid_order_rate"]["rate"] == pytest.approx(1 / 10)
    # decisive items 1 (A longer, A won) and 5 (A longer, B won) -> 1 of 2
    assert r["longer_wins"]["rate"] == 0.5 and r["longer_wins"]["n"] == 2


def test_battle_analysis_structure():
    rng = np.random.default_rng(4)
    items, out_a, out_b = [], {}, {}
    for i in range(60):
        la, lb = int(rng.integers(5, 80)), int(rng.integers(5, 80))
        out_a[str(i)], out_b[str(i)] = "word " * la, "- word\n" * lb
        v = "A" if la > lb else "B" if lb > la else "tie"
        items.append(_item(i, v, v, v, category="qa" if i < 40 else "chat"))
    items.append(_item(99, "invalid", "invalid", "A"))
    data = {"summary": {"model_a": "ma", "model_b": "mb"}, "items": items}
    r = battle_analysis(data, out_a, out_b, resamples=30)
    assert r["model_a"] == "ma" and set(r["by_category"]) == {"qa", "chat"}
    assert r["overall"]["length_controlled"]["n"] == 60
    assert r["overall"]["length_controlled"]["beta"] > 1  # the verdicts follow length exactly
    assert r["overall"]["judge_bias"]["longer_wins"]["rate"] == 1.0
    assert r["overall"]["judge_bias"]["invalid_rate"]["rate"] == pytest.approx(1 / 61)
    assert r["by_category"]["qa"]["length_controlled"]["n"] == 40
    assert set(r["overall"]["style_controlled"]["raw"]) == {"ma", "mb"}
    assert r["overall"]["without_outputs"] == 0


def test_the_vectorised_bootstrap_fits_equal_the_one_by_one_fits():
    from evaluate.stats.bradley_terry import fit_logistic, fit_logistic_many
    from evaluate.stats.intervals import bootstrap_counts as _boot_counts

    rng = np.random.default_rng(3)
    n = 60
    x = np.column_stack([np.ones(n), np.tanh(rng.normal(size=n)), rng.normal(size=n)])
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.3 + 1.2 * x[:, 1])))).astype(float)
    y[::7] = 0.5  # ties
    counts = _boot_counts(rng, n, 40)
    full = fit_logistic(x, y)
    many = fit_logistic_many(x, y, counts, init=full)
    one = np.array([fit_logistic(x, y, c, init=full) for c in counts])
    assert np.allclose(many, one, atol=1e-6)
