"""The judge check: can I trust this judge on this kind of data?

    python eval.py judge-check --config CFG [--data FILE.jsonl] [--limit N] [--seed S]

1. With labels (`--data`, a pairwise file: instruction, input, response_a, response_b, label
   a/b/tie): the config's battle judge (both orders when the config says so) on each pair.
   Agreement with the humans (a judge tie counts half; **label ties are left out** and counted),
   with a 95% Wilson interval, next to the baselines "pick the longer answer" (equal lengths count
   half) and "always the first" (response_a) on the same pairs; the judge's order-flip rate,
   P(first position wins), P(longer answer wins), invalid rate, tokens and cost.
   `--limit N`: a seeded random N of the decided pairs (the same draw as `meta-eval --sample N
   --seed S`, so both read one judge cache).
2. Without labels (no `--data`), on the run's own records (the config's answer files and
   targets, the categories that list GPT metrics): sanity pairs of each item's reference (or,
   where it has none or the judge is given the reference, each model's answer) against a
   corrupted copy: sentences shuffled, truncated to its first third, the answer to a different
   question of the same category, a number or a named entity swapped (a one-sentence text has its
   clauses shuffled). Each pair goes to the
   configured battle prompt (both orders, the intact text shown first in a seeded half of the
   pairs) and to the rating prompt (the category's GPT metrics). Per corruption and category: how
   often the judge prefers the intact text (ties half, chance is 50%, 95% Wilson interval) and how
   far its rating drops. `--limit N` pairs per corruption (seeded, spread over the categories).

Verdict rules (stated in every output):
- labels: the judge "does not beat the length baseline" when the lower end of its agreement's 95%
  Wilson interval is not above the accuracy of "pick the longer answer"; it "decides by position"
  when at least half of its items flip with the order.
- sanity: a preference for the intact text is "near chance" when its point estimate is below 0.6
  or its 95% Wilson interval reaches down to 0.5; judged on all pairs pooled, separately for the
  battle and the rating, and on the "different question's answer" pairs alone (a judge that cannot
  tell an answer from another question's answer should not be trusted to rank models).

The outcome is stored with the judge's signature and the prompts' hashes in
`<save_path>/judge_checks/<key>.json` (key: sha256 of both; a labelled and a label-free check of
the same judge and prompts are merged into one record) and copied to `<save_path>/judge_check.json`.
Every later run with the same judge and prompts finds it (`attach_to_run`): manifest.json
("judge_check"), each result file's GPT signatures, the run's closing lines; a judge that failed
is named in a plain warning. A changed prompt file or judge setting gives another key: "not checked".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .backends.cache import VOLATILE_FIELDS
from .core.errors import InputError
from .core.io import atomic_write_json
from .core.records import Record

CORRUPTIONS = ("shuffle", "truncate", "other_answer", "swap")
CORRUPTION_TEXT = {
    "shuffle": "sentences shuffled",
    "truncate": "truncated to its first third",
    "other_answer": "the answer to a different question of the same category",
    "swap": "a number or named entity swapped",
}
NEAR_CHANCE_POINT = 0.6
POSITION_FLIP_RATE = 0.5
RULES = {
    "labelled": "does not beat the length baseline when the lower end of the judge's 95% Wilson interval of "
                "agreement is not above the accuracy of 'pick the longer answer'; decides by position when "
                f">= {POSITION_FLIP_RATE:.0%} of the items valid in both orders flip with the order. Agreement: "
                "a judge tie counts half; label ties are left out (counted in 'label_ties_left_out').",
    "sanity": f"near chance when the preference for the intact text is below {NEAR_CHANCE_POINT} or its 95% "
              "Wilson interval includes 0.5; applied to all pairs pooled (battle and rating separately) and to "
              "the 'other_answer' pairs alone. Ties count half.",
}
# what never changes a reply, as for the judge cache: the server URL too, so replicas of one model
# share one check (and a run on two endpoints finds the check made on one)
VOLATILE = VOLATILE_FIELDS


# ----------------------------------------------------------------------------------- statistics
def _wilson(k: float, n: float) -> list[float] | None:
    from .stats.intervals import wilson_interval

    ci = wilson_interval(k, n)
    return [round(ci[0], 4), round(ci[1], 4)] if ci else None


def _prop(k: float, n: int) -> dict[str, Any]:
    return {"rate": round(k / n, 4) if n else None, "n": n, "ci95": _wilson(k, n)}


def near_chance(k: float, n: int) -> bool:
    """The sanity rule: point below 0.6, or a 95% Wilson interval that includes 0.5 (or no data)."""
    if n <= 0:
        return True
    ci = _wilson(k, n)
    return k / n < NEAR_CHANCE_POINT or ci[0] <= 0.5


# ----------------------------------------------------------------------------------- corruptions
_SENT_EN = re.compile(r"[^.!?\n]+(?:[.!?]+[\"')\]]*|\n+|$)")
_SENT_CN = re.compile(r"[^。！？!?\n]+(?:[。！？!?]+[”」』）)]*|\n+|$)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[0-9]+(?:[.,][0-9]+)?(?![A-Za-z0-9_])")  # ASCII: CJK text is \w too
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*\b")
_NOT_ENTITIES = {"I", "I'm", "The", "A", "An", "This", "That", "It", "In", "On", "At", "If", "But", "And", "Or",
                 "We", "You", "He", "She", "They", "My", "Our", "Your", "Yes", "No", "OK"}


def split_sentences(text: str, language: str = "en") -> list[str]:
    pat = _SENT_CN if language == "cn" else _SENT_EN
    return [s.strip() for s in pat.findall(text) if s.strip()]


def _rng(seed: int, kind: str, key: str) -> random.Random:
    # a str seed is hashed with sha512 by `random`: the same draw on every machine and Python run
    return random.Random(f"{seed}|{kind}|{key}")


def _entities(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _ENTITY.finditer(text):
        before = text[:m.start()].rstrip()
        if not before or before[-1] in ".!?:\n\"'(-*#" or m.group() in _NOT_ENTITIES:
            continue  # sentence-initial capitals are not names
        out.append((m.start(), m.end(), m.group()))
    return out


def _new_number(s: str, rng: random.Random) -> str:
    if "." in s or "," in s:
        sep = "." if "." in s else ","
        whole, frac = s.split(sep, 1)
        return f"{int(whole) + rng.randint(1, 9)}{sep}{frac}"
    v = int(s)
    new = v + rng.randint(1, 9) if v < 20 else v * rng.choice((2, 3)) if rng.random() < 0.5 else max(1, v // 2)
    return str(new) if str(new) != s else str(v + 1)


def corrupt(text: str, kind: str, *, seed: int = 0, key: str = "", others: Sequence[str] = (),
            language: str = "en") -> tuple[str, str] | None:
    """A corrupted copy of `text` and a note of what changed, or None when the corruption does
    not apply (one sentence to shuffle, fewer than three words, no other answer, nothing to swap).
    Deterministic in (seed, kind, key); `others`: texts of other items of the same category."""
    rng = _rng(seed, kind, key)
    if kind == "shuffle":
        sents, unit = split_sentences(text, language), "sentences"
        if len(set(sents)) < 2:  # one sentence: its clauses (split after , ; ， ；) instead
            sents, unit = [c.strip() for c in re.split(r"(?<=[,;，；、])", text) if c.strip()], "clauses"
        if len(set(sents)) < 2:
            return None
        order = list(range(len(sents)))
        while order == sorted(order) or [sents[i] for i in order] == sents:
            rng.shuffle(order)
        return ("" if language == "cn" else " ").join(sents[i] for i in order), f"{unit} in order {order}"
    if kind == "truncate":
        if language == "cn":
            chars = text.strip()
            if len(chars) < 3:
                return None
            return chars[:len(chars) // 3], f"first {len(chars) // 3} of {len(chars)} characters"
        words = text.split()
        if len(words) < 3:
            return None
        keep = len(words) // 3
        return " ".join(words[:keep]), f"first {keep} of {len(words)} words"
    if kind == "other_answer":
        pool = sorted({o for o in others if o.strip() and o.strip() != text.strip()})
        if not pool:
            return None
        return rng.choice(pool), "another question's answer"
    if kind == "swap":
        nums = list(_NUMBER.finditer(text))
        if nums:
            m = rng.choice(nums)
            new = _new_number(m.group(), rng)
            return text[:m.start()] + new + text[m.end():], f"number {m.group()} -> {new}"
        if language == "cn":
            return None
        ents = _entities(text)
        names = sorted({e[2] for e in ents})
        if not names:
            return None
        old = rng.choice(names)
        pool = sorted({e[2] for o in others for e in _entities(o)} - set(names))
        if pool:
            new = rng.choice(pool)
            return re.sub(rf"\b{re.escape(old)}\b", new, text), f"entity {old} -> {new}"
        if len(names) < 2:
            return None
        new = rng.choice([n for n in names if n != old])
        tmp = "\x00"
        swapped = re.sub(rf"\b{re.escape(old)}\b", tmp, text)
        swapped = re.sub(rf"\b{re.escape(new)}\b", old, swapped).replace(tmp, new)
        return swapped, f"entities {old} <-> {new}"
    raise InputError(f'unknown corruption "{kind}" (known: {", ".join(CORRUPTIONS)})')


@dataclass
class SanityPair:
    id: str
    kind: str
    category: str
    record: Record  # the question (and targets)
    source: str  # "reference" or "answer:<model>"
    intact: str
    corrupted: str
    note: str
    intact_first: bool  # shown as "A" (first in the first order)


def sanity_pairs(sets: Sequence[Any], categories: Sequence[str], *, limit: int | None, seed: int,
                 language: str, use_reference: bool) -> tuple[list[SanityPair], dict[str, int]]:
    """Up to `limit` pairs per corruption (all applicable ones when None), seeded, taken from the
    categories in turn so that a handful of pairs covers them all. Returns the pairs and, per
    corruption, how many candidate texts it could not be applied to."""
    cands: dict[str, list[tuple[Record, str, str]]] = {c: [] for c in categories}
    for r in sets[0].records:
        if r.category not in cands:
            continue
        ref = next((t for t in r.targets if t.strip()), None)
        if use_reference and ref:
            cands[r.category].append((r, "reference", ref))
            continue
        for s in sets:
            rec = next((x for x in s.records if x.id == r.id), None)
            if rec is not None and rec.output.strip():
                cands[r.category].append((rec, f"answer:{s.name}", rec.output))
    pairs: list[SanityPair] = []
    skipped: dict[str, int] = {}
    for kind in CORRUPTIONS:
        queues = []
        for cat in categories:
            items = list(cands[cat])
            _rng(seed, kind, cat).shuffle(items)
            queues.append(items)
        taken = 0
        skipped[kind] = 0
        while any(queues) and (limit is None or taken < limit):
            for q in queues:
                if not q or (limit is not None and taken >= limit):
                    continue
                rec, source, text = q.pop(0)
                others = [t for _, _, t in cands[rec.category] if t != text]
                key = f"{rec.category}/{rec.id}/{source}"
                out = corrupt(text, kind, seed=seed, key=key, others=others, language=language)
                if out is None:
                    skipped[kind] += 1
                    continue
                pid = f"{kind}/{key}"
                pairs.append(SanityPair(id=pid, kind=kind, category=rec.category, record=rec, source=source,
                                        intact=text, corrupted=out[0], note=out[1],
                                        intact_first=_rng(seed, "position", pid).random() < 0.5))
                taken += 1
    return pairs, skipped


# ----------------------------------------------------------------------------------- judges
def _context(cfg: Any, judges: Any, label: str):
    from .families import Context

    return Context(cfg=cfg, options=cfg.family_options("GPT"), judges=judges, family=label, memo={})


def judge_identity(cfg: Any, judges: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(judge signature, prompt hashes, store key) of the config's GPT judges. The signature is the
    battle and rating judges' own (backend, model, weights, decoding options) without the prompt
    paths and without settings that never change a reply (concurrency, timeouts, price)."""
    from .families.gpt import battle_judge, battle_prompt_path, eval_prompt_path, rating_judge

    ctx = _context(cfg, judges, "judge-check")
    prompts: dict[str, Any] = {}
    sig: dict[str, Any] = {}
    for name, make, path in (("battle", battle_judge, battle_prompt_path(cfg)),
                             ("rating", rating_judge, eval_prompt_path(cfg))):
        j = make(ctx)
        s = dict(j.signature())
        prompts[name] = {"file": str(path), "sha256": s.pop("prompt_sha256", None)}
        s.pop("prompt_file", None)
        s["judge"] = {k: v for k, v in s.get("judge", {}).items() if k not in VOLATILE}
        sig[name] = s
    ident = json.dumps({"judge": sig, "prompts": {k: v["sha256"] for k, v in prompts.items()}},
                       sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return sig, prompts, hashlib.sha256(ident.encode("utf-8")).hexdigest()[:24]


def _usage(meter: Any) -> dict[str, Any]:
    u = meter.usage()
    return {k: u.get(k) for k in ("requests", "cache_hits", "cache_misses", "failures", "prompt_tokens",
                                  "completion_tokens", "cost_usd")}


# ----------------------------------------------------------------------------------- with labels
def read_pairs(path: Path) -> list[dict[str, Any]]:
    """A pairwise file, read and checked as meta-eval reads it (one reader), plus the question."""
    from .metaeval import read_jsonl as read_rows

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


def baselines(rows: list[dict[str, Any]]) -> dict[str, Any]:
    longer = 0.0
    for r in rows:
        la, lb = len(r["response_a"]), len(r["response_b"])
        longer += 0.5 if la == lb else float(r["label"] == ("a" if la > lb else "b"))
    first = sum(r["label"] == "a" for r in rows)
    n = len(rows)
    return {"longer": {"accuracy": round(longer / n, 4) if n else None, "n": n, "ci95": _wilson(longer, n),
                       "rule": "picks the response with more characters; equal lengths count half"},
            "first": {"accuracy": round(first / n, 4) if n else None, "n": n, "ci95": _wilson(first, n),
                      "rule": "always picks response_a; judged in both orders such a judge ties every item (0.5)"}}


def labelled_check(cfg: Any, judges: Any, data: Path, *, limit: int | None, seed: int,
                   log: Callable[[str], None]) -> dict[str, Any]:
    from .families.gpt import battle_judge
    from .metaeval import battle_accuracy, row_record
    from .stats.battle import judge_bias

    all_rows = read_pairs(data)
    ties = sum(r["label"] == "tie" for r in all_rows)
    rows = select_pairs(all_rows, limit, seed)
    if not rows:
        raise InputError(f"{data}: no pair with a label a or b")
    recs_a = [row_record({**r, "output": r["response_a"]}, i) for i, r in enumerate(rows)]
    recs_b = [row_record({**r, "output": r["response_b"]}, i) for i, r in enumerate(rows)]
    ctx = _context(cfg, judges, "judge-check labelled")
    judge = battle_judge(ctx)
    log(f"judge check with labels: {len(rows)} pairs of {data} ({'both orders' if judge.both_orders else 'one order'})")
    t0 = time.time()
    result = judge.run({"response_a": recs_a, "response_b": recs_b})[0]
    wall = time.time() - t0
    acc = battle_accuracy(rows, result)
    lengths = {ra.id: (len(ra.output), len(rb.output)) for ra, rb in zip(recs_a, recs_b)}
    bias = judge_bias([it.to_dict() for it in result.items], lengths)
    valid = [r for r, it in zip(rows, result.items) if it.verdict != "invalid"]
    base = baselines(valid or rows)  # on the pairs the judge answered; all pairs when it answered none
    k = acc["right"] + 0.5 * acc["predicted_ties"]
    ci = _wilson(k, acc["n"])
    beats_length = bool(ci and base["longer"]["accuracy"] is not None and ci[0] > base["longer"]["accuracy"])
    flip = bias["flip_rate"]["rate"]
    by_position = flip is not None and flip >= POSITION_FLIP_RATE
    reasons = []
    if not valid:
        reasons.append(f"no valid verdict: all {len(rows)} pairs were invalid (see the battle replies)")
    elif not beats_length:
        reasons.append(f"does not beat the length baseline: agreement {_f(acc['accuracy'])} (95% CI "
                       f"{_ci(ci)}) vs {_f(base['longer']['accuracy'])} for 'pick the longer answer'")
    if by_position:
        reasons.append(f"decides by position: {flip:.0%} of its items flip with the order "
                       f"(P(first) {_f(bias['first_position_wins']['rate'])})")
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
                      "note": "a judge tie (equal scores, or orders that disagree) counts half; invalid items "
                              "left out of n and counted; 95% Wilson interval"},
        "baselines": base,
        "position": {"flip_rate": bias["flip_rate"], "p_first": bias["first_position_wins"],
                     "inconsistency_rate": acc["inconsistency_rate"]},
        "p_longer": bias["longer_wins"], "invalid_rate": bias["invalid_rate"],
        "invalid_order_rate": bias["invalid_order_rate"],
        "usage": _usage(ctx.judge()), "wall_s": round(wall, 1),
        "beats_length_baseline": beats_length, "decides_by_position": by_position,
        "trustworthy": beats_length and not by_position, "reasons": reasons, "rule": RULES["labelled"],
        "items": acc["items"],
    }


