"""Regex: the answer matches a regular expression (Python `re`), one pattern per category.

`patterns` maps a category to its pattern; `pattern` is used for the categories it does not
name. A category scored with the check but without a pattern is refused when the config loads,
and so is a pattern that does not compile (naming its key path, `metric_options.Regex.patterns.X`).
`match: search` passes when the pattern matches anywhere; `full` when it matches the whole answer
(leading and trailing whitespace stripped first). The reason quotes what matched, or the pattern
that did not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ..core.options import option
from ..core.registry import suggest
from .base import METRICS, MetricInput
from .rule import RuleCheck, quote

FLAGS = {"ignorecase": re.IGNORECASE, "multiline": re.MULTILINE, "dotall": re.DOTALL}


@dataclass
class RegexOptions:
    pattern: str | None = option(None, "the pattern of every category `patterns` does not name")
    patterns: dict[str, str] = option({}, "category -> pattern")
    match: Literal["search", "full"] = option("search", "search: anywhere in the answer; full: the whole answer")
    flags: list[str] = option([], "ignorecase, multiline, dotall")

    def problems(self) -> list[tuple[str, str]]:
        out = [(f"flags[{i}]", f'unknown flag "{f}"{suggest(f, list(FLAGS))} (known: {", ".join(FLAGS)})')
               for i, f in enumerate(self.flags) if f not in FLAGS]
        if self.pattern is None and not self.patterns:
            out.append(("", "give `pattern` (every category) or `patterns` (category -> pattern)"))
        return out


@METRICS.register("Regex", "RegExp", "Pattern")
class Regex(RuleCheck):
    """The answer matches the category's regular expression."""

    name = "Regex"
    sub_scores = ("Regex",)
    Options = RegexOptions

    def setup(self) -> list[tuple[str, str]]:
        flags = 0
        for f in self.opts.flags:
            flags |= FLAGS[f]
        self.compiled: dict[str | None, re.Pattern[str]] = {}
        problems = []
        named = [(None, "pattern", self.opts.pattern)] + [(c, f"patterns.{c}", p) for c, p in self.opts.patterns.items()]
        for cat, key, text in named:
            if text is None:
                continue
            try:
                self.compiled[cat] = re.compile(text, flags)
            except re.error as exc:
                problems.append((key, f"pattern {text!r} does not compile: {exc}"))
        return problems

    def check_category(self, category: str) -> list[str]:
        if category in self.compiled or None in self.compiled:
            return []
        return [f"metric_options.Regex has no pattern for category {category!r} (patterns has: "
                f"{', '.join(self.opts.patterns) or 'none'}; `pattern` would cover every category)"]

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        rx = self.compiled.get(item.category) or self.compiled[None]
        text = item.output.strip() if self.opts.match == "full" else item.output
        m = rx.fullmatch(text) if self.opts.match == "full" else rx.search(text)
        if m:
            return True, {"reason": f"matched at character {m.start() + 1}", "matched": quote(m.group(0), 80),
                          "pattern": rx.pattern}
        how = "the whole answer does not match" if self.opts.match == "full" else "no match anywhere"
        return False, {"reason": how + (" (empty answer)" if not item.output.strip() else ""), "pattern": rx.pattern}

    def signature(self) -> dict[str, Any]:
        return {**super().signature(), "library": "Python re", "tokenizer": "none"}
