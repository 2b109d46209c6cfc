"""Battle: a judge compares two models' answers to the same question.

Public API
----------
``battle(backend, prompt, records_a, records_b, *, names=("A", "B"), both_orders=True,
with_reference=False) -> BattleResult``
``battle_all(backend, prompt, answers: {model: records}, *, both_orders=True) -> list[BattleResult]``
    every pair of models, all requests in one batched judge call.
``BattleResult.summary()`` / ``.to_dict()``; ``.signature`` says how it was made.
The win rate's interval is ``evaluate.stats.intervals.wilson_interval`` (None when nothing was decided).
Rank more than two models with ``battle_summary.battle_ranking(results, outputs)`` (evaluate.stats.bradley_terry).

How an item is decided
----------------------
Answers are matched by record id; the questions must agree. ``with_reference``: true, false,
``"auto"`` or a run-wide ``ReferenceUse`` (`evaluate.judges.references`: ``"auto"`` shows it in a
category where a rating of the run is shown it; nowhere without a run). Where the judge is shown
the reference, the target answer (from model A's records; B's must agree when it has one) is added after the
question, before both answers, so it favours neither position: the prompt file's
``reference_template`` if it has one, else a block of this module's wording (en / cn). The battle prompt (ColossalAI's
format) asks for two scores (1-10) on the first line. With ``both_orders`` each item is judged
as (A, B) and as (B, A); each order gives a verdict: A wins, B wins, or tie (equal scores).

- Both orders agree: that verdict.
- They disagree (A in one order, B in the other; or a win in one and a tie in the other): the
  item is a **tie** and is counted as *inconsistent* (FastChat's rule). ``flips`` counts the
  subset where the winner reverses.
- One order (or the only order) fails to parse or the call fails: the item is **invalid**, not
  decided by the order that remains — keeping it would bring back the position bias that
  judging both orders is there to cancel. ``one_order_invalid`` counts these.

Probability-weighted verdicts: when the backend returns log-probabilities, each order also gets
the expected score (over the digit tokens) at the two positions where the reply writes its
numbers (``parsing.weighted_pair``), and each item a weighted verdict: the sign of the mean over
its orders of weighted(A) - weighted(B), so position bias cancels in magnitude rather than turning
the item into a tie. They are reported beside the parsed verdicts (``summary()["weighted"]``),
which stay the headline counts.

Position-calibrated verdicts (``summary()["calibrated"]``, ``BattleItem.calibrated_verdict``): the
judge's lean towards the first-shown answer is estimated from the battle's own two-order pairs, no
labels, and each item's preference is read with it taken out (``evaluate.stats.position``, which
states the model). With log-probabilities each order carries ``p_first``, the judge's probability
that the first-shown answer is preferred (``parsing.first_preferred``), and the lean is in log-odds;
without them the parsed scores are used (the lean in points of the judge's scale), and where an
order has a verdict but no scores (imported games) the verdicts (a latent-threshold model fitted by
maximum likelihood). The prior is reported with them ("the judge gives the first-shown answer +0.42
log-odds ..."). The raw verdicts stay the headline counts; the calibrated ones are beside them, as
the weighted ones are.

Conversations: a record with turns is judged turn by turn. Turn k's request fills the battle
prompt's ``conversation_template``: each assistant's own conversation up to turn k-1 (the setup,
the shared user messages, that model's earlier replies) as ``{conversation_1}`` /
``{conversation_2}``, the user's turn-k message as ``{question}`` and both turn-k replies as
``{answer_1}`` / ``{answer_2}``; in the swapped order each conversation moves with its answer. Each
turn is decided like a one-turn item (``BattleItem.turns``, each with its ``turn`` number). The
item's own verdict is the whole conversation: the model that won more turns wins it (a turn tie
counts for neither), equal counts are a tie, and any invalid turn makes the item invalid. Win
rates are over items (one per conversation); ``summary()["by_turn"]`` has each turn's own counts,
and the position statistics (flips, first-position wins) are over the turn judgments, where the
orders are.

Per pair: wins / ties / losses (from A's side) / invalid; **win rate = (wins + ties / 2) / decided
items** (ties count half); a 95% **Wilson score interval** on that rate (treating a tie as half a
success; a tie has less variance than a coin flip, so the interval is slightly conservative);
**order-flip rate** = flips / items with both orders valid; **inconsistency rate** likewise;
**first-position win rate** = share of decisive single-order verdicts won by the answer shown
first (position bias; 0.5 is unbiased).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Mapping, Sequence

from ..backends.base import Backend, Completion, JudgeRequest, ProgressFn
from ..core.errors import InputError
from ..core.records import Record
from ..stats.intervals import MIN_INTERVAL_N, bootstrap_mean_ci
from ..stats.intervals import wilson_interval
from ..stats.position import Calibration, calibrate
from .dispatch import complete_all
from .parsing import first_preferred, loop_in, parse_pair, repetition_reason, weighted_pair
from .prompts import BattlePrompt, fill, render_history
from .references import ReferenceUse, decide
from .rating import references_text, turns_without_reference

SCALE = (1, 10)
TOP_LOGPROBS = 20
REFERENCE_BLOCK = {
    "en": "[Reference answer, correct, for comparison]\n{reference}\n[End of reference answer]",
    "cn": "【参考答案（正确答案，供比较）】\n{reference}\n【参考答案结束】",
}


@dataclass
class OrderJudgment:
    """One presentation order. `order` is "AB" (A shown first) or "BA"; `scores` are (A, B)
    whatever the order; `verdict` is "A", "B", "tie" or "invalid"."""

    order: str
    verdict: str
    scores: tuple[float, float] | None = None
    raw: str = ""
    weighted: tuple[float, float] | None = None  # probability-weighted (A, B), when log-probs came back
    reason: str = ""
    request: str = ""
    p_first: float | None = None  # the judge's P(the first-shown answer is preferred), from log-probs

    def to_dict(self) -> dict[str, Any]:
        out = {"order": self.order, "verdict": self.verdict,
               "scores": list(self.scores) if self.scores else None,
               "weighted_scores": [round(v, 4) for v in self.weighted] if self.weighted else None,
               "raw": self.raw, "reason": self.reason, "request": self.request}
        if self.p_first is not None:
            out["p_first"] = round(self.p_first, 6)
        return out


    @classmethod
    def from_dict(cls, o: dict[str, Any]) -> "OrderJudgment":
        return cls(order=o["order"], verdict=o["verdict"], scores=tuple(o["scores"]) if o.get("scores") else None,
                   raw=o.get("raw", ""), weighted=tuple(o["weighted_scores"]) if o.get("weighted_scores") else None,
                   reason=o.get("reason", ""), request=o.get("request", ""),
                   p_first=float(o["p_first"]) if isinstance(o.get("p_first"), (int, float)) else None)


@dataclass
class BattleItem:
    """One record's verdict. A conversation's item holds one BattleItem per turn (`turns`, each with
    its `turn` number and orders) and has no orders of its own; its verdict is the whole conversation."""

    id: str
    verdict: str  # "A" | "B" | "tie" | "invalid"
    orders: list[OrderJudgment]
    inconsistent: bool = False
    flipped: bool = False
    category: str = ""
    turn: int | None = None
    turns: list["BattleItem"] = field(default_factory=list)
    p_a: float | None = None  # a soft verdict: the probability that A wins (imported, or from log-probs)
    calibrated_verdict: str | None = None  # position-calibrated (set by BattleResult.calibrated())
    calibrated_margin: float | None = None  # its log-odds that A is preferred, the position lean removed

    @property
    def weighted_margin(self) -> float | None:
        """Mean over the orders of weighted(A) - weighted(B); None unless every order has
        probability-weighted scores (a margin from one order would keep its position bias).
        A conversation: the mean of its turns' margins, None unless every turn has one."""
        if self.turns:
            margins = [t.weighted_margin for t in self.turns]
            return None if any(m is None for m in margins) else sum(margins) / len(margins)  # type: ignore[arg-type]
        if not self.orders or any(o.weighted is None or o.verdict == "invalid" for o in self.orders):
            return None
        return sum(o.weighted[0] - o.weighted[1] for o in self.orders) / len(self.orders)

    def judgments(self) -> list["BattleItem"]:
        """The items that hold orders: the turns of a conversation, else the item itself."""
        return self.turns or [self]

    @property
    def weighted_verdict(self) -> str | None:
        m = self.weighted_margin
        return None if m is None else "A" if m > 0 else "B" if m < 0 else "tie"

    def to_dict(self) -> dict[str, Any]:
        m = self.weighted_margin
        out = {"id": self.id, "category": self.category, "verdict": self.verdict,
               "weighted_verdict": self.weighted_verdict, "weighted_margin": None if m is None else round(m, 4),
               "inconsistent": self.inconsistent, "flipped": self.flipped,
               "orders": [o.to_dict() for o in self.orders]}
        if self.turn is not None:
            out = {"turn": self.turn, **out}
        if self.turns:
            out["turns"] = [t.to_dict() for t in self.turns]
        if self.p_a is not None:
            out["p_a"] = round(self.p_a, 6)
        if self.calibrated_verdict is not None:
            out["calibrated_verdict"] = self.calibrated_verdict
            out["calibrated_margin"] = None if self.calibrated_margin is None else round(self.calibrated_margin, 4)
        return out

    @classmethod
    def from_dict(cls, it: dict[str, Any]) -> "BattleItem":
        """An item as a battle file holds it (shards are merged from their files)."""
        return cls(id=str(it["id"]), verdict=it["verdict"], orders=[OrderJudgment.from_dict(o) for o in it["orders"]],
                   inconsistent=it.get("inconsistent", False), flipped=it.get("flipped", False),
                   category=it.get("category", ""), turn=it.get("turn"),
                   turns=[cls.from_dict(t) for t in it.get("turns") or []],
                   p_a=float(it["p_a"]) if isinstance(it.get("p_a"), (int, float)) else None)


