"""Contains / NotContains: the answer holds (or avoids) given strings, or the target.

`strings` is a list for every category, or a mapping category -> list (a category the config
scores with the check but the mapping lacks is refused when the config loads); left out, the
item's targets are the strings. `mode` says how several strings combine:

- Contains, any: passes when at least one string is found; all: when every one is.
- NotContains, any: fails when any string is found; all: fails only when every one is.

Answer and strings go through the same named normalisations (ExactMatch's), so `case` makes the
check case-insensitive. Chinese is matched as a substring, never split into words. The reason
names the strings missing (Contains) or found (NotContains).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

from ..core.options import option
from .base import METRICS, MetricInput
from .rule import RuleCheck, normalisation_problems, normalisation_text, normalize, quote


@dataclass
class ContainsOptions:
    strings: Union[list[str], dict[str, list[str]], None] = option(
        None, "the strings to look for: a list, or category -> list; null: the item's targets")
    mode: Literal["any", "all"] = option("any", "how several strings combine (see the module doc)")
    normalize: list[str] = option(["whitespace"], "normalisations of answer and strings (as ExactMatch's)")

    def problems(self) -> list[tuple[str, str]]:
        out = normalisation_problems(self.normalize)
        lists = {"": self.strings} if isinstance(self.strings, list) else dict(self.strings or {})
        for cat, strings in lists.items():
            key = f"strings.{cat}" if cat else "strings"
            if not strings:
                out.append((key, "expected a non-empty list of strings (leave `strings` out to use the targets)"))
            out.extend((f"{key}[{i}]", "an empty string is in every answer; give a non-empty one")
                       for i, s in enumerate(strings) if not s.strip())
        return out


class _ContainsBase(RuleCheck):
    Options = ContainsOptions
    negate = False

    def setup(self) -> list[tuple[str, str]]:
        self.needs_reference = self.opts.strings is None  # the targets are the strings
        return []

    def check_category(self, category: str) -> list[str]:
        if isinstance(self.opts.strings, dict) and category not in self.opts.strings:
            known = ", ".join(self.opts.strings)
            return [f"metric_options.{self.name}.strings has no entry for category {category!r} (it has: {known})"]
        return []

    def _strings(self, item: MetricInput) -> list[str]:
        s = self.opts.strings
        if s is None:
            return [t for t in item.references if isinstance(t, str) and t.strip()]
        return list(s.get(item.category, [])) if isinstance(s, dict) else list(s)

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        steps, lang = self.opts.normalize, self.language
        answer = normalize(item.output, steps, lang)
        wanted = self._strings(item)
        found = [w for w in wanted if normalize(w, steps, lang) in answer]
        missing = [w for w in wanted if w not in found]
        hit = bool(found) if self.opts.mode == "any" else not missing
        short = lambda xs: [quote(x, 60) for x in xs]  # noqa: E731
        if not self.negate:
            if hit:
                return True, {"reason": f"found {len(found)} of {len(wanted)}", "found": short(found)}
            what = "none of" if self.opts.mode == "any" else f"{len(missing)} of {len(wanted)} missing:"
            return False, {"reason": f"{what} {', '.join(repr(quote(m, 60)) for m in missing)}"
                           + (" (empty answer)" if not answer else ""), "missing": short(missing)}
        if hit:
            return False, {"reason": f"found {', '.join(repr(quote(f, 60)) for f in found)}", "found": short(found)}
        return True, {"reason": f"none of the {len(wanted)} found" if self.opts.mode == "any"
                      else f"{len(found)} of {len(wanted)} found, not all", "found": short(found)}

    def signature(self) -> dict[str, Any]:
        return {**super().signature(), "normalisation": normalisation_text(self.opts.normalize),
                "tokenizer": "none (substrings of the whole answer; Chinese never split into words)",
                "refs": "the item's targets" if self.opts.strings is None else "strings from the config"}


@METRICS.register("Contains")
class Contains(_ContainsBase):
    """The answer contains the strings (any or all)."""

    name = "Contains"
    sub_scores = ("Contains",)


@METRICS.register("NotContains", "Not Contains", "DoesNotContain")
class NotContains(_ContainsBase):
    """The answer does not contain the strings (fails on any, or only on all)."""

    name = "NotContains"
    sub_scores = ("NotContains",)
    negate = True
