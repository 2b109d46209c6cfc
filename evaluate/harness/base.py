"""What every harness reader returns: one file's models, each as records of this tool's own shape.

A harness (Inspect AI, lm-evaluation-harness, promptfoo) generates and scores answers in its own
format. Its reader turns one output file into a `HarnessFile`: the harness's name and version, the
task, and per model (a promptfoo file may hold several providers) the records, one per sample (per
sample and epoch where the log has several epochs), with ids the harness gave them, so that two
models' files pair by item. Each record carries the harness's own per-sample scores in
`Record.extra["harness"]` (a `HarnessScores`): the `Harness` family (evaluate.families.harness) reads
them there, with no judge call.

Score values are read as the harness documents them: numbers and booleans as they are; Inspect's
letter grades C (correct) 1, I (incorrect) 0, P (partial) 0.5, N (no answer) 0, as its
`value_to_float` reads them. A value that is none of these is not guessed: the sample's score is
invalid, with the value as its raw text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.records import Record

HARNESS_KEY = "harness"  # Record.extra[HARNESS_KEY]: the sample's HarnessScores
LETTER_GRADES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # Inspect's CORRECT, INCORRECT, PARTIAL, NOANSWER
WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


@dataclass
class HarnessScores:
    """One sample's scores as its harness gave them: `scores` (name -> value), `invalid` (name -> why,
    with the raw value), `details` (name -> what the scorer said: its answer, explanation, reason)."""

    sample: str  # the harness's own sample id (Inspect's id, lm-eval's doc_id, promptfoo's test index)
    epoch: int | None = None  # Inspect's epoch, where the log has several
    scores: dict[str, float] = field(default_factory=dict)
    invalid: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (reason, raw)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    fingerprint: str = ""  # what the model was asked (its input, document or test variables): pairs are checked on it
    origin: "HarnessFile | None" = field(default=None, repr=False, compare=False)  # the file it was read from


@dataclass
class HarnessFile:
    """One harness output file, read: its models' records and how its scores were made."""

    path: Path
    format: str  # the `format:` name: inspect, lm-eval, promptfoo
    harness: str  # the harness's own name, as a signature states it: inspect_ai, lm-eval, promptfoo
    version: str  # the harness version that wrote the file ("unknown" where the file does not say)
    task: str  # the task (Inspect's task, lm-eval's task, promptfoo's description): the records' category
    models: dict[str, list[Record]]  # model name -> its records, in file order
    epochs: int = 1
    scorers: dict[str, dict[str, Any]] = field(default_factory=dict)  # score name -> its options (the signature's)
    notes: list[str] = field(default_factory=list)  # what the reader left out, and why (said in the plan)

    def __post_init__(self) -> None:
        for records in self.models.values():  # each sample knows its file: the family's signature names it
            for rec in records:
                hs = scores_of(rec)
                if hs is not None:
                    hs.origin = self

    def options(self, score: str) -> dict[str, Any]:
        """How `score` was made, as the file says (a dict score's key `match.x`: its scorer's `match`)."""
        for name in (score, score.split(".", 1)[0], score.split(":", 1)[0]):
            if name in self.scorers:
                return self.scorers[name]
        return {}

    def describe(self, how: str) -> str:
        """One line for the plan: what the file is, how its format was known, what it holds."""
        n = max((len(v) for v in self.models.values()), default=0)
        per = f"{n // self.epochs} samples x {self.epochs} epochs" if self.epochs > 1 else f"{n} samples"
        models = ", ".join(self.models)
        scores = ", ".join(self.scorers) or "none"
        line = (f"answers: {self.path}: {self.harness} {self.version} ({self.format}, {how}); task {self.task!r}; "
                f"model{'s' if len(self.models) > 1 else ''} {models}; {per}; Harness scores: {scores}")
        return "; ".join([line, *self.notes])


def scores_of(record: Record) -> HarnessScores | None:
    """The harness scores a record carries (None: not read from a harness file)."""
    got = record.extra.get(HARNESS_KEY)
    return got if isinstance(got, HarnessScores) else None


def score_value(value: Any) -> tuple[float | None, str]:
    """A harness score value as a number, or (None, why) when it is not one."""
    if isinstance(value, bool):
        return (1.0 if value else 0.0), ""
    if isinstance(value, (int, float)):
        return (float(value), "") if math.isfinite(value) else (None, f"the value {value!r} is not finite")
    if isinstance(value, str):
        text = value.strip()
        if text in LETTER_GRADES:
            return LETTER_GRADES[text], ""
        if text.lower() in WORDS:
            return WORDS[text.lower()], ""
        try:
            number = float(text)
        except ValueError:
            return None, (f"the value {value!r} is not a score: expected a number, true/false, yes/no or one of "
                          "Inspect's grades C, I, P, N")
        return (number, "") if math.isfinite(number) else (None, f"the value {value!r} is not finite")
    if value is None:
        return None, "no value"
    return None, f"a {type(value).__name__} value, not one score"


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [c.get("text") if isinstance(c, dict) else str(c) for c in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)
