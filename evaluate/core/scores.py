"""What an evaluator family hands back for one item: scores, invalid entries, details.

A score that could not be made (a judge reply that does not parse, a failed call) is an
`Invalid` with its reason and the raw text; it is counted, shown, and never averaged in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Invalid:
    reason: str
    raw: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "raw": self.raw}


@dataclass
class ItemScores:
    """One item's results from one evaluator family. Keys are metric names local to the family
    ("BLEU-1", "relevance", "summarization-fluency"); the runner prefixes the family name."""

    scores: dict[str, float] = field(default_factory=dict)
    invalid: dict[str, Invalid] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: "ItemScores") -> None:
        self.scores.update(other.scores)
        self.invalid.update(other.invalid)
        self.details.update(other.details)
