"""Battle verdicts controlled for length and style, and the judge's own biases.

LLM judges prefer longer, more formatted answers and the answer shown first. A raw win rate
mixes those preferences with answer quality; these estimates take them out where the data allow.

- ``length_controlled_win_rate``: AlpacaEval 2's length control. A logistic model
  P(A wins) = sigmoid(theta + beta * tanh((len_a - len_b) / sd)) (sd: standard deviation of the
  length differences of the data) fitted by penalised maximum likelihood (Newton, L2 penalty
  ``L2`` on both coefficients: only there to keep an all-wins data set finite). Ties are
  half-weighted 1 and 0 observations (a soft label of 0.5). LC win rate = sigmoid(theta), the
  prediction at equal lengths; percentile bootstrap interval over items (level stated).
- ``bradley_terry``: Chatbot Arena / Arena-Hard style control. Logistic regression of the verdict
  on model indicator differences (+1 for A, -1 for B; no intercept), raw and with style features
  as normalised differences (a - b) / (a + b), standardised. Ratings on the Elo scale
  1000 + 400 / ln 10 * coefficient, mean-centred (the average model is 1000). Raw and controlled
  from the same bootstrap resamples at one level (95% by default), over questions when the battles
  name theirs (every verdict on a question travels together), else over battles. A model is
  "clearly first" only when, in those resamples, its rating minus every other model's has an
  interval above 0.
- ``judge_bias``: P(first position wins), order flip rate, P(longer answer wins), invalid rate.
- ``battle_analysis``: all of the above for one ``battles/<a>__vs__<b>.json``, per category and overall.

What this cannot do: a length term removes the part of the verdict that length *predicts*. If
longer answers of the better model really are better, some true quality goes with it; the raw
and controlled numbers are reported side by side for that reason.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import expit  # the logistic function without exp's overflow warning at large |z|

from .intervals import MIN_INTERVAL_N, percentile_interval, wilson_interval

L2 = 1e-3
ELO_BASE, ELO_SCALE = 1000.0, 400.0 / math.log(10)
STYLE_FEATURES = ("length", "headers", "list_items", "bold")
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W\u3400-\u9fff\uf900-\ufaff]+")
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
OUTCOME = {"A": 1.0, "tie": 0.5, "B": 0.0}


# --- the logistic fit ---------------------------------------------------------------------------
def fit_logistic(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, *, l2: float = L2,
                 init: np.ndarray | None = None, max_iter: int = 100, tol: float = 1e-9) -> np.ndarray:
    """Coefficients w minimising sum_i weight_i * logloss(y_i, sigmoid(x_i . w)) + l2 / 2 * |w|^2.

    y may be fractional (a tie is y = 0.5). Newton's method with step halving: the objective is
    strictly convex (l2 > 0), so this converges in a few steps from zero or from a nearby fit.
    """
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


def _sigmoid(z: float) -> float:
    return float(expit(z))


def _boot_counts(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """Bootstrap resamples as multiplicity weights (resample i uses item j counts[i, j] times)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(float)


