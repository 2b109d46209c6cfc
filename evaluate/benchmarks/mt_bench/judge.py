"""MT-bench's judging, as FastChat's gen_judgment.py does it: which prompt judges which turn, the exact
messages the judge receives, and how its reply is read.

- Prompt kinds (`make_judge_single` / `make_judge_pairwise`): turn 1 with `single-v1` / `pair-v2`,
  turn 2 with the `-multi-turn` variants, and the reference-guided `single-math-v1` /
  `pair-math-v1` (and their multi-turn variants) for the categories in NEED_REF_CATS.
- Messages: the prompt's `system_prompt` as a system message (none when it is empty), then the
  `prompt_template` filled with `str.format` as the user message; temperature 0, 2048 tokens. This is
  FastChat's path for an OpenAI-API judge (`conv.to_openai_api_messages()`); its Anthropic path,
  which folds a pair prompt's system prompt into the user turn, is not reproduced.
- Replies: `[[rating]]` through FastChat's two regexes (`[[7]]`, else `[7]`), the first match, read
  with `ast.literal_eval`; `[[A]]` by substring, in FastChat's order A, B, C. An unreadable reply is
  *invalid* here (score None, with its raw text); FastChat's files get -1 / "error" for it. A rating
  outside the scale its prompt states ("on a scale of 1 to 10") is invalid here too, though FastChat
  reads it and averages it: the judgment file keeps FastChat's reading (`fastchat_score`), so its
  show_result.py still reads the file as it always did, and the tables say where the two differ.
  A reply that ended in a loop (the judge repeated a block until the token limit, or the local judge
  stopped it there: `judges.parsing.loop_in`) is read up to the end of the loop's first copy (any
  verdict in the loop is there too); without a verdict it is invalid with the reason "the judge
  repeated itself: ...", its raw text kept.
- Pairs are judged in both orders; FastChat's show_result.py counts a pair whose two games
  disagree, or whose first game is a tie, as a tie, and drops a pair where either game is an error.

Everything here takes a backend and returns records; writing FastChat's files is files.py's.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Sequence

from ...backends.base import Backend, Completion, JudgeRequest
from ...core.repetition import Repetition
from ...judges.parsing import loop_in, repetition_reason
from .data import Conversation, JudgePrompt, Question, QuestionId

MAX_TOKENS = 2048  # FastChat's chat_completion_openai(..., temperature=0, max_tokens=2048)
TEMPERATURE = 0.0
TIE_DELTA = 0.1  # FastChat: two scores closer than this are a tie ([[rating_a,rating_b]] format)

# (mode, needs a reference, turn) -> FastChat's prompt name
PROMPT_NAMES = {
    ("single", False, 1): "single-v1", ("single", True, 1): "single-math-v1",
    ("single", False, 2): "single-v1-multi-turn", ("single", True, 2): "single-math-v1-multi-turn",
    ("pairwise", False, 1): "pair-v2", ("pairwise", True, 1): "pair-math-v1",
    ("pairwise", False, 2): "pair-v2-multi-turn", ("pairwise", True, 2): "pair-math-v1-multi-turn",
}


def template_fields_for(kind: str, ref: bool, turn: int) -> set[str]:
    """The names FastChat's run_judge_single / run_judge_pair pass to `format` for this prompt."""
    if kind == "single":
        out = {"question", "answer"} if turn == 1 else {"question_1", "question_2", "answer_1", "answer_2"}
    else:
        out = ({"question", "answer_a", "answer_b"} if turn == 1 else
               {"question_1", "question_2", "answer_a_1", "answer_b_1", "answer_a_2", "answer_b_2"})
    if ref:
        out |= {"ref_answer_1"} | ({"ref_answer_2"} if turn == 2 else set())
    return out


@dataclass(frozen=True)
class SingleMatch:
    question: Question
    model: str
    answer: Conversation
    prompt: JudgePrompt
    turn: int  # 1 or 2 (FastChat's multi_turn)
    reference: Conversation | None = None


