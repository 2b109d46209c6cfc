"""The automatic-metric interface (sacrebleu-style: a few named steps, a signature).

A metric is registered under the name a config uses ("BLEU", "ROUGE", "F1 score") and produces
one or more *sub-scores* per item ("BLEU-1".."BLEU-4", "ROUGE-1", ...). Per-item scores are
computed in `score`; per-category aggregates in `aggregate` (default: the mean of the items,
a metric may override with a corpus-level statistic and say so in its signature).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from ..core.registry import Registry


@dataclass(frozen=True)
class MetricInput:
    """One item as a metric sees it. `references` may be empty for reference-free metrics."""

    output: str
    references: Sequence[str] = ()
    source: str = ""  # instruction + input, for metrics that look at the question
    category: str = ""  # the item's category, for checks configured per category (Regex patterns)


class Metric:
    """Base class. Subclasses set `name`, `sub_scores`, `needs_reference` and implement `score`."""

    name: ClassVar[str] = ""
    sub_scores: ClassVar[tuple[str, ...]] = ()
    needs_reference: ClassVar[bool] = True
    languages: ClassVar[tuple[str, ...]] = ("en", "cn")

    def __init__(self, language: str = "en", **options: Any):
        self.language = language
        self.options = options

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        """Per-item scores: one dict {sub_score: value} per input item, same order."""
        raise NotImplementedError

    def score_details(self, items: Sequence[MetricInput]) -> tuple[list[dict[str, float]], list[dict[str, Any]]]:
        """Per-item scores and, per item, what the score rests on (a rule check's reason: the missing string,
        the JSON error's path), kept in the item's details. Default: `score` and no details."""
        return self.score(items), [{} for _ in items]

    def check_category(self, category: str) -> list[str]:
        """Problems with using this metric in `category` (a per-category option that has no entry for it),
        found when the config loads. Default: none."""
        return []

    def aggregate(self, items: Sequence[MetricInput], per_item: Sequence[dict[str, float]]) -> dict[str, float]:
        """Category-level value per sub-score. Default: mean of the finite per-item values."""
        out: dict[str, float] = {}
        for key in self.sub_scores:
            vals = [s[key] for s in per_item if key in s and s[key] is not None and math.isfinite(s[key])]
            out[key] = sum(vals) / len(vals) if vals else float("nan")
        return out

    def signature(self) -> dict[str, Any]:
        """How the numbers were made: library and version, tokenizer, options, aggregation."""
        return {"metric": self.name, "language": self.language, **self.options}


METRICS: Registry[type[Metric]] = Registry("metric")
