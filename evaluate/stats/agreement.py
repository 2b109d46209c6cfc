"""Agreement between raters: a judge and a person's labels, or the judges of a panel.

Why not raw agreement alone: two raters who both say "A" 90% of the time agree on 82% of items
by chance. Cohen's kappa (two raters), Fleiss' kappa (several raters, categorical verdicts) and
Krippendorff's alpha (several raters, any level of measurement, missing values allowed) report
agreement above what the raters' own label frequencies would give by chance: 0 is chance, 1 is
perfect, below 0 worse than chance.

Panels of correlated judges also carry fewer independent votes than their count: with mean
pairwise correlation r, n judges weigh like n / (1 + (n - 1) r) independent ones
(`effective_raters`, Kish's design effect for equicorrelated votes).

Only numpy / scipy. A value that is undefined (one category only, fewer than two pairable values)
is None, never 0 or NaN in a result file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Hashable, Literal, Sequence

import numpy as np

Level = Literal["nominal", "ordinal", "interval", "ratio"]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable], labels: Sequence[Hashable] | None = None) -> float | None:
    """Cohen's kappa of two raters' categorical labels on the same items (pairs with a missing label
    are left out). `labels`: the categories that count (others' pairs are left out), as
    scikit-learn's `labels`. None when undefined: no pair, or chance agreement of 1 (both raters
    used one and the same category throughout)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    keep = set(labels) if labels is not None else None
    pairs = [(x, y) for x, y in zip(a, b) if not _missing(x) and not _missing(y)
             and (keep is None or (x in keep and y in keep))]
    if not pairs:
        return None
    cats = sorted({c for p in pairs for c in p}, key=repr)
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(cats), len(cats)))
    for x, y in pairs:
        table[index[x], index[y]] += 1
    n = table.sum()
    p_o = np.trace(table) / n
    p_e = float((table.sum(axis=1) / n) @ (table.sum(axis=0) / n))
    if p_e >= 1.0 - 1e-12:
        return None
    return float((p_o - p_e) / (1.0 - p_e))


@dataclass
class KappaEstimate:
    """Cohen's kappa with its percentile bootstrap interval over items (level stated)."""

    kappa: float | None
    low: float | None
    high: float | None
    n: int
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {"kappa": self.kappa, "low": self.low, "high": self.high, "n": self.n, "level": self.level}


def cohen_kappa_interval(a: Sequence[Hashable], b: Sequence[Hashable], *, level: float = 0.95, resamples: int = 2000,
                         seed: int = 0) -> KappaEstimate:
    """Cohen's kappa and a percentile bootstrap interval (items resampled; resamples where kappa is
    undefined are dropped). No interval below 10 items: it would not hold its level."""
    pairs = [(x, y) for x, y in zip(a, b) if not _missing(x) and not _missing(y)]
    k = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs])
    if k is None or len(pairs) < 10:
        return KappaEstimate(k, None, None, len(pairs), level)
    cats = sorted({c for p in pairs for c in p}, key=repr)
    index = {c: i for i, c in enumerate(cats)}
    xs = np.array([index[p[0]] for p in pairs])
    ys = np.array([index[p[1]] for p in pairs])
    rng = np.random.default_rng(seed)
    c = len(cats)
    out = []
    for _ in range(resamples):
        idx = rng.integers(0, len(pairs), len(pairs))
        table = np.bincount(xs[idx] * c + ys[idx], minlength=c * c).reshape(c, c) / len(pairs)
        p_e = float(table.sum(axis=1) @ table.sum(axis=0))
        if p_e < 1.0 - 1e-12:
            out.append((np.trace(table) - p_e) / (1.0 - p_e))
    if not out:
        return KappaEstimate(k, None, None, len(pairs), level)
    tail = (1.0 - level) / 2
    low, high = np.quantile(out, [tail, 1.0 - tail])
    return KappaEstimate(k, float(max(-1.0, low)), float(min(1.0, high)), len(pairs), level)