@dataclass(frozen=True)
class PairMatch:
    question: Question
    model_1: str
    model_2: str
    answer_1: Conversation
    answer_2: Conversation
    prompt: JudgePrompt
    turn: int
    reference: Conversation | None = None


def _turns_judged(q: Question) -> list[int]:
    """FastChat judges turn 1 of every question and turn 2 of those with exactly two turns."""
    return [1, 2] if len(q.turns) == 2 else [1]


def _ordered(questions: Sequence[Question]) -> list[tuple[Question, int]]:
    """gen_judgment.py's order: general turn 1, reference turn 1, general turn 2, reference turn 2."""
    out = []
    for turn in (1, 2):
        for ref in (False, True):
            out += [(q, turn) for q in questions if q.needs_reference == ref and turn in _turns_judged(q)]
    return out


def single_matches(questions: Sequence[Question], answers: dict[str, dict[QuestionId, Conversation]],
                   prompts: dict[str, JudgePrompt], refs: dict[QuestionId, Conversation]) -> list[SingleMatch]:
    """One match per model, question and judged turn (FastChat's make_match_single)."""
    out = []
    for q, turn in _ordered(questions):
        prompt = prompts[PROMPT_NAMES[("single", q.needs_reference, turn)]]
        ref = refs.get(q.question_id) if q.needs_reference else None
        for model, by_id in answers.items():
            out.append(SingleMatch(q, model, by_id[q.question_id], prompt, turn, ref))
    return out


def pair_matches(questions: Sequence[Question], answers: dict[str, dict[QuestionId, Conversation]],
                 prompts: dict[str, JudgePrompt], refs: dict[QuestionId, Conversation],
                 baseline: str | None) -> list[PairMatch]:
    """Against `baseline`: (model, baseline) for every other model (FastChat's make_match); without
    one: (models[i], models[j]) for i < j in the order given (make_match_all_pairs)."""
    models = list(answers)
    if baseline is not None:
        pairs = [(m, baseline) for m in models if m != baseline]
    else:
        pairs = [(models[i], models[j]) for i in range(len(models)) for j in range(i + 1, len(models))]
    out = []
    for q, turn in _ordered(questions):
        prompt = prompts[PROMPT_NAMES[("pairwise", q.needs_reference, turn)]]
        ref = refs.get(q.question_id) if q.needs_reference else None
        for m1, m2 in pairs:
            out.append(PairMatch(q, m1, m2, answers[m1][q.question_id], answers[m2][q.question_id], prompt, turn, ref))
    return out


# ------------------------------------------------------------------ rendering
def _ref_kwargs(ref: Conversation | None, turn: int) -> dict[str, str]:
    if ref is None:
        return {}
    out = {"ref_answer_1": ref.turns[0]}
    if turn == 2:
        out["ref_answer_2"] = ref.turns[1]
    return out


def single_user_prompt(m: SingleMatch) -> str:
    q, a = m.question.turns, m.answer.turns
    if m.turn == 2:
        kw = dict(question_1=q[0], question_2=q[1], answer_1=a[0], answer_2=a[1])
    else:
        kw = dict(question=q[0], answer=a[0])
    return m.prompt.prompt_template.format(**kw, **_ref_kwargs(m.reference, m.turn))


def pair_user_prompt(m: PairMatch, swapped: bool) -> str:
    """Game 1 shows model_1 as Assistant A; game 2 (`swapped`) shows model_2 as A."""
    q = m.question.turns
    a, b = (m.answer_2.turns, m.answer_1.turns) if swapped else (m.answer_1.turns, m.answer_2.turns)
    if m.turn == 2:
        kw = dict(question_1=q[0], question_2=q[1], answer_a_1=a[0], answer_b_1=b[0], answer_a_2=a[1],
                  answer_b_2=b[1])
    else:
        kw = dict(question=q[0], answer_a=a[0], answer_b=b[0])
    return m.prompt.prompt_template.format(**kw, **_ref_kwargs(m.reference, m.turn))


def request(prompt: JudgePrompt, user_prompt: str) -> JudgeRequest:
    return JudgeRequest.chat(prompt.system_prompt, user_prompt, max_tokens=MAX_TOKENS, temperature=TEMPERATURE)


