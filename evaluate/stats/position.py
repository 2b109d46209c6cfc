"""Battle verdicts calibrated for the judge's preference for a position, from the run's own pairs.

A battle asks the judge twice, A shown first ("AB") and B shown first ("BA"). Many judges, small
ones above all, lean towards one position whatever the answers say. The raw rule (the two orders
agree, else a tie) protects the verdict from that lean but throws away every item where the lean
outweighed the judge's preference in one order. This module estimates the lean from the pairs
themselves, with no labels, and reads each item's preference with the lean taken out.

The model
---------
Per judgment i (one item, or one turn of a conversation) the judge has a preference d_i for A over
B and, everywhere, a bias b for the answer shown first. In order AB the first answer is A, in order
BA it is B, so the judge's preference for the *first-shown* answer is

    order AB:  d_i + b          order BA:  -d_i + b.

b > 0 is a lean to the first position, b < 0 to the second; d_i > 0 means A is preferred. What the
judge gives decides the scale, and the method (the richest evidence every valid order carries):

- **probabilities** (every valid order carries p, the judge's own probability that the first-shown
  answer is preferred, read from its token probabilities): log-odds. l = logit(p), clipped at
  P_CLIP so that one saturated reply cannot outweigh the rest.
- **scores** (no probabilities, but both scores parsed in every valid order, as the battle prompt
  asks): points of the judge's scale, m = the first-shown answer's score minus the second's.

  In both, each pair gives (x_AB + x_BA) / 2 = b + noise and (x_AB - x_BA) / 2 = d_i + noise. The bias
  is the median over the pairs of (x_AB + x_BA) / 2 (robust to the items the judge is sure of), with
  a percentile bootstrap interval, and d_i is (x_AB - x_BA) / 2. The difference cancels b exactly:
  the verdict does not need b, b is what the judge's lean *is*. With probabilities the verdict is
  close to the probability-weighted one (the sign of the mean expected-score difference), read on
  the judge's log-odds instead of its 1-10 scale; with parsed scores it is what the raw rule throws
  away: "8 1" with A first and "8 7" with B first is a tie for the raw rule (the first answer won
  both times) and A here (A lost 1 point where B lost 7).
- **verdicts** (only first / second / tie per order: benchmark games, replies without scores): an
  ordered-logit latent-threshold model in log-odds: with z = +-d_i + b, P(first) = sigmoid(z - tau),
  P(second) = sigmoid(-z - tau), a tie in between (tau >= 0: the judge's tie zone). The items'
  preferences are a random effect, d ~ N(0, sigma^2); b, tau and sigma are fitted by maximum
  likelihood over the judgments (the likelihood depends only on the counts of the 9 patterns of
  two verdicts; d integrated out by Gauss-Hermite quadrature), and d_i is its posterior mean given
  the item's two verdicts. Symmetric patterns (first in both orders, second in both, tie in both)
  have posterior mean 0: a tie, as in the raw rule. The model earns its keep on "a win in one
  order, a tie in the other": with a lean to the first position, a tie where B was shown first is
  evidence for A (B had the lean and did not win), so the item goes to A, where the raw rule calls
  it a tie. (The posterior means are shrunk towards 0, by how much depends on sigma: only their sign
  is read.)

The calibrated verdict is A when d_i > 0, B when d_i < 0, a tie when the evidence is balanced (d_i
= 0, to rounding: TIE_BAND only absorbs it). A band of logit(0.55) was the first choice, fixed before
any measurement; on the 221 HHH pairs it turned 142 of the local judge's verdicts into ties (a weak
judge's calibrated preferences are all small in log-odds, and a band in fixed units means something
different for every judge and scale) and was dropped: BENCHMARKS.md gives both. Under "ties count
half", committing to the sign is the better bet whenever the sign is better than chance.

A judgment needs both orders valid (as the raw rule does: one order alone would bring the lean back,
uncorrected except through an estimate); with no judgment valid in both orders there is no
calibration (None), e.g. `both_orders: false`. The interval of b (level stated; none below
MIN_INTERVAL_N judgments) is the bootstrap one above, or with verdicts a Wald interval from the
likelihood's curvature (observed information); none when the fitted lean is at the edge of what the
pairs can measure (every order named the same position). Nothing here sees a label: the
calibration is fit on the battle it calibrates, as the raw verdict is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.special import expit, log_expit

from .intervals import MIN_INTERVAL_N, percentile_interval

P_CLIP = 1e-3
TIE_BAND = 1e-9  # a tie only when the evidence is balanced; the band absorbs rounding
METHODS = ("probabilities", "scores", "verdicts")
UNIT = {"probabilities": "log-odds", "scores": "points", "verdicts": "log-odds"}
_GH = np.polynomial.hermite_e.hermegauss(48)  # nodes and weights for E over a standard normal
# the 9 patterns of (verdict in AB, verdict in BA), each the first / second / tie *position*
_POS = ("first", "second", "tie")
PATTERNS = [(x, y) for x in _POS for y in _POS]

# one order of a judgment: (order "AB"/"BA", verdict from A's side "A"/"B"/"tie"/"invalid",
# p = P(the first-shown answer is preferred) or None, first-shown score minus second-shown or None)
Order = tuple


@dataclass
class Calibration:
    """The position prior of one battle's judge and each judgment's calibrated preference (A over B,
    position lean removed, in the method's unit) and verdict ("A", "B", "tie"; None: not both orders
    valid)."""

    method: str  # "probabilities" | "scores" | "verdicts"
    bias: float  # b: the judge's lean towards the first-shown answer, in the method's unit
    bias_ci: list[float] | None
    judgments: int  # judgments valid in both orders, the ones the prior is fitted on
    margins: list[float | None]
    verdicts: list[str | None]
    tau: float | None = None  # verdicts: the half-width of the judge's tie zone (log-odds)
    sigma: float | None = None  # verdicts: the spread of the items' preferences
    level: float = 0.95
    tie_band: float = TIE_BAND
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return UNIT[self.method]

    @property
    def p_first_equal(self) -> float | None:
        """P(the first-shown answer is preferred) between two answers the judge rates alike (d = 0), where
        the unit is log-odds."""
        return None if self.method == "scores" else float(expit(self.bias - (self.tau or 0.0)))

    def text(self) -> str:
        """The prior in words, e.g. "the judge gives the first-shown answer +0.90 log-odds (95% CI +0.71
        to +1.10), a lean to the first position; between two answers it rates alike it prefers the first
        71% of the time (from its 221 two-order pairs, no labels)"."""
        ci = f" ({self.level:.0%} CI {self.bias_ci[0]:+.2f} to {self.bias_ci[1]:+.2f})" if self.bias_ci else ""
        where = "first" if self.bias >= 0 else "second"
        if self.method == "verdicts" and abs(self.bias) >= _UPPER[0] - 1e-6:
            return (f"the judge's lean to the {where} position is beyond what its {self.judgments} two-order pairs "
                    f"can measure (at least {self.bias:+.0f} log-odds): it named the {where}-shown answer in "
                    "nearly every order")
        if self.method == "scores":
            alike = "on its own score scale, from the parsed scores"
        elif self.method == "probabilities":
            alike = f"between two answers it rates alike it prefers the first {self.p_first_equal:.0%} of the time"
        else:
            alike = (f"between two answers it rates alike it calls the first the winner {self.p_first_equal:.0%}, "
                     f"the second {float(expit(-self.bias - (self.tau or 0.0))):.0%} of the time")
        undetected = (self.bias_ci[0] <= 0 <= self.bias_ci[1]) if self.bias_ci else self.bias == 0
        lean = "no detectable lean to either position" if undetected else f"a lean to the {where} position"
        return (f"the judge gives the first-shown answer {self.bias:+.2f} {self.unit}{ci}, {lean}; {alike} "
                f"(from its {self.judgments} two-order pairs, no labels)")

    def summary(self) -> dict[str, Any]:
        """The prior as a battle file holds it (no per-item values)."""
        p_eq = self.p_first_equal
        out = {"method": self.method, "unit": self.unit, "position_bias": round(self.bias, 4),
               "position_bias_ci": [round(v, 4) for v in self.bias_ci] if self.bias_ci else None,
               "level": self.level, "p_first_equal": None if p_eq is None else round(p_eq, 4),
               "judgments": self.judgments, "tie_band": self.tie_band, "text": self.text()}
        if self.method == "verdicts":
            out.update(tie_zone=round(self.tau or 0.0, 4), preference_sd=round(self.sigma or 0.0, 4))
        out.update(self.extra)
        return out