SOFT_NOTE = ("the mean over items of the probability that A wins (a soft verdict: imported with the judgments, "
             "or read from the judge's log-probabilities), beside the discrete win rate (ties half); 95% bootstrap "
             f"interval over items, none below {MIN_INTERVAL_N}")


def soft_summary(p_a: Sequence[float], discrete_win_rate: float | None) -> dict[str, Any] | None:
    """The soft win rate of the items that carry P(A wins), or None when none does."""
    if not p_a:
        return None
    ci = bootstrap_mean_ci(p_a, bounds=(0.0, 1.0), min_n=MIN_INTERVAL_N)
    return {"items": len(p_a), "win_rate": sum(p_a) / len(p_a), "win_rate_ci95": list(ci) if ci else None,
            "discrete_win_rate": discrete_win_rate, "note": SOFT_NOTE}


@dataclass
class BattleResult:
    """Everything about one pair of models; counts are from model A's side."""

    model_a: str
    model_b: str
    items: list[BattleItem]
    both_orders: bool = True
    signature: dict[str, Any] = field(default_factory=dict)
    # the position calibration of the whole battle; a part of it (a category, a turn) is given its
    # parent's, so that the prior is fitted once, over every pair
    calibration: Calibration | None = None

    def calibrated(self) -> Calibration | None:
        """The battle's position calibration (evaluate.stats.position), fitted on its items' own
        two-order pairs the first time it is asked for, which also sets each item's calibrated verdict."""
        if self.calibration is None and not getattr(self, "_fitted", False):
            self.calibration = calibrate_items(self.items)
            self._fitted = True
        return self.calibration

    def part(self, items: list[BattleItem]) -> "BattleResult":
        """A part of this battle (a category's items, a turn's judgments) under its calibration."""
        return BattleResult(self.model_a, self.model_b, items, self.both_orders, calibration=self.calibrated())

    def _count(self, verdict: str) -> int:
        return sum(1 for it in self.items if it.verdict == verdict)

    @property
    def wins(self) -> int:
        return self._count("A")

    @property
    def losses(self) -> int:
        return self._count("B")

    @property
    def ties(self) -> int:
        return self._count("tie")

    @property
    def invalid(self) -> int:
        return self._count("invalid")

    @property
    def win_rate(self) -> float:
        n = self.wins + self.ties + self.losses
        return (self.wins + self.ties / 2) / n if n else math.nan

    @property
    def win_rate_ci(self) -> tuple[float, float] | None:
        """95% Wilson interval of the win rate (ties count half); None when no item was decided."""
        return wilson_interval(self.wins + self.ties / 2, self.wins + self.ties + self.losses)

    def summary(self) -> dict[str, Any]:
        judged = [j for it in self.items for j in it.judgments()]  # where the orders are
        both_valid = [it for it in judged if len(it.orders) == 2
                      and all(o.verdict != "invalid" for o in it.orders)]
        flips = sum(it.flipped for it in both_valid)
        inconsistent = sum(it.inconsistent for it in both_valid)
        decisive = [o for it in judged for o in it.orders if o.verdict in ("A", "B")]
        first_wins = sum(1 for o in decisive if o.verdict == o.order[0])
        one_bad = sum(1 for it in judged if len(it.orders) == 2
                      and sum(o.verdict == "invalid" for o in it.orders) == 1)
        ci = self.win_rate_ci
        wv = [it.weighted_verdict for it in self.items if it.weighted_verdict is not None]
        weighted = None
        if wv:
            w_wins, w_losses, w_ties = wv.count("A"), wv.count("B"), wv.count("tie")
            w_ci = wilson_interval(w_wins + w_ties / 2, len(wv))
            weighted = {"items": len(wv), "wins": w_wins, "ties": w_ties, "losses": w_losses,
                        "win_rate": (w_wins + w_ties / 2) / len(wv), "win_rate_ci95": list(w_ci) if w_ci else None,
                        "note": "verdict from the mean over both orders of the probability-weighted score "
                                "difference (A - B); items without log-probs in every order are left out"}
        soft = soft_summary([it.p_a for it in self.items if it.p_a is not None], self.win_rate)
        calibrated = calibrated_summary(self.calibrated(), self.items)
        return {
            "model_a": self.model_a, "model_b": self.model_b, "items": len(self.items),
            "wins": self.wins, "ties": self.ties, "losses": self.losses, "invalid": self.invalid,
            "win_rate": self.win_rate, "win_rate_ci95": list(ci) if ci else None,
            "win_rate_note": "ties count half; 95% Wilson score interval",
            "both_orders": self.both_orders, "both_orders_valid": len(both_valid),
            "inconsistent": inconsistent, "flips": flips,
            "flip_rate": flips / len(both_valid) if both_valid else math.nan,
            "inconsistency_rate": inconsistent / len(both_valid) if both_valid else math.nan,
            "one_order_invalid": one_bad,
            "first_position_win_rate": first_wins / len(decisive) if decisive else math.nan,
            "weighted": weighted,
            "calibrated": calibrated,
            **({"soft": soft} if soft else {}),
            **self._by_turn(),
        }

    def _by_turn(self) -> dict[str, Any]:
        """Each turn's own counts when there are conversations (nothing for one-turn battles)."""
        turns = sorted({t.turn for it in self.items for t in it.turns if t.turn is not None})
        if not turns:
            return {}
        return {"turn_judgments": sum(len(it.turns) for it in self.items),
                "by_turn": {str(k): self.part([t for it in self.items for t in it.turns if t.turn == k]).summary()
                            for k in turns},
                "conversation_rule": CONVERSATION_RULE}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "signature": self.signature,
                "items": [it.to_dict() for it in self.items]}


