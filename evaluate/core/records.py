"""The unit every evaluator scores: one model's answer to one question, or one model's side of a
conversation (several user turns, each with the model's reply)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TURN_MARK = "@turn"


def turn_key(name: str, k: int) -> str:
    """The score name of turn `k` of a conversation (`relevance@turn2`); `name` alone is the whole
    conversation. The "@" makes it a variant of `name` wherever scores are grouped (stats, report)."""
    return f"{name}{TURN_MARK}{k}"


def judge_key(name: str, judge: str) -> str:
    """The score name one judge of a panel gave (`correctness@gpt4o`; a turn: `correctness@gpt4o@turn2`,
    the turn mark last so that `@turnK` still ends every turn's key); `name` alone is the panel's. The
    "@" makes it a variant of `name`, as a turn's is: not a primary score unless a config names it."""
    base, mark, turn = name.rpartition(TURN_MARK)
    if mark and turn.isdigit():
        return f"{base}@{judge}{TURN_MARK}{turn}"
    return f"{name}@{judge}"


def split_judge_key(name: str) -> tuple[str, str | None]:
    """(the panel's score name, the judge) of a score name: `correctness@gpt4o@turn2` ->
    (`correctness@turn2`, "gpt4o"); a name without a judge -> (name, None). A judge's name never
    looks like a turn mark (`turnK`), which the config refuses."""
    base, mark, turn = name.rpartition(TURN_MARK)
    if not (mark and turn.isdigit()):
        base, turn = name, ""
    head, at, judge = base.rpartition("@")
    if not at or not judge or "/" in judge:
        return name, None
    return (f"{head}{TURN_MARK}{turn}" if turn else head), judge


@dataclass(frozen=True)
class Turn:
    """One round of a conversation: the user's message, the model's reply to it, and the reply's
    reference answers (empty when the turn has none)."""

    user: str
    assistant: str = ""
    references: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "assistant": self.assistant, "references": list(self.references)}


@dataclass(frozen=True)
class Record:
    """One answer record, ColossalAI's `{category, instruction, input, output, target, id}`.

    `id` is kept as a string (ColossalAI files use ints; both are accepted on load).
    `targets` holds the reference answers (a single `target` becomes a one-element tuple;
    an empty target becomes an empty tuple).

    A conversation has `turns` (one or more): then `output` is the last reply and `targets` the
    last reply's references, so whatever scores one answer sees the last turn; `instruction` is
    the setup shown before the first user turn (a role, a system message; may be empty) and
    `input` is empty. Evaluators that judge the conversation itself read `turns`.
    """

    id: str
    category: str
    instruction: str
    input: str = ""
    output: str = ""
    targets: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    turns: tuple[Turn, ...] = ()

    @property
    def question(self) -> str:
        """The question as a judge sees it: instruction, then the input on its own line if any.
        For a conversation: the last user turn (the message `output` replies to)."""
        if self.turns:
            return self.turns[-1].user
        return self.instruction if not self.input else f"{self.instruction}\n{self.input}"

    @property
    def target(self) -> str:
        """The first reference ('' when there is none)."""
        return self.targets[0] if self.targets else ""

    def user_turns(self) -> tuple[str, ...]:
        """The user's messages, in order (a one-turn record: its question)."""
        return tuple(t.user for t in self.turns) if self.turns else (self.question,)

    def answer_text(self) -> str:
        """Everything the model wrote, as one canonical string: the output, or for a conversation
        every reply, each tagged with its turn. Its hash says whether earlier scores still describe
        this answer (a changed earlier reply changes every later turn's judgment)."""
        if not self.turns:
            return self.output
        return "\n".join(f"[turn {k}]\n{t.assistant}" for k, t in enumerate(self.turns, 1))
