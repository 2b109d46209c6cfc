"""Length: the answer's length is within bounds (both inclusive), in characters, words or tokens.

- characters: Unicode code points of the answer with leading and trailing whitespace stripped
  (a Chinese character is one);
- words: `text.words` (English: word tokens without punctuation; Chinese: jieba's words);
- tokens: o200k_base tokens (GPT-4o's encoding) from the `bpe-openai` package, which ships the
  vocabulary (no download); without that package, `unit: tokens` is refused when the config loads.
The reason gives the length and the bound it broke.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from ..core.options import option
from .base import METRICS, MetricInput
from .common import library_version
from .rule import RuleCheck
from .text import cjk_rule, ensure_jieba, script_language, words, words_description

TOKEN_PACKAGE = "bpe-openai"


@functools.lru_cache(maxsize=1)
def _encoder() -> Any:
    import bpe_openai  # type: ignore

    return bpe_openai.get_encoding("o200k_base")


@dataclass
class LengthOptions:
    unit: Literal["characters", "words", "tokens"] = option("words", "what is counted")
    min: int | None = option(None, "the smallest length that passes (inclusive)", min=0)
    max: int | None = option(None, "the largest length that passes (inclusive)", min=0)

    def problems(self) -> list[tuple[str, str]]:
        if self.min is None and self.max is None:
            return [("", "give `min`, `max` or both (the bounds a length must stay within)")]
        if self.min is not None and self.max is not None and self.min > self.max:
            return [("min", f"{self.min} is above max {self.max}: no answer could pass")]
        return []


@METRICS.register("Length")
class Length(RuleCheck):
    """The answer's length (characters, words or tokens) is within [min, max]."""

    name = "Length"
    sub_scores = ("Length",)
    Options = LengthOptions

    def setup(self) -> list[tuple[str, str]]:
        if self.opts.unit == "tokens":
            try:
                _encoder()
            except ImportError:
                return [("unit", f"tokens need the {TOKEN_PACKAGE} package (o200k_base without a download): "
                                 f"pip install {TOKEN_PACKAGE}==0.1.4, or count characters or words")]
        return []

    def length(self, text: str) -> int:
        if self.opts.unit == "characters":
            return len(text.strip())
        if self.opts.unit == "words":
            lang = script_language(self.language, text)  # CJK text under en: jieba words, as cn counts them
            if lang == "cn":
                ensure_jieba()
            return len(words(text, lang))
        return len(_encoder().encode(text))

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        n, lo, hi = self.length(item.output), self.opts.min, self.opts.max
        unit = self.opts.unit
        if lo is not None and n < lo:
            return False, {"reason": f"{n} {unit}, below the minimum {lo}", "length": n}
        if hi is not None and n > hi:
            return False, {"reason": f"{n} {unit}, above the maximum {hi}", "length": n}
        return True, {"reason": f"{n} {unit}, within bounds", "length": n}

    def signature(self) -> dict[str, Any]:
        tok = {"characters": "Unicode code points, outer whitespace stripped",
               "words": words_description(self.language),
               "tokens": f"o200k_base ({library_version(TOKEN_PACKAGE)})"}[self.opts.unit]
        sig = {**super().signature(), "tokenizer": tok}
        if self.opts.unit == "words" and self.language == "en":
            sig["cjk"] = cjk_rule(words_description("cn"), "answer")
        return sig
