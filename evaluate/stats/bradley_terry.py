"""Bradley-Terry ranking of several models from pairwise battles.

Public API
----------
``fit_bradley_terry(wins, prior=1.0) -> np.ndarray``: log-strengths (mean 0) from a matrix
``wins[i, j]`` = how often i beat j (ties entered as half a win each way).
``rank(results, *, n_boot=200, seed=0, prior=1.0) -> Ranking``: from ``BattleResult`` objects.

Model: P(i beats j) = p_i / (p_i + p_j), p_i = exp(beta_i). The log-likelihood is concave in
beta, so the MLE is found by Newton-Raphson on the mean-zero subspace with step halving (a few
iterations; Hunter's MM update converges linearly: 11 ms against 1.4 ms for a 3-model fit with
strengths far apart, which matters inside the bootstrap). Ties count as half a win for each
side. ``prior`` adds that many virtual ties to every pair that met: without it a model that
never won has no finite MLE (beta -> -inf); with 200 real items per pair one virtual tie moves
beta by well under its standard error.

Confidence intervals: percentile bootstrap over *items* (questions), fixed seed. An item carries
all of its pairwise verdicts together, so the correlation between pairs judged on the same
question is kept. ``elo`` is the same scale as beta, shown as 1000 + 400 * beta / ln(10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..core.errors import InputError

ELO_BASE, ELO_SCALE = 1000.0, 400.0 / math.log(10)


def fit_bradley_terry(wins: np.ndarray, prior: float = 1.0, tol: float = 1e-10, max_iter: int = 200,
                      init: np.ndarray | None = None, met: np.ndarray | None = None) -> np.ndarray:
    """Log-strengths beta (mean 0) maximising the Bradley-Terry likelihood of `wins`.
    `init`: a starting point (the bootstrap starts from the full-data fit, which it lies near).
    `met`: pairs that get the prior (default: pairs with games in `wins`); the bootstrap passes
    the full data's pairs so a resample that happens to miss a pair stays well-posed."""
    w = np.asarray(wins, dtype=float)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"wins must be a square matrix, got shape {w.shape}")
    k = w.shape[0]
    w = w.copy()
    np.fill_diagonal(w, 0.0)
    met = (w + w.T) > 0 if met is None else np.asarray(met, dtype=bool)
    w = w + np.where(met & ~np.eye(k, dtype=bool), prior / 2.0, 0.0)
    games = w + w.T
    total = w.sum(axis=1)
    if np.any(total <= 0):
        raise ValueError("every model needs a win (or a prior > 0) for the Bradley-Terry MLE to exist")

    def loglik(b: np.ndarray) -> float:
        return -float(np.sum(w * np.logaddexp(0.0, b[None, :] - b[:, None])))

    beta = np.zeros(k) if init is None else np.asarray(init, dtype=float) - np.mean(init)
    current = loglik(beta)
    centre = np.ones((k, k)) / k  # makes the Laplacian-like Hessian invertible on mean-zero steps
    for _ in range(max_iter):
        pi = 1.0 / (1.0 + np.exp(beta[None, :] - beta[:, None]))  # pi[i, j] = P(i beats j)
        grad = total - (games * pi).sum(axis=1)
        v = games * pi * pi.T
        step = np.linalg.solve(np.diag(v.sum(axis=1)) - v + centre, grad)
        t = 1.0
        while t > 1e-12:  # step halving keeps every iterate an improvement
            cand = beta + t * step
            value = loglik(cand)
            if value >= current - 1e-12:
                break
            t /= 2
        beta, current = cand - cand.mean(), value
        if np.max(np.abs(t * step)) < tol:
            break
    return beta


def elo(beta: float) -> float:
    return ELO_BASE + ELO_SCALE * beta