CALIBRATED_NOTE = ("verdict from the judge's preference with its measured lean to a position taken out (the lean "
                   "fitted on this battle's own two-order pairs, no labels; evaluate/stats/position.py): A or B "
                   "beyond the tie band, else a tie; items not valid in both orders are left out")


def calibrate_items(items: Sequence[BattleItem]) -> Calibration | None:
    """Fit the position calibration on the items' judgments (a conversation's turns) and set every
    item's calibrated verdict and margin; a conversation's from its turns' (CONVERSATION_RULE).
    None when no judgment is valid in both orders."""
    judged = [j for it in items for j in it.judgments()]
    cal = calibrate([[(o.order, o.verdict, o.p_first, _first_minus_second(o)) for o in j.orders] for j in judged])
    for j, (m, v) in zip(judged, zip(cal.margins, cal.verdicts) if cal else [(None, None)] * len(judged)):
        j.calibrated_verdict, j.calibrated_margin = v, m
    for it in items:
        if it.turns:
            vs = [t.calibrated_verdict for t in it.turns]
            if any(v is None for v in vs):
                it.calibrated_verdict = it.calibrated_margin = None
                continue
            margin = sum(1 if v == "A" else -1 if v == "B" else 0 for v in vs)
            it.calibrated_verdict = "A" if margin > 0 else "B" if margin < 0 else "tie"
            it.calibrated_margin = sum(t.calibrated_margin for t in it.turns) / len(it.turns)  # type: ignore[misc]
    return cal


