"""Paired comparison of two models scored on the same items.

Why paired: both models answer the same questions, and question difficulty moves both scores
together. Comparing the two means with unpaired intervals throws that away (overlapping
per-model intervals say little); the distribution of per-item differences keeps it.

- Interval: percentile bootstrap of the mean difference, resampling item indices (the pair of
  scores of an item travels together).
- Test: two-sided Wilcoxon signed-rank (scipy, ``zero_method="zsplit"``: items with equal scores
  count half to each side instead of being dropped) from n >= 10 (up to n = 13 with ties, the
  exact permutation distribution scipy would use, computed here vectorised); below that, the exact
  sign-flip permutation test of the mean difference over all 2^n sign assignments (no
  asymptotics where n is tiny).
- MDE: the smallest |mean difference| this n detects at `alpha` (two-sided) with `power`,
  normal approximation: (z_{1-alpha/2} + z_power) * sd(diff) / sqrt(n). A "no detectable
  difference" next to an MDE of 0.4 on a 1-5 scale says the comparison could not have seen less.
- ``holm``: Holm's step-down adjustment over a family of comparisons (the benchmarks' own tables use
  it; a run's comparison files use one Bonferroni family per pair, see ``family``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
from scipy.stats import norm, rankdata, wilcoxon

from .intervals import percentile_interval, resampled_means

EXACT_BELOW = 10
SCIPY_PERMUTATION_UP_TO = 13  # scipy's wilcoxon runs an exact permutation test up to here when d has ties
TEST_WILCOXON = "Wilcoxon signed-rank, two-sided, zero_method=zsplit"
TEST_PERMUTATION = "exact sign-flip permutation of the mean difference, two-sided"
VERDICTS = ("A better", "B better", "no detectable difference")


@dataclass
class PairedResult:
    """One paired comparison; diff = mean_a - mean_b (positive: A scored higher)."""

    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci: tuple[float, float] | None
    level: float
    p: float | None
    test: str | None
    mde: float | None
    effect_size: float | None  # mean diff / sd diff (paired Cohen's d_z); None when sd is 0 or n < 2

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci"] = list(self.ci) if self.ci is not None else None
        return d


def sign_flip_p(d: np.ndarray) -> float:
    """Exact two-sided p of the mean difference: share of the 2^n sign flips whose |sum| reaches the observed."""
    d = np.asarray(d, dtype=float)
    if d.size == 0 or np.all(d == 0):
        return 1.0
    if d.size > 20:
        raise ValueError("sign_flip_p: exact enumeration is for small n (<= 20)")
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    sums = np.abs(signs @ d)
    observed = abs(float(d.sum()))
    return float(np.mean(sums >= observed - 1e-12 * max(1.0, observed)))


def signed_rank_exact_p(d: np.ndarray) -> float:
    """Two-sided p of the zsplit signed-rank statistic over all 2^n sign flips, vectorised.

    What scipy's ``wilcoxon(d, zero_method="zsplit")`` computes for n <= 13 with ties or zeros
    (a permutation test over every flip), but scipy evaluates the statistic once per flip in
    Python: 1.5 s per call here, and ratings on a 1-5 scale nearly always tie.
    """
    ranks = rankdata(np.abs(d))
    zero = d == 0
    const = float(ranks[zero].sum()) / 2.0  # zsplit: a zero's rank counts half to each side, whatever the sign
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=int(d.size))))
    null = ((signs * np.where(zero, 0.0, d)) > 0) @ ranks + const
    observed = float(ranks[d > 0].sum()) + const
    tol = 1e-9 * max(1.0, abs(observed))
    p_greater = float(np.mean(null >= observed - tol))
    p_less = float(np.mean(null <= observed + tol))
    return min(1.0, 2.0 * min(p_greater, p_less))


def paired_p(d: np.ndarray) -> tuple[float, str]:
    """Two-sided p of "no difference" and the name of the test used (see the module docstring)."""
    if d.size == 0:
        return 1.0, TEST_PERMUTATION
    if d.size < EXACT_BELOW:
        return sign_flip_p(d), TEST_PERMUTATION
    if np.all(d == 0):
        return 1.0, TEST_WILCOXON
    ties = np.any(d == 0) or np.unique(np.abs(d)).size < d.size
    if ties and d.size <= SCIPY_PERMUTATION_UP_TO:
        return signed_rank_exact_p(d), TEST_WILCOXON
    return float(wilcoxon(d, zero_method="zsplit", alternative="two-sided").pvalue), TEST_WILCOXON


def mde(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimum detectable |mean difference| (normal approximation); None when n < 2 or sd == 0 (every
    difference equal: a detectable difference of 0 would be meaningless; `detectability` says so)."""
    if n < 2 or sd == 0:
        return None
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / math.sqrt(n))


