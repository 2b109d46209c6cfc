"""What a SAGEval run hands back: per item both agents' judgements, per run the aggregates.

Invalid judgements are kept (with the reason and the raw reply) and counted, never averaged.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from evaluate.core.scores import ItemScores

from .aspects import Aspect
from .parsing import NewAspect, aspect_key

EVALUATOR_SUFFIX = "@evaluator"


@dataclass
class AgentJudgement:
    """One agent's judgement of one aspect of one item."""

    value: float | str | None = None  # the score used (weighted or stated) or the label; None: invalid
    reason: str = ""
    stated: int | str | None = None  # the value written in the JSON reply
    source: str | None = None  # "logprobs" (weighted) or "reply" (stated)
    digit_mass: float | None = None  # probability on "1".."5" of the one-token request, when asked
    definition: str | None = None  # SAGE: a suggested better definition
    invalid: str | None = None  # why there is no value

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != ""}


@dataclass
class SageItem:
    record_id: str
    category: str
    evaluator: dict[str, AgentJudgement]
    sage: dict[str, AgentJudgement]
    new_aspects: list[NewAspect]
    raw: dict[str, str]  # agent -> the raw reply kept
    attempts: dict[str, int]  # agent -> JSON requests sent (1 + retries)
    closed: dict[str, bool] = field(default_factory=dict)  # agent -> kept reply was cut and closed
    scores: ItemScores = field(default_factory=ItemScores)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 4)


@dataclass
class SageResult:
    """All items of one run. `tolerance`: a rectification counts as lowered/raised only when it
    moves the score by at least this much (integer scores move by 1 or more; weighted scores
    drift by fractions that are not a judgement change)."""

    aspects: list[Aspect]
    items: list[SageItem]
    signature: dict[str, Any]
    tolerance: float = 0.5

    def aspect_stats(self) -> dict[str, dict[str, Any]]:
        """Per score aspect: means before (evaluator) and after (SAGE), and the rectifications."""
        out: dict[str, dict[str, Any]] = {}
        for a in self.aspects:
            if not a.is_score:
                continue
            before = [it.evaluator[a.id].value for it in self.items if it.evaluator[a.id].value is not None]
            after = [it.sage[a.id].value for it in self.items if it.sage[a.id].value is not None]
            pairs = [(it.evaluator[a.id].value, it.sage[a.id].value) for it in self.items
                     if it.evaluator[a.id].value is not None and it.sage[a.id].value is not None]
            diffs = [float(s) - float(e) for e, s in pairs]
            out[a.id] = {
                "mean_before": _r(_mean([float(x) for x in before])), "n_before": len(before),
                "mean_after": _r(_mean([float(x) for x in after])), "n_after": len(after),
                "n_paired": len(pairs), "mean_change_paired": _r(_mean(diffs)),
                "lowered": sum(d <= -self.tolerance for d in diffs),
                "raised": sum(d >= self.tolerance for d in diffs),
                "unchanged": sum(-self.tolerance < d < self.tolerance for d in diffs),
                "invalid_before": len(self.items) - len(before),
                "invalid_after": len(self.items) - len(after),
            }
        return out

    def label_stats(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for a in self.aspects:
            if a.is_score:
                continue
            before = Counter(it.evaluator[a.id].value for it in self.items if it.evaluator[a.id].value is not None)
            after = Counter(it.sage[a.id].value for it in self.items if it.sage[a.id].value is not None)
            changed = sum(1 for it in self.items if None not in (it.evaluator[a.id].value, it.sage[a.id].value)
                          and it.evaluator[a.id].value != it.sage[a.id].value)
            out[a.id] = {"before": dict(before.most_common()), "after": dict(after.most_common()),
                         "changed": changed}
        return out

    def definition_suggestions(self) -> dict[str, list[dict[str, str]]]:
        """Per aspect, every definition the SAGE agent proposed instead, with the item it came from."""
        out: dict[str, list[dict[str, str]]] = {}
        for a in self.aspects:
            got = [{"id": it.record_id, "definition": it.sage[a.id].definition}
                   for it in self.items if it.sage[a.id].definition]
            if got:
                out[a.id] = got
        return out

    def new_aspect_counts(self, top: int | None = None) -> list[dict[str, Any]]:
        """Suggested new aspects grouped by normalised name, most frequent first.

        Suggestions that only rename a given aspect (its id, name or an alias) are not new and
        are left out; `echoes_of_given_aspects` in the summary counts them.
        """
        given = {aspect_key(s) for a in self.aspects for s in (a.id, a.name, *a.aliases)}
        groups: dict[str, list[tuple[str, NewAspect]]] = defaultdict(list)
        for it in self.items:
            for na in it.new_aspects:
                if na.key not in given:
                    groups[na.key].append((it.record_id, na))
        rows = []
        for key, members in groups.items():
            spelling = Counter(na.name for _, na in members).most_common(1)[0][0]
            scores = [na.score for _, na in members if na.score is not None]
            rows.append({"name": spelling, "key": key, "count": len(members),
                         "items": sorted({rid for rid, _ in members}),
                         "definitions": list(dict.fromkeys(na.definition for _, na in members))[:3],
                         "mean_score": _r(_mean([float(s) for s in scores]))})
        rows.sort(key=lambda r: (-r["count"], r["key"]))
        return rows[:top] if top else rows

    def summary(self) -> dict[str, Any]:
        """JSON-serialisable per-run summary."""
        given = {aspect_key(s) for a in self.aspects for s in (a.id, a.name, *a.aliases)}
        echoes = sum(1 for it in self.items for na in it.new_aspects if na.key in given)
        return {
            "signature": self.signature,
            "n_items": len(self.items),
            "tolerance": self.tolerance,
            "aspects": self.aspect_stats(),
            "labels": self.label_stats(),
            "definition_suggestions": self.definition_suggestions(),
            "new_aspects": self.new_aspect_counts(),
            "echoes_of_given_aspects": echoes,
            "replies": {
                agent: {
                    "retries": sum(max(0, it.attempts.get(agent, 0) - 1) for it in self.items),
                    "cut_and_closed": sum(1 for it in self.items if it.closed.get(agent)),
                    "fully_valid": sum(1 for it in self.items
                                       if all(j.invalid is None for j in getattr(it, agent).values())),
                }
                for agent in ("evaluator", "sage")
            },
        }