# ------------------------------------------------------------------ parsing
ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
TWO_SCORE = re.compile(r"\[\[(\d+\.?\d*),\s?(\d+\.?\d*)\]\]")
TWO_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*),\s?(\d+\.?\d*)\]")


def _number(text: str) -> float | None:
    """FastChat's ast.literal_eval of the matched digits; "07" (a SyntaxError there) is unreadable."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, (int, float)) else None


SCALE = (1, 10)  # FastChat's rating prompts: "rate the response on a scale of 1 to 10"
_SCALE_TEXT = re.compile(r"on a scale of (\d+) to (\d+)")


def prompt_scale(prompt: JudgePrompt) -> tuple[float, float]:
    """The rating scale the prompt states to the judge (FastChat's: 1 to 10)."""
    m = _SCALE_TEXT.search(prompt.system_prompt + "\n" + prompt.prompt_template)
    return (float(m.group(1)), float(m.group(2))) if m else SCALE


def fastchat_rating(text: str) -> tuple[float | None, str]:
    """What FastChat's run_judge_single reads from the reply: (score, "") or (None, why)."""
    match = ONE_SCORE.search(text) or ONE_SCORE_BACKUP.search(text)
    if not match:
        return None, "no [[rating]] in the reply"
    value = _number(match.group(1))
    return (value, "") if value is not None else (None, f"unreadable rating {match.group(1)!r}")


def outside(value: float, scale: tuple[float, float]) -> str:
    """Why `value` is not a rating on `scale` ("" when it is one)."""
    lo, hi = scale
    return "" if lo <= value <= hi else (f"rating {value:g} is outside the prompt's scale {lo:g}-{hi:g} "
                                         f"(FastChat's parser reads it as {value:g} and averages it)")


def parse_rating(text: str, scale: tuple[float, float] = SCALE) -> tuple[float | None, str]:
    """(score, "") or (None, why): FastChat's reading, and a rating outside `scale` is invalid."""
    value, why = fastchat_rating(text)
    if value is None:
        return None, why
    why = outside(value, scale)
    return (None, why) if why else (value, "")


def parse_verdict(text: str, output_format: str) -> tuple[str | None, str]:
    """("A" | "B" | "tie", "") or (None, why), for the A/B order the judge was shown."""
    if output_format == "[[A]]":
        for tag, winner in (("[[A]]", "A"), ("[[B]]", "B"), ("[[C]]", "tie")):
            if tag in text:
                return winner, ""
        return None, "no [[A]], [[B]] or [[C]] in the reply"
    match = TWO_SCORE.search(text) or TWO_SCORE_BACKUP.search(text)
    if not match:
        return None, "no [[rating_a,rating_b]] in the reply"
    a, b = _number(match.group(1)), _number(match.group(2))
    if a is None or b is None:
        return None, f"unreadable ratings {match.group(0)!r}"
    return ("tie" if abs(a - b) <= TIE_DELTA else "A" if a > b else "B"), ""


# ------------------------------------------------------------------ records
@dataclass
class Game:
    """One judge call: what it was sent, what came back, what it means."""

    system_prompt: str
    user_prompt: str
    judgment: str = ""  # the raw reply
    error: str | None = None  # the call failed (transport); nothing to parse
    reason: str = ""  # why the reply is invalid, when it is

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class SingleJudgment:
    question_id: QuestionId
    category: str
    model: str
    turn: int
    prompt_name: str
    game: Game
    score: float | None = None  # None: invalid (or failed)
    reused: bool = False  # read back from an existing judgment file, not judged in this run
    fastchat_score: float | None = None  # what FastChat reads when it differs from `score` (out of scale)

    @property
    def valid(self) -> bool:
        return self.score is not None


@dataclass
class PairJudgment:
    question_id: QuestionId
    category: str
    model_1: str
    model_2: str
    turn: int
    prompt_name: str
    g1: Game  # model_1 shown as A
    g2: Game  # model_2 shown as A
    g1_winner: str | None = None  # "model_1" | "model_2" | "tie"; None: invalid
    g2_winner: str | None = None
    reused: bool = False

    @property
    def valid(self) -> bool:
        return self.g1_winner is not None and self.g2_winner is not None

    @property
    def winner(self) -> str | None:
        """show_result.py's outcome: "model_1" / "model_2" when both games agree on it, "tie" when the
        first game is a tie or the two disagree, None when either game is invalid."""
        if not self.valid:
            return None
        if self.g1_winner == "tie" or self.g1_winner != self.g2_winner:
            return "tie"
        return self.g1_winner


@dataclass
class Plan:
    """The judge calls a list of matches needs, per prompt name (for --dry-run)."""

    calls: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def plan(matches: Sequence[SingleMatch | PairMatch]) -> Plan:
    out = Plan()
    for m in matches:
        out.calls[m.prompt.name] = out.calls.get(m.prompt.name, 0) + (2 if isinstance(m, PairMatch) else 1)
    return out


def _game(prompt: JudgePrompt, user_prompt: str, comp: Completion) -> Game:
    game = Game(prompt.system_prompt, user_prompt, judgment=comp.text or "")
    if not comp.ok:
        game.error = comp.error or "the judge call failed"
    return game


def _before_loop(comp: Completion) -> tuple[str, Repetition | None]:
    """The reply as far as the judge said something new: a reply that ended in a loop (stopped for it,
    or cut at the token limit while repeating) is read up to the end of the loop's first copy, so a
    verdict written before the loop (or in it) stands and one the loop never reached is missing."""
    loop = loop_in(comp.text, comp.finish_reason)
    return (loop.before(comp.text), loop) if loop else (comp.text, None)


def judge_single(backend: Backend, matches: Sequence[SingleMatch]) -> list[SingleJudgment]:
    """Judge each match once; the records come back in the order of the matches."""
    users = [single_user_prompt(m) for m in matches]
    comps = backend.complete_many([request(m.prompt, u) for m, u in zip(matches, users)]) if matches else []
    out = []
    for m, user, comp in zip(matches, users, comps):
        game = _game(m.prompt, user, comp)
        score = read = None
        if not game.failed:
            text, loop = _before_loop(comp)
            read, game.reason = fastchat_rating(text)
            score, game.reason = parse_rating(text, prompt_scale(m.prompt))
            if score is None and loop:
                game.reason = repetition_reason(loop, comp.finish_reason, "[[rating]]")
        out.append(SingleJudgment(m.question.question_id, m.question.category, m.model, m.turn, m.prompt.name,
                                  game, score, fastchat_score=read if score is None else None))
    return out


def judge_pairs(backend: Backend, matches: Sequence[PairMatch]) -> list[PairJudgment]:
    """Judge each match in both orders (two calls, sent together); records in the order of the matches."""
    users = [(pair_user_prompt(m, False), pair_user_prompt(m, True)) for m in matches]
    reqs = [request(m.prompt, u) for m, pair in zip(matches, users) for u in pair]
    comps = backend.complete_many(reqs) if reqs else []
    out = []
    for i, (m, (u1, u2)) in enumerate(zip(matches, users)):
        g1, g2 = _game(m.prompt, u1, comps[2 * i]), _game(m.prompt, u2, comps[2 * i + 1])
        winners: list[str | None] = []
        for game, comp, names in ((g1, comps[2 * i], {"A": "model_1", "B": "model_2"}),
                                  (g2, comps[2 * i + 1], {"A": "model_2", "B": "model_1"})):
            w = None
            if not game.failed:
                text, loop = _before_loop(comp)
                w, game.reason = parse_verdict(text, m.prompt.output_format)
                if w is None and loop:
                    game.reason = repetition_reason(loop, comp.finish_reason, "verdict")
            winners.append(names.get(w, w) if w is not None else None)
        out.append(PairJudgment(m.question.question_id, m.question.category, m.model_1, m.model_2, m.turn,
                                m.prompt.name, g1, g2, winners[0], winners[1]))
    return out