def _first_minus_second(o: OrderJudgment) -> float | None:
    """The first-shown answer's parsed score minus the second's (scores are held as (A, B))."""
    if not o.scores:
        return None
    a, b = o.scores
    return a - b if o.order == "AB" else b - a


def calibrated_summary(cal: Calibration | None, items: Sequence[BattleItem]) -> dict[str, Any] | None:
    """Wins / ties / losses of the calibrated verdicts, their win rate (ties half, 95% Wilson) and the prior."""
    if cal is None:
        return None
    cv = [it.calibrated_verdict for it in items if it.calibrated_verdict is not None]
    wins, losses, ties = cv.count("A"), cv.count("B"), cv.count("tie")
    ci = wilson_interval(wins + ties / 2, len(cv))
    return {"items": len(cv), "wins": wins, "ties": ties, "losses": losses,
            "win_rate": (wins + ties / 2) / len(cv) if cv else None, "win_rate_ci95": list(ci) if ci else None,
            "prior": cal.summary(), "note": CALIBRATED_NOTE}


def _index(records: Sequence[Record], name: str) -> dict[str, Record]:
    out: dict[str, Record] = {}
    for r in records:
        if r.id in out:
            raise InputError(f'battle: answers of "{name}" contain record id {r.id} twice')
        out[r.id] = r
    return out


