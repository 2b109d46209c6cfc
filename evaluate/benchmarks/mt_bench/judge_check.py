"""The label-free judge check on an MT-bench run's own conversations.

A judge that ranks models must at least tell an answer from a spoiled copy of it. N of the run's
judged turns (seeded, spread over the categories) each get every corruption that applies
(evaluate.judgecheck.corrupt: sentences shuffled, truncated to its first third, the same model's
answer to the same turn of another question, of the same category where the run has one, a number
or name swapped); only the judged turn's reply is
replaced, the earlier turn and the question stay as they were. The judge sees FastChat's prompt of
the run unchanged:

- single mode: the turn's rating prompt (single-v1, single-math-v1 with its reference, their
  multi-turn variants) for the intact and the corrupted answer; the intact one should get the
  higher rating (equal ratings count half). The intact rating is the run's own judgment.
- pairwise modes: the pair prompt with the intact answer against the corrupted one in both orders
  (FastChat's two games); show_result.py's verdict (the games agree, else a tie) should be the intact one.
  Beside it, Cohen's kappa over the single games of the position that won against the position the
  intact answer was shown in (first in one game, second in the other): a judge that always names the
  first answer prefers the intact one in half the games and has kappa 0.

Per corruption, per category and pooled: how often the intact answer is preferred, with its 95%
Wilson interval, and for ratings the mean drop. The verdict is the judge check's own sanity rule
(rules.RULES["sanity"]): near chance when the preference is below 0.6 or its interval reaches 0.5,
on all pairs pooled and on the "another question's answer" pairs alone. The record has the shape of
the run's label-free check (`sanity` in the judge check's store), with `parts` naming the one part
this mode judges, so the store, the manifest, the report and the closing lines show it unchanged.
"""

from __future__ import annotations

import hashlib
import json
import random
import textwrap
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ...backends.base import Backend
from ...backends.cache import VOLATILE_FIELDS
from .run import Inputs, Match
from .judge import PairMatch, SingleJudgment, SingleMatch, judge_pairs, judge_single
from ...core.io import read_text, sha256_text
from ...core.numbers import ci_text, fmt3, pct
from ...judgecheck.store import save_check, usage_of
from ...judgecheck.corrupt import corrupt
from ...judgecheck.rules import CORRUPTIONS, RULES
from ...judgecheck.sanity import corruption_blocks, mean_ci, preference_block, verdict_reasons

def part_of(mode: str) -> str:
    """The part of the label-free check a mode's prompts make: ratings, or battles of two answers."""
    return "rating" if mode == "single" else "battle"


