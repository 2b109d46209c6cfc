"""Label-corrected estimates: what people would say, from a few labels and every item's judge verdict.

Prediction-powered inference (Angelopoulos et al., Science 2023) in its power-tuned form PPI++
(Angelopoulos, Duchi and Zrnic, 2023), as "AutoEval Done Right" (Boyeau et al., ICML 2025) applies it
to model evaluation. The quantity is a mean over the run's items of a person's value y (a battle: 1 when
model_a is better, 0.5 a tie, 0 model_b; a rating: the score). A person labelled n of the N items, drawn
at random by the label queue; the judge gave every item a value f on the same scale. Then

    estimate = lam * mean(f over all N items) + mean(y - lam * f over the n labelled draws)

is unbiased for the mean of y over the N items for any fixed lam, because the labelled draws are a
random sample: the judge's mistakes are measured on them and subtracted. lam = 0 is the labels alone;
lam = 1 trusts the judge's mean and corrects its bias; PPI++ picks lam to make the interval narrowest,
so a judge that agrees with people at chance gets lam near 0 and the interval of the labels alone,
never materially wider, and a good judge makes each label count for several.

Three choices differ from the authors' reference code (`ppi_py.ppi_mean_ci`), each for a reason, each
with a switch (`superpopulation=True, quantile="z", guard=False` gives theirs, and tests/test_ppi.py
checks equality to 1e-6 on the same inputs):

- *The target is the run's own items* (finite population). The judge's mean over all N items is then a
  known number, not a sample mean, so it adds no variance, and a draw without replacement shrinks the
  rectifier's variance by (1 - n/N). The reference code treats the unlabelled items as a fresh sample
  from a larger population and adds lam^2 var(f) / N.
- *Student's t with n - 1 degrees of freedom* instead of the normal quantile: with 20 labels the z
  interval under-covers (the variance is estimated from the same 20 draws).
- *A guard against zero width*: with a good judge and few labels, the judge is often right on every one
  of them (0.95^20 = 36% of 20-label sets), the residuals y - lam * f are all zero and the reference
  interval has width zero although the judge errs elsewhere. The residuals' sum of squares gets one
  pseudo-draw h from their mean: s^2 = (SS + h^2) / n instead of SS / (n - 1), where h is, for the
  labels alone (lam = 0), the distance from the labels' mean to the scale's far end (half the range
  when the mean is in the middle: a label of the other end, which a small sample of labels crowded at
  one end most often lacks), one judge error at lam = 1, linear between. A battle's error is a verdict
  the other way (the whole range: h = (1 + lam) / 2 at a win rate of one half); a rating's is half the
  range (`rating_error`). lam minimises that same adjusted variance, so lam = 0 (labels alone) is
  always a candidate and the corrected interval is never wider than the labels-only one of the same
  draws.

The active design (Zrnic and Candes, ICML 2024): the queue draws items with replacement, item j with
probability p_j rising with the judge's uncertainty (mixed with the uniform draw so no weight explodes, and
so the weights' design effect stays at most 1.2: `active_probabilities`).
Each draw's terms are weighted by 1 / (N p_j) (Hansen-Hurwitz), which keeps the estimate unbiased; the
interval narrows faster when the judge's errors fall where it is uncertain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate with its two-sided interval (at the level of the `Corrected` holding it) and its
    standard error. NaN (None in `to_dict`) where nothing can be said."""

    estimate: float
    low: float
    high: float
    se: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if not math.isfinite(v) else round(float(v), 6))
                for k, v in (("estimate", self.estimate), ("low", self.low), ("high", self.high), ("se", self.se))}