def _match(a: Sequence[Record], b: Sequence[Record], name_a: str, name_b: str,
           allow_unmatched: bool) -> list[tuple[Record, Record]]:
    ia, ib = _index(a, name_a), _index(b, name_b)
    only_a = [i for i in ia if i not in ib]
    only_b = [i for i in ib if i not in ia]
    if (only_a or only_b) and not allow_unmatched:
        def show(ids: list[str]) -> str:
            return ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        parts = []
        if only_a:
            parts.append(f'ids only in "{name_a}": {show(only_a)}')
        if only_b:
            parts.append(f'ids only in "{name_b}": {show(only_b)}')
        raise InputError(f'battle "{name_a}" vs "{name_b}": answers do not cover the same questions ('
                         + "; ".join(parts) + ")")
    pairs = [(ia[i], ib[i]) for i in ia if i in ib]
    for ra, rb in pairs:
        if [u.strip() for u in ra.user_turns()] != [u.strip() for u in rb.user_turns()] or \
                len(ra.turns) != len(rb.turns):
            raise InputError(f'battle "{name_a}" vs "{name_b}": record id {ra.id} has different questions'
                             f" ({ra.question[:60]!r} vs {rb.question[:60]!r})")
    if not pairs:
        raise InputError(f'battle "{name_a}" vs "{name_b}": no record id in common')
    return pairs


def _verdict(a: float, b: float) -> str:
    return "A" if a > b else "B" if b > a else "tie"


def _judge_order(order: str, comp: Completion, request: JudgeRequest) -> OrderJudgment:
    if not comp.ok:
        return OrderJudgment(order=order, verdict="invalid", raw=comp.error or "",
                             reason=f"judge call failed: {comp.error}", request=request.key())
    loop = loop_in(comp.text, comp.finish_reason)  # a looping reply is read up to its loop's first copy
    parsed = parse_pair(loop.before(comp.text) if loop else comp.text, low=SCALE[0], high=SCALE[1])
    if not parsed.ok:
        reason = repetition_reason(loop, comp.finish_reason, "score line") if loop else parsed.reason
        return OrderJudgment(order=order, verdict="invalid", raw=comp.text, reason=reason, request=request.key())
    if comp.finish_reason == "length" and "\n" not in comp.text.strip() and comp.text.rstrip()[-1:].isdigit():
        # "9 1" cut from "9 10": the score line ends where the token limit cut the reply
        return OrderJudgment(order=order, verdict="invalid", raw=comp.text, request=request.key(),
                             reason="the reply was cut at the token limit right after its second score, "
                                    "which may be incomplete; raise max_tokens")
    first, second = parsed.values
    a, b = (first, second) if order == "AB" else (second, first)
    w = weighted_pair(comp.top_logprobs, low=SCALE[0], high=SCALE[1]) if comp.top_logprobs else None
    weighted = None if w is None else (w if order == "AB" else (w[1], w[0]))
    p_first = first_preferred(comp.top_logprobs, low=SCALE[0], high=SCALE[1]) if comp.top_logprobs else None
    return OrderJudgment(order=order, verdict=_verdict(a, b), scores=(a, b), raw=comp.text, request=request.key(),
                         weighted=weighted, p_first=p_first)