def _logit(p: float) -> float:
    q = min(1.0 - P_CLIP, max(P_CLIP, p))
    return math.log(q / (1.0 - q))


def _position(order: str, verdict: str) -> str:
    """A verdict from A's side ("A" / "B" / "tie") as the position that won in this order."""
    if verdict == "tie":
        return "tie"
    return "first" if verdict == order[0] else "second"


def _verdict(margin: float, band: float) -> str:
    return "A" if margin > band else "B" if margin < -band else "tie"


def _valid_pair(orders: Sequence[Order]) -> dict[str, tuple] | None:
    """{order: (verdict, p, points)} when the judgment has both orders valid, else None."""
    by = {o[0]: (o[1], o[2] if len(o) > 2 else None, o[3] if len(o) > 3 else None)
          for o in orders if o[1] in ("A", "B", "tie")}
    return by if set(by) == {"AB", "BA"} and len(orders) == 2 else None


def calibrate(judgments: Sequence[Sequence[Order]], *, tie_band: float = TIE_BAND, level: float = 0.95,
              resamples: int = 1000, seed: int = 0, method: str | None = None) -> Calibration | None:
    """The calibration of one battle (module docstring). `judgments`: per judgment its orders as
    (order "AB"/"BA", verdict from A's side "A"/"B"/"tie"/"invalid", p = P(first-shown preferred) or
    None[, the first-shown answer's score minus the second-shown's, or None]). `method`: force one of
    METHODS (default: probabilities when every valid order of a two-order judgment has p, else scores
    when every one has its scores, else verdicts). None when no judgment is valid in both orders."""
    pairs = [_valid_pair(j) for j in judgments]
    usable = [p for p in pairs if p is not None]
    if not usable:
        return None
    if method is None:
        method = ("probabilities" if all(x[1] is not None for pair in usable for x in pair.values()) else
                  "scores" if all(x[2] is not None for pair in usable for x in pair.values()) else "verdicts")
    if method in ("probabilities", "scores"):
        return _calibrate_additive(pairs, method, tie_band, level, resamples, seed)
    if method == "verdicts":
        return _calibrate_verdicts(pairs, tie_band, level)
    raise ValueError(f'calibrate: method "{method}" (expected one of {", ".join(METHODS)})')