@dataclass(frozen=True)
class Corrected:
    """The three rows of a label-corrected verdict and what the labels were worth."""

    label_corrected: Interval
    labels_only: Interval
    judge_only: Interval
    labels_used: int
    items: int
    effective_labels: float
    lam: float
    level: float
    null: float | None
    labels_to_decide: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"label_corrected": self.label_corrected.to_dict(), "labels_only": self.labels_only.to_dict(),
                "judge_only": self.judge_only.to_dict(), "labels_used": self.labels_used, "items": self.items,
                "effective_labels": round(self.effective_labels, 1) if math.isfinite(self.effective_labels) else None,
                "lam": round(self.lam, 6), "level": self.level, "null": self.null,
                "labels_to_decide": self.labels_to_decide}


def _as_array(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=float).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: every value must be a finite number")
    return a


def _quantile(level: float, df: int | None) -> float:
    """The two-sided quantile: Student's t with `df` degrees of freedom, the normal one when df is None."""
    upper = 1.0 - (1.0 - level) / 2.0
    return float(norm.ppf(upper)) if df is None else float(student_t.ppf(upper, df))


def _clip(iv: Interval, bounds: tuple[float, float]) -> Interval:
    lo, hi = bounds
    if not math.isfinite(iv.estimate):
        return iv
    return Interval(min(max(iv.estimate, lo), hi), max(iv.low, lo), min(iv.high, hi), iv.se)


def _interval(estimate: float, se: float, q: float, bounds: tuple[float, float]) -> Interval:
    return _clip(Interval(estimate, estimate - q * se, estimate + q * se, se), bounds)