@dataclass
class Ranking:
    """Models best first, with log-strengths (mean 0), 95% bootstrap intervals and Elo-scale values."""

    models: list[str]
    strength: dict[str, float]
    ci: dict[str, tuple[float, float]]
    n_items: int
    n_boot: int
    seed: int
    prior: float
    wins: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": "Bradley-Terry MLE (Newton), ties = half wins; 95% percentile bootstrap over items",
            "n_items": self.n_items, "n_boot": self.n_boot, "seed": self.seed, "prior_ties_per_pair": self.prior,
            "ranking": [{"model": m, "rank": r, "strength": self.strength[m], "ci95": list(self.ci[m]),
                         "elo": elo(self.strength[m]), "elo_ci95": [elo(self.ci[m][0]), elo(self.ci[m][1])]}
                        for r, m in enumerate(self.models, 1)],
            "wins": self.wins,
        }


def _item_tables(results: Sequence[Any]) -> tuple[list[str], list[str], np.ndarray]:
    """Models, item ids, and per item a k x k matrix of its (half-)wins."""
    models: list[str] = []
    for res in results:
        for m in (res.model_a, res.model_b):
            if m not in models:
                models.append(m)
    pos = {m: i for i, m in enumerate(models)}
    ids: dict[str, int] = {}
    cells: list[tuple[int, int, int, float]] = []
    for res in results:
        a, b = pos[res.model_a], pos[res.model_b]
        for item in res.items:
            if item.verdict == "invalid":
                continue
            n = ids.setdefault(item.id, len(ids))
            if item.verdict == "A":
                cells.append((n, a, b, 1.0))
            elif item.verdict == "B":
                cells.append((n, b, a, 1.0))
            else:
                cells.append((n, a, b, 0.5))
                cells.append((n, b, a, 0.5))
    table = np.zeros((len(ids), len(models), len(models)))
    for n, i, j, v in cells:
        table[n, i, j] += v
    return models, list(ids), table


def _check_connected(models: list[str], wins: np.ndarray) -> None:
    """Strengths of models that never meet, directly or through others, are not comparable."""
    met = (wins + wins.T) > 0
    seen, todo = {0}, [0]
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(met[i]):
            if int(j) not in seen:
                seen.add(int(j))
                todo.append(int(j))
    if len(seen) < len(models):
        apart = [m for i, m in enumerate(models) if i not in seen]
        raise InputError(f"ranking: models {', '.join(apart)} have no valid battle linking them to"
                         f" {models[0]}; their strengths would not be comparable")


def rank(results: Sequence[Any], *, n_boot: int = 200, seed: int = 0, prior: float = 1.0) -> Ranking:
    """Bradley-Terry ranking from battle results (any objects with model_a, model_b and items whose
    verdict is "A", "B", "tie" or "invalid" and which carry an id shared across pairs)."""
    models, ids, table = _item_tables(results)
    if len(models) < 2:
        raise InputError("ranking needs battles between at least two models")
    if not ids:
        raise InputError("ranking: every battle item is invalid; nothing to rank")
    _check_connected(models, table.sum(axis=0))
    full = table.sum(axis=0)
    beta = fit_bradley_terry(full, prior=prior)
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, len(models)))
    for b in range(n_boot):
        counts = np.bincount(rng.integers(0, len(ids), len(ids)), minlength=len(ids)).astype(float)
        boots[b] = fit_bradley_terry(np.tensordot(counts, table, axes=1), prior=prior, init=beta,
                                     met=(full + full.T) > 0)
    if n_boot:
        lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    else:
        lo = hi = np.full(len(models), math.nan)
    order = sorted(range(len(models)), key=lambda i: -beta[i])
    wins = full
    return Ranking(
        models=[models[i] for i in order],
        strength={models[i]: float(beta[i]) for i in order},
        ci={models[i]: (float(lo[i]), float(hi[i])) for i in order},
        n_items=len(ids), n_boot=n_boot, seed=seed, prior=prior,
        wins={models[i]: {models[j]: float(wins[i, j]) for j in range(len(models)) if j != i}
              for i in range(len(models))},
    )