CONVERSATION_RULE = ("a conversation is one item: the model that won more turns wins it, equal counts are a tie, "
                     "an invalid turn makes it invalid; flips and first-position wins are over the turn judgments")


def _combine_turns(item_id: str, category: str, turns: list[BattleItem]) -> BattleItem:
    """The whole conversation from its turns (CONVERSATION_RULE)."""
    if any(t.verdict == "invalid" for t in turns):
        return BattleItem(id=item_id, verdict="invalid", orders=[], category=category, turns=turns)
    margin = sum(1 if t.verdict == "A" else -1 if t.verdict == "B" else 0 for t in turns)
    verdict = "A" if margin > 0 else "B" if margin < 0 else "tie"
    return BattleItem(id=item_id, verdict=verdict, orders=[], category=category, turns=turns,
                      inconsistent=any(t.inconsistent for t in turns), flipped=any(t.flipped for t in turns))


def _combine(item_id: str, category: str, orders: list[OrderJudgment]) -> BattleItem:
    if any(o.verdict == "invalid" for o in orders):
        return BattleItem(id=item_id, verdict="invalid", orders=orders, category=category)
    verdicts = {o.verdict for o in orders}
    if len(verdicts) == 1:
        return BattleItem(id=item_id, verdict=orders[0].verdict, orders=orders, category=category)
    return BattleItem(id=item_id, verdict="tie", orders=orders, inconsistent=True,
                      flipped=verdicts == {"A", "B"}, category=category)