# ----------------------------------------------------------------------------------- without labels
def _pref_block(wins: float, n: int, invalid: int) -> dict[str, Any]:
    return {"preference": round(wins / n, 4) if n else None, "n": n, "ci95": _wilson(wins, n),
            "invalid": invalid, "near_chance": near_chance(wins, n)}


def _mean_ci(values: list[float]) -> tuple[float | None, list[float] | None]:
    if not values:
        return None, None
    from .stats.intervals import bootstrap_mean_ci

    mean = float(np.mean(values))
    if len(values) < 2:
        return round(mean, 4), None
    try:
        lo, hi = bootstrap_mean_ci(values, seed=0)
        return round(mean, 4), [round(lo, 4), round(hi, 4)]
    except Exception:  # a constant sample: the interval is the point
        return round(mean, 4), [round(mean, 4), round(mean, 4)]


def sanity_check(cfg: Any, judges: Any, *, limit: int | None, seed: int,
                 log: Callable[[str], None]) -> dict[str, Any]:
    from .data import load_answer_sets
    from .families.gpt import battle_judge, rating_judge

    if not cfg.answers:
        raise InputError(f"{cfg.source}: no answer files (`answers:`): the label-free check judges the run's own "
                         "records; list them, or give --data FILE.jsonl for a check with labels")
    sets = load_answer_sets([(a.name, a.path) for a in cfg.answers], cfg.target_file)
    metrics = {cat: list(entry.get("GPT") or []) for cat, entry in cfg.categories.items() if entry.get("GPT")}
    used = {r.category for r in sets[0].records}
    cats = [c for c in metrics if c in used]
    if not cats:
        raise InputError(f"{cfg.source}: no category of the answer files lists GPT metrics (category.<name>.GPT); "
                         "the label-free check judges what the run's judge judges")
    use_reference = not cfg.gpt_with_reference
    pairs, skipped = sanity_pairs(sets, cats, limit=limit, seed=seed, language=cfg.language,
                                  use_reference=use_reference)
    if not pairs:
        raise InputError(f"{cfg.source}: no sanity pair could be made from the records of {', '.join(cats)}")
    t0 = time.time()
    # battle: "x" is shown first in the first order; the intact text is x in a seeded half of the pairs
    bctx = _context(cfg, judges, "judge-check battle")
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
    rctx = _context(cfg, judges, "judge-check rating")
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
        mean_drop, drop_ci = _mean_ci(drops)
        return {"pairs": len(sel),
                "battle": _pref_block(sum(b), len(b), len(sel) - len(b)),
                "rating": {**_pref_block(wins, n_r, bad), "mean_drop": mean_drop, "drop_ci95": drop_ci,
                           "intact_mean": round(float(np.mean(ri_all)), 4) if ri_all else None,
                           "corrupted_mean": round(float(np.mean(rc_all)), 4) if rc_all else None}}

    by_corruption = {}
    for kind in CORRUPTIONS:
        sel = [x for x in items if x["corruption"] == kind]
        block = summarise(sel)
        block["what"] = CORRUPTION_TEXT[kind]
        block["not_applicable"] = skipped.get(kind, 0)
        block["by_category"] = {c: summarise([x for x in sel if x["category"] == c]) for c in cats
                                if any(x["category"] == c for x in sel)}
        by_corruption[kind] = block
    pooled = summarise(items)
    reasons = []
    for part in ("battle", "rating"):
        blk = pooled[part]
        if not blk["n"]:
            reasons.append(f"{part}: no valid verdict on the sanity pairs (all {blk['invalid']} invalid; see the "
                           "raw replies in the items)")
        elif blk["near_chance"]:
            reasons.append(f"{part} near chance on sanity pairs: prefers the intact text {_pct(blk['preference'])} "
                           f"(95% CI {_ci(blk['ci95'])}, n={blk['n']})")
    other = by_corruption["other_answer"]
    for part in ("battle", "rating"):
        blk = other[part]
        if blk["n"] and blk["near_chance"] and not pooled[part]["near_chance"]:
            reasons.append(f"{part} cannot tell an answer from another question's answer: prefers it "
                           f"{_pct(blk['preference'])} (95% CI {_ci(blk['ci95'])}, n={blk['n']})")
    b_usage, r_usage = _usage(bctx.judge()), _usage(rctx.judge())
    return {"source": "references (where an item has one), else each model's answer" if use_reference else
                      "each model's answer (the judge is given the reference: gpt_with_reference)",
            "categories": cats, "metrics": {c: metrics[c] for c in cats}, "pairs": len(pairs),
            "limit_per_corruption": limit, "seed": seed,
            "pooled": pooled, "by_corruption": by_corruption,
            "usage": {"battle": b_usage, "rating": r_usage}, "wall_s": round(wall, 1),
            "trustworthy": not reasons, "reasons": reasons, "rule": RULES["sanity"], "items": items}