def fleiss_kappa(table: Any) -> float | None:
    """Fleiss' kappa of an items x categories table of counts, every item rated by the same number of
    raters (statsmodels' `fleiss_kappa(table, method="fleiss")`). None when undefined (one category
    only, or fewer than two raters)."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] == 0:
        return None
    raters = t.sum(axis=1)
    if not np.allclose(raters, raters[0]):
        raise ValueError("fleiss_kappa: every item needs the same number of ratings "
                         f"(found {sorted(set(raters.astype(int).tolist()))})")
    n = raters[0]
    if n < 2:
        return None
    p_j = t.sum(axis=0) / t.sum()
    p_bar = float(((t * t).sum(axis=1) - n).mean() / (n * (n - 1)))
    p_e = float((p_j * p_j).sum())
    if p_e >= 1.0 - 1e-12:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa_labels(ratings: Sequence[Sequence[Hashable]]) -> tuple[float | None, int]:
    """Fleiss' kappa of per-item label lists (one label per rater, None for a missing one). Items
    where any rater is missing are left out (Fleiss needs the same raters on every item); returns
    (kappa, items used)."""
    full = [list(r) for r in ratings if r and not any(_missing(v) for v in r)]
    if not full:
        return None, 0
    width = {len(r) for r in full}
    if len(width) != 1:
        raise ValueError(f"fleiss_kappa_labels: items have {sorted(width)} ratings; expected the same number")
    cats = sorted({v for r in full for v in r}, key=repr)
    index = {c: i for i, c in enumerate(cats)}
    table = np.zeros((len(full), len(cats)))
    for i, r in enumerate(full):
        for v in r:
            table[i, index[v]] += 1
    return fleiss_kappa(table), len(full)


def krippendorff_alpha(data: Any, level: Level = "interval") -> float | None:
    """Krippendorff's alpha of a raters x units matrix (NaN or None: no value), at the given level
    of measurement. Units with fewer than two values are not pairable and are left out. None when
    undefined (fewer than two pairable values, or no variation at all).

    Interval and ratio alphas are computed from sums over values (O(values)), so a panel's
    continuous ratings of many items need no values x values coincidence matrix."""
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f'krippendorff_alpha: level "{level}" (expected nominal, ordinal, interval or ratio)')
    m = np.array([[np.nan if _missing(v) else float(v) for v in row] for row in data], dtype=float) \
        if not isinstance(data, np.ndarray) else np.asarray(data, dtype=float)
    if m.ndim != 2:
        raise ValueError("krippendorff_alpha: expected a raters x units matrix")
    units = [col[~np.isnan(col)] for col in m.T]
    units = [u for u in units if len(u) >= 2]
    if not units:
        return None
    values = np.concatenate(units)
    n = len(values)
    if n < 2:
        return None
    if level == "interval":
        d_o = sum(2.0 * (len(u) * float(u @ u) - float(u.sum()) ** 2) / (len(u) - 1) for u in units) / n
        d_e = 2.0 * (n * float(values @ values) - float(values.sum()) ** 2) / (n * (n - 1))
    else:
        cats, inverse = np.unique(values, return_inverse=True)
        c = len(cats)
        o = np.zeros((c, c))
        start = 0
        for u in units:
            idx = inverse[start:start + len(u)]
            start += len(u)
            counts = np.bincount(idx, minlength=c).astype(float)
            pair = np.outer(counts, counts) - np.diag(counts)  # ordered pairs of different raters' values
            o += pair / (len(u) - 1)
        n_c = o.sum(axis=1)
        if level == "nominal":
            delta = 1.0 - np.eye(c)
        elif level == "ratio":
            s = cats[:, None] + cats[None, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                delta = np.where(s == 0, 0.0, ((cats[:, None] - cats[None, :]) / s) ** 2)
        else:  # ordinal: the squared count of values between two ranks, each end half counted
            cum = np.concatenate([[0.0], np.cumsum(n_c)])
            lo = np.minimum.outer(np.arange(c), np.arange(c))
            hi = np.maximum.outer(np.arange(c), np.arange(c))
            delta = (cum[hi + 1] - cum[lo] - (n_c[lo] + n_c[hi]) / 2.0) ** 2
        d_o = float((o * delta).sum()) / n
        d_e = float((np.outer(n_c, n_c) * delta).sum()) / (n * (n - 1))
    if d_e <= 0.0:
        return None
    return 1.0 - d_o / d_e


def pairwise_correlations(ratings: dict[str, Sequence[float | None]], method: Literal["pearson", "spearman"] = "spearman"
                          ) -> dict[tuple[str, str], dict[str, Any]]:
    """Each pair of raters' correlation over the items both rated (None: fewer than 3 common items or
    a constant rater). `ratings`: rater -> one value per item (None: no valid rating)."""
    from scipy.stats import pearsonr, spearmanr

    names = list(ratings)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            xs, ys = ratings[a], ratings[b]
            if len(xs) != len(ys):
                raise ValueError(f"pairwise_correlations: {a} has {len(xs)} items, {b} {len(ys)}")
            both = [(float(x), float(y)) for x, y in zip(xs, ys) if not _missing(x) and not _missing(y)]
            r = None
            if len(both) >= 3:
                x = np.array([p[0] for p in both])
                y = np.array([p[1] for p in both])
                if x.std() > 0 and y.std() > 0:
                    r = float((spearmanr if method == "spearman" else pearsonr)(x, y)[0])
            out[(a, b)] = {"r": r, "n": len(both), "method": method}
    return out


def effective_raters(n: int, mean_correlation: float | None) -> float | None:
    """How many independent raters `n` raters with this mean pairwise correlation weigh like:
    n / (1 + (n - 1) r), r clipped to [0, 1] (negative correlation is not extra independence)."""
    if n < 1 or mean_correlation is None:
        return None
    r = min(1.0, max(0.0, mean_correlation))
    return n / (1.0 + (n - 1) * r)


def strength(value: float | None) -> str:
    """Landis and Koch's words for a kappa or alpha: said beside the number, never instead of it."""
    if value is None:
        return "undefined"
    if value < 0:
        return "worse than chance"
    for bound, word in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if value <= bound:
            return word
    return "almost perfect"