def _calibrate_additive(pairs, method, tie_band, level, resamples, seed) -> Calibration:
    """probabilities (logit p) or scores (points): the lean is the median centre, d the half difference."""
    k = 1 if method == "probabilities" else 2
    read = _logit if method == "probabilities" else float
    centres, margins = [], []
    for pair in pairs:
        if pair is None or pair["AB"][k] is None or pair["BA"][k] is None:
            margins.append(None)
            continue
        x_ab, x_ba = read(pair["AB"][k]), read(pair["BA"][k])
        centres.append((x_ab + x_ba) / 2)
        margins.append((x_ab - x_ba) / 2)
    c = np.array(centres)
    bias = float(np.median(c))
    ci = None
    if len(c) >= MIN_INTERVAL_N and resamples > 0:
        rng = np.random.default_rng(seed)
        boots = np.median(c[rng.integers(0, len(c), (resamples, len(c)))], axis=1)
        ci = list(percentile_interval(boots, level))
    what = "logit p_AB + logit p_BA" if method == "probabilities" else "m_AB + m_BA (first minus second score)"
    extra = {"estimator": f"median over pairs of ({what}) / 2; preference = half the difference"}
    if method == "probabilities":
        extra["p_clip"] = P_CLIP
    return Calibration(method=method, bias=bias, bias_ci=ci, judgments=len(c), margins=margins,
                       verdicts=[None if m is None else _verdict(m, tie_band) for m in margins],
                       level=level, tie_band=tie_band, extra=extra)


# --- the latent-threshold model for verdicts ------------------------------------------------------
def _log_probs(z: np.ndarray, tau: float) -> np.ndarray:
    """log P(first), log P(second), log P(tie) at latent z (log-odds for the first position): (3, len(z))."""
    tie = expit(z + tau) - expit(z - tau)  # >= 0 for tau >= 0
    return np.stack([log_expit(z - tau), log_expit(-z - tau), np.log(np.clip(tie, 1e-300, None))])


_LOG_W = np.log(_GH[1] / _GH[1].sum())


