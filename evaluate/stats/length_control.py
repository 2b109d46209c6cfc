"""AlpacaEval 2's length-controlled (LC) win rate, with the instruction difficulty fitted jointly
over a reference set of models and each model's length slope shrunk towards the reference set's.

AlpacaEval's GLM (Dubois et al. 2024, arXiv 2404.04475; `metrics/glm_winrate.py`) models the
judge's probability that model m beats the baseline on instruction i as

    P = sigmoid(a_m + b_m * tanh((len_baseline - len_model) / sd_m) + c_m * d_i)

(sd_m: standard deviation of model m's length differences), and reports the mean over
instructions of the prediction at equal lengths, sigmoid(a_m + c_m * d_i). Two ingredients of
its published numbers are not in the annotation files, and are rebuilt here from the reference
set (every model given together) instead:

- the instruction difficulty d_i: AlpacaEval fitted it once, jointly over its leaderboard
  (`notebooks/instruction_difficulty.ipynb`: per-model intercept and length slope, one effect per
  instruction). Here the same joint model is fitted over the reference set, the instruction
  effects with a Gaussian prior whose variance is estimated from the data (empirical Bayes);
  nothing is tuned by hand.
- the regularisation of (b_m, c_m): AlpacaEval adds to every model's fit the rows of two
  "gamed" baselines (the baseline prompted to be concise or verbose: same quality, intercept 0),
  N rows each at weight 0.2 / 2. That is what stops a truncation attack (short answers everywhere
  except where a long one wins) from buying a high LC win rate by extrapolating a steep length
  slope to equal lengths. Those rows are not published. In their place each model's (b_m, c_m)
  gets a Gaussian prior with the same weight: the quadratic approximation of 0.2 x N rows of a
  same-quality model, centred at the reference set's median (b, c) (robust to gamed models in the
  set), with the per-row information of the reference set's lengths and difficulties
  (`slope_prior`). The intercept a_m, the model's quality, is not shrunk. The one constant, 0.2,
  is AlpacaEval's.

With fewer than `MIN_REFERENCE` models there is nothing to pool: each model gets AlpacaEval's
per-model GLM without the difficulty term (its `length_controlled_minimal`), unregularised, and
`method` says so. The LC standard error is AlpacaEval's `lc_standard_error`: the standard error
of the mean of the per-instruction predictions (ddof 1), in percent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_REFERENCE = 2
RIDGE = 1e-4  # keeps a fit finite when the data alone separate (a model that never wins)
GAMED_WEIGHT = 0.2  # AlpacaEval's regularize_to_baseline_lambda (GLM_INFO["length_controlled_v1"])
METHOD_JOINT = "glm+joint-difficulty+slope-prior"
METHOD_MINIMAL = "glm-minimal (no reference set: no difficulty, no slope prior)"


@dataclass(frozen=True)
class LengthControlled:
    """LC win rates of K models and how they were obtained.

    `coef[k]` = (length slope b, difficulty weight c, intercept a) of model k;
    `difficulty`: d_i per instruction and `difficulty_prior_var` the variance of its fitted prior;
    `prior_mean`, `prior_precision`: the prior of (b, c) (all None for the minimal method)."""

    win_rate: np.ndarray
    standard_error: np.ndarray
    coef: np.ndarray
    method: str
    reference: tuple[int, ...]
    difficulty: np.ndarray | None = None
    difficulty_prior_var: float | None = None
    prior_mean: np.ndarray | None = None
    prior_precision: np.ndarray | None = None


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _softplus(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


def length_features(len_model: np.ndarray, len_baseline: np.ndarray, present: np.ndarray) -> np.ndarray:
    """tanh of the standardised length difference (baseline minus model), per model; 0 where absent.

    The standard deviation is each model's own (ddof 1), as AlpacaEval standardises it."""
    delta = np.where(present, len_baseline - len_model, np.nan)
    with np.errstate(invalid="ignore"):
        sd = np.nanstd(delta, axis=1, ddof=1) if delta.shape[1] > 1 else np.zeros(delta.shape[0])
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    return np.where(present, np.tanh(np.nan_to_num(delta) / sd[:, None]), 0.0)