def identity(judge_signature: dict[str, Any], inputs: Inputs, mode: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(judge, prompts, store key) of this judge with FastChat's prompts of this mode: the key changes
    with the judge's model or decoding, with judge_prompts.jsonl's bytes and with the mode's kind, never
    with the server URL or concurrency (replicas share one check)."""
    sig = {k: v for k, v in judge_signature.items() if k not in VOLATILE_FIELDS}
    part = part_of(mode)
    judge = {part: {"judge": sig, "evaluator": f"mt-bench {'single' if mode == 'single' else 'pairwise'}"}}
    prompts = {part: {"file": str(inputs.prompts_path), "sha256": sha256_text(read_text(inputs.prompts_path)),
                      "names": sorted(inputs.prompts)}}
    ident = json.dumps({"judge": judge, "prompts": {part: prompts[part]["sha256"]}, "benchmark": "mt_bench"},
                       sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return judge, prompts, hashlib.sha256(ident.encode("utf-8")).hexdigest()[:24]


@dataclass
class _Turn:
    model: str
    match: Match  # a match of the run that judged this (question, turn)
    intact: SingleJudgment | None  # single mode: the run's own judgment of it

    @property
    def key(self) -> str:
        return f"{self.match.question.question_id}/turn{self.match.turn}/{self.model}"


def candidates(matches: Sequence[Match], records: Sequence[Any], models: Sequence[str]) -> list[_Turn]:
    """Every judged (model, question, turn) of the run: a single match's own, and in a pair each side's."""
    out, seen = [], set()
    for m, r in zip(matches, records):
        if isinstance(m, SingleMatch):
            out.append(_Turn(m.model, m, r))
            continue
        for model in models:
            k = (model, m.question.question_id, m.turn)
            if k not in seen and model in (m.model_1, m.model_2):
                seen.add(k)
                out.append(_Turn(model, m, None))
    return out


def select_turns(cands: Sequence[_Turn], n: int, seed: int) -> list[_Turn]:
    """N judged turns, seeded, the categories in turn so that a handful covers them all."""
    queues: dict[str, list[_Turn]] = {}
    for c in cands:
        queues.setdefault(c.match.question.category, []).append(c)
    for cat, q in queues.items():
        random.Random(f"{seed}|mt-bench|{cat}").shuffle(q)
    out: list[_Turn] = []
    while len(out) < n and any(queues.values()):
        for q in queues.values():
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def _answer(inputs: Inputs, model: str, match: Match) -> Any:
    return inputs.answers[model][match.question.question_id]


def _spoiled(inputs: Inputs, t: _Turn, kind: str, seed: int) -> tuple[Any, str] | None:
    """The model's conversation with the judged turn's reply corrupted, and what changed; None where
    the corruption does not apply. Another question's answer is the same model's reply to the same turn
    of a question of the same category, or of any other selected question when the run has none."""
    conv = _answer(inputs, t.model, t.match)
    k = t.match.turn - 1
    q = t.match.question
    category = {x.question_id: x.category for x in inputs.questions}
    pool = [(qid, a.turns[k]) for qid, a in inputs.answers[t.model].items()
            if qid != q.question_id and qid in category and len(a.turns) > k]
    same = [text for qid, text in pool if category[qid] == q.category]
    got = corrupt(conv.turns[k], kind, seed=seed, key=t.key, others=same or [text for _, text in pool])
    if got is None:
        return None
    turns = list(conv.turns)
    turns[k] = got[0]
    return replace(conv, turns=tuple(turns)), got[1]


def _pair_match(inputs: Inputs, t: _Turn, bad: Any) -> PairMatch:
    m = t.match
    assert isinstance(m, PairMatch)
    return PairMatch(m.question, "intact", "corrupted", _answer(inputs, t.model, m), bad, m.prompt, m.turn,
                     m.reference)


def _outcome_rating(intact: SingleJudgment | None, bad: SingleJudgment) -> float | None:
    if intact is None or not intact.valid or not bad.valid:
        return None
    return 1.0 if intact.score > bad.score else 0.5 if intact.score == bad.score else 0.0  # type: ignore[operator]


def usage_of(backend: Backend) -> dict[str, Any] | None:
    try:
        return usage_of(backend)
    except Exception:  # a statistic; the check stands without it (a backend with no usage() or an odd one)
        return None


def most_calls(matches: Sequence[Match], models: Sequence[str], mode: str, n: int,
               corruptions: Sequence[str] = CORRUPTIONS) -> int:
    """The most judge calls the check of N turns makes (a corruption that does not apply makes none)."""
    turns = min(n, len(candidates(matches, [None] * len(matches), models)))
    return turns * len(corruptions) * (1 if part_of(mode) == "rating" else 2)


_SHOWN = {("intact first", "model_1"): "A", ("intact first", "model_2"): "B",
          ("corrupted first", "model_1"): "B", ("corrupted first", "model_2"): "A"}


def game_kappa(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Cohen's kappa of the games' winning position against the intact answer's position (module docstring)."""
    from ...stats.label_agreement import verdict_agreement

    said, truth = [], []
    for x in items:
        for game, winner, _ in x.get("orders") or []:
            said.append(None if winner is None else "tie" if winner == "tie" else _SHOWN[(game, winner)])
            truth.append("A" if game == "intact first" else "B")
    k = verdict_agreement(said, truth)
    return {"kappa": k["kappa"], "kappa_ci": k["kappa_ci"], "kappa_strength": k["kappa_strength"],
            "kappa_games": k["n"]}


def sanity_on_run(backend: Backend, inputs: Inputs, matches: Sequence[Match], records: Sequence[Any], mode: str, *,
                  n: int, seed: int = 0, corruptions: Sequence[str] = CORRUPTIONS,
                  log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """The label-free check of the run's judge on N of its judged turns (module docstring); the
    `sanity` record of the judge check's store."""
    part = part_of(mode)
    turns = select_turns(candidates(matches, records, inputs.models), n, seed)
    cats = list(dict.fromkeys(t.match.question.category for t in turns))
    log(f"judge check on the run's conversations: {len(turns)} judged turns ({', '.join(cats)}), "
        f"{', '.join(corruptions)}; FastChat's {'rating' if part == 'rating' else 'pair'} prompts")
    items: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    walls: dict[str, float] = {}
    t0 = time.time()
    for kind in corruptions:
        made = [(t, _spoiled(inputs, t, kind, seed)) for t in turns]
        skipped[kind] = sum(1 for _, s in made if s is None)
        todo = [(t, s) for t, s in made if s is not None]
        t1 = time.time()
        if part == "rating":
            judged = judge_single(backend, [replace(t.match, answer=s[0]) for t, s in todo])  # type: ignore[arg-type]
            for (t, (_, note)), bad in zip(todo, judged):
                outcome = _outcome_rating(t.intact, bad)
                intact_score = t.intact.score if t.intact is not None and t.intact.valid else None
                items.append({"id": f"{kind}/{t.key}", "corruption": kind, "category": t.match.question.category,
                              "source": f"answer:{t.model}", "note": note, "turn": t.match.turn,
                              "prompt": t.match.prompt.name, "rating": outcome,
                              "ratings": {"score": [intact_score, bad.score]},
                              "raw": {"intact": t.intact.game.judgment if t.intact else "",
                                      "corrupted": bad.game.judgment},
                              "reason": bad.game.error or bad.game.reason or ""})
        else:
            judged_p = judge_pairs(backend, [_pair_match(inputs, t, s[0]) for t, s in todo])
            for (t, (_, note)), j in zip(todo, judged_p):
                w = j.winner
                outcome = None if w is None else 1.0 if w == "model_1" else 0.0 if w == "model_2" else 0.5
                items.append({"id": f"{kind}/{t.key}", "corruption": kind, "category": t.match.question.category,
                              "source": f"answer:{t.model}", "note": note, "turn": t.match.turn,
                              "prompt": t.match.prompt.name, "battle": outcome,
                              "orders": [["intact first", j.g1_winner, j.g1.judgment],
                                         ["corrupted first", j.g2_winner, j.g2.judgment]]})
        walls[kind] = round(time.time() - t1, 1)
    wall = time.time() - t0

    def summarise(sel: list[dict[str, Any]]) -> dict[str, Any]:
        vals = [x.get(part) for x in sel]
        ok = [v for v in vals if v is not None]
        block = {"pairs": len(sel), "battle": preference_block(0.0, 0, 0), "rating": preference_block(0.0, 0, 0)}
        block[part] = preference_block(sum(ok), len(ok), len(vals) - len(ok))
        if part == "battle":
            block[part].update(game_kappa(sel))
        block["rating"].update(mean_drop=None, drop_ci95=None)
        if part == "rating":
            pairs = [x["ratings"]["score"] for x in sel if x["rating"] is not None]
            mean_drop, drop_ci = mean_ci([a - b for a, b in pairs])
            block["rating"].update(mean_drop=mean_drop, drop_ci95=drop_ci,
                                   intact_mean=round(sum(a for a, _ in pairs) / len(pairs), 4) if pairs else None,
                                   corrupted_mean=round(sum(b for _, b in pairs) / len(pairs), 4) if pairs else None)
        return block

    by_corruption = corruption_blocks(items, corruptions, summarise, skipped, cats, walls)
    pooled = summarise(items)
    reasons = verdict_reasons(pooled, by_corruption, (part,), "answer")
    return {"benchmark": "mt_bench", "mode": mode, "parts": [part],
            "source": "the run's own judged turns (each model's reply of that turn; earlier turns intact)",
            "categories": cats, "metrics": {c: sorted({t.match.prompt.name for t in turns
                                                      if t.match.question.category == c}) for c in cats},
            "turns_checked": len(turns), "pairs": len(items), "limit_per_corruption": n, "seed": seed,
            "pooled": pooled, "by_corruption": by_corruption,
            "usage": {part: usage_of(backend)}, "wall_s": round(wall, 1),
            "trustworthy": not reasons, "reasons": reasons, "rule": RULES["sanity"], "items": items}


def run_check(save_path: Any, backend: Backend, inputs: Inputs, matches: Sequence[Match], records: Sequence[Any],
              mode: str, *, n: int, seed: int = 0, corruptions: Sequence[str] = CORRUPTIONS,
              log: Callable[[str], None] = lambda s: None) -> tuple[dict[str, Any], str]:
    """Run the check, store it under the save path (judge_checks/<key>.json, judge_check.json); returns
    the stored record and its key."""
    judge, prompts, key = identity(backend.signature(), inputs, mode)
    sanity = sanity_on_run(backend, inputs, matches, records, mode, n=n, seed=seed, corruptions=corruptions, log=log)
    record, _ = save_check(save_path, key, judge, prompts, None, sanity)
    return record, key


def report_text(record: dict[str, Any]) -> str:
    """The check as a terminal reads it, 80 columns: one row per corruption, pooled last, then the verdict."""
    from ...core.verdicts import verdict_detail

    sanity = record["sanity"]
    part = sanity["parts"][0]
    lines = [f"Judge check on the run's conversations: {sanity['turns_checked']} judged turns, "
             f"{sanity['pairs']} pairs, seed {sanity['seed']};",
             f"the judge should {'rate the intact answer higher' if part == 'rating' else 'prefer the intact answer'}"
             " (ties half)",
             f"{'corruption':<14}{'pairs':>6}{'prefers intact':>16}{'95% Wilson':>15}{'invalid':>9}"
             + (f"{'drop':>7}" if part == "rating" else "")]
    rows = list(sanity["by_corruption"].items()) + [("(pooled)", sanity["pooled"])]
    for name, blk in rows:
        b = blk[part]
        drop = f"{fmt3(blk['rating'].get('mean_drop')):>7}" if part == "rating" else ""
        lines.append(f"{name:<14}{blk['pairs']:>6}{pct(b['preference']):>16}{ci_text(b['ci95']):>15}"
                     f"{b['invalid']:>9}{drop}")
    k = sanity["pooled"][part].get("kappa") if part == "battle" else None
    if k is not None:
        ci = sanity["pooled"][part].get("kappa_ci")
        lines += textwrap.wrap(f"Cohen's kappa of the winning position against the intact answer's, over "
                               f"{sanity['pooled'][part].get('kappa_games')} games: {k:.2f}"
                               + (f" (95% CI {ci[0]:.2f} to {ci[1]:.2f})" if ci else "") + "; 0 is chance", 80)
    lines += [""] + textwrap.wrap(("TRUSTWORTHY" if record["trustworthy"] else "NOT TRUSTWORTHY") + ": "
                                  + verdict_detail(record["verdict_text"]), 80, subsequent_indent="  ")
    lines += textwrap.wrap("rule: " + RULES["sanity"], 80, subsequent_indent="  ")
    return "\n".join(lines)
