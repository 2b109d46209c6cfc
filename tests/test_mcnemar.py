"""Paired pass/fail comparisons: McNemar's exact p against scipy and a hand sum, the exact interval that
agrees with it (Clopper-Pearson against scipy's), verdicts inside the Bonferroni family, and the one
Wilson interval against the inversion of the score test (solved with scipy, no formula shared)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import binomtest, norm

from evaluate.pipeline.comparisons import compare_pair
from evaluate.stats.family import ALL, RowInput, decide_pair
from evaluate.stats.intervals import wilson_interval
from evaluate.stats.mcnemar import clopper_pearson, mcnemar, mcnemar_exact_p

PF = {"metric": "Regex", "outcome": "pass/fail", "scale": "0-1"}


def table(n11: int, n10: int, n01: int, n00: int) -> tuple[list[int], list[int]]:
    """Paired outcomes with the given 2x2 table (A passed/failed x B passed/failed)."""
    a = [1] * n11 + [1] * n10 + [0] * n01 + [0] * n00
    b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * n00
    return a, b


def test_mcnemar_p_by_hand_and_scipy():
    # b = 7, c = 1: p = 2 * P(X <= 1 | Bin(8, 1/2)) = 2 * (1 + 8) / 256
    assert mcnemar_exact_p(7, 1) == pytest.approx(18 / 256)
    assert mcnemar_exact_p(0, 0) == 1.0 and mcnemar_exact_p(3, 3) == 1.0
    for b, c in ((7, 0), (12, 5), (3, 9), (40, 22), (1, 0)):
        assert mcnemar_exact_p(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
        tail = sum(math.comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c)
        assert mcnemar_exact_p(b, c) == pytest.approx(min(1.0, 2 * tail), rel=1e-12)


def test_clopper_pearson_equals_scipys_exact_interval():
    for k, n, level in ((0, 10, 0.95), (3, 10, 0.95), (10, 10, 0.99), (17, 40, 0.9917)):
        ref = binomtest(k, n, 0.5).proportion_ci(confidence_level=level, method="exact")
        assert clopper_pearson(k, n, level) == pytest.approx((ref.low, ref.high), abs=1e-10)


def test_the_interval_excludes_zero_exactly_when_p_is_below_alpha():
    rng = np.random.default_rng(3)
    seen = {True: 0, False: 0}
    for _ in range(150):
        n10, n01, n11, n00 = (int(x) for x in rng.integers(0, [30, 8, 20, 20]))
        if rng.random() < 0.5:
            n10, n01 = n01, n10
        a, b = (np.array(x) for x in table(n11, n10, n01, n00))
        if a.size == 0:
            continue
        for level in (0.95, 0.99, 1 - 0.05 / 6):
            res = mcnemar(a, b, level)
            excludes = res.interval[0] > 0 or res.interval[1] < 0
            assert excludes == (res.p < 1 - level), (a.tolist(), b.tolist(), level, res)
            d = float(np.mean(a) - np.mean(b))
            assert res.interval[0] <= d <= res.interval[1] and -1 <= res.interval[0] <= res.interval[1] <= 1
            seen[excludes] += 1
    assert seen[True] > 20 and seen[False] > 20  # both outcomes were exercised


def test_no_discordant_items_still_gives_an_honest_interval():
    a, b = table(60, 0, 0, 40)
    res = mcnemar(np.array(a), np.array(b), 0.95)
    assert res.p == 1.0
    # psi's Clopper-Pearson upper bound for 0 of 100 is 1 - 0.025^(1/100); pi's interval is [0, 1]
    hi = 1 - 0.025 ** (1 / 100)
    assert res.interval == pytest.approx((-hi, hi))


def test_decide_pair_uses_mcnemar_for_pass_fail_rows_inside_the_bonferroni_family():
    a, b = table(5, 9, 1, 5)  # 20 items; b = 9, c = 1
    cont = np.random.default_rng(0).random(20)
    rows = [RowInput("Metrics/Regex", ALL, a, b, (0, 1), binary=True),
            RowInput("Metrics/ROUGE-L", ALL, cont, cont * 0.9, (0, 1))]
    dec = decide_pair(rows, ["Metrics/Regex", "Metrics/ROUGE-L"])
    p = binomtest(9, 10, 0.5).pvalue  # 22 / 1024
    assert dec[0].p == pytest.approx(p) and dec[0].p_adj == pytest.approx(2 * p) and dec[0].m == 2
    assert "McNemar" in dec[0].test and dec[0].level == pytest.approx(1 - 0.025)
    assert dec[0].verdict == "A better"  # 2p = 0.043 < 0.05, and the 97.5% interval excludes 0
    assert dec[0].interval[0] > 0
    assert "bootstrap" in dec[1].test
    # same outcomes, not flagged pass/fail: the bootstrap decides (McNemar only where the signature says so)
    assert "McNemar" not in decide_pair([RowInput("x", ALL, a, b, (0, 1))], ["x"])[0].test


def test_compare_pair_on_result_files_gives_scipys_mcnemar_p():
    a, b = table(4, 6, 1, 3)  # 14 items, 8 of them in category "x"
    def result(model, values):
        items = [{"id": str(i), "category": "x" if i < 8 else "y", "scores": {"Metrics/Regex": float(v)},
                  "invalid": {}} for i, v in enumerate(values)]
        return {"model": model, "items": items, "signatures": {"Metrics/Regex": PF}}
    comp = compare_pair(result("m1", a), result("m2", b))
    row = next(r for r in comp["rows"] if r["category"] == ALL)
    assert row["role"] == "confirmatory" and row["p"] == pytest.approx(binomtest(6, 7, 0.5).pvalue)
    assert row["verdict"] == "no detectable difference"  # p = 0.125
    assert row["interval"][0] < 0 < row["interval"][1]
    assert "McNemar" in comp["method"]["binary_scores"]
    # the 8-item category row is exact too (no "too few items" for a pass/fail score)
    xa, xb = a[:8], b[:8]
    bx = sum(1 for u, v in zip(xa, xb) if u > v)
    cx = sum(1 for u, v in zip(xa, xb) if u < v)
    cat = next(r for r in comp["rows"] if r["category"] == "x")
    assert cat["interval"] is not None and cat["p"] == pytest.approx(binomtest(bx, bx + cx, 0.5).pvalue)


def _wilson_by_inversion(k: float, n: int, level: float) -> tuple[float, float]:
    """The p0 where the score test |k/n - p0| / sqrt(p0 (1 - p0) / n) = z: Wilson's definition, solved
    numerically (no closed form shared with the code under test)."""
    z = norm.ppf(0.5 + level / 2)
    phat = k / n
    f = lambda p0: abs(phat - p0) - z * math.sqrt(p0 * (1 - p0) / n)  # noqa: E731
    lo = 0.0 if k == 0 else brentq(f, 1e-15, phat - 1e-12)
    hi = 1.0 if k == n else brentq(f, phat + 1e-12, 1 - 1e-15)
    return lo, hi


@pytest.mark.parametrize("k,n,level", [(7, 10, 0.95), (0, 9, 0.95), (9, 9, 0.95), (6.5, 10, 0.95), (33, 120, 0.99)])
def test_the_one_wilson_interval_against_the_score_test_inversion(k, n, level):
    assert wilson_interval(k, n, level) == pytest.approx(_wilson_by_inversion(k, n, level), abs=1e-9)


def test_wilson_hand_case_and_both_callers_share_it():
    # 8 of 10 at 95%: centre (0.8 + 1.92/10) / 1.384, half 1.96 * sqrt(0.016 + 0.0096) / 1.384 -> 0.4902, 0.9433
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 0) is None
    import importlib

    from evaluate.pipeline import results

    battle = importlib.import_module("evaluate.judges.battle")  # the package's `battle` is the function
    assert battle.wilson_interval is wilson_interval
    agg = results.summarize([(str(i), float(i < 8)) for i in range(10)], 0, (0.0, 1.0), binary=True)
    assert agg["ci95"] == pytest.approx(list(wilson_interval(8, 10))) and agg["ci_method"] == "wilson"