def fit_glms(x: np.ndarray, y: np.ndarray, w: np.ndarray, *, prior_mean: np.ndarray | None = None,
             prior_prec: np.ndarray | None = None, init: np.ndarray | None = None,
             max_iter: int = 100, tol: float = 1e-9) -> np.ndarray:
    """K logistic fits at once: coef[k] minimises sum_n w[k,n] * logloss(y[k,n], sigmoid(x[k,n] . coef))
    + 1/2 (coef - prior_mean)' prior_prec (coef - prior_mean) + RIDGE/2 |coef|^2.

    x: (K, N, p); y: soft labels in [0, 1]; w: row weights (0 = absent). Newton steps with step
    halving per model, so a model that separates (never or always wins) still converges."""
    k, _, p = x.shape
    if k == 0:
        return np.zeros((0, p))
    pm = np.zeros((k, p)) if prior_mean is None else np.broadcast_to(prior_mean, (k, p))
    pp = np.zeros((k, p, p)) if prior_prec is None else np.broadcast_to(prior_prec, (k, p, p))
    coef = np.zeros((k, p)) if init is None else np.array(init, dtype=float)

    def objective(c: np.ndarray) -> np.ndarray:
        z = np.einsum("knp,kp->kn", x, c)
        dev = c - pm
        return (np.sum(w * (_softplus(z) - y * z), axis=1) + 0.5 * np.einsum("kp,kpq,kq->k", dev, pp, dev)
                + 0.5 * RIDGE * np.sum(c * c, axis=1))

    current = objective(coef)
    ridge = RIDGE * np.eye(p)
    for _ in range(max_iter):
        q = _sigmoid(np.einsum("knp,kp->kn", x, coef))
        grad = (np.einsum("knp,kn->kp", x, w * (q - y)) + np.einsum("kpq,kq->kp", pp, coef - pm)
                + RIDGE * coef)
        hess = np.einsum("knp,kn,knq->kpq", x, w * q * (1 - q), x) + pp + ridge
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        t = np.ones(k)
        for _ in range(40):
            cand = coef - t[:, None] * step
            value = objective(cand)
            worse = value > current + 1e-12 * (1 + np.abs(current))
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        coef, current = cand, np.minimum(value, current)
        if np.max(np.abs(t[:, None] * step)) < tol:
            break
    return coef


def fit_difficulty(t: np.ndarray, y: np.ndarray, w: np.ndarray, *, max_iter: int = 100,
                   tol: float = 1e-9) -> tuple[np.ndarray, float]:
    """Instruction effects d (N,) of the joint model logit P = alpha_m + beta_m * t + d_i over the models
    given (AlpacaEval's joint formula), with d_i ~ N(0, 1/lam) and lam estimated by EM.

    Newton on all 2K + N parameters: the instruction block of the Hessian is diagonal, so each step
    solves a 2K x 2K system (Schur complement), which stays fast for hundreds of models."""
    k, n = y.shape
    lam = 1.0
    alpha, beta, d = np.zeros(k), np.zeros(k), np.zeros(n)
    rows = np.arange(k)

    def objective(a_, b_, d_, lam_):
        z = a_[:, None] + b_[:, None] * t + d_[None, :]
        return (np.sum(w * (_softplus(z) - y * z)) + 0.5 * lam_ * d_ @ d_
                + 0.5 * RIDGE * (a_ @ a_ + b_ @ b_))

    for _ in range(100):  # EM over lam: the inner Newton fits d given lam
        current = objective(alpha, beta, d, lam)
        for _ in range(max_iter):
            q = _sigmoid(alpha[:, None] + beta[:, None] * t + d[None, :])
            r, h = w * (q - y), w * q * (1 - q)
            g1 = np.concatenate([r.sum(1) + RIDGE * alpha, (r * t).sum(1) + RIDGE * beta])
            gd = r.sum(0) + lam * d
            hd = h.sum(0) + lam
            a_blk = np.zeros((2 * k, 2 * k))
            a_blk[rows, rows] = h.sum(1) + RIDGE
            a_blk[rows, k + rows] = a_blk[k + rows, rows] = (h * t).sum(1)
            a_blk[k + rows, k + rows] = (h * t * t).sum(1) + RIDGE
            cross = np.concatenate([h, h * t], axis=0)
            s1 = np.linalg.solve(a_blk - (cross / hd) @ cross.T, g1 - cross @ (gd / hd))
            sd_ = (gd - cross.T @ s1) / hd
            step = 1.0
            for _ in range(40):
                cand = (alpha - step * s1[:k], beta - step * s1[k:], d - step * sd_)
                value = objective(*cand, lam)
                if value <= current + 1e-12 * (1 + abs(current)):
                    break
                step /= 2
            alpha, beta, d = cand
            current = value
            if max(np.abs(step * s1).max(initial=0.0), np.abs(step * sd_).max(initial=0.0)) < tol:
                break
        q = _sigmoid(alpha[:, None] + beta[:, None] * t + d[None, :])
        post_var = 1.0 / ((w * q * (1 - q)).sum(0) + lam)
        new_lam = 1.0 / max(float(np.mean(d * d + post_var)), 1e-6)
        if abs(new_lam - lam) <= 1e-4 * lam:
            lam = new_lam
            break
        lam = new_lam
    return d, lam


