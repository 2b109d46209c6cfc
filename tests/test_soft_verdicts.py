"""Soft verdicts: a battle item may carry the probability that A wins (AlpacaEval's preference, or read
from a judge's log-probabilities); the win rate, its interval, the length-controlled win rate and the
Bradley-Terry ranking use it, and the discrete win rate stays beside it. Checked on constructed data
whose answers are known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluate.judges.battle_summary import battle_ranking
from evaluate.judges.battle import BattleItem, BattleResult, OrderJudgment
from evaluate.stats.battle import battle_analysis, length_controlled_win_rate


def _item(i: int, p: float) -> BattleItem:
    verdict = "A" if p > 0.5 else "B" if p < 0.5 else "tie"
    return BattleItem(id=str(i), verdict=verdict, orders=[OrderJudgment(order="AB", verdict=verdict)], p_a=p)


def test_lc_of_soft_labels_at_equal_lengths_is_their_mean():
    """With every length difference 0 the model is sigmoid(theta): theta = logit(mean y) maximises the
    soft-label likelihood, so LC = the mean probability (up to the tiny L2 penalty)."""
    y = [0.9, 0.8, 0.65, 0.3, 0.75, 0.6, 0.55, 0.95, 0.2, 0.7, 0.85, 0.4]
    lengths = [100.0] * len(y)
    got = length_controlled_win_rate(y, lengths, lengths, resamples=200)
    assert got["raw_win_rate"] == pytest.approx(np.mean(y))
    assert got["lc_win_rate"] == pytest.approx(np.mean(y), abs=1e-3)
    assert got["lc_interval"][0] < got["lc_win_rate"] < got["lc_interval"][1]
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        length_controlled_win_rate([1.2], [1.0], [2.0])


def test_a_soft_label_is_the_same_fit_as_its_weighted_discrete_observations():
    """y = 0.25 on an item is the likelihood of one win weighted 0.25 and one loss weighted 0.75: four
    copies of an item with y = .25 fit like one win and three losses of it."""
    rng = np.random.default_rng(3)
    la, lb = rng.integers(50, 400, 20).astype(float), rng.integers(50, 400, 20).astype(float)
    soft = length_controlled_win_rate([0.25] * 20, la, lb, resamples=0)
    discrete = length_controlled_win_rate([1.0] * 20 + [0.0] * 60, np.tile(la, 4), np.tile(lb, 4), resamples=0)
    assert soft["lc_win_rate"] == pytest.approx(discrete["lc_win_rate"], abs=2e-3)


def test_battle_summary_and_analysis_carry_the_soft_rate_beside_the_discrete_one():
    ps = [0.9, 0.7, 0.6, 0.45, 0.8, 0.55, 0.65, 0.75, 0.35, 0.85]
    res = BattleResult("m", "base", [_item(i, p) for i, p in enumerate(ps)], both_orders=False)
    s = res.summary()
    assert s["soft"]["items"] == 10 and s["soft"]["win_rate"] == pytest.approx(np.mean(ps))
    assert s["soft"]["discrete_win_rate"] == s["win_rate"] == pytest.approx(8 / 10)  # 8 of 10 above .5
    lo, hi = s["soft"]["win_rate_ci95"]
    assert 0 <= lo < np.mean(ps) < hi <= 1
    again = BattleItem.from_dict(res.items[3].to_dict())
    assert again.p_a == pytest.approx(0.45)
    data = {"summary": s, "items": [it.to_dict() for it in res.items]}
    text = {str(i): "word " * 50 for i in range(10)}
    block = battle_analysis(data, text, text, resamples=100)["overall"]
    assert block["length_controlled_soft"]["lc_win_rate"] == pytest.approx(np.mean(ps), abs=1e-3)
    assert block["length_controlled"]["raw_win_rate"] == pytest.approx(0.8)  # the discrete one, beside it
    few = BattleResult("m", "base", [_item(i, p) for i, p in enumerate(ps[:4])], both_orders=False).summary()
    assert few["soft"]["win_rate_ci95"] is None  # below 10 items: no bootstrap interval


def test_bradley_terry_reads_soft_outcomes():
    """Three models, every battle a soft 0.75 for the first-named: A beats B and B beats C by
    logit(.75) each, so on the Elo scale A - B = B - C = 400 log10(3) = 190.85."""
    def battle(a, b):
        return BattleResult(a, b, [_item(i, 0.75) for i in range(12)], both_orders=False)

    results = [battle("A", "B"), battle("B", "C")]
    outputs = {m: {str(i): "an answer" for i in range(12)} for m in "ABC"}
    ranking = battle_ranking(results, outputs, resamples=50)
    raw = {m: v["rating"] for m, v in ranking["raw"].items()} if isinstance(ranking["raw"], dict) else None
    assert raw is not None
    want = 400 * math.log10(3)
    assert raw["A"] - raw["B"] == pytest.approx(want, abs=1.0)
    assert raw["B"] - raw["C"] == pytest.approx(want, abs=1.0)


def test_the_report_shows_the_soft_rate_from_either_side():
    from evaluate.report.page import battle_view

    ps = [0.9, 0.7, 0.6, 0.45, 0.8, 0.55, 0.65, 0.75, 0.35, 0.85]
    s = BattleResult("m", "base", [_item(i, p) for i, p in enumerate(ps)], both_orders=False).summary()
    as_stored, other_side = battle_view({"summary": s}, False), battle_view({"summary": s}, True)
    assert as_stored["soft"]["win_rate"] == pytest.approx(np.mean(ps))
    assert other_side["soft"]["win_rate"] == pytest.approx(1 - np.mean(ps))
    assert other_side["soft"]["discrete_win_rate"] == pytest.approx(0.2)
