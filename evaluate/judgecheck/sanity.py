"""The judge check without labels: does the judge prefer an intact text to a corrupted copy?

The battle part also gives Cohen's kappa of the item verdicts against the side the intact text was
shown on (first in a seeded half of the pairs, so both sides occur): a judge that always picks one
position prefers the intact text about half the time and has kappa 0. Kappa and the preference are
given for the parsed, probability-weighted and position-calibrated verdicts (`battle_verdicts`,
pooled), the calibration fitted on these pairs' own two orders."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..core.errors import InputError
from ..core.io import clean_json
from ..core.records import Record
from ..core.numbers import ci_text, pct
from .store import check_usage, judge_context
from .corrupt import sanity_pairs
from ..stats.label_agreement import verdict_agreement
from .rules import CORRUPTIONS, CORRUPTION_TEXT, RULES, _wilson, near_chance


def preference_block(wins: float, n: int, invalid: int) -> dict[str, Any]:
    return {"preference": round(wins / n, 4) if n else None, "n": n, "ci95": _wilson(wins, n),
            "invalid": invalid, "near_chance": near_chance(wins, n)}


def mean_ci(values: list[float]) -> tuple[float | None, list[float] | None]:
    if not values:
        return None, None
    from ..stats.intervals import bootstrap_mean_ci

    mean = float(np.mean(values))
    if len(values) < 2:
        return round(mean, 4), None
    try:
        lo, hi = bootstrap_mean_ci(values, seed=0)
        return round(mean, 4), [round(lo, 4), round(hi, 4)]
    except Exception:  # a constant sample: the interval is the point
        return round(mean, 4), [round(mean, 4), round(mean, 4)]


def corruption_blocks(items: list[dict[str, Any]], kinds: Sequence[str],
                      summarise: Callable[[list[dict[str, Any]]], dict[str, Any]], skipped: dict[str, int],
                      cats: Sequence[str], walls: dict[str, float] | None = None) -> dict[str, dict[str, Any]]:
    """Per corruption: `summarise` of its pairs, what it is, how many records it did not apply to, and
    the same per category (`walls`: seconds each corruption's judging took)."""
    out = {}
    for kind in kinds:
        sel = [x for x in items if x["corruption"] == kind]
        block = summarise(sel)
        block.update(what=CORRUPTION_TEXT[kind], not_applicable=skipped.get(kind, 0))
        if walls is not None:
            block["wall_s"] = walls.get(kind)
        block["by_category"] = {c: summarise([x for x in sel if x["category"] == c]) for c in cats
                                if any(x["category"] == c for x in sel)}
        out[kind] = block
    return out


def verdict_reasons(pooled: dict[str, Any], by_corruption: dict[str, dict[str, Any]], parts: Sequence[str],
                    intact: str) -> list[str]:
    """Why the judge fails the label-free check (RULES["sanity"]), one line per reason; [] = it passes.
    `intact`: what the pairs keep intact ("text", "answer")."""
    reasons = []
    for part in parts:
        blk = pooled[part]
        if not blk["n"]:
            reasons.append(f"{part}: no valid verdict on the sanity pairs (all {blk['invalid']} invalid; see the "
                           "raw replies in the items)")
        elif blk["near_chance"]:
            reasons.append(f"{part} near chance on sanity pairs: prefers the intact {intact} "
                           f"{pct(blk['preference'])} (95% CI {ci_text(blk['ci95'])}, n={blk['n']})")
    other = by_corruption.get("other_answer") or {}
    for part in parts:
        blk = other.get(part)
        if blk and blk["n"] and blk["near_chance"] and not pooled[part]["near_chance"]:
            reasons.append(f"{part} cannot tell an answer from another question's answer: prefers it "
                           f"{pct(blk['preference'])} (95% CI {ci_text(blk['ci95'])}, n={blk['n']})")
    return reasons


def shown_side(item: dict[str, Any]) -> str:
    """The side ("A" / "B") a sanity pair's intact text was shown on in its first order: its label."""
    return "A" if item["intact_first"] else "B"


def sanity_check(cfg: Any, judges: Any, *, limit: int | None, seed: int,
                 log: Callable[[str], None]) -> dict[str, Any]:
    from ..harness.entries import expand
    from ..pipeline.answers import load_entries
    from ..judges.configured import battle_judge, rating_judge

    if not cfg.answers:
        raise InputError(f"{cfg.source}: no answer files (`answers:`): the label-free check judges the run's own "
                         "records; list them, or give --data FILE.jsonl for a check with labels")
    sets = load_entries(expand(cfg.answers), cfg.target_file, cfg.missing)
    metrics = {cat: list(entry.get("GPT") or []) for cat, entry in cfg.categories.items() if entry.get("GPT")}
    used = {r.category for r in sets[0].records}
    cats = [c for c in metrics if c in used]
    if not cats:
        raise InputError(f"{cfg.source}: no category of the answer files lists GPT metrics (category.<name>.GPT); "
                         "the label-free check judges what the run's judge judges")
    use_reference = cfg.gpt_with_reference is not True
    if cfg.gpt_with_reference == "auto":  # the references are the intact texts here: the judge is not shown them
        cfg = dataclasses.replace(cfg, gpt_with_reference=False)
    pairs, skipped = sanity_pairs(sets, cats, limit=limit, seed=seed, language=cfg.language,
                                  use_reference=use_reference)
    if not pairs:
        raise InputError(f"{cfg.source}: no sanity pair could be made from the records of {', '.join(cats)}")
    t0 = time.time()
    # battle: "x" is shown first in the first order; the intact text is x in a seeded half of the pairs
    bctx = judge_context(cfg, judges, "judge-check battle")
    bj = battle_judge(bctx)
    xs, ys = [], []
    for p in pairs:
        a, b = (p.intact, p.corrupted) if p.intact_first else (p.corrupted, p.intact)
        base = dict(id=p.id, category=p.category, instruction=p.record.instruction, input=p.record.input,
                    targets=p.record.targets)
        xs.append(Record(output=a, **base))
        ys.append(Record(output=b, **base))
    log(f"judge check without labels: {len(pairs)} sanity pairs ({', '.join(cats)}), battle "
        f"{'both orders' if bj.both_orders else 'one order'} + rating")
    battle = bj.run({"x": xs, "y": ys})[0]
    # rating: every distinct text once, on its category's GPT metrics
    rctx = judge_context(cfg, judges, "judge-check rating")
    rj = rating_judge(rctx)
    uniq: dict[tuple[str, str, str], Record] = {}
    for p in pairs:
        for text in (p.intact, p.corrupted):
            k = (p.category, p.record.question, text)
            if k not in uniq:
                uniq[k] = Record(id=f"r{len(uniq)}", category=p.category, instruction=p.record.instruction,
                                 input=p.record.input, output=text, targets=p.record.targets)
    recs = list(uniq.values())
    rated = rj.rate(recs, {c: metrics[c] for c in cats})
    score = {k: it for k, it in zip(uniq, rated)}
    wall = time.time() - t0

    items = []
    for p, it in zip(pairs, battle.items):
        v = it.verdict
        intact_side = "A" if p.intact_first else "B"
        outcome = None if v == "invalid" else 1.0 if v == intact_side else 0.5 if v == "tie" else 0.0
        ri, rc = score[(p.category, p.record.question, p.intact)], score[(p.category, p.record.question, p.corrupted)]
        ratings = {m: [ri.scores.get(m), rc.scores.get(m)] for m in metrics[p.category]}
        items.append({"id": p.id, "corruption": p.kind, "category": p.category, "source": p.source, "note": p.note,
                      "intact_first": p.intact_first, "battle": outcome, "battle_verdict": v,
                      "weighted_verdict": it.weighted_verdict, "calibrated_verdict": it.calibrated_verdict,
                      "orders": [[o.order, o.verdict, o.raw] for o in it.orders], "ratings": ratings,
                      "corrupted_text": p.corrupted[:500]})

    def summarise(sel: list[dict[str, Any]]) -> dict[str, Any]:
        b = [x["battle"] for x in sel if x["battle"] is not None]
        drops, wins, n_r, bad = [], 0.0, 0, 0
        ri_all, rc_all = [], []
        for x in sel:
            for m, (ri, rc) in x["ratings"].items():
                if ri is None or rc is None:
                    bad += 1
                    continue
                n_r += 1
                drops.append(ri - rc)
                ri_all.append(ri)
                rc_all.append(rc)
                wins += 1.0 if ri > rc else 0.5 if ri == rc else 0.0
        mean_drop, drop_ci = mean_ci(drops)
        kappa = verdict_agreement([x["battle_verdict"] for x in sel], [shown_side(x) for x in sel])
        return {"pairs": len(sel),
                "battle": {**preference_block(sum(b), len(b), len(sel) - len(b)),
                           "kappa": kappa["kappa"], "kappa_ci": kappa["kappa_ci"],
                           "kappa_strength": kappa["kappa_strength"]},
                "rating": {**preference_block(wins, n_r, bad), "mean_drop": mean_drop, "drop_ci95": drop_ci,
                           "intact_mean": round(float(np.mean(ri_all)), 4) if ri_all else None,
                           "corrupted_mean": round(float(np.mean(rc_all)), 4) if rc_all else None}}

    by_corruption = corruption_blocks(items, CORRUPTIONS, summarise, skipped, cats)
    pooled = summarise(items)
    sides = [shown_side(x) for x in items]
    pooled["battle_verdicts"] = {kind: verdict_agreement([x[key] for x in items], sides) for kind, key in
                                 (("raw", "battle_verdict"), ("weighted", "weighted_verdict"),
                                  ("calibrated", "calibrated_verdict"))}
    cal = battle.calibrated()
    pooled["position_prior"] = cal.summary() if cal else None
    if getattr(cfg, "panel", None) is not None:  # the panel as a whole: its judges' verdicts voted, ratings combined
        pooled["panel"] = {"judges": cfg.panel.names, **cfg.panel.policy.to_dict(),
                           "battle_agreement": clean_json(battle.agreement()),
                           "note": "each judge's replies are its own check's (from the cache where that ran "
                                   "first); the panel's calibrated verdict votes the judges' calibrated ones, "
                                   "each fitted on its own two orders (their position priors: each judge's check)"}
    reasons = verdict_reasons(pooled, by_corruption, ("battle", "rating"), "text")
    b_usage, r_usage = check_usage(bctx), check_usage(rctx)
    return {"source": "references (where an item has one), else each model's answer" if use_reference else
                      "each model's answer (the judge is given the reference: gpt_with_reference)",
            "categories": cats, "metrics": {c: metrics[c] for c in cats}, "pairs": len(pairs),
            "limit_per_corruption": limit, "seed": seed,
            "pooled": pooled, "by_corruption": by_corruption,
            "usage": {"battle": b_usage, "rating": r_usage}, "wall_s": round(wall, 1),
            "trustworthy": not reasons, "reasons": reasons, "rule": RULES["sanity"], "items": items}


