"""Which ratings and battles the judge is shown the reference answer for (`gpt_with_reference`).

A judge that checks correctness without the reference answer has to know the answer itself; a
small local judge often does not ("The capital of Australia is Sydney." and "... Canberra." scored
3.30 and 3.35 with the reference in the target file but not in the prompt). So the reference is
shown where it exists and helps, and the plan says plainly where it is not.

Settings (`gpt_with_reference` in the config, `--gpt_with_reference` sets true):

- ``auto`` (the default): per category and metric, the judge is shown the reference when every
  judged record of the category has one (every turn, for a conversation) and the prompt file's
  entry marks the metric as using one (`reference_metrics`: the project's prompts mark
  `correctness` where a reference settles it; an entry without that key, such as ColossalAI's,
  marks none). A category's battles are shown it when any of its rated metrics is.
- ``true``: every rating and battle of every category (ColossalAI's setting); a judged record
  without a reference is refused before any call.
- ``false``: never.

Why per category and not per record: the records of a category are aggregated into one mean and
compared between models; a mean over items judged partly with and partly without the reference
would be a mix of two measurements. The decision is run-wide (every model's records), so two
models are always judged the same way; each score's signature lists the categories where its
judge saw the reference (`with_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..core.records import Record

SETTINGS = ("auto", True, False)


def setting_text(setting: bool | str) -> str:
    return setting if isinstance(setting, str) else ("true" if setting else "false")


def has_reference(record: Record) -> bool:
    """A one-turn record: a non-empty target; a conversation: a reference for every turn."""
    if record.turns:
        return all(any(x.strip() for x in t.references) for t in record.turns)
    return any(t.strip() for t in record.targets)


@dataclass(frozen=True)
class CategoryReferences:
    """One category's decision: how many judged records have a reference, the metrics rated with it,
    the others with why not, and whether its battles are shown it."""

    category: str
    records: int
    with_reference: int
    shown: tuple[str, ...] = ()
    hidden: Mapping[str, str] = field(default_factory=dict)  # metric -> why the judge is not shown it
    battle: bool = False
    battle_why: str = ""


@dataclass(frozen=True)
class ReferenceUse:
    """The run's decision (see the module docstring); `rating` and `battle` answer the judges."""

    setting: bool | str
    categories: Mapping[str, CategoryReferences] = field(default_factory=dict)

    def rating(self, category: str, metric: str) -> bool:
        if self.setting is True or self.setting is False:
            return self.setting
        c = self.categories.get(category)
        return c is not None and metric in c.shown

    def battle(self, category: str) -> bool:
        if self.setting is True or self.setting is False:
            return self.setting
        c = self.categories.get(category)
        return c is not None and c.battle

    def rated_with(self, metric: str) -> list[str]:
        """The categories whose `metric` is rated with the reference (the signature's `with_reference`)."""
        return sorted(c for c, d in self.categories.items() if metric in d.shown)

    def battled_with(self) -> list[str]:
        return sorted(c for c, d in self.categories.items() if d.battle)

    def lines(self, battles: bool) -> list[dict[str, Any]]:
        """What the plan and the closing lines say: per category whose records have a reference, where
        the judge is shown it and where it is judged WITHOUT it (and why). Each line is a note
        `{"text", "scores"}`: the score keys it is about, so the closing lines show it beside them."""
        out: list[dict[str, Any]] = []
        for cat, d in self.categories.items():
            if not d.with_reference:
                continue
            head = (f"{cat}: {d.with_reference} of {d.records} records have a reference"
                    if d.with_reference < d.records else f"{cat}: {d.records} records have a reference")
            parts = []
            shown = [f"GPT/{m}" for m in d.shown] + (["the battle"] if battles and d.battle else [])
            if shown:
                parts.append("the judge is shown it for " + _join(shown))
            reasons: dict[str, list[str]] = {}
            for m, why in d.hidden.items():
                reasons.setdefault(why, []).append(f"GPT/{m}")
            if battles and not d.battle:
                reasons.setdefault(d.battle_why, []).append("the battle")
            for why, what in reasons.items():
                parts.append(f"{_join(what)} {'is' if len(what) == 1 else 'are'} judged WITHOUT it ({why})")
            out.append({"text": f"  {head}; " + "; ".join(parts), "scores": [f"GPT/{m}" for m in (*d.shown, *d.hidden)]})
        if out:
            out.insert(0, {"text": f"references (gpt_with_reference: {setting_text(self.setting)}):",
                           "scores": sorted({k for n in out for k in n["scores"]})})
        return out


def _join(xs: Sequence[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def decide(setting: bool | str, metrics: Mapping[str, Sequence[str]], records: Iterable[Record],
           why_not: Callable[[str, str], str | None] = lambda c, m: None) -> ReferenceUse:
    """The decision for `metrics` (category -> GPT metrics) over `records` (every model's: a record id
    has a reference when every model's record of it has one). `why_not(category, metric)`: None when
    the prompt file's entry marks the metric as using a reference, else why not (shown in the plan)."""
    have: dict[str, dict[str, bool]] = {}
    for r in records:
        if r.category in metrics:
            ids = have.setdefault(r.category, {})
            ids[r.id] = ids.get(r.id, True) and has_reference(r)
    cats: dict[str, CategoryReferences] = {}
    for cat, names in metrics.items():
        ids = have.get(cat, {})
        n, k = len(ids), sum(ids.values())
        shown: list[str] = []
        hidden: dict[str, str] = {}
        whole = ("gpt_with_reference: false" if setting is False else
                 f"gpt_with_reference: auto, and {n - k} of the {n} records have none"
                 if setting == "auto" and k < n else "")  # a reason for the whole category, if there is one
        for m in names:
            if setting is True:
                shown.append(m)
            elif whole:
                hidden[m] = whole
            elif (why := why_not(cat, m)) is not None:
                hidden[m] = why
            else:
                shown.append(m)
        battle = setting is True or (setting == "auto" and bool(shown))
        battle_why = whole or "gpt_with_reference: auto, and no rating of the category is shown it"
        cats[cat] = CategoryReferences(category=cat, records=n, with_reference=k, shown=tuple(shown), hidden=hidden,
                                       battle=battle, battle_why=battle_why)
    return ReferenceUse(setting=setting, categories=cats)