def slope_prior(x: np.ndarray, y: np.ndarray, w: np.ndarray, *,
                gamed_weight: float = GAMED_WEIGHT) -> tuple[np.ndarray, np.ndarray]:
    """The prior on (b, c) that stands in for AlpacaEval's gamed-baseline rows: (mean, precision).

    AlpacaEval adds N rows of the baseline's concise and verbose variants, intercept 0 (same quality
    as the baseline), total weight `gamed_weight` x N, sharing b and c with the model. Their
    log-likelihood is replaced by its quadratic approximation: centred at the reference set's
    typical model (the median over models of each coefficient of their own fits: a gamed model in
    the set cannot move it), with the information of N rows at intercept 0 whose lengths and
    difficulties are distributed as in the reference set."""
    _, n, _ = x.shape
    own = fit_glms(x, y, w)
    mean = np.median(own[:, :2], axis=0)
    tc = x[:, :, :2]
    q = _sigmoid(tc @ mean)
    info = np.einsum("knp,kn,knq->pq", tc, w * q * (1 - q), tc) / max(float(w.sum()), 1.0)
    return mean, gamed_weight * n * info


def length_controlled_win_rates(y: np.ndarray, len_model: np.ndarray, len_baseline: np.ndarray, *,
                                reference: np.ndarray | None = None, is_baseline: np.ndarray | None = None,
                                difficulty_item: np.ndarray | None = None) -> LengthControlled:
    """LC win rates (percent) of K models against one baseline on N instructions.

    y: (K, N) the judge's probability that the model beats the baseline (AlpacaEval's preference
    minus 1; a draw is 0.5), NaN where the judge gave none. len_model, len_baseline: (K, N) answer
    lengths in characters, NaN where the model has no row for the instruction. As in AlpacaEval, a
    row without a preference is left out of the fit but its prediction counts in the LC mean, and
    the length standardisation uses all rows. reference: (K,) bool, the models that form the reference
    set (default: all but the baseline). is_baseline: (K,) bool, models that are the baseline
    itself: LC = 50 by construction. difficulty_item: (K, N) int, which instruction's difficulty
    model k's annotation n gets in its own fit (default: n itself; AlpacaEval's positional lookup
    is built by the caller).
    """
    y = np.asarray(y, dtype=float)
    len_model, len_baseline = np.asarray(len_model, float), np.asarray(len_baseline, float)
    k, n = y.shape
    present = np.isfinite(len_model) & np.isfinite(len_baseline)
    judged = present & np.isfinite(y)
    base = np.zeros(k, bool) if is_baseline is None else np.asarray(is_baseline, bool)
    ref = (~base if reference is None else np.asarray(reference, bool) & ~base) & judged.any(1)
    t = length_features(np.nan_to_num(len_model), np.nan_to_num(len_baseline), present)
    y0, w = np.where(judged, y, 0.5), judged.astype(float)
    coef = np.zeros((k, 3))
    fit = ~base & judged.any(1)
    if ref.sum() >= MIN_REFERENCE:
        d, lam = fit_difficulty(t[ref], y0[ref], w[ref])
        item = np.broadcast_to(np.arange(n), (k, n)) if difficulty_item is None else np.asarray(difficulty_item)
        dd = np.where(present, d[np.clip(item, 0, n - 1)], 0.0)
        x = np.stack([t, dd, np.ones_like(t)], axis=-1)
        mu, precision = slope_prior(x[ref], y0[ref], w[ref])
        pm, prec = np.zeros(3), np.zeros((3, 3))
        pm[:2], prec[:2, :2] = mu, precision
        coef[fit] = fit_glms(x[fit], y0[fit], w[fit], prior_mean=pm, prior_prec=prec)
        method, extra = METHOD_JOINT, dict(difficulty=d, difficulty_prior_var=1.0 / lam, prior_mean=mu,
                                           prior_precision=precision)
    else:
        dd = np.zeros((k, n))
        x = np.stack([t, dd, np.ones_like(t)], axis=-1)
        coef[fit] = fit_glms(x[fit], y0[fit], w[fit])  # the all-zero difficulty column keeps c = 0
        method, extra = METHOD_MINIMAL, {}
    pred = _sigmoid(coef[:, 1, None] * dd + coef[:, 2, None])
    count = present.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(present, pred, 0.0).sum(1) / count
        var = np.where(present, (pred - mean[:, None]) ** 2, 0.0).sum(1) / (count - 1)
        se = np.sqrt(var / count)
    mean = np.where(count > 0, mean, np.nan)
    se = np.where(count > 1, se, np.nan)
    mean[base], se[base] = 0.5, 0.0
    return LengthControlled(win_rate=100 * mean, standard_error=100 * se, coef=coef, method=method,
                            reference=tuple(int(i) for i in np.flatnonzero(ref)), **extra)
