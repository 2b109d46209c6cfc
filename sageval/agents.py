"""Talking to a judge: JSON replies with bounded, error-quoting retries, and weighted scores.

Every item's request goes out in one `complete_many` batch per round (so a backend can batch or
run them concurrently); only the replies that failed the schema are asked again, with the
problems quoted back in a follow-up turn.

Probability-weighted scores (G-Eval): when the backend gives log-probabilities, each score
aspect gets a second, one-token request ("reply with one digit 1-5") and the score is
sum(i * p(i)) over the tokens "1".."5", renormalised. A separate request, rather than reading
the digit's position inside the JSON reply, because it does not depend on how the backend
tokenised the reply or on the digit being among the returned top tokens at that position,
and costs one forward pass. When less than `min_mass` of the probability falls on the
digits, the weighted score means little and the score stated in the JSON reply is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from evaluate.backends.base import Backend, Completion, JudgeRequest
from evaluate.core.expected import expected_score

from .aspects import SCORE_MAX, SCORE_MIN
from .parsing import REPLY, ParsedReply, close_cut_reply
from .prompts import Prompts, fill, retry_request


@dataclass
class Attempt:
    raw: str
    problems: dict[str, str]
    closed: bool = False  # cut at the token limit; parsed after `close_cut_reply` closed it


@dataclass
class Exchange:
    """One agent's conversation about one item: every attempt, and the reply kept."""

    attempts: list[Attempt] = field(default_factory=list)
    best: ParsedReply | None = None
    best_index: int | None = None
    backend_error: str | None = None

    @property
    def raw(self) -> str:
        """The raw text of the kept reply (the last one when none parsed)."""
        if self.best_index is not None:
            return self.attempts[self.best_index].raw
        return self.attempts[-1].raw if self.attempts else ""

    @property
    def closed(self) -> bool:
        """The kept reply was cut at the token limit and closed after its last full sentence."""
        return self.best_index is not None and self.attempts[self.best_index].closed

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)


Progress = Callable[[str, int, int], None]  # (stage, done, total) after each completion


def _counter(progress: Progress | None, stage: str, total: int) -> Callable[[Completion], None] | None:
    if progress is None:
        return None
    done = [0]

    def tick(_: Completion) -> None:
        done[0] += 1
        progress(stage, done[0], total)

    return tick


CUT_ECHO_CHARS = 300  # how much of a reply cut at max_tokens a retry shows back to the judge


def ask_json(backend: Backend, requests: Sequence[JudgeRequest], parse: Callable[[str], ParsedReply],
             prompts: Prompts, agent: str, max_retries: int, progress: Progress | None = None) -> list[Exchange]:
    """Send every request; re-ask (at most `max_retries` times) those whose reply fails `parse`.

    The reply kept is the attempt with the most valid aspects (the later one on a tie), so a
    retry that makes things worse never loses what an earlier reply got right. A reply cut at
    the token limit is first closed after its last complete sentence (`close_cut_reply`); when
    that gives every aspect, it is kept without a retry (small judges run on in a reason after
    giving the score, and a retry tends to run on the same way).
    """
    exchanges = [Exchange() for _ in requests]
    current = list(requests)
    pending = list(range(len(requests)))
    for round_ in range(max_retries + 1):
        if not pending:
            break
        stage = agent if round_ == 0 else f"{agent} retry {round_}"
        completions: list[Completion] = backend.complete_many(
            [current[i] for i in pending], progress=_counter(progress, stage, len(pending)))
        still: list[int] = []
        for i, comp in zip(pending, completions):
            ex = exchanges[i]
            if not comp.ok:
                # The backend already retried transient failures; asking again would not help.
                ex.backend_error = comp.error
                ex.attempts.append(Attempt(comp.text, {REPLY: f"backend error: {comp.error}"}))
                continue
            parsed, closed = parse(comp.text), False
            if not parsed.ok and comp.finish_reason == "length":
                text = close_cut_reply(comp.text)
                if text is not None:
                    repaired = parse(text)
                    if len(repaired.judgements) > len(parsed.judgements) or repaired.ok:
                        parsed, closed = repaired, True
            ex.attempts.append(Attempt(comp.text, dict(parsed.problems), closed))
            if ex.best is None or len(parsed.judgements) >= len(ex.best.judgements):
                ex.best, ex.best_index = parsed, len(ex.attempts) - 1
            if not parsed.ok and round_ < max_retries:
                reply, error = comp.text, parsed.error_message()
                if comp.finish_reason == "length":
                    # Cut at the token limit, usually by a reason that ran on (small judges loop).
                    # Echoing the whole run-on reply invites the same loop again: show its start only.
                    reply = reply[:CUT_ECHO_CHARS] + (" ..." if len(reply) > CUT_ECHO_CHARS else "")
                    cut = prompts.templates.get(f"{agent}.cut")  # optional in a user's prompts file
                    if cut:
                        error = fill(cut, {"max_tokens": current[i].max_tokens, "error": error})
                current[i] = retry_request(prompts, agent, current[i], reply, error)
                still.append(i)
        pending = still
    return exchanges




@dataclass(frozen=True)
class Weighted:
    score: float | None  # None when no probability fell on a digit
    mass: float  # probability on "1".."5" among the returned top tokens


def weighted_score(top_logprobs: dict[str, float]) -> Weighted:
    """The expected score over the digit tokens "1".."5" of one position (`evaluate.core.expected`)."""
    got = expected_score(top_logprobs, low=SCORE_MIN, high=SCORE_MAX, min_mass=0.0)
    return Weighted(got.value, got.mass)


def ask_weighted(backend: Backend, requests: Sequence[JudgeRequest], progress: Progress | None = None,
                 stage: str = "scores") -> list[Weighted | str]:
    """One weighted score per one-token request, or the reason there is none."""
    out: list[Weighted | str] = []
    for comp in backend.complete_many(list(requests), progress=_counter(progress, stage, len(requests))):
        if not comp.ok:
            out.append(f"backend error: {comp.error}")
        elif not comp.top_logprobs:
            out.append("the backend returned no log-probabilities")
        else:
            out.append(weighted_score(comp.top_logprobs[0]))
    return out
