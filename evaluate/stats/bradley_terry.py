"""The one Bradley-Terry fit: the run's ranking (`bradley_terry`, battles/ranking.json and each battle
file's style-controlled block), Arena-Hard's style-controlled scores (benchmarks/arena_hard/scores.py)
and AlpacaEval's length control (battle.py) all fit their logistic models here.

The model: P(A beats B) = sigmoid(x . w), x holding +1 for A's indicator and -1 for B's (no intercept)
and, for style control, the answers' style differences; outcomes may be soft (a tie is 0.5, a soft
verdict the probability that A wins: the likelihood of y is y log p + (1 - y) log(1 - p)).

``fit_logistic`` maximises that likelihood with one of two optimizers:
- ``newton`` (the run's): Newton's method with step halving to the optimum of the likelihood with an L2
  penalty ``l2`` on the coefficients (1e-3 by default: only there to keep an all-wins data set finite);
  ``fit_logistic_many`` fits many bootstrap resamples (weight vectors) at once, to the same numbers;
- ``lbfgs``: Arena-Hard's show_result.py's fit (lmarena/arena-hard-auto @ 196f6b8): one torch LBFGS step
  (lr 0.1, at most 50 iterations, tolerances 1e-9) from coefficients 0.5 on the summed soft-label
  cross-entropy, in float32. It stops short of the optimum on rare features, which narrows the bootstrap
  spread; Arena-Hard's scores use it so that their intervals are the ones Arena-Hard publishes.

``bradley_terry`` rates several models from their battles: raw and style-controlled, on the Elo scale
1000 + 400 / ln 10 * coefficient, mean-centred (the average model is 1000), from the same bootstrap
resamples at one level (95% by default), over questions when the battles name theirs (every verdict on
a question travels together), else over battles. A model is "clearly first" only when, in those
resamples, its rating minus every other model's has an interval above 0.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import expit  # the logistic function without exp's overflow warning at large |z|

from .intervals import MIN_INTERVAL_N, bootstrap_counts, percentile_interval

L2 = 1e-3
ELO_BASE, ELO_SCALE = 1000.0, 400.0 / math.log(10)


# --- the fit --------------------------------------------------------------------------------------
def fit_logistic(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, *, l2: float = L2,
                 init: np.ndarray | None = None, max_iter: int = 100, tol: float = 1e-9,
                 solver: str = "newton") -> np.ndarray:
    """Coefficients w minimising sum_i weight_i * logloss(y_i, sigmoid(x_i . w)) + l2 / 2 * |w|^2.

    y may be fractional (a tie is y = 0.5). `newton`: Newton's method with step halving; the objective is
    strictly convex (l2 > 0), so this converges in a few steps from zero or from a nearby fit. `lbfgs`:
    show_result.py's optimizer (see the module docstring): no penalty, weights nor starting point.
    """
    if solver == "lbfgs":
        if l2 or weights is not None or init is not None:
            raise ValueError("fit_logistic: the lbfgs solver is show_result.py's fit: no l2, weights or init")
        return _fit_lbfgs(x, y)
    if solver != "newton":
        raise ValueError(f"fit_logistic: solver {solver!r}: expected newton or lbfgs")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w8 = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    coef = np.zeros(x.shape[1]) if init is None else np.array(init, dtype=float)

    def loss(c: np.ndarray) -> float:
        z = x @ c
        return float(np.sum(w8 * (np.logaddexp(0.0, z) - y * z)) + 0.5 * l2 * c @ c)

    current = loss(coef)
    for _ in range(max_iter):
        p = expit(x @ coef)
        grad = x.T @ (w8 * (p - y)) + l2 * coef
        hess = x.T @ (x * (w8 * p * (1 - p))[:, None]) + l2 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while True:
            cand = coef - t * step
            value = loss(cand)
            if value <= current + 1e-12 or t < 1e-10:
                break
            t /= 2
        coef, current = cand, value
        if np.max(np.abs(t * step)) < tol:
            break
    return coef


def fit_logistic_many(x: np.ndarray, y: np.ndarray, weights: np.ndarray, *, l2: float = L2,
                      init: np.ndarray | None = None, max_iter: int = 50, tol: float = 1e-9) -> np.ndarray:
    """`fit_logistic` for many weight vectors at once (one row of `weights` per bootstrap resample):
    Newton steps on all of them together, in chunks that keep resamples x items under ~2M numbers.
    A resample that has not converged (rare: the objective is strictly convex and the start is the
    full fit) is fitted again alone with step halving, so the result equals the one-by-one fits."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    weights = np.atleast_2d(np.asarray(weights, dtype=float))
    n_res, k = weights.shape[0], x.shape[1]
    start = np.zeros(k) if init is None else np.asarray(init, dtype=float)
    out = np.empty((n_res, k))
    step_rows = max(1, 2_000_000 // max(1, len(y)))
    for lo in range(0, n_res, step_rows):
        w8 = weights[lo:lo + step_rows]
        coef = np.tile(start, (len(w8), 1))
        for _ in range(max_iter):
            p = expit(coef @ x.T)
            grad = (w8 * (p - y)) @ x + l2 * coef
            curv = w8 * p * (1 - p)
            hess = np.stack([(curv * x[:, i]) @ x for i in range(k)], axis=1) + l2 * np.eye(k)
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
            coef = coef - step
            if np.max(np.abs(step)) < tol:
                break
        p = expit(coef @ x.T)
        grad = (w8 * (p - y)) @ x + l2 * coef
        bad = ~np.isfinite(coef).all(axis=1) | (np.abs(grad).max(axis=1) > 1e-6 * (1.0 + w8.sum(axis=1)))
        for b in np.flatnonzero(bad):
            coef[b] = fit_logistic(x, y, w8[b], l2=l2, init=start)
        out[lo:lo + len(w8)] = coef
    return out


def _fit_lbfgs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """show_result.py's fit, as it runs it (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    w = torch.nn.Parameter(torch.full((x.shape[1],), 0.5))
    opt = torch.optim.LBFGS([w], lr=0.1, max_iter=50, tolerance_grad=1e-9, tolerance_change=1e-9)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(xt @ w, yt, reduction="sum")
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy().astype(float)


# --- ratings of several models ----------------------------------------------------------------------
def _ratings(coef: np.ndarray, k: int) -> np.ndarray:
    """Model coefficients (the first model fixed at 0) -> mean-centred Elo-scale ratings."""
    c = np.concatenate([[0.0], coef[: k - 1]])
    return ELO_BASE + ELO_SCALE * (c - c.mean())


def _table(models: list[str], ratings: np.ndarray, boots: np.ndarray | None, level: float) -> dict[str, dict[str, Any]]:
    order = np.argsort(-ratings, kind="stable")
    rank = {int(i): r for r, i in enumerate(order, 1)}
    out = {}
    for i, m in enumerate(models):
        iv = list(percentile_interval(boots[:, i], level)) if boots is not None and len(boots) else None
        out[m] = {"rating": float(ratings[i]), "interval": iv, "rank": rank[i]}
    return out


def first_place(models: list[str], ratings: np.ndarray, boots: np.ndarray | None, level: float,
                why_none: str = "no resamples") -> dict[str, Any]:
    """Is the top-rated model clearly first? Yes only when the `level` percentile interval of its rating
    minus each other model's, over the same resamples, lies above 0; otherwise the models it cannot be
    told apart from are named."""
    top = int(np.argmax(ratings))
    out: dict[str, Any] = {"model": models[top], "clearly": False, "tied_with": [], "margins": {}}
    if boots is None or not len(boots):
        out["text"] = f"{models[top]} rated highest; not shown to be first ({why_none})"
        return out
    for j, m in enumerate(models):
        if j == top:
            continue
        lo, hi = percentile_interval(boots[:, top] - boots[:, j], level)
        out["margins"][m] = {"difference": float(ratings[top] - ratings[j]), "interval": [lo, hi]}
        if lo <= 0:
            out["tied_with"].append(m)
    out["clearly"] = not out["tied_with"]
    out["text"] = (f"{models[top]} clearly first ({level:.0%} intervals of its margin over every other model "
                   "exclude 0)" if out["clearly"] else
                   f"no model is clearly first: {models[top]} rated highest, not distinguishable from "
                   + ", ".join(out["tied_with"]))
    return out


def bradley_terry(battles: Sequence[tuple[str, str, float, Mapping[str, float] | None, Mapping[str, float] | None]],
                  *, features: Sequence[str] | None = None, resamples: int = 200, seed: int = 0,
                  level: float = 0.95, groups: Sequence[str] | None = None) -> dict[str, Any]:
    """Raw and style-controlled Bradley-Terry ratings from (model_a, model_b, outcome, feat_a, feat_b).

    features: style feature names to control for; None = every name in the first battle's
    feat_a (no feature dicts: raw only). A feature with no variation is left out and reported.
    groups: the question of each battle; the bootstrap then resamples questions, so the verdicts of
    several pairs on one question stay together. Both tables use the same resamples and `level`.
    """
    if not battles:
        raise ValueError("bradley_terry: no battles")
    models = sorted({str(m) for a, b, *_ in battles for m in (a, b)})
    if len(models) < 2:
        raise ValueError("bradley_terry: needs battles between at least two models")
    pos = {m: i for i, m in enumerate(models)}
    k, n = len(models), len(battles)
    y = np.array([float(o) for _, _, o, *_ in battles])
    xm = np.zeros((n, k))
    for r, (a, b, *_) in enumerate(battles):
        xm[r, pos[str(a)]] += 1.0
        xm[r, pos[str(b)]] -= 1.0
    xm = xm[:, 1:]  # the first model is the reference (0); ratings are mean-centred afterwards
    if features is None:
        first = battles[0][3]
        features = list(first) if first else []
    used, dropped, cols = [], [], []
    for f in features:
        fa = np.array([float((fa_ or {}).get(f, 0.0)) for _, _, _, fa_, _ in battles])
        fb = np.array([float((fb_ or {}).get(f, 0.0)) for _, _, _, _, fb_ in battles])
        tot = fa + fb
        d = np.divide(fa - fb, tot, out=np.zeros(n), where=tot > 0)
        sd = d.std()
        if sd > 0:
            cols.append((d - d.mean()) / sd)
            used.append(f)
        else:
            dropped.append(f)
    xs = np.column_stack([xm, *cols]) if cols else xm
    rng = np.random.default_rng(seed)
    if groups is not None:
        if len(groups) != n:
            raise ValueError(f"bradley_terry: {len(groups)} groups for {n} battles")
        index = {g: i for i, g in enumerate(dict.fromkeys(str(g) for g in groups))}
        units, unit = len(index), "questions"
        g_idx = np.array([index[str(g)] for g in groups])
    else:
        units, unit, g_idx = n, "battles", np.arange(n)
    too_few = units < MIN_INTERVAL_N
    counts = (bootstrap_counts(rng, units, resamples)[:, g_idx] if resamples > 0 and not too_few
              else np.zeros((0, n)))
    why_none = f"too few {unit}: {units} < {MIN_INTERVAL_N}" if too_few else "no resamples"
    out: dict[str, Any] = {
        "models": models, "n_battles": n, "resamples": resamples, "seed": seed, "level": level,
        "interval": (f"no intervals: {why_none}" if too_few or not resamples else
                     f"{level:.0%} percentile interval of a bootstrap over {units} {unit} ({resamples} resamples, "
                     "the same for raw and style-controlled)"),
        "method": "logistic regression on model indicator differences (no intercept, ties as half "
                  f"observations, L2 {L2}); ratings 1000 + 400/ln10 * coefficient, mean-centred; style "
                  "control adds features (a - b) / (a + b), standardised",
    }
    for name, x in (("raw", xm), ("style_controlled", xs if used else None)):
        if x is None:
            out[name] = None
            continue
        coef = fit_logistic(x, y)
        boots = fit_logistic_many(x, y, counts, init=coef) if len(counts) else None
        rb = np.array([_ratings(b, k) for b in boots]) if boots is not None else None
        ratings = _ratings(coef, k)
        out[name] = _table(models, ratings, rb, level)
        out.setdefault("first", {})[name] = first_place(models, ratings, rb, level, why_none)
        if name == "style_controlled":
            out["style_coefficients"] = {
                f: {"coef": float(coef[k - 1 + j]),
                    "interval": list(percentile_interval(boots[:, k - 1 + j], level)) if boots is not None else None}
                for j, f in enumerate(used)}
    if not used:
        out["style_coefficients"] = {}
    out["features_without_variation"] = dropped
    return out
