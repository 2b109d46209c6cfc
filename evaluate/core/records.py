"""The unit every evaluator scores: one model's answer to one question."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Record:
    """One answer record, ColossalAI's `{category, instruction, input, output, target, id}`.

    `id` is kept as a string (ColossalAI files use ints; both are accepted on load).
    `targets` holds the reference answers (a single `target` becomes a one-element tuple;
    an empty target becomes an empty tuple).
    """

    id: str
    category: str
    instruction: str
    input: str = ""
    output: str = ""
    targets: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def question(self) -> str:
        """The question as a judge sees it: instruction, then the input on its own line if any."""
        return self.instruction if not self.input else f"{self.instruction}\n{self.input}"

    @property
    def target(self) -> str:
        """The first reference ('' when there is none)."""
        return self.targets[0] if self.targets else ""
