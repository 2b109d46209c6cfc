"""evaluate.stats.family: per-pair families, verdicts that agree with their intervals, small-n wording."""

from __future__ import annotations

import numpy as np
import pytest

from evaluate.stats.family import (ALL, CONFIRMATORY, EXPLORATORY, RowInput, decide_pair, default_primary)
from evaluate.stats.intervals import MIN_INTERVAL_N, bootstrap_mean_ci, too_few_reason
from evaluate.stats.paired import detectability, min_attainable_p


def _pair_rows(rng, n, shift_key="Metrics/BLEU-4"):
    base = rng.uniform(0.2, 0.8, n)
    rows = []
    for key in ("Metrics/BLEU-4", "Metrics/ROUGE-L", "Metrics/CHRF"):
        b = np.clip(base + rng.normal(0, 0.05, n), 0, 1)
        a = np.clip(b + (0.15 if key == shift_key else 0.0) + rng.normal(0, 0.05, n), 0, 1)
        rows.append(RowInput(key, ALL, a, b, (0.0, 1.0)))
    return rows


def test_a_planted_shift_is_found_and_nothing_else():
    rows = _pair_rows(np.random.default_rng(1), 60)
    out = decide_pair(rows, {r.key for r in rows})
    by = {d.key: d for d in out}
    assert by["Metrics/BLEU-4"].verdict == "A better"
    assert by["Metrics/BLEU-4"].interval[0] < 0.15 < by["Metrics/BLEU-4"].interval[1]
    assert by["Metrics/ROUGE-L"].verdict == by["Metrics/CHRF"].verdict == "no detectable difference"
    assert all(d.role == CONFIRMATORY and d.m == 3 and d.simultaneous and d.level == pytest.approx(1 - 0.05 / 3)
               for d in out)


def test_a_third_model_does_not_change_a_vs_b():
    rng = np.random.default_rng(2)
    rows_ab = _pair_rows(rng, 40)
    rows_ac = _pair_rows(rng, 40, shift_key="Metrics/CHRF")
    primary = {r.key for r in rows_ab}
    alone = [d.to_dict() for d in decide_pair(rows_ab, primary)]
    decide_pair(rows_ac, primary)  # the A-vs-C family is computed on its own rows only
    assert [d.to_dict() for d in decide_pair(rows_ab, primary)] == alone


def test_primary_per_category_rows_and_other_keys_are_exploratory():
    rng = np.random.default_rng(3)
    rows = _pair_rows(rng, 30) + [RowInput("Metrics/BLEU-4", "qa", rng.uniform(0, 1, 12), rng.uniform(0, 1, 12)),
                                  RowInput("Metrics/BLEU-1", ALL, rng.uniform(0, 1, 30), rng.uniform(0, 1, 30))]
    out = decide_pair(rows, {"Metrics/BLEU-4", "Metrics/ROUGE-L", "Metrics/CHRF"})
    assert [d.role for d in out] == [CONFIRMATORY] * 3 + [EXPLORATORY] * 2
    assert all(d.m == 1 and d.level == 0.95 and not d.simultaneous for d in out[3:])
    assert "exploratory, unadjusted" in out[4].sentence()


@pytest.mark.parametrize("m", [1, 4])
def test_verdict_and_interval_never_contradict_on_random_data(m):
    rng = np.random.default_rng(10 + m)
    seen = set()
    for trial in range(150):
        n = int(rng.integers(MIN_INTERVAL_N, 40))
        rows = []
        for j in range(m):
            b = rng.integers(1, 6, n).astype(float) if trial % 2 else rng.uniform(0, 1, n)
            a = b + rng.normal(rng.choice([0.0, 0.3, -0.4]) * (j == 0), 0.8 if trial % 2 else 0.2, n)
            rows.append(RowInput(f"K/{j}", ALL, a, b))
        for d in decide_pair(rows, {r.key for r in rows}, resamples=400, seed=trial):
            if d.interval is None:
                continue
            lo, hi = d.interval
            seen.add(d.verdict)
            if d.verdict == "A better":
                assert lo > 0 and d.p_adj < 0.05
            elif d.verdict == "B better":
                assert hi < 0 and d.p_adj < 0.05
            else:
                assert lo <= 0 <= hi and d.p_adj >= 0.05
    assert seen == {"A better", "B better", "no detectable difference"}


def test_too_small_n_wording():
    assert min_attainable_p(3) == 0.25 and min_attainable_p(5) == 0.0625 and min_attainable_p(6) == 2 / 64
    assert detectability([0.6, 0.5, 0.7]) == ("n = 3: too few pairs for any test at alpha = 0.05 "
                                                "(smallest attainable p = 0.25)")
    assert "too few pairs" in detectability([1.0, 2.0, 1.0, 3.0, 2.0, 1.0], m=2)  # 2/64 * 2 = 0.0625
    assert "detects" in detectability([1.0, 2.0, 1.0, 3.0, 2.0, 1.0])  # 2/64 < 0.05
    assert detectability([0.25] * 12) == "all 12 differences equal (0.25)"
    assert detectability([0.0] * 12) == "identical scores on every item"
    d = decide_pair([RowInput("Metrics/F1", ALL, [0.9, 0.95, 0.99], [0.3, 0.35, 0.4])], {"Metrics/F1"})[0]
    assert d.verdict == "no detectable difference" and d.interval is None and "0.000" not in d.sentence()
    assert "too few pairs" in d.sentence()


def test_minimum_n_interval_rule():
    assert bootstrap_mean_ci([0.86, 0.87], min_n=MIN_INTERVAL_N) is None
    assert too_few_reason(2) == "too few items (n = 2 < 10) for a 95% bootstrap interval"
    assert too_few_reason(10) is None
    lo, hi = bootstrap_mean_ci(np.linspace(0.9, 1.0, 10), min_n=MIN_INTERVAL_N, bounds=(0, 1))
    assert 0.9 <= lo < hi <= 1.0
    small = decide_pair([RowInput("GPT/relevance", ALL, [5, 4, 5, 5, 4, 5, 5, 4, 5], [1] * 9, (1, 5))],
                        {"GPT/relevance"})[0]
    assert small.interval is None and "too few items" in small.interval_note
    assert small.verdict == "A better" and small.p == pytest.approx(2 / 512)  # exact sign-flip decides
    big = decide_pair([RowInput("GPT/relevance", ALL, [5.0] * 12, [1.0] * 11 + [5.0], (1, 5))], {"GPT/relevance"})[0]
    assert big.interval is not None and -4 <= big.interval[0] <= big.interval[1] <= 4  # inside the scale


def test_default_primary():
    keys = {"Metrics": ["Metrics/BLEU-1", "Metrics/BLEU-2", "Metrics/BLEU-4", "Metrics/ROUGE-1", "Metrics/ROUGE-L",
                        "Metrics/ROUGE-Lsum", "Metrics/BERTScore-P", "Metrics/BERTScore-R", "Metrics/BERTScore-F1",
                        "Metrics/CHRF", "Metrics/F1", "Metrics/Distinct-1", "Metrics/Distinct-2"],
            "GPT": ["GPT/relevance", "GPT/fluency", "GPT/relevance@raw"]}
    assert default_primary(keys) == {"Metrics/BLEU-4", "Metrics/ROUGE-L", "Metrics/BERTScore-F1", "Metrics/CHRF",
                                     "Metrics/F1", "Metrics/Distinct-2", "GPT/relevance", "GPT/fluency"}