class BattleJudge:
    """Options of a battle run. explain=False caps the reply at 32 tokens: enough for the score
    line, not for the explanation (cheaper; the verdict only needs the first line)."""

    def __init__(self, backend: Backend, prompt: BattlePrompt, *, both_orders: bool = True,
                 max_tokens: int = 512, explain: bool = True, allow_unmatched: bool = False,
                 with_reference: bool | str | ReferenceUse = False, language: str = "en"):
        if language not in REFERENCE_BLOCK:
            raise InputError(f'battle: unknown language "{language}" (expected one of {", ".join(REFERENCE_BLOCK)})')
        self.with_reference = with_reference
        self._use: ReferenceUse | None = with_reference if isinstance(with_reference, ReferenceUse) else \
            ReferenceUse(setting=with_reference) if isinstance(with_reference, bool) else None
        self._call_use: ReferenceUse | None = None
        self.language = language
        self.backend = backend
        self.prompt = prompt
        self.both_orders = both_orders
        self.max_tokens = max_tokens if explain else min(max_tokens, 32)
        self.explain = explain
        self.allow_unmatched = allow_unmatched

    def signature(self) -> dict[str, Any]:
        use = self._call_use or self._use
        shown = {"reference_shown_in": use.battled_with()} if isinstance(use, ReferenceUse) and use.setting == "auto" \
            else {}
        return {"evaluator": "battle", "judge": self.backend.signature(), "prompt_file": str(self.prompt.path),
                "prompt_sha256": self.prompt.sha256, "mode": "generate", "both_orders": self.both_orders,
                "scale": list(SCALE), "max_tokens": self.max_tokens, "explain": self.explain,
                "with_reference": self._use.setting if self._use is not None else self.with_reference,
                "language": self.language,
                "verdict_rule": "disagreeing orders -> tie (inconsistent); an invalid order -> invalid item",
                "weighted_verdict_rule": "sign of the mean over orders of the expected-score difference A - B "
                                         "(top log-probs at the two number positions); needs every order valid",
                "win_rate": "ties count half; 95% Wilson interval", **shown}

    def reference_use(self, matched: list[list[tuple[Record, Record]]]) -> ReferenceUse:
        """Which categories' battles the judge is shown the reference in. "auto" without a run-wide
        decision (meta-eval, the judge check: no ratings to follow) shows it nowhere: a run's battle
        gets it where a rating of its category does."""
        if self._use is not None:
            return self._use
        records = [r for items in matched for pair in items for r in pair]
        return decide(self.with_reference, {r.category: [] for r in records}, records)

    def _shows(self, record: Record) -> bool:
        use = self._call_use or self.reference_use([[(record, record)]])
        return use.battle(record.category)

    def _question(self, ra: Record, rb: Record) -> str:
        if not self._shows(ra):
            return ra.question
        targets = ra.targets or rb.targets
        reference = targets[0] if len(targets) == 1 else "\n\n".join(f"[{i}] {t}" for i, t in enumerate(targets, 1))
        block = fill(self.prompt.reference_template or REFERENCE_BLOCK[self.language], reference=reference)
        return f"{ra.question}\n\n{block}"

    def _turn_question(self, ra: Record, rb: Record, k: int) -> str:
        """Turn k's user message, with that turn's reference after it when judging with one."""
        question = ra.turns[k - 1].user
        if not self._shows(ra):
            return question
        reference = references_text(ra.turns[k - 1].references or rb.turns[k - 1].references)
        block = fill(self.prompt.reference_template or REFERENCE_BLOCK[self.language], reference=reference)
        return f"{question}\n\n{block}"

    def _check_conversations(self, matched: list[list[tuple[Record, Record]]]) -> None:
        """Refused before any call: a battle prompt without a conversation template, and (with a
        reference) a conversation turn without one."""
        convs = [ra for items in matched for ra, _ in items if ra.turns]
        if not convs:
            return
        problems = []
        if self.prompt.conversation_template is None:
            r = convs[0]
            problems.append(f'{self.prompt.path}: no "conversation_template", and category "{r.category}" holds '
                            f"conversations (record {r.id}: {len(r.turns)} turns); add one with {{conversation_1}} "
                            "{conversation_2} {question} {answer_1} {answer_2} {prompt} (see "
                            "evaluate/prompts/README.md), or leave prompts: out for the project's own")
        shown = [r for r in convs if self._shows(r)]
        if shown:
            problems.extend(turns_without_reference(list({r.id: r for r in shown}.values()), "battle with reference"))
        if problems:
            raise InputError("\n".join(problems))

    def _check_references(self, pairs: Sequence[tuple[str, str]], matched: list[list[tuple[Record, Record]]]) -> None:
        matched = [[(ra, rb) for ra, rb in items if self._shows(ra)] for items in matched]
        lacking = sorted({ra.id for items in matched for ra, rb in items
                          if not ra.turns and not any(t.strip() for t in (ra.targets or rb.targets))})
        if lacking:
            shown = ", ".join(lacking[:10]) + (f" and {len(lacking) - 10} more" if len(lacking) > 10 else "")
            raise InputError(f"battle with reference: record(s) {shown} have no target answer")
        for (a, b), items in zip(pairs, matched):
            for ra, rb in items:
                if ra.targets and rb.targets and ra.targets != rb.targets:
                    raise InputError(f'battle "{a}" vs "{b}": record id {ra.id} has different targets')

    def _request(self, question: str, first: str, second: str) -> JudgeRequest:
        return self._chat(self.prompt.render(question, first, second))

    def _chat(self, user: str) -> JudgeRequest:
        # top log-probabilities when the backend has them: the probability-weighted scores
        # (`weighted_scores`) are read from the positions where the reply writes its two numbers
        top = TOP_LOGPROBS if self.backend.supports_logprobs else 0
        return JudgeRequest.chat(self.prompt.system_prompt or None, user,
                                 max_tokens=self.max_tokens, temperature=0.0, top_logprobs=top)

    def _turn_request(self, ra: Record, rb: Record, k: int, order: str) -> JudgeRequest:
        """Turn k of a conversation in one order: each assistant's earlier turns travel with its reply."""
        sides = [(ra, rb), (rb, ra)][order == "BA"]
        history = [render_history(r.instruction, r.turns[:k - 1], self.language) for r in sides]
        return self._chat(self.prompt.render_conversation(history[0], history[1], self._turn_question(ra, rb, k),
                                                          sides[0].turns[k - 1].assistant,
                                                          sides[1].turns[k - 1].assistant))

    def _requests(self, ra: Record, rb: Record, orders: Sequence[str]) -> list[JudgeRequest]:
        """One record's requests: per order; for a conversation per turn, then per order."""
        if ra.turns:
            return [self._turn_request(ra, rb, k, order) for k in range(1, len(ra.turns) + 1) for order in orders]
        question = self._question(ra, rb)
        return [self._request(question, *((ra.output, rb.output) if order == "AB" else (rb.output, ra.output)))
                for order in orders]

    def run(self, answers: Mapping[str, Sequence[Record]], pairs: Sequence[tuple[str, str]] | None = None,
            progress: ProgressFn | None = None) -> list[BattleResult]:
        names = list(answers)
        if len(names) < 2:
            raise InputError(f"battle: needs answers of at least two models, got {len(names)}")
        pairs = list(pairs) if pairs is not None else list(combinations(names, 2))
        for a, b in pairs:
            for n in (a, b):
                if n not in answers:
                    raise InputError(f'battle: unknown model "{n}" (models: {", ".join(names)})')
            if a == b:
                raise InputError(f'battle: model "{a}" cannot battle itself')
        matched = [_match(answers[a], answers[b], a, b, self.allow_unmatched) for a, b in pairs]
        self._call_use = self.reference_use(matched)
        try:
            return self._run(pairs, matched, progress)
        finally:
            self._call_use = None

    def _run(self, pairs: list[tuple[str, str]], matched: list[list[tuple[Record, Record]]],
             progress: ProgressFn | None) -> list[BattleResult]:
        self._check_conversations(matched)
        self._check_references(pairs, matched)
        orders = ("AB", "BA") if self.both_orders else ("AB",)
        requests: list[JudgeRequest] = []
        for items in matched:
            for ra, rb in items:
                requests.extend(self._requests(ra, rb, orders))
        completions = iter(complete_all(self.backend, requests, progress))
        req_iter = iter(requests)
        sig = self.signature()
        results = []
        for (a, b), items in zip(pairs, matched):
            battle_items = []
            for ra, _ in items:
                if ra.turns:
                    turns = []
                    for k in range(1, len(ra.turns) + 1):
                        judged = [_judge_order(order, next(completions), next(req_iter)) for order in orders]
                        turns.append(_combine(ra.id, ra.category, judged))
                        turns[-1].turn = k
                    battle_items.append(_combine_turns(ra.id, ra.category, turns))
                    continue
                judged = [_judge_order(order, next(completions), next(req_iter)) for order in orders]
                battle_items.append(_combine(ra.id, ra.category, judged))
            results.append(BattleResult(model_a=a, model_b=b, items=battle_items, both_orders=self.both_orders,
                                        signature=sig))
        return results


def battle(backend: Backend, prompt: BattlePrompt, records_a: Sequence[Record], records_b: Sequence[Record], *,
           names: tuple[str, str] = ("A", "B"), both_orders: bool = True, progress: ProgressFn | None = None,
           **options: Any) -> BattleResult:
    """Judge model A against model B on every shared question (see the module docstring).
    `options` go to BattleJudge (max_tokens, explain, allow_unmatched, with_reference, language)."""
    if names[0] == names[1]:
        raise InputError(f'battle: the two models need different names, got "{names[0]}" twice')
    judge = BattleJudge(backend, prompt, both_orders=both_orders, **options)
    return judge.run({names[0]: records_a, names[1]: records_b}, progress=progress)[0]


def battle_all(backend: Backend, prompt: BattlePrompt, answers: Mapping[str, Sequence[Record]], *,
               both_orders: bool = True, progress: ProgressFn | None = None, **options: Any) -> list[BattleResult]:
    """Every pair of models (in the mapping's order), all judged in one batched call."""
    judge = BattleJudge(backend, prompt, both_orders=both_orders, **options)
    return judge.run(answers, progress=progress)
