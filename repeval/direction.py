"""Quality directions learned from K (good, bad) representation pairs.

- ``pca`` (the paper): PCA of the differences good - bad, top components combined with their
  explained-variance ratios as weights. scikit-learn's PCA centres its input; when every
  difference is good - bad their common mean *is* the quality direction and centring would
  remove it, so (as the RepEval authors' code does) a seeded random half of the differences is
  negated first. Each component is then oriented so that good projects above bad on the
  training pairs.
- ``mean``: the mean of the differences (no components to choose; often the strongest with
  few pairs).
- ``svm``: a linear SVM separating good from bad representations (the paper's baseline).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evaluate.core.errors import InputError

METHODS = ("pca", "mean", "svm")


@dataclass
class DirectionFit:
    direction: np.ndarray  # unit vector, float32 [hidden]
    explained_variance_ratio: list[float]  # per PCA component used ([] for mean/svm)
    train_accuracy: float  # share of training pairs with good projected above bad


def fit_direction(good: np.ndarray, bad: np.ndarray, method: str = "pca", n_components: int = 1,
                  seed: int = 0) -> DirectionFit:
    """Learn a unit direction along which `good` rows project above their `bad` partners."""
    good = np.asarray(good, dtype=np.float64)
    bad = np.asarray(bad, dtype=np.float64)
    if good.shape != bad.shape or good.ndim != 2:
        raise InputError(f"good/bad representations: expected two [K, hidden] arrays of one shape, "
                         f"got {good.shape} and {bad.shape}")
    k = len(good)
    if method not in METHODS:
        raise InputError(f'direction method "{method}": expected one of {", ".join(METHODS)}')
    if k < 2:
        raise InputError(f"{k} pair(s): RepEval needs at least 2 (good, bad) pairs")
    diffs = good - bad
    evr: list[float] = []
    if method == "mean":
        vec = diffs.mean(axis=0)
    elif method == "pca":
        vec, evr = _pca_direction(diffs, n_components, seed)
    else:
        vec = _svm_direction(good, bad, seed)
    norm = np.linalg.norm(vec)
    if not np.isfinite(norm) or norm == 0:
        raise InputError("the good and bad representations do not differ: no direction can be learned")
    direction = (vec / norm).astype(np.float32)
    acc = float(np.mean(diffs @ direction > 0))
    return DirectionFit(direction, evr, acc)


def _pca_direction(diffs: np.ndarray, n_components: int, seed: int) -> tuple[np.ndarray, list[float]]:
    from sklearn.decomposition import PCA

    k = len(diffs)
    if not 1 <= n_components <= k - 1:
        raise InputError(f"n_components={n_components} with {k} pairs: PCA on K pairs gives at most "
                         f"K-1 components; use 1..{k - 1} or give more pairs")
    rng = np.random.default_rng(seed)
    signs = np.ones(k)
    signs[rng.permutation(k)[: k // 2]] = -1.0
    pca = PCA(n_components=n_components, random_state=seed).fit(diffs * signs[:, None])
    vec = np.zeros(diffs.shape[1])
    for comp, weight in zip(pca.components_, pca.explained_variance_ratio_):
        # orient each component so that the (un-flipped) good - bad differences project positive
        sign = 1.0 if np.mean(diffs @ comp) >= 0 else -1.0
        vec += weight * sign * comp
    return vec, [float(v) for v in pca.explained_variance_ratio_]


def _svm_direction(good: np.ndarray, bad: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.svm import LinearSVC

    x = np.vstack([good, bad])
    scale = np.abs(x).max() or 1.0  # keep the solver well conditioned; the direction is scale-free
    y = np.r_[np.ones(len(good)), np.zeros(len(bad))]
    clf = LinearSVC(C=1.0, random_state=seed, max_iter=20000).fit(x / scale, y)
    return clf.coef_[0]
