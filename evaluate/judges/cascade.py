"""Rules before the judge (OpenCompass's cascade evaluator): a rule check decides the items it can,
and only the undecided ones go to the judge.

A category names, per GPT metric, a rule check (`category.closed_qa.cascade: {correctness:
ExactMatch}`); the GPT family runs the rule on each answer before it asks the judge
(`evaluate.families.gpt`). What "decided" means:

- **A rating**: the rule passing decides the item: the answer is what the reference says
  (ExactMatch), so it gets the top of the scale (5) and no judge call. The rule failing decides
  nothing: a correct answer may be worded in a way the rule does not match ("Canberra is the
  capital." against the target "Canberra"), so the judge rates it. A record the rule cannot check
  (ExactMatch on a record without a target) goes to the judge too.
- **A battle**: never decided by a rule. A battle asks which of two answers is better overall; two
  answers that both pass may still differ in quality, and one that fails may be the better one.
  Battles are judged on every item, cascade or not.

How the numbers combine: the metric's value per item is the rule's 5 or the judge's rating, and
its mean, interval and comparisons are over all items together. Nothing is mixed silently: each
item's details say who decided (`decided_by: "rule"` or `"judge"`, with the rule's outcome and
reason under `cascade`), the score's signature names the rule and states this rule (`cascade`), so
a cascaded score never meets a judge-only one (their signatures differ: the save path keeps one,
comparisons refuse the pair), and the plan, the log and the closing lines count the items each
decided and the calls saved.

This module is the bookkeeping only (which items the judge still rates, what goes into the result);
the rule itself comes in as a function, so the judges do not depend on the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..core.records import Record
from ..core.scores import ItemScores


@dataclass(frozen=True)
class RuleOutcome:
    """One answer under the rule: passed (decides the rating) or not, and the rule's own details."""

    passed: bool
    details: Mapping[str, Any] = field(default_factory=dict)


# the rule over a category's records: one outcome per record, None where it cannot check one
RuleFn = Callable[[Sequence[Record]], list["RuleOutcome | None"]]

DECIDES = "the rule passing: the scale's top, no judge call; failing (or unable to check): the judge rates the item"
AGGREGATE = ("mean over all items: the rule's top scores and the judge's ratings together; each item's details "
             "say which decided (decided_by)")
BATTLE = "a battle is judged on every item: a rule decides a rating, not which of two answers is better"


@dataclass
class Split:
    """Who decides what: per metric the rule's name and its outcome for each record; `per_record` the
    metrics the judge still rates for each record."""

    records: int
    rules: dict[str, str] = field(default_factory=dict)  # metric -> rule check name
    outcomes: dict[str, list[RuleOutcome | None]] = field(default_factory=dict)  # metric -> outcome per record
    per_record: list[list[str]] = field(default_factory=list)

    def decided(self, metric: str) -> int:
        return sum(1 for o in self.outcomes.get(metric, []) if o is not None and o.passed)

    def saved(self) -> int:
        """Judge calls the rules saved (one per decided item and metric)."""
        return sum(self.decided(m) for m in self.outcomes)


def split(records: Sequence[Record], metrics: Sequence[str], rules: Mapping[str, tuple[str, RuleFn]]) -> Split:
    """Run each metric's rule (`rules`: metric -> (name, function)) over `records`; the judge rates
    each record on its metrics minus those a rule decided."""
    out = Split(records=len(records))
    for metric, (name, fn) in rules.items():
        if metric not in metrics:
            continue
        outcomes = fn(records)
        if len(outcomes) != len(records):
            raise RuntimeError(f"cascade rule {name}: {len(outcomes)} outcomes for {len(records)} records")
        out.rules[metric] = name
        out.outcomes[metric] = outcomes
    out.per_record = [[m for m in metrics if not _passed(out.outcomes.get(m), i)] for i in range(len(records))]
    return out


def _passed(outcomes: list[RuleOutcome | None] | None, i: int) -> bool:
    return bool(outcomes) and outcomes[i] is not None and outcomes[i].passed  # type: ignore[index, union-attr]


def apply(items: Sequence[ItemScores], result: Split, top: float) -> None:
    """Put the rule's decisions into the judge's `items` (one per record, in order): a decided metric
    gets `top` and details saying so; a metric the judge rated keeps its reply and gets the rule's
    outcome beside it."""
    for metric, outcomes in result.outcomes.items():
        rule = result.rules[metric]
        for item, outcome in zip(items, outcomes):
            said = {"rule": rule, "passed": None if outcome is None else outcome.passed,
                    **({k: v for k, v in outcome.details.items() if k != "passed"} if outcome is not None else
                       {"reason": f"{rule} cannot check this record"})}
            if outcome is not None and outcome.passed:
                item.scores[metric] = top
                item.invalid.pop(metric, None)
                item.details[metric] = {"decided_by": "rule", "cascade": said}
            else:
                item.details[metric] = {**item.details.get(metric, {}), "decided_by": "judge", "cascade": said}


def count_line(category: str, metric: str, rule: str, per_model: Mapping[str, tuple[int, int]]) -> str:
    """`closed_qa GPT/correctness: 40 items, 31 decided by ExactMatch, 9 to the judge: 31 calls saved`
    (`per_model`: model -> (items, decided); named per model when there are several)."""
    n = sum(v[0] for v in per_model.values())
    k = sum(v[1] for v in per_model.values())
    each = (" (" + ", ".join(f"{m} {d} of {t}" for m, (t, d) in per_model.items()) + ")") if len(per_model) > 1 else ""
    return (f"{category} GPT/{metric}: {n} items, {k} decided by {rule}{each}, {n - k} to the judge: "
            f"{k} call{'s' if k != 1 else ''} saved")