def _pattern_loglik(b: float, tau: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Per pattern (PATTERNS' order): its marginal log-likelihood, and the posterior mean of d given it."""
    d = sigma * _GH[0]
    ab, ba = _log_probs(d + b, tau), _log_probs(-d + b, tau)
    joint = (ab[:, None, :] + ba[None, :, :] + _LOG_W).reshape(len(PATTERNS), -1)  # (9, nodes)
    top = joint.max(axis=1, keepdims=True)
    post = np.exp(joint - top)
    total = post.sum(axis=1)
    return top[:, 0] + np.log(total), (post @ d) / total


_LOWER = np.array([-12.0, math.log(1e-3), math.log(0.05)])  # b, log tau, log sigma
_UPPER = np.array([12.0, math.log(10.0), math.log(20.0)])


def _fit_counts(counts: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """(b, log tau, log sigma) maximising the likelihood of the pattern counts. BFGS on the parameters
    clipped to a box (a judge that never ties drives tau to its floor, one that never contradicts
    itself drives sigma to its ceiling), with a small pull back from outside the box."""
    from scipy.optimize import minimize

    def nll(theta: np.ndarray) -> float:
        t = np.clip(theta, _LOWER, _UPPER)
        logs, _ = _pattern_loglik(t[0], math.exp(t[1]), math.exp(t[2]))
        return -float(counts @ logs) + 1e-3 * float(((theta - t) ** 2).sum())

    if start is not None:
        starts = [start]
    else:  # b from the share of first- over second-position wins, tau from the share of ties
        per = counts.reshape(3, 3)
        first = per[0].sum() + per[:, 0].sum()
        second = per[1].sum() + per[:, 1].sum()
        ties = per[2].sum() + per[:, 2].sum()
        b0 = float(np.clip(math.log((first + 0.5) / (second + 0.5)), -5, 5))
        t0 = math.log(max(0.05, min(2.0, 2.0 * (ties + 0.5) / (first + second + ties + 1.5))))
        starts = [np.array([b0, t0, math.log(s0)]) for s0 in (0.7, 2.5)]
    best = None
    for x0 in starts:
        res = minimize(nll, x0, method="BFGS", options={"gtol": 1e-4 * max(1.0, float(counts.sum()) ** 0.5)})
        if best is None or res.fun < best.fun:
            best = res
    return np.clip(best.x, _LOWER, _UPPER)  # type: ignore[union-attr]


def _wald_interval(counts: np.ndarray, theta: np.ndarray, level: float) -> list[float] | None:
    """The Wald interval of b from the observed information (the likelihood's curvature at its maximum,
    central differences), the parameters at an edge of the box held fixed; None when b is at an edge
    (a lean too strong to measure) or the curvature is not positive."""
    from scipy.stats import norm

    free = [k for k in range(3) if _LOWER[k] + 1e-6 < theta[k] < _UPPER[k] - 1e-6]
    if 0 not in free:
        return None

    def nll(t: np.ndarray) -> float:
        return -float(counts @ _pattern_loglik(t[0], math.exp(t[1]), math.exp(t[2]))[0])

    h = 1e-3
    hess = np.empty((len(free), len(free)))
    for a, i in enumerate(free):
        for c, j in enumerate(free):
            def at(di: float, dj: float) -> float:
                t = theta.astype(float).copy()
                t[i] += di
                t[j] += dj
                return nll(t)
            hess[a, c] = (at(h, h) - at(h, -h) - at(-h, h) + at(-h, -h)) / (4 * h * h)
    try:
        var = float(np.linalg.inv(hess)[0, 0])
    except np.linalg.LinAlgError:
        return None
    if not var > 0:
        return None
    z = float(norm.ppf(0.5 + level / 2))
    return [float(theta[0]) - z * math.sqrt(var), float(theta[0]) + z * math.sqrt(var)]


def _calibrate_verdicts(pairs, tie_band, level) -> Calibration:
    index = {p: k for k, p in enumerate(PATTERNS)}
    rows = []
    for pair in pairs:
        rows.append(None if pair is None else index[(_position("AB", pair["AB"][0]), _position("BA", pair["BA"][0]))])
    counts = np.bincount([r for r in rows if r is not None], minlength=len(PATTERNS)).astype(float)
    theta = _fit_counts(counts)
    b, tau, sigma = float(theta[0]), math.exp(theta[1]), math.exp(theta[2])
    _, means = _pattern_loglik(b, tau, sigma)
    n = int(counts.sum())
    ci = _wald_interval(counts, theta, level) if n >= MIN_INTERVAL_N else None
    margins = [None if r is None else float(means[r]) for r in rows]
    return Calibration(method="verdicts", bias=b, bias_ci=ci, judgments=n, margins=margins,
                       verdicts=[None if m is None else _verdict(m, tie_band) for m in margins],
                       tau=tau, sigma=sigma, level=level, tie_band=tie_band,
                       extra={"estimator": "ordered logit with a tie zone, item preferences N(0, sigma^2), maximum "
                                           "likelihood over the 9 patterns of two verdicts; margin = posterior mean",
                              "patterns": {f"{x}/{y}": int(counts[k]) for k, (x, y) in enumerate(PATTERNS)}})
