"""ExactMatch: the answer equals the target (any of the targets), after named normalisations.

Chinese is compared as a whole string, never split into words; `whitespace` there removes all
whitespace (Chinese writes none between words). The reason names the target that matched, or the
first character where the normalised answer leaves the closest target.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..core.options import option
from .base import METRICS, MetricInput
from .rule import RuleCheck, normalisation_problems, normalisation_text, normalize, quote


@dataclass
class ExactMatchOptions:
    normalize: list[str] = option(["whitespace"], "normalisations applied to answer and target: nfkc, case, "
                                  "whitespace, punctuation, articles")

    def problems(self) -> list[tuple[str, str]]:
        return normalisation_problems(self.normalize)


@METRICS.register("ExactMatch", "Exact Match", "EM")
class ExactMatch(RuleCheck):
    """The answer equals a target after normalisation."""

    name = "ExactMatch"
    sub_scores = ("ExactMatch",)
    Options = ExactMatchOptions
    needs_reference = True

    def check(self, item: MetricInput) -> tuple[bool, dict[str, Any]]:
        steps = self.opts.normalize
        answer = normalize(item.output, steps, self.language)
        targets = [normalize(t, steps, self.language) for t in item.references if isinstance(t, str)]
        for i, target in enumerate(targets):
            if answer == target:
                return True, {"reason": f"equals target {i + 1} of {len(targets)}"}
        if not answer:
            return False, {"reason": "empty answer", "answer": ""}
        closest = max(targets, key=lambda t: len(os.path.commonprefix([answer, t])), default="")
        at = len(os.path.commonprefix([answer, closest]))
        return False, {"reason": f"differs from every target ({len(targets)}); from the closest, at character {at + 1}",
                       "answer": quote(answer, 120), "closest_target": quote(closest, 120)}

    def signature(self) -> dict[str, Any]:
        return {**super().signature(), "normalisation": normalisation_text(self.opts.normalize),
                "tokenizer": "none (whole strings compared; Chinese never split into words)",
                "refs": "multi: passes when it equals any target"}
