"""The judge check with human labels: agreement with the labels and Cohen's kappa, for the judge's
parsed, probability-weighted and position-calibrated verdicts, next to the trivial rules' agreement
and kappa on the same pairs, on a pairwise file (instruction, input, response_a, response_b, label
a/b/tie)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InputError
import numpy as np

from ..core.numbers import ci_text, fmt3
from .store import check_usage, judge_context
from ..stats.label_agreement import verdict_agreement
from .rules import POSITION_FLIP_RATE, RULE_NAMES, RULES, _wilson


def read_pairs(path: Path) -> list[dict[str, Any]]:
    """A pairwise file, read and checked as meta-eval reads it (one reader), plus the question."""
    from ..metaeval.run import read_metaeval_rows as read_rows

    rows = read_rows(path)
    for i, r in enumerate(rows, 1):
        if not all(k in r for k in ("response_a", "response_b", "label")):
            raise InputError(f"{path}: row {i}: not a pairwise row (a pairwise file needs instruction, input, "
                             "response_a, response_b, label)")
        if not (r.get("instruction") or r.get("input")):
            raise InputError(f"{path}: row {i}: no instruction or input (the question shown to the judge)")
    return rows


def select_pairs(rows: list[dict[str, Any]], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """Decided pairs (label ties dropped), then a seeded N of them in file order (meta-eval's --sample)."""
    rows = [r for r in rows if r["label"] != "tie"]
    if limit is not None and limit < len(rows):
        keep = sorted(np.random.default_rng(seed).choice(len(rows), limit, replace=False).tolist())
        rows = [rows[i] for i in keep]
    return rows


def baselines(rows: list[dict[str, Any]], ties_labelled: bool = False) -> dict[str, Any]:
    """The accuracy of every trivial rule a judge must beat on these decided pairs: pick the longer or
    the shorter response, always the first or always the second, and (where the file labels ties)
    always say tie, which scores half on every decided pair as a judge's tie does. Each with its
    Cohen's kappa (0 for the constant rules by construction) and its interval."""
    from ..metaeval.run import trivial_verdicts

    n = len(rows)
    said = trivial_verdicts(rows)
    labels = [r["label"] for r in rows]
    credit: dict[str, float] = {"longer": 0.0, "shorter": 0.0}
    for r in rows:
        la, lb = len(r["response_a"]), len(r["response_b"])
        longer = "a" if la > lb else "b"
        credit["longer"] += 0.5 if la == lb else float(r["label"] == longer)
        credit["shorter"] += 0.5 if la == lb else float(r["label"] != longer)
    credit["first"] = float(sum(r["label"] == "a" for r in rows))
    credit["second"] = float(sum(r["label"] == "b" for r in rows))
    rules = {"longer": "picks the response with more characters; equal lengths count half",
             "shorter": "picks the response with fewer characters; equal lengths count half",
             "first": "always picks response_a; judged in both orders such a judge ties every item (0.5)",
             "second": "always picks response_b"}
    if ties_labelled:
        credit["tie"] = 0.5 * n
        rules["tie"] = "always says tie (the file labels ties); a tie counts half on a decided pair"
    out = {}
    for name in rules:
        agree = verdict_agreement(said[name], labels)
        out[name] = {"accuracy": round(credit[name] / n, 4) if n else None, "n": n, "ci95": _wilson(credit[name], n),
                     "kappa": agree["kappa"], "kappa_ci": agree["kappa_ci"], "kappa_strength": agree["kappa_strength"],
                     "rule": rules[name]}
    return out


def above_chance(block: dict[str, Any]) -> bool:
    """The kappa rule: the lower end of kappa's 95% interval is above 0 (no interval: kappa above 0.2)."""
    k, ci = block.get("kappa"), block.get("kappa_ci")
    if k is None:
        return False
    return ci[0] > 0 if ci else k > 0.2


def best_rule(base: dict[str, Any]) -> tuple[str, float | None]:
    """The trivial rule with the highest accuracy (the first named on a tie: longer, shorter, first, ...)."""
    scored = [(name, b["accuracy"]) for name, b in base.items() if b.get("accuracy") is not None]
    if not scored:
        return "longer", None
    return max(scored, key=lambda kv: kv[1])


def decide(k: float, n: int, accuracy: float | None, base: dict[str, Any], bias: dict[str, Any], *, valid: int,
           total: int, chance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict rules of a check with labels (RULES["labelled"]), in one place for the check on a
    pairwise file and `judge-check --labels` on a run's own battles: `k` agreeing verdicts (a judge tie
    counts half) of `n`, the trivial rules' accuracies `base`, the judge's biases `bias` (stats.battle.
    judge_bias) on those items; `valid` of `total` items had a usable verdict; `chance`: the judge's
    Cohen's kappa block (kappa, kappa_ci, kappa_strength), whose interval must clear 0 (`above_chance`)."""
    ci = _wilson(k, n)
    beats_length = bool(ci and base["longer"]["accuracy"] is not None and ci[0] > base["longer"]["accuracy"])
    best, best_acc = best_rule(base)
    beats_rules = bool(ci and best_acc is not None and ci[0] > best_acc)
    flip = bias["flip_rate"]["rate"]
    by_position = flip is not None and flip >= POSITION_FLIP_RATE
    reasons = []
    if not valid:
        reasons.append(f"no valid verdict: all {total} pairs were invalid (see the battle replies)")
    elif not beats_rules:
        what = "the length baseline" if best == "longer" else f"the best trivial rule, '{RULE_NAMES[best]}'"
        reasons.append(f"does not beat {what}: agreement {fmt3(accuracy)} (95% CI "
                       f"{ci_text(ci)}) vs {fmt3(best_acc)} for '{RULE_NAMES[best]}'")
    chance_ok = above_chance(chance) if chance is not None else True
    if valid and not chance_ok:
        reasons.append(f"no better than chance: Cohen's kappa {_k(chance['kappa'])} ({chance['kappa_strength']}, "
                       f"95% CI {_kci(chance['kappa_ci'])})")
    if by_position:
        reasons.append(f"decides by position: {flip:.0%} of its items flip with the order "
                       f"(P(first) {fmt3(bias['first_position_wins']['rate'])})")
    return {"ci95": ci, "beats_length_baseline": beats_length, "best_trivial_rule": best,
            "beats_trivial_rules": beats_rules, "decides_by_position": by_position, "above_chance": chance_ok,
            "trustworthy": beats_rules and not by_position and chance_ok, "reasons": reasons}


def labelled_check(cfg: Any, judges: Any, data: Path, *, limit: int | None, seed: int,
                   log: Callable[[str], None]) -> dict[str, Any]:
    from ..judges.configured import battle_judge
    from ..metaeval.run import battle_accuracy, row_record
    from ..stats.battle import judge_bias

    all_rows = read_pairs(data)
    ties = sum(r["label"] == "tie" for r in all_rows)
    rows = select_pairs(all_rows, limit, seed)
    if not rows:
        raise InputError(f"{data}: no pair with a label a or b")
    recs_a = [row_record({**r, "output": r["response_a"]}, i) for i, r in enumerate(rows)]
    recs_b = [row_record({**r, "output": r["response_b"]}, i) for i, r in enumerate(rows)]
    ctx = judge_context(cfg, judges, "judge-check labelled")
    judge = battle_judge(ctx)
    log(f"judge check with labels: {len(rows)} pairs of {data} ({'both orders' if judge.both_orders else 'one order'})")
    t0 = time.time()
    result = judge.run({"response_a": recs_a, "response_b": recs_b})[0]
    wall = time.time() - t0
    acc = battle_accuracy(rows, result)
    verdicts = acc["verdicts"]
    raw = verdicts["raw"]
    lengths = {ra.id: (len(ra.output), len(rb.output)) for ra, rb in zip(recs_a, recs_b)}
    bias = judge_bias([it.to_dict() for it in result.items], lengths)
    valid = [r for r, it in zip(rows, result.items) if it.verdict != "invalid"]
    base = baselines(valid or rows, ties_labelled=ties > 0)  # on the pairs the judge answered (all when none)
    k = acc["right"] + 0.5 * acc["predicted_ties"]
    decided = decide(k, acc["n"], acc["accuracy"], base, bias, valid=len(valid), total=len(rows), chance=raw)
    ci, best = decided["ci95"], decided["best_trivial_rule"]
    beats_length, beats_rules = decided["beats_length_baseline"], decided["beats_trivial_rules"]
    by_position, reasons, chance_ok = decided["decides_by_position"], decided["reasons"], decided["above_chance"]
    return {
        "data": str(data), "pairs": len(rows), "label_ties_left_out": ties,
        "selection": {"limit": limit, "seed": seed if limit is not None else None,
                      "rule": "label ties dropped, then a seeded random N (numpy default_rng(seed).choice), file order"},
        "agreement": {"accuracy": acc["accuracy"], "n": acc["n"], "ci95": ci, "right": acc["right"],
                      "wrong": acc["wrong"], "judge_ties": acc["predicted_ties"], "invalid": acc["invalid"],
                      "decisive_only": acc["accuracy_decisive_only"],
                      "single_order": acc["single_order_accuracy"],
                      "weighted": acc["weighted_accuracy"], "weighted_n": acc["weighted_n"],
                      "weighted_ci95": _wilson(acc["weighted_accuracy"] * acc["weighted_n"], acc["weighted_n"])
                      if acc["weighted_n"] else None,
                      "kappa": raw["kappa"], "kappa_ci": raw["kappa_ci"], "kappa_strength": raw["kappa_strength"],
                      "verdicts": verdicts,
                      "note": "a judge tie (equal scores, or orders that disagree) counts half; invalid items "
                              "left out of n and counted; 95% Wilson interval. Cohen's kappa over A / B / tie "
                              "(a tie never matches a label; 0 is chance), 95% percentile bootstrap interval. "
                              "verdicts: parsed (raw), probability-weighted, position-calibrated (the judge's "
                              "position lean fitted on these pairs' own two orders, no labels)"},
        "position_prior": acc["position_prior"],
        "baselines": base,
        "position": {"flip_rate": bias["flip_rate"], "p_first": bias["first_position_wins"],
                     "inconsistency_rate": acc["inconsistency_rate"]},
        "p_longer": bias["longer_wins"], "invalid_rate": bias["invalid_rate"],
        "invalid_order_rate": bias["invalid_order_rate"],
        "usage": check_usage(ctx), "wall_s": round(wall, 1),
        "beats_length_baseline": beats_length, "best_trivial_rule": best, "beats_trivial_rules": beats_rules,
        "decides_by_position": by_position, "above_chance": chance_ok,
        "trustworthy": beats_rules and not by_position and chance_ok, "reasons": reasons, "rule": RULES["labelled"],
        "items": acc["items"],
    }




def _k(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}"


def _kci(ci: Any) -> str:
    return "-" if not ci else f"{ci[0]:.2f} to {ci[1]:.2f}"