def judge_only(f_all: np.ndarray, *, level: float = LEVEL, bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
    """Today's figure, "if the judge were right": the judge's mean over the items, with the items' sampling
    noise (a t interval over the N items) and nothing for the judge's own errors."""
    n = len(f_all)
    if n == 0:
        return Interval(math.nan, bounds[0], bounds[1], math.nan)
    mean = float(f_all.mean())
    if n < 2:
        return Interval(mean, bounds[0], bounds[1], math.nan)
    se = float(f_all.std(ddof=1) / math.sqrt(n))
    return _interval(mean, se, _quantile(level, n - 1), bounds)


def _tuned_lambda(a: np.ndarray, b: np.ndarray, alpha: float, beta: float, *, guard: bool) -> float:
    """The lam in [0, 1] minimising the (guarded) variance of a - lam * b: sum((a - lam b - mean)^2) plus
    the pseudo-draw (alpha + beta lam)^2 when guarded (`_guard_size`)."""
    ac, bc = a - a.mean(), b - b.mean()
    sab, sbb = float(ac @ bc), float(bc @ bc)
    if not guard:
        alpha = beta = 0.0
    denom = sbb + beta * beta
    if denom <= 0.0:
        return 0.0
    return float(min(1.0, max(0.0, (sab - alpha * beta) / denom)))


def _guard_size(lam: float, span: float, error: float, weight: float) -> float:
    """The guard's pseudo-draw at lam: span / 2 for the labels alone (lam = 0: the distance from the labels'
    mean to the scale's far end, `_guard_span`), one judge error at lam = 1 (`error`: a battle's verdict
    the other way is the whole range), linear between; in the draws' weight units."""
    return ((1.0 - lam) * span / 2.0 + lam * error) * weight


def _guard_span(centre: float, bounds: tuple[float, float]) -> float:
    """Twice the labels' guard: twice the distance from the labels' mean to the scale's far end (the range
    when the mean is in the middle; up to twice the range when the labels crowd at one end, where a small
    sample most often holds none of the other end: SummEval's consistency scores are 5 for 82% of the
    summaries, and 12% of 20-label sets hold no score below 4)."""
    lo, hi = bounds
    return 2.0 * max(centre - lo, hi - centre, (hi - lo) / 2.0)


def _residual_variance(r: np.ndarray, h: float, *, guard: bool) -> float:
    """The per-draw variance of the residuals r: SS / (n - 1), or with the guard (SS + h^2) / n."""
    n = len(r)
    ss = float(((r - r.mean()) ** 2).sum())
    return (ss + h * h) / n if guard else ss / (n - 1)


def corrected_mean(y: Sequence[float] | np.ndarray, f_labelled: Sequence[float] | np.ndarray,
                   f_all: Sequence[float] | np.ndarray, *, weights: Sequence[float] | np.ndarray | None = None,
                   level: float = LEVEL, bounds: tuple[float, float] = (0.0, 1.0), null: float | None = None,
                   superpopulation: bool = False, quantile: str = "t", guard: bool = True,
                   lam: float | None = None, error: float | None = None) -> Corrected:
    """The label-corrected mean of y over the items (module docstring), labels only, judge only.

    y, f_labelled: the person's and the judge's value on each labelled draw (an item drawn twice by the
    active design appears twice); f_all: the judge's value on every item (labelled ones included; with
    `superpopulation=True` the unlabelled sample instead, as the reference code takes it). weights: None
    for a uniform draw without replacement; 1 / (N p_k) per draw for draws with replacement at
    probability p_k. bounds: the scale (intervals are clipped to it). null: the value a decision is about
    (0.5 for a win rate, 0 for a difference), for `labels_to_decide`. lam: fixed instead of tuned.
    error: the size of one judge error on this scale, for the guard (default the whole range: a battle's
    verdict the other way; `rating_error` for a score).
    """
    y_arr, f_arr, all_arr = _as_array(y, "y"), _as_array(f_labelled, "f_labelled"), _as_array(f_all, "f_all")
    if len(y_arr) != len(f_arr):
        raise ValueError(f"y has {len(y_arr)} values and f_labelled {len(f_arr)}; one each per labelled draw")
    if quantile not in ("t", "z"):
        raise ValueError(f"quantile: expected 't' or 'z', got {quantile!r}")
    lo, hi = bounds
    n, big_n = len(y_arr), len(all_arr)
    judge = judge_only(all_arr if not superpopulation else np.concatenate([f_arr, all_arr]), level=level, bounds=bounds)
    if n < 2 or big_n == 0:
        est = float(y_arr.mean()) if n else math.nan
        nothing = Interval(est, lo, hi, math.nan)
        return Corrected(nothing, nothing, judge, n, big_n, float(n), 0.0, level, null, None)
    w = np.ones(n) if weights is None else _as_array(weights, "weights")
    if len(w) != n:
        raise ValueError(f"weights has {len(w)} values for {n} labelled draws")
    q = _quantile(level, None if quantile == "z" else n - 1)
    if superpopulation:
        return _superpopulation(y_arr, f_arr, all_arr, w, q=q, level=level, bounds=bounds, null=null, lam=lam,
                                judge=judge, guard=guard)
    replace = weights is not None
    fpc = 1.0 if replace else max(0.0, 1.0 - n / big_n)
    a, b = w * y_arr, w * f_arr
    f_mean = float(all_arr.mean())
    w_mean = float(w.mean())
    size = (hi - lo) if error is None else float(error)
    if not size > 0.0:
        raise ValueError(f"error: expected a positive size on the scale, got {error}")
    span = _guard_span(float(a.mean()) / w_mean if w_mean > 0 else (lo + hi) / 2.0, bounds)

    def one(lam_value: float) -> tuple[Interval, float]:
        r = a - lam_value * b
        var = _residual_variance(r, _guard_size(lam_value, span, size, w_mean), guard=guard)
        est = lam_value * f_mean + float(r.mean())
        return _interval(est, math.sqrt(fpc * var / n), q, bounds), var

    alpha = _guard_size(0.0, span, size, w_mean)
    beta = _guard_size(1.0, span, size, w_mean) - alpha
    lam_used = _tuned_lambda(a, b, alpha, beta, guard=guard) if lam is None else float(lam)
    corrected, var_c = one(lam_used)
    labels, var_l = one(0.0)
    effective = _effective(n, big_n, var_c, var_l, replace=replace)
    return Corrected(corrected, labels, judge, n, big_n, effective, lam_used, level, null,
                     _to_decide(corrected.estimate, var_c, n, big_n, null, q, replace=replace))


RATING_ERROR_SHARE = 0.5


def rating_error(bounds: tuple[float, float]) -> float:
    """One judge error on a rating scale, for the guard: half the range (2 points on a 1-5 scale, 4.5 on
    1-10), a "good" scored "poor". A battle's error, a verdict the other way, is the whole range; sized
    so for a rating (a 1 scored 5), the guard dominated the variance of a good judge's few labels and held
    the tuning back (the .95 judge's interval on SummEval at 20 labels was 0.78-0.97 of the labels
    alone's); a quarter (one point) let rare judge errors go unseen at 50-100 labels (coverage down to
    0.88). bench/ppi_coverage.py measured both; BENCHMARKS.md has the table."""
    lo, hi = bounds
    return (hi - lo) * RATING_ERROR_SHARE


def _effective(n: int, big_n: int, var_c: float, var_l: float, *, replace: bool) -> float:
    """How many labels alone (same design) would give the corrected interval's width."""
    if var_c <= 0.0:
        return float(big_n if not replace else math.inf)
    if replace:
        return n * var_l / var_c
    se2 = (1.0 / n - 1.0 / big_n) * var_c  # the corrected variance of the mean
    if var_l <= 0.0:
        return float(n)
    return float(min(big_n, 1.0 / (se2 / var_l + 1.0 / big_n)))


def _to_decide(estimate: float, var: float, n: int, big_n: int, null: float | None, q: float, *,
               replace: bool) -> int | None:
    """About how many more labels until the interval excludes `null`, if the estimate and the per-draw
    variance stayed as they are: 0 when it already does; None when there is no null or the estimate is
    on it."""
    if null is None or not math.isfinite(estimate):
        return None
    gap = abs(estimate - null)
    if gap <= 1e-12:
        return None
    if var <= 0.0:
        return 0
    if replace:
        needed = q * q * var / (gap * gap)
    else:
        needed = 1.0 / (gap * gap / (q * q * var) + 1.0 / big_n)
    return max(0, math.ceil(needed) - n)


def _superpopulation(y: np.ndarray, f: np.ndarray, f_unlab: np.ndarray, w: np.ndarray, *, q: float, level: float,
                     bounds: tuple[float, float], null: float | None, lam: float | None, judge: Interval,
                     guard: bool) -> Corrected:
    """The reference code's design: the n labelled and N unlabelled items two independent samples of a
    larger population (ppi_py.ppi_mean_ci with lam tuned as there: cov(y, f) over (1 + n/N) var(f) on
    all items, clipped to [0, 1]; standard deviations with ddof 0)."""
    n, big_n = len(y), len(f_unlab)
    if lam is None:
        first = float(f_unlab.mean()) + float((w * (y - f)).mean())  # lam = 1, as the reference tunes around
        g, gh = w * (y - first), w * (f - first)
        cov = float(((g - g.mean()) * (gh - gh.mean())).sum() / n)
        var_f = float(np.var(np.concatenate([gh, f_unlab - first]), ddof=1))
        lam = 0.0 if var_f <= 0 else float(min(1.0, max(0.0, cov / ((1.0 + n / big_n) * var_f))))
    est = lam * float(f_unlab.mean()) + float((w * (y - lam * f)).mean())
    se = math.sqrt(float(np.std(lam * f_unlab)) ** 2 / big_n + float(np.std(w * (y - lam * f))) ** 2 / n)
    corrected = _interval(est, se, q, bounds)
    lab_se = float(np.std(w * y)) / math.sqrt(n)
    labels = _interval(float((w * y).mean()), lab_se, q, bounds)
    effective = n * (lab_se / se) ** 2 if se > 0 else math.inf
    return Corrected(corrected, labels, judge, n, big_n, effective, float(lam), level, null,
                     _to_decide(corrected.estimate, se * se * n, n, big_n, null, q, replace=True))


MAX_DESIGN_EFFECT = 1.2


def design_effect(p: Sequence[float] | np.ndarray) -> float:
    """Kish's design effect of the weights w = 1 / (N p) of draws with replacement at probabilities p:
    E_p[w^2] (their mean is 1), i.e. sum(1 / p) / N^2. n labels drawn so are worth about n / deff labels
    drawn uniformly, before what the design gains where the judge's errors are."""
    a = _as_array(p, "p")
    return float(np.sum(1.0 / a) / len(a) ** 2) if len(a) else 1.0


def active_probabilities(uncertainty: Sequence[float] | np.ndarray, mix: float = 0.5,
                         max_design_effect: float | None = MAX_DESIGN_EFFECT) -> np.ndarray:
    """Each item's draw probability for the active design: m / N + (1 - m) u_j / sum(u), where the uniform
    share m is `mix`, raised until the weights' design effect (`design_effect`) is at most
    `max_design_effect`. The uniform share bounds every weight 1 / (N p_j) by 1 / mix, so one unlucky draw
    cannot swamp the estimate; the cap keeps the design from spending the labels on a few items: a judge
    unsure only where it says "tie" (6% of PandaLM's items) drew half the labels there, and at 20 labels
    the interval covered 0.86 (bench/ppi_coverage.py; with the cap 0.93, and the design's advantage where
    the judge's errors fall where it is unsure is kept). All u zero: the uniform draw."""
    u = _as_array(uncertainty, "uncertainty")
    if np.any(u < 0):
        raise ValueError("uncertainty: values must be >= 0")
    if not 0.0 < mix <= 1.0:
        raise ValueError(f"mix: expected a share in (0, 1], got {mix}")
    if max_design_effect is not None and not max_design_effect >= 1.0:
        raise ValueError(f"max_design_effect: expected a number >= 1, got {max_design_effect}")
    big_n = len(u)
    if big_n == 0:
        return u
    total = float(u.sum())
    if total <= 0.0:
        return np.full(big_n, 1.0 / big_n)
    share = u / total

    def probs(m: float) -> np.ndarray:
        return m / big_n + (1.0 - m) * share

    if max_design_effect is None or design_effect(probs(mix)) <= max_design_effect:
        return probs(mix)
    low, high = mix, 1.0  # the design effect falls as the uniform share grows (convex, 1 at m = 1)
    for _ in range(60):
        mid = (low + high) / 2.0
        if design_effect(probs(mid)) <= max_design_effect:
            high = mid
        else:
            low = mid
    return probs(high)


def draw_sequence(n_items: int, *, seed: int, design: str = "uniform", p: Sequence[float] | np.ndarray | None = None,
                  length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The queue's draws: (item indices, each draw's selection probability), deterministic in its inputs.
    uniform: a seeded permutation of the items (without replacement), each stored with 1/N; active:
    `length` (default 4 N) seeded draws with replacement from p."""
    if n_items <= 0:
        return np.zeros(0, dtype=int), np.zeros(0)
    rng = np.random.default_rng([int(seed), 44])
    if design == "uniform":
        return rng.permutation(n_items), np.full(n_items, 1.0 / n_items)
    if design != "active":
        raise ValueError(f"design: expected 'uniform' or 'active', got {design!r}")
    probs = np.full(n_items, 1.0 / n_items) if p is None else _as_array(p, "p")
    if len(probs) != n_items or np.any(probs < 0) or not math.isclose(float(probs.sum()), 1.0, rel_tol=1e-9):
        raise ValueError(f"p: expected {n_items} non-negative probabilities summing to 1")
    idx = rng.choice(n_items, size=length or 4 * n_items, replace=True, p=probs / probs.sum())
    return idx, probs[idx]
