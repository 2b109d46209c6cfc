"""The multiple-comparison family of one pair of models, and verdicts that agree with their intervals.

The family (``FAMILY_SENTENCE``): for each pair of models, the primary scores over all items are
one confirmatory family; every other row (other scores, per-category rows) is exploratory. Adding a
third model changes nothing here, because nothing outside the pair enters the family.

Why Bonferroni and not Holm inside the family: a verdict must never contradict the interval beside
it. With Bonferroni the confirmatory interval is the (1 - alpha/m) interval, simultaneous at
(1 - alpha) over the m primary scores, and "better" holds exactly when that interval excludes 0.
Holm rejects more than Bonferroni, and for those extra rejections no interval both excludes 0 and
keeps simultaneous coverage, so a Holm verdict would sit beside an interval that includes 0.

Why the verdict comes from the interval: the test is the bootstrap test dual to the interval shown
(an expanded percentile interval, see ``expanded_tail``; p from the share of resampled mean
differences on the far side of 0), and the bounds are order statistics chosen so that "0 outside
the interval" and "p < level" are the same event.
The verdict is read off the interval, so the agreement holds by construction, not by luck.

Paired 0/1 outcomes (rule checks; ``RowInput.binary``) are decided by the exact McNemar test at any n,
with the exact conditional interval dual to it (``mcnemar``): the same Bonferroni level, the verdict read
off the interval, which excludes 0 exactly when McNemar's p < alpha / m.

Below ``MIN_INTERVAL_N`` pairs (see ``intervals.MIN_INTERVAL_N``) no interval is shown (the
percentile bootstrap is too narrow there) and the exact sign-flip test decides; its smallest
attainable p is 2 / 2^k (k non-zero differences), so with k <= 5 no difference can be called at
alpha .05 and the row says so instead of quoting a minimum detectable difference.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from .intervals import MIN_INTERVAL_N, expanded_tail, resampled_means
from .mcnemar import INTERVAL_MCNEMAR, TEST_MCNEMAR, is_binary, mcnemar
from .paired import detectability, min_attainable_p, sign_flip_p

CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
ALL = "(all)"
FAMILY_SENTENCE = ("For each pair of models, the primary scores over all items form one family of m tests: "
                   "a difference is called only when its simultaneous 95% interval (each at 1 - 0.05/m, "
                   "Bonferroni) excludes zero; every other row is exploratory, at an unadjusted 95% level.")
MIN_TAIL_SAMPLES = 40  # resampled means beyond each interval end, so a 1 - 0.05/m bound is not one sample

# family -> score names (after "<Family>/"), best first; the first present is the family's primary score
_PRIMARY_METRICS = (("BLEU-4", "BLEU"), ("ROUGE-L", "ROUGE"), ("BERTScore-F1", "BERTScore"), ("CHRF",),
                    ("F1",), ("Distinct-2",), ("METEOR",), ("EM", "ExactMatch"),
                    ("Contains",), ("NotContains",), ("Regex",), ("JSON",), ("Length",))  # rule checks: each its own kind


@dataclass
class RowInput:
    """One comparison row of a pair: paired scores a[i], b[i] of the same items."""

    key: str  # "<Family>/<score>"
    category: str  # ALL for the row over every item
    a: Sequence[float]
    b: Sequence[float]
    scale: tuple[float, float] | None = None
    binary: bool = False  # pass (1) / fail (0) outcomes: exact McNemar instead of the bootstrap


@dataclass
class Decision:
    """What a row says: its role, test, verdict and the interval that agrees with the verdict."""

    key: str
    category: str
    role: str  # CONFIRMATORY / EXPLORATORY
    n: int
    diff: float | None  # mean of a - b
    p: float | None  # unadjusted, from the test named in `test`
    p_adj: float | None  # Bonferroni within the confirmatory family; = p for exploratory rows
    m: int  # tests in this row's family (1 for an exploratory row)
    test: str | None
    verdict: str  # "A better" / "B better" / "no detectable difference"
    interval: tuple[float, float] | None
    level: float  # the level of `interval` (1 - alpha/m for a confirmatory row)
    simultaneous: bool  # interval is simultaneous over the confirmatory family
    interval_note: str | None  # why there is no interval
    detectable: str  # what this n could detect, in words

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["interval"] = list(self.interval) if self.interval is not None else None
        return d

    def sentence(self, a: str = "A", b: str = "B") -> str:
        """The row in words; the interval, its level and whether it is adjusted are always named."""
        tag = "" if self.role == CONFIRMATORY else " (exploratory, unadjusted)"
        if self.interval is not None:
            kind = f"simultaneous {1 - (1 - self.level) * self.m:.0%} interval (each at {self.level:.4g})" \
                if self.simultaneous else f"{self.level:.0%} interval"
            ci = f"{kind} {self.interval[0]:.3f} to {self.interval[1]:.3f}"
        else:
            ci = f"no interval: {self.interval_note}"
        diff = "–" if self.diff is None else f"{self.diff:.3f}"
        if self.verdict in ("A better", "B better"):
            who = a if self.verdict == "A better" else b
            return f"{who} higher by {abs(self.diff or 0):.3f}{tag} ({ci}, p_adj = {self.p_adj:.3g})"
        return f"no detectable difference{tag} (A − B = {diff}, {ci}; {self.detectable})"


def default_primary(keys_by_family: Mapping[str, Iterable[str]]) -> set[str]:
    """A sensible primary set: GPT, every rated dimension's main score (no "@" variants); Metrics, one per
    metric kind (BLEU-4, ROUGE-L, BERTScore-F1, CHRF, F1, Distinct-2, ...); other families, every score
    without "@". `keys_by_family` maps a family name to its full keys ("GPT/relevance")."""
    out: set[str] = set()
    for fam, keys in keys_by_family.items():
        keys = sorted(k for k in keys if "@" not in k)
        if fam != "Metrics":
            out.update(keys)
            continue
        names = {k.split("/", 1)[1]: k for k in keys}
        taken = set()
        for group in _PRIMARY_METRICS:
            for name in group:
                if name in names:
                    out.add(names[name])
                    taken.update(n for n in names if n.split("-")[0] == group[0].split("-")[0])
                    break
        for name, k in names.items():  # a metric kind the list does not know: its first score
            kind = name.split("-")[0]
            if name not in taken and not any(t.split("-")[0] == kind for t in taken):
                out.add(k)
                taken.add(name)
    return out


def _verdict_from(interval: tuple[float, float] | None, p: float | None, alpha_row: float, diff: float | None) -> str:
    if interval is not None:
        excluded = interval[0] > 0 or interval[1] < 0
    else:
        excluded = p is not None and p < alpha_row and diff not in (None, 0.0)
    if not excluded or diff is None:
        return "no detectable difference"
    return "A better" if diff > 0 else "B better"


def dual_bootstrap(d: np.ndarray, alpha_row: float, resamples: int, seed: int) -> tuple[tuple[float, float], float]:
    """Expanded percentile interval at 1 - alpha_row and the p of the test it inverts, from the same means.

    Bounds are the j-th smallest and j-th largest of B resampled means, j = ceil(B * tail) with
    tail = expanded_tail(alpha_row, n): the lower bound is > 0 exactly when fewer than B * tail means are
    <= 0. p maps the smaller tail share q back through the same (monotone) expansion, so p < alpha_row
    exactly when the interval excludes 0. B grows so each tail holds at least MIN_TAIL_SAMPLES means.
    """
    n = d.size
    tail = expanded_tail(alpha_row, n)
    B = max(resamples, math.ceil(MIN_TAIL_SAMPLES / tail))
    means = np.sort(resampled_means(d, B, np.random.default_rng(seed)))
    j = max(1, math.ceil(B * tail))
    lo, hi = float(means[j - 1]), float(means[B - j])
    q = min(int(np.sum(means <= 0)), int(np.sum(means >= 0))) / B
    if q >= 0.5:
        p = 1.0
    else:
        q = max(q, 1.0 / (B + 1))  # no resample beyond 0 says p < 1/B, not p = 0; still below the tail cut
        t = -float(norm.ppf(q)) * math.sqrt((n - 1) / n)
        p = min(1.0, 2.0 * float(student_t.sf(t, n - 1)))
    return (lo, hi), p


def _decide(row: RowInput, role: str, m: int, alpha: float, power: float, resamples: int, seed: int) -> Decision:
    xa, xb = np.asarray(row.a, dtype=float).ravel(), np.asarray(row.b, dtype=float).ravel()
    if xa.shape != xb.shape:
        raise ValueError(f"decide_pair: {row.key} ({row.category}): a and b must pair up, got {xa.size} and {xb.size}")
    n = int(xa.size)
    d = xa - xb
    alpha_row = alpha / m
    level = 1 - alpha_row
    simultaneous = role == CONFIRMATORY and m > 1
    diff = float(d.mean()) if n else None
    interval, note, p, test = None, None, None, None
    if n == 0:
        note = "no items scored for both models"
    elif row.binary and is_binary(xa) and is_binary(xb):
        exact = mcnemar(xa, xb, level)
        interval, p, test = exact.interval, exact.p, f"{TEST_MCNEMAR}: {exact.b} items only A passed, {exact.c} only B"
    elif np.all(d == d[0]):
        note = "identical scores on every item" if d[0] == 0 else f"every item differs by exactly {d[0]:.3g}"
        k = 0 if d[0] == 0 else n
        p, test = (1.0 if k == 0 else min_attainable_p(k)), "exact sign-flip (all differences equal)"
    elif n < MIN_INTERVAL_N:
        note = f"too few items (n = {n} < {MIN_INTERVAL_N}) for a bootstrap interval"
        p, test = sign_flip_p(d), "exact sign-flip permutation of the mean difference, two-sided"
    else:
        interval, p = dual_bootstrap(d, alpha_row, resamples, seed)
        test = "expanded percentile bootstrap of the mean difference (dual to the interval), two-sided"
        if row.scale is not None:
            w = row.scale[1] - row.scale[0]
            interval = (max(interval[0], -w), min(interval[1], w))  # 0 is inside [-w, w]: the verdict is kept
    p_adj = None if p is None else min(1.0, p * m)
    return Decision(key=row.key, category=row.category, role=role, n=n, diff=diff, p=p, p_adj=p_adj, m=m,
                    test=test, verdict=_verdict_from(interval, p, alpha_row, diff), interval=interval, level=level,
                    simultaneous=simultaneous, interval_note=note,
                    detectable=detectability(d, alpha=alpha, m=m, power=power))


def decide_pair(rows: Sequence[RowInput], primary: Iterable[str], *, alpha: float = 0.05, power: float = 0.8,
                resamples: int = 2000, seed: int = 0) -> list[Decision]:
    """Decisions for the rows of ONE pair of models, in input order.

    A row is confirmatory when its key is in `primary` and its category is ALL; the confirmatory rows
    are one Bonferroni family of m = their number; every other row is exploratory (m = 1, unadjusted).
    Nothing outside `rows` is read, so another model's rows cannot change these decisions.
    """
    primary = set(primary)
    roles = [CONFIRMATORY if r.category == ALL and r.key in primary else EXPLORATORY for r in rows]
    m = max(1, sum(role == CONFIRMATORY for role in roles))
    return [_decide(r, role, m if role == CONFIRMATORY else 1, alpha, power, resamples, seed)
            for r, role in zip(rows, roles)]


def family_method(m: int, alpha: float = 0.05) -> dict[str, Any]:
    """The `method` block a comparison file states about its family."""
    adjustment = (f"Bonferroni within the pair's {m} primary score{'s' if m != 1 else ''} (each at "
                  f"{alpha / m:.4g})" if m else "none: the pair has no primary score, every row is exploratory")
    return {"family": FAMILY_SENTENCE, "confirmatory_tests": m, "alpha": alpha, "adjustment": adjustment,
            "interval": "expanded percentile bootstrap of the mean difference (Hesterberg); the verdict is read off the interval",
            "min_interval_n": MIN_INTERVAL_N,
            "binary_scores": f"pass/fail scores (rule checks): {TEST_MCNEMAR} at any n; interval: {INTERVAL_MCNEMAR}; "
                             "same Bonferroni level, verdict read off the interval"}