# --- length-controlled win rate -----------------------------------------------------------------
def length_controlled_win_rate(outcomes: Sequence[float], len_a: Sequence[float], len_b: Sequence[float], *,
                               resamples: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """Win rate of A at equal answer lengths (see the module docstring), beside the raw one.

    outcomes: 1 = A wins, 0.5 = tie, 0 = B wins, or any probability in between that A wins (a soft
    verdict, used as a soft label: the likelihood of y is y log p + (1 - y) log(1 - p)); invalid items
    left out by the caller.
    """
    y = np.asarray(outcomes, dtype=float)
    la, lb = np.asarray(len_a, dtype=float), np.asarray(len_b, dtype=float)
    if not (y.shape == la.shape == lb.shape):
        raise ValueError("length_controlled_win_rate: outcomes, len_a and len_b must have the same length")
    if not np.all(np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise ValueError("length_controlled_win_rate: outcomes must be in [0, 1]: 1 (A wins), 0.5 (tie), 0 (B "
                         "wins), or the probability that A wins")
    n = int(y.size)
    out: dict[str, Any] = {
        "n": n, "level": level, "resamples": resamples, "seed": seed,
        "method": "logistic P(A wins) = sigmoid(theta + beta * tanh((len_a - len_b) / sd)), ties as half "
                  f"observations, Newton with L2 penalty {L2}; LC win rate = sigmoid(theta); percentile "
                  "bootstrap over items; raw win rate with ties half and a Wilson interval",
        "lc_win_rate": None, "lc_interval": None, "raw_win_rate": None, "raw_interval": None,
        "theta": None, "beta": None, "length_sd": None,
    }
    if n == 0:
        return out
    out["raw_win_rate"] = float(y.mean())
    ci = wilson_interval(float(y.sum()), n, level)
    out["raw_interval"] = list(ci) if ci else None
    diff = la - lb
    sd = float(diff.std())
    xlen = np.tanh(diff / sd) if sd > 0 else np.zeros(n)
    x = np.column_stack([np.ones(n), xlen])
    coef = fit_logistic(x, y)
    out.update(lc_win_rate=_sigmoid(coef[0]), theta=float(coef[0]), beta=float(coef[1]), length_sd=sd)
    if n < MIN_INTERVAL_N:
        out["interval_note"] = f"too few items (n = {n} < {MIN_INTERVAL_N}) for a bootstrap interval"
    elif resamples > 0:
        counts = _boot_counts(np.random.default_rng(seed), n, resamples)
        lc = expit(fit_logistic_many(x, y, counts, init=coef)[:, 0])
        out["lc_interval"] = list(percentile_interval(lc, level))
    return out


# --- style features and Bradley-Terry -------------------------------------------------------------
def style_features(text: str) -> dict[str, int]:
    """Arena's style features of one answer: length in words (a CJK character counts as one),
    markdown headers, list items, bold spans."""
    text = text or ""
    return {"length": len(_WORD.findall(text)), "headers": len(_HEADER.findall(text)),
            "list_items": len(_LIST.findall(text)), "bold": len(_BOLD.findall(text))}


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
    counts = (_boot_counts(rng, units, resamples)[:, g_idx] if resamples > 0 and not too_few
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


# --- the judge's biases -------------------------------------------------------------------------
def _rate(k: float, n: int) -> dict[str, Any]:
    ci = wilson_interval(k, n)
    return {"rate": k / n if n else None, "n": n, "ci95": list(ci) if ci else None}


def judge_bias(items: Sequence[Mapping[str, Any]],
               lengths: Mapping[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """Position, order and length biases of the judge from battle items (``BattleItem.to_dict()``).

    - first_position_wins: share of decisive single-order verdicts won by the answer shown first
      (0.5 = no position bias).
    - flip_rate: share of items valid in both orders whose winner reverses with the order.
    - longer_wins: share of decisive item verdicts (both orders combined) won by the longer answer
      (needs `lengths`: id -> (len_a, len_b); equal lengths are left out).
    - invalid_rate: share of items (and of single orders) without a usable verdict.
    95% Wilson intervals. A conversation's orders are its turns' (each turn is judged in both orders);
    its whole verdict counts for `longer_wins` and `invalid_rate`.
    """
    judged = [t for it in items for t in (it.get("turns") or [it])]  # where the orders are
    orders = [o for it in judged for o in it.get("orders", [])]
    decisive = [o for o in orders if o.get("verdict") in ("A", "B")]
    first = sum(1 for o in decisive if o["verdict"] == str(o.get("order", "AB"))[0])
    both = [it for it in judged if len(it.get("orders", [])) == 2
            and all(o.get("verdict") != "invalid" for o in it["orders"])]
    flips = sum(1 for it in both if {o["verdict"] for o in it["orders"]} == {"A", "B"})
    out = {
        "items": len(items),
        "first_position_wins": _rate(first, len(decisive)),
        "flip_rate": _rate(flips, len(both)),
        "invalid_rate": _rate(sum(1 for it in items if it.get("verdict") == "invalid"), len(items)),
        "invalid_order_rate": _rate(sum(1 for o in orders if o.get("verdict") == "invalid"), len(orders)),
        "longer_wins": None,
    }
    if lengths is not None:
        wins = total = 0
        for it in items:
            ln = lengths.get(str(it.get("id")))
            if it.get("verdict") not in ("A", "B") or ln is None or ln[0] == ln[1]:
                continue
            total += 1
            wins += it["verdict"] == ("A" if ln[0] > ln[1] else "B")
        out["longer_wins"] = _rate(wins, total)
    return out


# --- one battle file ------------------------------------------------------------------------------
def _block(items: list[Mapping[str, Any]], feats: dict[str, tuple[dict, dict]], model_a: str, model_b: str,
           resamples: int, seed: int, with_bt: bool) -> dict[str, Any]:
    lengths = {i: (fa["length"], fb["length"]) for i, (fa, fb) in feats.items()}
    decided = [it for it in items if it.get("verdict") in OUTCOME and str(it.get("id")) in feats]
    ids = [str(it["id"]) for it in decided]
    y = [OUTCOME[it["verdict"]] for it in decided]
    block: dict[str, Any] = {
        "length_controlled": length_controlled_win_rate(y, [lengths[i][0] for i in ids],
                                                        [lengths[i][1] for i in ids], resamples=resamples, seed=seed),
        "judge_bias": judge_bias(items, lengths),
        "without_outputs": sum(1 for it in items if it.get("verdict") in OUTCOME and str(it.get("id")) not in feats),
    }
    soft = [it for it in items if isinstance(it.get("p_a"), (int, float)) and str(it.get("id")) in feats]
    if soft:
        sid = [str(it["id"]) for it in soft]
        block["length_controlled_soft"] = length_controlled_win_rate(
            [float(it["p_a"]) for it in soft], [lengths[i][0] for i in sid], [lengths[i][1] for i in sid],
            resamples=resamples, seed=seed)
    weighted = [it for it in items if it.get("weighted_verdict") in OUTCOME and str(it.get("id")) in feats]
    if weighted:
        wid = [str(it["id"]) for it in weighted]
        block["length_controlled_weighted"] = length_controlled_win_rate(
            [OUTCOME[it["weighted_verdict"]] for it in weighted], [lengths[i][0] for i in wid],
            [lengths[i][1] for i in wid], resamples=resamples, seed=seed)
    if with_bt and len(decided) >= 2:
        battles = [(model_a, model_b, o, feats[i][0], feats[i][1]) for i, o in zip(ids, y)]
        block["style_controlled"] = bradley_terry(battles, features=list(STYLE_FEATURES),
                                                  resamples=min(resamples, 200), seed=seed)
    return block


def battle_analysis(battle_json: Mapping[str, Any], outputs_a: Mapping[str, str], outputs_b: Mapping[str, str],
                    *, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Length- and style-controlled verdicts and judge biases of one battle file, per category and
    overall ("(all)"), ready to be stored under the file's "controlled" key. outputs_*: id -> answer text."""
    summary = battle_json.get("summary", {})
    model_a, model_b = summary.get("model_a", "A"), summary.get("model_b", "B")
    items = list(battle_json.get("items", []))
    oa = {str(k): v for k, v in outputs_a.items()}
    ob = {str(k): v for k, v in outputs_b.items()}
    feats = {str(it["id"]): (style_features(oa[str(it["id"])]), style_features(ob[str(it["id"])]))
             for it in items if str(it["id"]) in oa and str(it["id"]) in ob}
    by_cat: dict[str, list] = {}
    for it in items:
        by_cat.setdefault(str(it.get("category", "")), []).append(it)
    return {
        "model_a": model_a, "model_b": model_b,
        "note": "A's side: win rates are of model_a; length = words (a CJK character counts as one)",
        "overall": _block(items, feats, model_a, model_b, resamples, seed, with_bt=True),
        "by_category": {c: _block(its, feats, model_a, model_b, resamples, seed, with_bt=False)
                        for c, its in sorted(by_cat.items())},
    }