# ----------------------------------------------------------------------------------- the store
def store_dir(save_path: Path) -> Path:
    return Path(save_path) / "judge_checks"


def verdict_of(record: dict[str, Any]) -> tuple[bool, str]:
    parts, ok = [], True
    for name in ("labelled", "sanity"):
        sec = record.get(name)
        if not sec:
            continue
        ok = ok and bool(sec.get("trustworthy"))
        if name == "labelled":
            a = sec["agreement"]
            head = (f"with labels ({Path(sec['data']).name}, {sec['pairs']} pairs): agreement {_f(a['accuracy'])} "
                    f"(95% CI {_ci(a['ci95'])}) vs {_f(sec['baselines']['longer']['accuracy'])} for the longer answer")
        else:
            b, r = sec["pooled"]["battle"], sec["pooled"]["rating"]
            head = (f"without labels ({sec['pairs']} sanity pairs): battle prefers the intact text "
                    f"{_pct(b['preference'])} (95% CI {_ci(b['ci95'])}), rating {_pct(r['preference'])} "
                    f"(mean drop {_f(r['mean_drop'])})")
        parts.append(head + (": passes" if sec.get("trustworthy") else ": " + "; ".join(sec["reasons"])))
    if not parts:
        return False, "not checked"
    return ok, ("trustworthy: " if ok else "NOT trustworthy: ") + " | ".join(parts)


