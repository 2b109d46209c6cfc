"""Distinct-1/2/3: how little an answer repeats itself (Li et al. 2016), per answer.

Distinct-n = unique n-grams / total n-grams of the answer's words (`text.words`: jieba words
for cn). Reference-free. An answer with fewer than n words has no n-grams and scores 0.0
for Distinct-n (an empty answer scores 0 everywhere): it shows no diversity, and a NaN would
silently drop it from the category mean.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

from .base import METRICS, MetricInput
from .common import LibraryMetric
from .text import cjk_rule, ensure_jieba, script_language, words, words_description

ORDERS = (1, 2, 3)


def distinct(tokens: Sequence[str], n: int) -> float:
    """Unique / total n-grams of one token list; 0.0 when there is no n-gram."""
    total = len(tokens) - n + 1
    if total <= 0:
        return 0.0
    return len(set(zip(*(tokens[i:] for i in range(n))))) / total


@dataclass(frozen=True)
class DistinctConfig:
    language: str


_KEYS = tuple((f"Distinct-{n}", n) for n in ORDERS)


def score_chunk(cfg: DistinctConfig, items: Sequence[MetricInput]) -> list[dict[str, float]]:
    out = []
    for item in items:
        toks = words(item.output, script_language(cfg.language, item.output))  # CJK under en: jieba words
        out.append({key: distinct(toks, n) for key, n in _KEYS})
    return out


@METRICS.register("Distinct", "Distinct-n")
class Distinct(LibraryMetric):
    """Distinct-1, -2, -3 of each answer, 0-1; category value: mean over answers."""

    name = "Distinct"
    sub_scores = tuple(f"Distinct-{n}" for n in ORDERS)
    needs_reference = False
    min_parallel_items = 5000  # ~60 us per answer: a fork (~0.05-0.1 s) pays off only for long lists

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        if any(script_language(self.language, it.output) == "cn" for it in items):
            ensure_jieba()
        return self.map_items(functools.partial(score_chunk, DistinctConfig(self.language)), items)

    def signature(self) -> dict[str, Any]:
        return self.describe(
            library="evaluate.metrics.distinct",
            tokenizer=words_description(self.language),
            **({"cjk": cjk_rule(words_description("cn"), "answer")} if self.language == "en" else {}),
            empty="answer shorter than n words: 0.0",
            refs="none (reference-free)",
            aggregate="mean of items",
            scale="0-1",
        )
