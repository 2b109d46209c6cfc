"""What every rule check shares (ExactMatch, Contains, NotContains, Regex, JSON, Length).

A rule check is an assertion about one answer: it passes (1) or fails (0), and the item's details
say why (`passed`, `reason`, and what the check found: the missing string, the JSON error's path).
Its options are a dataclass (`Options`), checked key by key when the config loads, with key paths
(`metric_options.Regex.patterns.coding`) and did-you-mean; a check that cannot work as configured
(a pattern that does not compile, a schema file that is missing) is refused then, not at scoring.

Per model the category value is the pass rate, with a 95% Wilson interval (`stats.intervals`); two
models are compared by McNemar's exact test on the items one passed and the other failed
(`stats.mcnemar`). Both follow from the signature's `outcome: pass/fail` (`core.scores.PASS_FAIL`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import fields
from typing import Any, ClassVar, Sequence

from ..core.errors import ConfigError, InputError
from ..core.options import as_dict, parse_options
from ..core.registry import suggest
from ..core.scores import PASS_FAIL
from .base import Metric, MetricInput
from .text import LANGUAGES

NORMALISATIONS = ("nfkc", "case", "whitespace", "punctuation", "articles")
NORMALISATION_TEXT = {
    "nfkc": "Unicode NFKC (full-width letters and digits, ligatures, compatibility forms folded)",
    "case": "case folded (str.casefold)",
    "whitespace": "whitespace trimmed and runs collapsed to one space (cn: all whitespace removed)",
    "punctuation": "Unicode punctuation removed (ASCII and CJK: ，。！？ included; en: replaced by a space)",
    "articles": "English articles a / an / the removed as words",
}
_ARTICLES = re.compile(r"\b(?:a|an|the)\b", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


def normalize(text: str, steps: Sequence[str], language: str) -> str:
    """`text` under the named normalisations, always applied in the order of NORMALISATIONS (so the
    list's order in a config does not matter). Chinese is never split into words: whitespace is
    removed there, since Chinese writes none between words."""
    if "nfkc" in steps:
        text = unicodedata.normalize("NFKC", text)
    if "case" in steps:
        text = text.casefold()
    if "punctuation" in steps:  # English: a space, so "Lisbon,Porto" and "Lisbon, Porto" agree; Chinese: nothing
        gap = " " if language == "en" else ""
        text = "".join(gap if unicodedata.category(ch).startswith("P") else ch for ch in text)
    if "articles" in steps:
        text = _ARTICLES.sub(" ", text)
    if "whitespace" in steps:
        text = _SPACES.sub("", text) if language == "cn" else _SPACES.sub(" ", text).strip()
    return text


def normalisation_problems(steps: Sequence[str], key: str = "normalize") -> list[tuple[str, str]]:
    """Unknown names in a `normalize` list, each with the closest known one."""
    out = []
    for i, step in enumerate(steps):
        if step not in NORMALISATIONS:
            out.append((f"{key}[{i}]", f'unknown normalisation "{step}"{suggest(step, list(NORMALISATIONS))} '
                                       f'(known: {", ".join(NORMALISATIONS)})'))
    return out


def normalisation_text(steps: Sequence[str]) -> str:
    return "; ".join(NORMALISATION_TEXT[s] for s in NORMALISATIONS if s in steps) or "none (compared as written)"


def quote(text: str, limit: int = 80) -> str:
    """A piece of an answer as details keep it: cut to `limit` characters (a reason never holds a whole essay)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


class RuleCheck(Metric):
    """Base of the rule checks: typed options, 0/1 per item with its reason, a pass-rate signature.

    Subclasses set `name`, `Options` (a dataclass of `core.options.option` fields) and implement
    `check(item) -> (passed, details)`; `setup()` may return further problems (key, message) found
    while preparing (compiling patterns, reading a schema file).
    """

    Options: ClassVar[type]
    needs_reference: ClassVar[bool] = False
    path_options: ClassVar[tuple[str, ...]] = ()  # options naming files, resolved against the config's folder

    def __init__(self, language: str = "en", **options: Any):
        where = f"metric_options.{self.name}"
        if language not in LANGUAGES:
            raise InputError(f'{self.name}: unknown language "{language}" (expected one of {", ".join(LANGUAGES)})')
        self.opts, problems = parse_options(self.Options, options, where)
        if not problems:
            problems = [f"{where}.{key}: {msg}" if key else f"{where}: {msg}" for key, msg in self.setup()]
        if problems:
            raise ConfigError(problems)
        super().__init__(language, **as_dict(self.opts))

    def setup(self) -> list[tuple[str, str]]:
        return []

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    def score_details(self, items: Sequence[MetricInput]) -> tuple[list[dict[str, float]], list[dict[str, Any]]]:
        scores, details = [], []
        for item in items:
            passed, why = self.check(item)
            scores.append({self.name: 1.0 if passed else 0.0})
            details.append({"passed": passed, **why})
        return scores, details

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        return self.score_details(items)[0]

    def describe_options(self) -> dict[str, Any]:
        """The options as the signature states them (override to replace a file path by its hash)."""
        out = {f.name: getattr(self.opts, f.name) for f in fields(self.opts)}
        if isinstance(out.get("normalize"), list):  # applied in one fixed order, so stated in it
            out["normalize"] = [s for s in NORMALISATIONS if s in out["normalize"]]
        return out

    def signature(self) -> dict[str, Any]:
        sig: dict[str, Any] = {"metric": self.name, "language": self.language, "check": type(self).__doc__.split("\n")[0],
                               "options": self.describe_options(), "outcome": PASS_FAIL, "scale": "0-1",
                               "library": type(self).__module__, "refs": "none (the answer alone)",
                               "aggregate": "mean of items (the pass rate); 95% Wilson interval"}
        opts = ",".join(f"{k}={v}" for k, v in sig["options"].items() if v not in (None, [], {}))
        sig["text"] = f"{self.name}|language:{self.language}|{opts}|outcome:{PASS_FAIL}"
        return sig
