"""What a paired comparison of two models scored on the same items can detect; the exact test for tiny n.

Why paired: both models answer the same questions, and question difficulty moves both scores
together; the distribution of per-item differences keeps that. The comparison itself (intervals,
tests, the multiple-comparison family, verdicts) is `family`'s; this module holds its parts:

- ``sign_flip_p``: the exact sign-flip permutation test of the mean difference over all 2^n sign
  assignments (no asymptotics where n is tiny).
- MDE: the smallest |mean difference| this n detects at `alpha` (two-sided) with `power`,
  normal approximation: (z_{1-alpha/2} + z_power) * sd(diff) / sqrt(n). A "no detectable
  difference" next to an MDE of 0.4 on a 1-5 scale says the comparison could not have seen less.
- ``min_attainable_p`` / ``detectability``: never a detectable difference below what the test can reach.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
from scipy.stats import norm

EXACT_BELOW = 10  # below this many pairs the exact sign-flip test is used
TEST_PERMUTATION = "exact sign-flip permutation of the mean difference, two-sided"


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


def mde(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimum detectable |mean difference| (normal approximation); None when n < 2 or sd == 0 (every
    difference equal: a detectable difference of 0 would be meaningless; `detectability` says so)."""
    if n < 2 or sd == 0:
        return None
    return float((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / math.sqrt(n))


def min_attainable_p(k: int) -> float:
    """Smallest two-sided p an exact sign-flip (or signed-rank) test can reach with k non-zero
    differences: only the all-same-sign assignments reach the observed extreme, 2 of 2^k."""
    return 1.0 if k <= 0 else min(1.0, 2.0 ** (1 - k))  # 2 / 2**k would overflow above k = 1024


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
