"""The `Harness` family: another harness's own per-sample scores (Inspect's scorers, lm-eval's
metrics, promptfoo's assertions) as scores of this tool, so that the paired verdicts, gates, report
and viewer apply to them with no judge call.

The scores come with the answer files (evaluate.harness): a category whose records were read from an
Inspect log, an lm-eval samples file or a promptfoo results file lists the scores it wants by the
harness's names, `category: {addition: {Harness: [match, includes]}}`, checked at load against the
names the files hold (did-you-mean). A sample the harness could not score (its call failed, a value
that is not a number) is invalid with the harness's reason and raw value, never averaged in.

Each score's signature names the harness, its version, the task and the scorer (with its options),
so two models' scores made by different versions or scorers are "not comparable" rather than
silently compared. Its scale is [0, 1] when every model's values lie there (unbounded otherwise),
and a score whose values are all 0 or 1 is a pass/fail outcome: its interval is Wilson's and two
models are compared by McNemar's exact test, as a rule check's.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core.records import Record
from ..core.registry import suggest
from ..core.scores import PASS_FAIL, Invalid, ItemScores
from ..harness.base import HarnessScores, scores_of
from .base import Context, Family, FamilyOutput, register_family


def _category_scores(ctx: Context, category: str) -> list[HarnessScores | None]:
    return [scores_of(r) for s in ctx.sets for r in s.records if r.category == category]


@register_family
class HarnessFamily(Family):
    name = "Harness"
    scale = None  # each score states its own in its signature (from every model's values)

    def validate(self, ctx, category, names, where, *, used):
        if not used:
            return []
        found = _category_scores(ctx, category)
        if not any(found):
            return [f'{where}: category "{category}" holds no records read from another harness\'s file; Harness '
                    "scores come with an Inspect log, an lm-eval samples file or a promptfoo results file "
                    "(answers[].format: inspect, lm-eval or promptfoo)"]
        known = sorted({k for h in found if h for k in (*h.scores, *h.invalid) if k != "*"})
        return [f'{where}[{i}]: no Harness score "{name}" in category "{category}"{suggest(name, known)} (its files '
                f"give: {', '.join(known) or 'none'})" for i, name in enumerate(names) if name not in known]

    def score(self, ctx, category, names, records: Sequence[Record]) -> FamilyOutput:
        items = [self._item(r, names) for r in records]
        origin = next((h.origin for r in records if (h := scores_of(r)) is not None and h.origin), None)
        sigs = {name: self.signature(ctx, category, name, origin) for name in names}
        return FamilyOutput(items=items, signatures=sigs)

    @staticmethod
    def _item(record: Record, names: list[str]) -> ItemScores:
        hs = scores_of(record)
        it = ItemScores()
        for name in names:
            if hs is None:
                it.invalid[name] = Invalid(reason=f"record {record.id} was not read from a harness's file")
            elif name in hs.scores:
                it.scores[name] = hs.scores[name]
            elif name in hs.invalid or "*" in hs.invalid:
                reason, raw = hs.invalid.get(name) or hs.invalid["*"]
                it.invalid[name] = Invalid(reason=reason, raw=raw)
            else:
                it.invalid[name] = Invalid(reason=f"the harness gave sample {hs.sample} no {name} score")
            if hs is not None and hs.details.get(name):
                it.details[name] = {"harness": hs.details[name]}
        return it

    @staticmethod
    def signature(ctx: Context, category: str, name: str, origin: Any) -> dict[str, Any]:
        """How `name` was made (the harness, its version, the task, the scorer and its options) and its
        scale, read from every model's values of this category so that each model's signature is the same."""
        values = [h.scores[name] for h in _category_scores(ctx, category) if h is not None and name in h.scores]
        sig: dict[str, Any] = {"evaluator": "Harness", "harness": getattr(origin, "harness", None),
                               "version": getattr(origin, "version", None), "task": getattr(origin, "task", None),
                               "scorer": name, "options": origin.options(name) if origin is not None else {},
                               "scale": [0.0, 1.0] if values and all(0.0 <= v <= 1.0 for v in values) else None}
        if values and all(v in (0.0, 1.0) for v in values):
            sig["outcome"] = PASS_FAIL
        return sig