def save_check(save_path: Path, key: str, judge: dict, prompts: dict, labelled: dict | None,
               sanity: dict | None) -> tuple[dict[str, Any], Path]:
    path = store_dir(save_path) / f"{key}.json"
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            old = {}
    record = {"schema": "llm-eval-judge-check/1", "key": key, "judge": judge, "prompts": prompts,
              "labelled": labelled if labelled is not None else old.get("labelled"),
              "sanity": sanity if sanity is not None else old.get("sanity")}
    record["trustworthy"], record["verdict_text"] = verdict_of(record)
    record["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    atomic_write_json(path, record)
    atomic_write_json(Path(save_path) / "judge_check.json", record)
    return record, path


def lookup(save_path: Path, key: str) -> dict[str, Any] | None:
    path = store_dir(save_path) / f"{key}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def summary_of(record: dict[str, Any] | None, key: str, config: str | None) -> dict[str, Any]:
    """The short form shown in manifests and signatures."""
    if record is None:
        hint = f"eval.py judge-check --config {config}" if config else "eval.py judge-check --config CFG"
        return {"checked": False, "trustworthy": None, "key": key,
                "verdict": f"not checked: no judge check for this judge and these prompts (run `{hint}`)"}
    return {"checked": True, "trustworthy": record.get("trustworthy"), "key": key,
            "verdict": record.get("verdict_text"), "created": record.get("created"),
            "file": str(Path("judge_checks") / f"{key}.json")}


def attach_to_run(cfg: Any, plan: Any, judges: Any, save: Path, manifest: dict[str, Any],
                  log: Callable[[str], None]) -> dict[str, Any] | None:
    """Called once by the runner after scoring: find the check of this run's judge and prompts and
    show it in the manifest, in every GPT signature of the result (and battle) files, and in the
    closing lines, with a plain warning when the judge failed it. Never fails the run."""
    if "GPT" not in plan.families:
        return None
    try:
        _, _, key = judge_identity(cfg, judges)
        summary = summary_of(lookup(save, key), key, str(cfg.source) if cfg.source else None)
        manifest["judge_check"] = summary
        for path in sorted((save / "results").glob("*.json")) + sorted((save / "battles").glob("*__vs__*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            sigs = data.get("signatures") or {}
            touched = False
            for k, sig in sigs.items():
                if k.startswith("GPT/") and isinstance(sig, dict):
                    sig["judge_check"] = {x: summary.get(x) for x in ("trustworthy", "verdict", "key")}
                    touched = True
            if isinstance(data.get("signature"), dict):
                data["signature"]["judge_check"] = {x: summary.get(x) for x in ("trustworthy", "verdict", "key")}
                touched = True
            if touched:
                atomic_write_json(path, data)
    except Exception as exc:  # a view on an earlier check; never lose a run over it
        log(f"judge check: could not look it up ({type(exc).__name__}: {exc})")
        return None
    if not summary["checked"]:
        log(f"judge check: {summary['verdict']}")
    elif summary["trustworthy"]:
        log(f"judge check: {summary['verdict']}")
    else:
        log("WARNING: the GPT scores and battles above come from a judge that failed its check; do not read "
            "them as a ranking of the models.")
        log(f"judge check: {summary['verdict']}")
    return summary


# ----------------------------------------------------------------------------------- output
def _f(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{x:.0%}"


def _ci(ci: Any) -> str:
    return "-" if not ci else f"{ci[0]:.3f}-{ci[1]:.3f}"


def format_report(record: dict[str, Any], labelled: dict | None, sanity: dict | None) -> str:
    from .report.analysis import verdict_detail  # one helper drops the verdict's leading "NOT trustworthy: "

    lines = []
    j = record["judge"]["battle"]["judge"]
    lines.append(f"judge: {j.get('backend')} {j.get('model')}  (key {record['key']})")
    if labelled:
        a, base, pos = labelled["agreement"], labelled["baselines"], labelled["position"]
        lines += ["", f"With labels: {labelled['data']} ({labelled['pairs']} decided pairs, "
                      f"{labelled['label_ties_left_out']} label ties left out)",
                  "| | accuracy | 95% Wilson CI | n |", "|---|---|---|---|",
                  f"| judge (ties half) | {_f(a['accuracy'])} | {_ci(a['ci95'])} | {a['n']} |",
                  f"| judge, probability-weighted | {_f(a['weighted'])} | {_ci(a['weighted_ci95'])} | {a['weighted_n']} |",
                  f"| pick the longer answer | {_f(base['longer']['accuracy'])} | {_ci(base['longer']['ci95'])} | "
                  f"{base['longer']['n']} |",
                  f"| always the first (response_a) | {_f(base['first']['accuracy'])} | {_ci(base['first']['ci95'])} | "
                  f"{base['first']['n']} |",
                  f"judge ties {a['judge_ties']}, invalid {a['invalid']}; flip rate {_f(pos['flip_rate']['rate'])}, "
                  f"P(first) {_f(pos['p_first']['rate'])}, P(longer) {_f((labelled['p_longer'] or {}).get('rate'))}, "
                  f"invalid rate {_f(labelled['invalid_rate']['rate'])}",
                  f"usage: {labelled['usage']}; {labelled['wall_s']} s"]
    if sanity:
        lines += ["", f"Without labels: {sanity['pairs']} sanity pairs from {sanity['source']}; seed {sanity['seed']}",
                  "| corruption | category | pairs | battle prefers intact (95% CI) | rating prefers intact (95% CI) "
                  "| rating drop (95% CI) |", "|---|---|---|---|---|---|"]

        def row(name: str, cat: str, blk: dict) -> str:
            b, r = blk["battle"], blk["rating"]
            return (f"| {name} | {cat} | {blk['pairs']} | {_pct(b['preference'])} ({_ci(b['ci95'])}) | "
                    f"{_pct(r['preference'])} ({_ci(r['ci95'])}) | {_f(r['mean_drop'])} ({_ci(r['drop_ci95'])}) |")

        for kind, blk in sanity["by_corruption"].items():
            lines.append(row(kind, "(all)", blk))
            for cat, cb in blk["by_category"].items():
                lines.append(row(kind, cat, cb))
        lines.append(row("(pooled)", "(all)", sanity["pooled"]))
        lines.append(f"usage: {sanity['usage']}; {sanity['wall_s']} s")
    lines += ["", ("TRUSTWORTHY" if record["trustworthy"] else "NOT TRUSTWORTHY") + ": "
              + verdict_detail(record["verdict_text"]),
              "rules: " + " | ".join(RULES[k] for k, v in (("labelled", labelled), ("sanity", sanity)) if v)]
    return "\n".join(lines)


def has_gpt_work(cfg: Any) -> bool:
    """Whether the config lists GPT metrics for any category (what the label-free check judges)."""
    return any((entry or {}).get("GPT") for entry in cfg.categories.values())


def check_config(cfg: Any, judges: Any, *, data: Path | None = None, limit: int | None = None, seed: int = 0,
                 log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                 output: Path | None = None) -> dict[str, Any]:
    """Run the check of `cfg`'s judge and prompts through `judges` (a JudgePool: a run that checks its
    judge first shares its loaded models and caches), store it, print the report; returns the record."""
    judge, prompts, key = judge_identity(cfg, judges)
    labelled = sanity = None
    if data is not None:
        if not data.exists():
            raise InputError(f"--data {data}: no such file")
        labelled = labelled_check(cfg, judges, data, limit=limit, seed=seed, log=log)
    else:
        sanity = sanity_check(cfg, judges, limit=limit, seed=seed, log=log)
    record, path = save_check(cfg.save_path, key, judge, prompts, labelled, sanity)
    print(format_report(record, labelled, sanity), flush=True)
    log(f"judge check: {path} (and {Path(cfg.save_path) / 'judge_check.json'})")
    if output is not None:
        atomic_write_json(output, record)
    return record


def main(argv: list[str]) -> int:
    from .config import load_config

    p = argparse.ArgumentParser(prog="eval.py judge-check", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="the run config whose judge and prompts to check")
    p.add_argument("--data", help="a pairwise file with human labels (instruction, input, response_a, response_b, "
                                  "label a/b/tie); without it, the label-free check on the config's own records")
    p.add_argument("--limit", type=int, help="labels: a seeded random N of the decided pairs; without labels: "
                                             "N sanity pairs per corruption")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="also write the full record (JSON) here")
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive integer, got {args.limit}")
    cfg = load_config(Path(args.config))
    from .backends.pool import JudgePool

    judges = JudgePool(api_key=cfg.openai_key)
    try:
        check_config(cfg, judges, data=Path(args.data) if args.data else None, limit=args.limit, seed=args.seed,
                     output=Path(args.output) if args.output else None)
    finally:
        judges.close()
    return 0
