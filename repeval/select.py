"""Choosing layer, token and direction method on a validation split.

Small models and few pairs make these choices noisy, so they are chosen on held-out data, never
on the test documents. Representations are extracted once for every (token, layer) in the grid
(one forward pass to the deepest layer) and every candidate direction is fitted from them.

- absolute scores: maximise Spearman against human scores, per group (SummEval's
  "summary-level": one correlation per document over its outputs, averaged, constant groups
  skipped) or over the whole set when no groups are given;
- pairwise: maximise accuracy of proj(A vs B) - proj(B vs A) against the labels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from evaluate.core.errors import InputError

from .direction import fit_direction


@dataclass(frozen=True)
class Candidate:
    layer: int
    token: int
    method: str
    n_components: int = 1


@dataclass
class SweepRow:
    layer: int
    token: int
    method: str
    n_components: int
    train_accuracy: float
    validation: float  # Spearman (absolute) or accuracy (pairwise)

    def as_dict(self) -> dict:
        return asdict(self)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho; nan when either side is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def grouped_spearman(pred: Sequence[float], human: Sequence[float], groups: Sequence[Any] | None) -> float:
    """Mean per-group Spearman (groups where either side is constant are skipped); one Spearman
    over everything when `groups` is None."""
    pred, human = np.asarray(pred, float), np.asarray(human, float)
    if groups is None:
        return spearman(pred, human)
    groups = np.asarray(groups)
    rhos = [spearman(pred[groups == g], human[groups == g]) for g in dict.fromkeys(groups.tolist())]
    rhos = [r for r in rhos if not np.isnan(r)]
    return float(np.mean(rhos)) if rhos else float("nan")


def grid(layers: Sequence[int], tokens: Sequence[int], methods: Sequence[str] = ("pca", "mean", "svm"),
         n_components: Sequence[int] = (1,)) -> list[Candidate]:
    out = []
    for layer in layers:
        for token in tokens:
            for method in methods:
                for n in (n_components if method == "pca" else (1,)):
                    out.append(Candidate(int(layer), int(token), method, int(n)))
    return out


def sweep(train_good: np.ndarray, train_bad: np.ndarray, val: np.ndarray, layers: Sequence[int],
          tokens: Sequence[int], candidates: Sequence[Candidate], *, human: Sequence[float] | None = None,
          groups: Sequence[Any] | None = None, val_bad: np.ndarray | None = None, seed: int = 0) -> list[SweepRow]:
    """Score every candidate on the validation representations; best first.

    Arrays are ``[n, n_tokens, n_layers, hidden]`` laid out as `tokens` x `layers`. Absolute
    validation: `val` + `human` (+ `groups`). Pairwise validation: `val` holds the A-vs-B
    prompts of correctly ordered pairs (better answer first) and `val_bad` the B-vs-A ones.
    """
    if (human is None) == (val_bad is None):
        raise InputError("sweep: give human scores (absolute) or val_bad (pairwise), not both")
    rows = []
    for cand in candidates:
        ti, li = list(tokens).index(cand.token), list(layers).index(cand.layer)
        fit = fit_direction(train_good[:, ti, li], train_bad[:, ti, li], cand.method, cand.n_components, seed)
        proj = val[:, ti, li] @ fit.direction
        if val_bad is None:
            value = grouped_spearman(proj, human, groups)
        else:
            value = float(np.mean(proj > val_bad[:, ti, li] @ fit.direction))
        rows.append(SweepRow(cand.layer, cand.token, cand.method, cand.n_components, fit.train_accuracy, value))
    rows.sort(key=lambda r: -np.nan_to_num(r.validation, nan=-9))
    return rows