def min_attainable_p(k: int) -> float:
    """Smallest two-sided p an exact sign-flip (or signed-rank) test can reach with k non-zero
    differences: only the all-same-sign assignments reach the observed extreme, 2 of 2^k."""
    return 1.0 if k <= 0 else min(1.0, 2.0 / 2.0 ** k)


def detectability(d: Sequence[float], *, alpha: float = 0.05, m: int = 1, power: float = 0.8) -> str:
    """What a comparison of these paired differences could detect at level alpha / m, in words.

    Never a detectable difference below what the test can reach: with k non-zero differences the exact
    test's p is at least 2 / 2^k (k <= 5 cannot reach .05 at all), and when every difference is equal
    there is no spread to speak of.
    """
    x = np.asarray(d, dtype=float).ravel()
    n = int(x.size)
    at = f"alpha = {alpha:g}" + (f" over {m} tests" if m > 1 else "")
    if n == 0:
        return "no items scored for both models"
    if np.all(x == x[0]):
        return "identical scores on every item" if x[0] == 0 else f"all {n} differences equal ({x[0]:.3g})"
    k = int(np.count_nonzero(x))
    smallest = min(1.0, min_attainable_p(k) * m)
    if n < EXACT_BELOW and smallest >= alpha:
        adj = "adjusted " if m > 1 else ""
        return (f"n = {n}: too few pairs for any test at {at} (smallest attainable {adj}p = {smallest:.3g})")
    size = mde(float(x.std(ddof=1)), n, alpha=alpha / m, power=power)
    return f"n = {n} detects |A − B| of about {size:.3g} or more ({power:.0%} power, {at})"


def paired_compare(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                   level: float = 0.95, alpha: float = 0.05, power: float = 0.8) -> PairedResult:
    """Compare scores a[i] and b[i] of the same items i (see the module docstring for the methods)."""
    xa, xb = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if xa.shape != xb.shape:
        raise ValueError(f"paired_compare: a and b must pair up, got {xa.size} and {xb.size} values")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(xb))):
        raise ValueError("paired_compare: scores must be finite (leave invalid items out of both)")
    n = int(xa.size)
    if n == 0:
        return PairedResult(n=0, mean_a=None, mean_b=None, diff=None, ci=None, level=level, p=None, test=None,
                            mde=None, effect_size=None)
    d = xa - xb
    diff = float(d.mean())
    if n == 1 or np.all(d == d[0]):
        ci = (diff, diff)
    else:
        lo, hi = percentile_interval(resampled_means(d, resamples, np.random.default_rng(seed)), level)
        ci = (max(lo, float(d.min())), min(hi, float(d.max())))
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    p, test = paired_p(d)
    effect = diff / sd if n > 1 and sd > 0 else None
    return PairedResult(n=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=diff, ci=ci, level=level,
                        p=p, test=test, mde=mde(sd, n, alpha=alpha, power=power), effect_size=effect)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values in the input order; None stays None and is not counted.

    Sorted ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) * p_(j)) (m = how many
    p-values), which keeps the adjusted values monotone in the raw ones.
    """
    present = [(i, float(p)) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(pvalues)
    m = len(present)
    running = 0.0
    for rank, (i, p) in enumerate(sorted(present, key=lambda t: t[1])):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def verdict(p_adj: float | None, diff: float | None, alpha: float = 0.05) -> str:
    """"A better" / "B better" when the adjusted p is below alpha, else "no detectable difference".
    Scores are higher-is-better (every family here)."""
    if p_adj is None or diff is None or math.isnan(p_adj) or p_adj >= alpha or diff == 0:
        return "no detectable difference"
    return "A better" if diff > 0 else "B better"
