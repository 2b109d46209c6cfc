"""Battle verdicts controlled for length and style, and the judge's own biases.

LLM judges prefer longer, more formatted answers and the answer shown first. A raw win rate
mixes those preferences with answer quality; these estimates take them out where the data allow.

- ``length_controlled_win_rate``: AlpacaEval 2's length control. A logistic model
  P(A wins) = sigmoid(theta + beta * tanh((len_a - len_b) / sd)) (sd: standard deviation of the
  length differences of the data) fitted by penalised maximum likelihood (the one logistic fit of
  bradley_terry.py: Newton, L2 penalty ``L2`` on both coefficients, only there to keep an all-wins
  data set finite). Ties are half-weighted 1 and 0 observations (a soft label of 0.5). LC win rate =
  sigmoid(theta), the prediction at equal lengths; percentile bootstrap interval over items (level stated).
- ``style_features`` of an answer, which the Bradley-Terry ratings (bradley_terry.py: Chatbot Arena /
  Arena-Hard style control) control for.
- ``judge_bias``: P(first position wins), order flip rate, P(longer answer wins), invalid rate.
- ``battle_analysis``: all of the above for one ``battles/<a>__vs__<b>.json``, per category and overall.

What this cannot do: a length term removes the part of the verdict that length *predicts*. If
longer answers of the better model really are better, some true quality goes with it; the raw
and controlled numbers are reported side by side for that reason.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import expit  # the logistic function without exp's overflow warning at large |z|

from .bradley_terry import L2, bradley_terry, fit_logistic, fit_logistic_many
from .intervals import MIN_INTERVAL_N, bootstrap_counts, percentile_interval, wilson_interval

STYLE_FEATURES = ("length", "headers", "list_items", "bold")
_WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W\u3400-\u9fff\uf900-\ufaff]+")
_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
OUTCOME = {"A": 1.0, "tie": 0.5, "B": 0.0}


def _sigmoid(z: float) -> float:
    return float(expit(z))


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
        counts = bootstrap_counts(np.random.default_rng(seed), n, resamples)
        lc = expit(fit_logistic_many(x, y, counts, init=coef)[:, 0])
        out["lc_interval"] = list(percentile_interval(lc, level))
    return out


# --- style features -----------------------------------------------------------------------------
def style_features(text: str) -> dict[str, int]:
    """Arena's style features of one answer: length in words (a CJK character counts as one),
    markdown headers, list items, bold spans."""
    text = text or ""
    return {"length": len(_WORD.findall(text)), "headers": len(_HEADER.findall(text)),
            "list_items": len(_LIST.findall(text)), "bold": len(_BOLD.findall(text))}


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
