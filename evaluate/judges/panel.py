"""A panel of judges: several judges (models, servers, backends) rate and battle the same items, and
the panel's score is theirs combined (evaluate.stats.panel says how).

A config's `judge:` may be a list of judge blocks, each with a `name`; the panel's policy is the
top-level `panel:` block (`PanelOptions`; both parsed in evaluate.judges.panel_config).
`PanelRatingJudge` and `PanelBattleJudge` stand where a `RatingJudge` and a `BattleJudge` stand
(evaluate.judges.configured builds them for a panel), so the GPT family rates and battles with a
panel without knowing it is one. The judge check checks each judge of a panel on its own.

Scores (`ItemScores`): each judge's under `<metric>@<judge>` (a turn: `<metric>@<judge>@turn<k>`,
evaluate.core.records.judge_key), every reply, reason and detail kept as that judge gave it; the
panel's under `<metric>` itself, its details naming each judge's value and marked `derived` (a
judged score is a judge's; the invalid tally counts each judge's). An item no judge rated validly
is invalid, its reason naming every judge's.

Battles: each judge battles every pair (`BattleResult`, its raw, probability-weighted and
position-calibrated verdicts as one judge's always are); the panel's result (`PanelBattleResult`)
holds per item the judges' votes, the panel's verdict, its probability-weighted verdict (the mean of
the judges' probabilities that A is better, where every judge with a verdict gives one) and its
calibrated one (the judges' calibrated verdicts voted), the judges' own results, and how far the
judges agree (Fleiss' kappa, pairwise correlation, effective number of judges).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..core.io import clean_json
from ..core.records import Record, judge_key
from ..core.scores import Invalid, ItemScores
from ..stats.intervals import wilson_interval
from ..stats.panel import (CALIBRATED_RULE, PROBABILITY_RULE, VERDICT_RULE,
                           combine_rating, mean_probability, verdict_agreement, vote)
from .battle import BattleItem, BattleResult
from .panel_config import PanelOptions


# ----------------------------------------------------------------------------------------- ratings

def combine_ratings(per_judge: Mapping[str, Sequence[ItemScores]], policy: PanelOptions) -> list[ItemScores]:
    """One ItemScores per item: each judge's scores, invalid entries and details under its own keys, and
    the panel's under the judges' shared keys (see the module docstring)."""
    names = list(per_judge)
    lengths = {len(v) for v in per_judge.values()}
    if len(lengths) > 1:
        raise ValueError(f"panel: the judges rated different numbers of items ({sorted(lengths)})")
    out = []
    for i in range(lengths.pop() if lengths else 0):
        items = {n: per_judge[n][i] for n in names}
        item = ItemScores()
        keys: dict[str, None] = {}
        for n in names:
            it = items[n]
            for k in (*it.scores, *it.invalid):
                keys.setdefault(k, None)
            for k, v in it.scores.items():
                item.scores[judge_key(k, n)] = v
            for k, inv in it.invalid.items():
                item.invalid[judge_key(k, n)] = inv
            for k, det in it.details.items():
                item.details[judge_key(k, n)] = det
        for k in keys:
            given = {n: items[n].scores.get(k) for n in names}
            valid = [(n, v) for n, v in given.items() if v is not None and k not in items[n].invalid]
            item.details[k] = {"panel": {n: given[n] if k not in items[n].invalid else None for n in names},
                               "aggregation": policy.rule(), "valid_judges": len(valid), "derived": True}
            if valid:
                item.scores[k] = combine_rating([v for _, v in valid], [policy.weight(n) for n, _ in valid],
                                                policy.rating)
                continue
            reasons = [f"{n}: {items[n].invalid[k].reason}" if k in items[n].invalid else f"{n}: not rated"
                       for n in names]
            raw = next((items[n].invalid[k].raw for n in names if k in items[n].invalid), "")
            item.invalid[k] = Invalid(reason="no judge of the panel gave a valid rating (" + "; ".join(reasons) + ")",
                                      raw=raw)
        out.append(item)
    return out


class _Panel:
    """The judges of a panel by name (two or more) and how their answers combine."""

    def __init__(self, members: Mapping[str, Any], policy: PanelOptions):
        if len(members) < 2:
            raise ValueError("a panel needs two judges or more")
        self.members = dict(members)
        self.policy = policy

    @property
    def names(self) -> list[str]:
        return list(self.members)


class PanelRatingJudge(_Panel):
    """Rates with every judge of the panel and combines their ratings (`combine_ratings`)."""

    def rate(self, records: Sequence[Record], metrics: Any, progress: Any = None, *,
             per_record: Sequence[Sequence[str]] | None = None) -> list[ItemScores]:
        per = {n: j.rate(records, metrics, progress, per_record=per_record) for n, j in self.members.items()}
        return combine_ratings(per, self.policy)

    def member_signature(self, name: str) -> dict[str, Any]:
        return {**self.members[name].signature(), "panel_judge": name}

    def signature(self) -> dict[str, Any]:
        return panel_signature("rating panel", self.members, self.policy,
                               aggregation=self.policy.rule(), scale=[1, 5],
                               invalid="an item no judge of the panel rated validly is invalid")


def panel_signature(evaluator: str, members: Mapping[str, Any], policy: PanelOptions, **extra: Any) -> dict[str, Any]:
    """A panel score's signature: the panel, its policy, and each judge's own signature (a changed judge
    changes the panel's signature, so earlier panel scores are not mixed with new ones)."""
    sigs = {n: j.signature() for n, j in members.items()}
    first = next(iter(sigs.values()))
    return {"evaluator": evaluator, "panel": {"judges": list(sigs), **policy.to_dict()},
            "prompt_file": first.get("prompt_file"), "prompt_sha256": first.get("prompt_sha256"),
            **extra, "judges": sigs}


# ----------------------------------------------------------------------------------------- battles

def probability_a(item: BattleItem) -> float | None:
    """A judge's probability that A is better on one item: from each order's P(first-shown preferred),
    averaged over the orders (which cancels the judge's lean to a position); a conversation's, the mean
    of its turns'. None unless every order (every turn) carries one."""
    if item.turns:
        ps = [probability_a(t) for t in item.turns]
        return None if not ps or any(p is None for p in ps) else sum(ps) / len(ps)  # type: ignore[arg-type]
    if not item.orders or any(o.p_first is None or o.verdict == "invalid" for o in item.orders):
        return None
    return sum(o.p_first if o.order == "AB" else 1.0 - o.p_first for o in item.orders) / len(item.orders)  # type: ignore[operator]


@dataclass
class PanelItem(BattleItem):
    """One item's panel verdict: the judges' verdicts (`votes`), their probabilities that A is better,
    and the panel's. It has no orders of its own (each judge's are in its result)."""

    votes: dict[str, str] = field(default_factory=dict)
    probabilities: dict[str, float | None] = field(default_factory=dict)
    p_panel: float | None = None  # the panel's probability that A is better

    @property
    def weighted_margin(self) -> float | None:
        return None if self.p_panel is None else self.p_panel - 0.5

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["judges"] = dict(self.votes)
        if any(p is not None for p in self.probabilities.values()):
            out["p_a_judges"] = {n: None if p is None else round(p, 6) for n, p in self.probabilities.items()}
        out["p_a_panel"] = None if self.p_panel is None else round(self.p_panel, 6)
        return out

    @classmethod
    def from_dict(cls, it: dict[str, Any]) -> "PanelItem":
        base = BattleItem.from_dict(it)
        return cls(**{f: getattr(base, f) for f in BattleItem.__dataclass_fields__},
                   votes=dict(it.get("judges") or {}), probabilities=dict(it.get("p_a_judges") or {}),
                   p_panel=it.get("p_a_panel"))


def combine_items(results: Mapping[str, BattleResult], policy: PanelOptions) -> list[PanelItem]:
    """The panel's item per item of the judges' results (the same pairs, in the same order)."""
    names = list(results)
    for r in results.values():
        r.calibrated()  # each judge's calibrated verdicts, fitted on its own two-order pairs
    first = results[names[0]].items
    by_judge = {n: {it.id: it for it in results[n].items} for n in names}
    out = []
    for it in first:
        mine = {n: by_judge[n].get(it.id) for n in names}
        votes = {n: (x.verdict if x is not None else "invalid") for n, x in mine.items()}
        valid = [n for n in names if votes[n] != "invalid"]
        probs = {n: (probability_a(x) if x is not None else None) for n, x in mine.items()}
        p_panel = mean_probability([probs[n] for n in valid], [policy.weight(n) for n in valid]) \
            if valid and all(probs[n] is not None for n in valid) else None  # type: ignore[misc]
        cal = {n: mine[n].calibrated_verdict for n in valid}  # type: ignore[union-attr]
        calibrated = vote([cal[n] for n in valid], [policy.weight(n) for n in valid]) \
            if valid and all(v is not None for v in cal.values()) else None
        out.append(PanelItem(id=it.id, verdict=vote([votes[n] for n in valid], [policy.weight(n) for n in valid]),
                             orders=[], category=it.category, votes=votes, probabilities=probs, p_panel=p_panel,
                             calibrated_verdict=calibrated))
    return out


@dataclass
class PanelBattleResult(BattleResult):
    """The panel's battle of one pair: `items` are PanelItems; `judges` each judge's own BattleResult."""

    judges: dict[str, BattleResult] = field(default_factory=dict)
    policy: PanelOptions = field(default_factory=PanelOptions)

    def calibrated(self):  # the panel's calibrated verdicts are the judges' voted (set on its items)
        return None

    def part(self, items: list[BattleItem]) -> "PanelBattleResult":
        return PanelBattleResult(self.model_a, self.model_b, items, self.both_orders, self.signature,
                                 judges={}, policy=self.policy)

    def agreement(self) -> dict[str, Any]:
        """How far the judges' verdicts agree (evaluate.stats.panel.verdict_agreement)."""
        by = {n: {it.id: it.verdict for it in r.items} for n, r in self.judges.items()}
        return verdict_agreement({n: [v.get(it.id) for it in self.items] for n, v in by.items()})

    def summary(self) -> dict[str, Any]:
        s = super().summary()
        for k in ("both_orders_valid", "inconsistent", "flips", "flip_rate", "inconsistency_rate", "one_order_invalid",
                  "first_position_win_rate"):
            s[k] = None  # a judge's own, in its summary (panel.judges)
        if s.get("weighted"):
            s["weighted"]["note"] = PROBABILITY_RULE
        cv = [it.calibrated_verdict for it in self.items if it.calibrated_verdict is not None]
        if cv:
            wins, losses, ties = cv.count("A"), cv.count("B"), cv.count("tie")
            ci = wilson_interval(wins + ties / 2, len(cv))
            s["calibrated"] = {"items": len(cv), "wins": wins, "ties": ties, "losses": losses,
                               "win_rate": (wins + ties / 2) / len(cv), "win_rate_ci95": list(ci) if ci else None,
                               "prior": None, "note": CALIBRATED_RULE}
        s["panel"] = {"judges": list(self.judges) or list(self.signature.get("panel", {}).get("judges") or []),
                      "verdict_rule": VERDICT_RULE, **self.policy.to_dict()}
        return s

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["panel"] = {
            "judges": {n: {"summary": clean_json(r.summary()), "signature": r.signature,
                           "items": [it.to_dict() for it in r.items]} for n, r in self.judges.items()},
            "agreement": clean_json(self.agreement()),
            "verdict_rule": VERDICT_RULE, "weighted_rule": PROBABILITY_RULE, "calibrated_rule": CALIBRATED_RULE,
            **self.policy.to_dict()}
        return out


def combine_battle(results: Mapping[str, BattleResult], policy: PanelOptions,
                   signature: dict[str, Any]) -> PanelBattleResult:
    first = next(iter(results.values()))
    return PanelBattleResult(first.model_a, first.model_b, list(combine_items(results, policy)),
                             all(r.both_orders for r in results.values()), signature,
                             judges=dict(results), policy=policy)


class PanelBattleJudge(_Panel):
    """Battles with every judge of the panel and combines their verdicts (`combine_battle`)."""

    @property
    def both_orders(self) -> bool:
        return all(j.both_orders for j in self.members.values())

    def signature(self) -> dict[str, Any]:
        return panel_signature("battle panel", self.members, self.policy, verdict_rule=VERDICT_RULE,
                               weighted_verdict_rule=PROBABILITY_RULE, calibrated_rule=CALIBRATED_RULE,
                               win_rate="ties count half; 95% Wilson interval")

    def run(self, answers: Mapping[str, Sequence[Record]], pairs: Sequence[tuple[str, str]] | None = None,
            progress: Any = None) -> list[PanelBattleResult]:
        per = {n: j.run(answers, pairs, progress) for n, j in self.members.items()}
        sig = self.signature()
        count = len(next(iter(per.values())))
        return [combine_battle({n: per[n][i] for n in per}, self.policy, sig) for i in range(count)]
