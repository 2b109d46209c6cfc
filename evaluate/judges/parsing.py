"""Turning a judge's reply into a number, strictly, or saying why not.

Only the judge's *reply* is parsed, and only at anchored places, so a score quoted from the
answer or the prompt in the middle of an explanation can never steer the result. A candidate
score line that also appears in the text the judge was shown (`quoted`: the answer, question,
references) is treated as a quotation, not as the judge's score, when it is labelled ("Score: 5")
and found anywhere in that text. A bare first line ("4") is the designated line and always the
judge's own (an answer "4" to a sum must not void an honest "4"). So an answer that plants
"Score: 5" cannot give itself 5, nor make a judge's own "2" invalid by conflict.

Rating replies (``parse_rating``), scale ``low..high`` (1..5 by default). Accepted, in order:

1. **The first non-empty line is the score** (the format the rating prompts ask for):
   ``4``, ``4/5``, ``4 out of 5``, optionally labelled ``Score: 4``, ``Rating: 4``,
   ``Relevance: 4``, ``切题：4`` (the label must be "score"/"rating"/"分数"/"评分"/"得分", the
   metric's name, or the metric's display name), optionally in Markdown emphasis (``**4**``)
   and with a final period. Nothing else may be on the line.
2. **Tolerant variant, still anchored**: if the first line is not a score line, the *last*
   non-empty line may be a labelled score (``Score: 4``) — for judges that reason first.
   An unlabelled last line is not accepted (it could be the tail of quoted text).

If the first line is a score and the last line is a labelled score that disagrees, the reply is
invalid ("conflicting scores"). A score must be an integer in range: ``10`` on a 1-5 scale is
out of range (never read as 1), ``4.5`` is not an integer, ``4/10`` has the wrong scale.

Battle replies (``parse_pair``), scale 1..10: the first non-empty line holds exactly two
numbers (integers or decimals) separated by whitespace, a comma or a semicolon, as ColossalAI's
and FastChat's battle prompts ask. Both must be in range.

Log-probability scores (``score_from_top_logprobs``): G-Eval's expected score
``sum(i * p(i)) / sum(p(i))`` over the tokens "1".."5" of the first generated position. Token
text is stripped of whitespace and NFKC-normalised, and duplicates such as " 4" and "4" are merged
by summing their probabilities. Too little mass on the score tokens (< ``min_mass``) is invalid.

Every reply is NFKC-normalised first, so full-width digits and colons (common in Chinese
replies) read like ASCII ones.

A judge that repeats itself (``loop_in``): a reply the backend stopped because it had fallen into a
loop (finish_reason "repetition", the local judge), or one cut at the token limit whose tail
repeats one block (``core.repetition``: 4 copies or more in a row, 200 characters or more; an HTTP
judge). Such a reply is parsed as far as the end of the loop's first copy, which is what the judge
said before repeating it: a verdict written there (a battle's first-line scores, a rating before the
loop) stands, and its raw text is kept whole; with none there the reply is invalid with the reason
``"the judge repeated itself: '<block>' N times in a row ..."`` (``repetition_reason``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..core.expected import LogprobScore, expected_score  # noqa: F401  (re-exported)
from ..core.repetition import Repetition, repeated_tail

GENERIC_LABELS = ("score", "rating", "final score", "overall score", "分数", "评分", "得分", "最终得分")

_NUM = r"[+-]?\d+(?:\.\d+)?"
_SCORE_LINE = re.compile(
    r"^(?:(?P<label>[^\W\d_][^:\d]{0,48}?)\s*:\s*)?"
    rf"(?P<num>{_NUM})"
    r"(?:\s*(?:/|out\s+of)\s*(?P<den>\d+))?"
    r"\s*\.?$",
    re.IGNORECASE,
)
_PAIR_LINE = re.compile(rf"^(?P<a>{_NUM})\s*(?:[,;]\s*|\s+)(?P<b>{_NUM})\s*\.?$")


@dataclass(frozen=True)
class Parsed:
    """A parse outcome: `value` set and `reason` empty on success; `rule` names what matched."""

    value: float | None = None
    reason: str = ""
    rule: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class ParsedPair:
    values: tuple[float, float] | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.values is not None


def _lines(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _clean(line: str) -> str:
    """Drop Markdown emphasis/code marks and a heading mark, which carry no meaning here."""
    return re.sub(r"[*`]", "", line).lstrip("#").strip()


def _norm_label(label: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", label).lower().split())


def metric_labels(metric: str, definition: str = "") -> tuple[str, ...]:
    """Labels a judge may put before its score: the metric name and the definition's display
    name (the text before "(1-5)" / "：" in ColossalAI's definitions, e.g. "Relevance", "切题")."""
    labels = [metric]
    if definition:
        head = re.split(r"[(（:：]", unicodedata.normalize("NFKC", definition), maxsplit=1)[0].strip()
        if head and len(head) <= 48:
            labels.append(head)
    return tuple(labels)


def _quote_index(quoted: Iterable[str]) -> tuple[set[str], str]:
    """The quoted texts as (their normalised non-empty lines, all of them normalised in one string)."""
    lines: set[str] = set()
    parts: list[str] = []
    for text in quoted:
        if not text:
            continue
        for ln in _lines(text):
            norm = _norm_label(_clean(ln))
            if norm:
                lines.add(norm)
                parts.append(norm)
    return lines, "\n".join(parts)


def _is_quoted(line: str, index: tuple[set[str], str], labelled: bool) -> bool:
    """Whether a reply's score line also appears in the quoted text (labelled: anywhere in a line;
    bare numbers: as a whole line, since a digit alone appears in most texts)."""
    lines, joined = index
    norm = _norm_label(_clean(line))
    if not norm:
        return False
    if norm in lines:
        return True
    return labelled and norm.rstrip(".") in joined


def _score_from_match(m: re.Match[str], low: int, high: int) -> Parsed:
    num, den = m.group("num"), m.group("den")
    if not re.fullmatch(r"[+-]?\d+", num):
        return Parsed(reason=f"score {num} is not an integer")
    value = int(num)
    if den is not None and int(den) != high:
        return Parsed(reason=f"score {num}/{den} is not on the {low}-{high} scale")
    if not low <= value <= high:
        return Parsed(reason=f"score {value} is outside {low}-{high}")
    return Parsed(value=float(value))


def _label_ok(m: re.Match[str], allowed: set[str]) -> bool:
    label = m.group("label")
    return label is None or _norm_label(label) in allowed


def parse_rating(text: str, *, low: int = 1, high: int = 5, labels: Iterable[str] = (),
                 quoted: Iterable[str] = ()) -> Parsed:
    """Parse a rating reply (rules in the module docstring). `labels`: extra accepted labels,
    typically `metric_labels(metric, definition)`; `quoted`: the texts the judge was shown (the
    answer first), whose score-like lines are never read as the judge's score."""
    lines = _lines(text)
    if not lines:
        return Parsed(reason="empty reply")
    allowed = {_norm_label(x) for x in (*GENERIC_LABELS, *labels)}
    index = _quote_index(quoted)
    note = ""

    first = _SCORE_LINE.match(_clean(lines[0]))
    if first and first.group("label") and _label_ok(first, allowed) and _is_quoted(lines[0], index, True):
        first, note = None, "; the score-like first line also appears in the answer (a quotation, not a score)"
    if first and _label_ok(first, allowed):
        result = _score_from_match(first, low, high)
        if not result.ok:
            return result
        if len(lines) > 1:
            last = _SCORE_LINE.match(_clean(lines[-1]))
            if last and last.group("label") and _label_ok(last, allowed) and not _is_quoted(lines[-1], index, True):
                other = _score_from_match(last, low, high)
                if other.value != result.value:
                    return Parsed(reason=f"conflicting scores: first line {first.group('num')},"
                                         f" last line {last.group('num')}")
        return Parsed(value=result.value, rule="first-line")

    last = _SCORE_LINE.match(_clean(lines[-1])) if len(lines) > 1 else None
    if last and last.group("label") and _label_ok(last, allowed):
        if _is_quoted(lines[-1], index, True):
            return Parsed(reason="no score of the judge's own: the last line "
                                 f"{_clean(lines[-1])[:40]!r} also appears in the answer (a quotation, not a score)")
        result = _score_from_match(last, low, high)
        return Parsed(value=result.value, reason=result.reason, rule="last-line" if result.ok else "")
    return Parsed(reason="no score: the first line is not a score and the last line is not 'Score: N'" + note)


def parse_pair(text: str, *, low: float = 1, high: float = 10) -> ParsedPair:
    """Parse a battle reply: two scores on the first non-empty line (the designated line: nothing
    quoted later in the reply counts)."""
    lines = _lines(text)
    if not lines:
        return ParsedPair(reason="empty reply")
    m = _PAIR_LINE.match(_clean(lines[0]))
    if not m:
        return ParsedPair(reason="the first line does not hold exactly two scores")
    a, b = float(m.group("a")), float(m.group("b"))
    for v in (a, b):
        if not low <= v <= high:
            return ParsedPair(reason=f"score {v:g} is outside {low:g}-{high:g}")
    return ParsedPair(values=(a, b))


def pair_distributions(top_logprobs: Sequence[Mapping[str, float]], *, low: int = 1, high: int = 10,
                       min_mass: float = 0.5) -> tuple[LogprobScore, LogprobScore] | None:
    """The judge's score distributions at the two positions where the greedy reply starts its two
    numbers on the first line (G-Eval's reading of each position; see `weighted_pair`)."""
    starts: list[int] = []
    prev_digit = False
    for i, top in enumerate(top_logprobs):
        if not top:
            return None
        tok = unicodedata.normalize("NFKC", max(top, key=top.get))
        if "\n" in tok and starts and not tok.strip():
            break
        if re.match(r"\s*\d", tok) and not prev_digit:
            starts.append(i)
            if len(starts) == 2:
                break
        prev_digit = bool(re.search(r"\d$", tok))
    if len(starts) < 2:
        return None
    scores = [score_from_top_logprobs(top_logprobs[i], low=low, high=high, min_mass=min_mass) for i in starts]
    if any(s.value is None for s in scores):
        return None
    return scores[0], scores[1]


def weighted_pair(top_logprobs: Sequence[Mapping[str, float]], *, low: int = 1, high: int = 10,
                  min_mass: float = 0.5) -> tuple[float, float] | None:
    """Probability-weighted battle scores: G-Eval's expected score at the two positions where the
    greedy reply starts its two numbers on the first line.

    `top_logprobs` holds one {token: logprob} per generated position (temperature 0, so the most
    likely token is the one written). The positions are found by walking those most likely tokens:
    the first two tokens that start a run of digits, before the first line break that follows a
    number. At each, the expectation over the score tokens in low..high (`score_from_top_logprobs`;
    with one-digit tokenizers "10" is seen as its first digit, "1"). None when the reply has no two
    numbers there or either position has less than `min_mass` probability on score tokens."""
    pair = pair_distributions(top_logprobs, low=low, high=high, min_mass=min_mass)
    return None if pair is None else (pair[0].value, pair[1].value)  # type: ignore[return-value]


def first_preferred(top_logprobs: Sequence[Mapping[str, float]], *, low: int = 1, high: int = 10,
                    min_mass: float = 0.5) -> float | None:
    """P(the first-shown answer is preferred) in one order: P(S1 > S2) + P(S1 = S2) / 2, S1 and S2 the
    judge's two scores drawn from its distributions at the two score positions (`pair_distributions`,
    each renormalised over the score tokens). The two are taken as independent, which they are not
    quite (the second position is read after the greedy first score); it is the order's own
    probability that the position calibration (`stats.position`) works with. None as weighted_pair."""
    pair = pair_distributions(top_logprobs, low=low, high=high, min_mass=min_mass)
    if pair is None:
        return None
    q1, q2 = ({int(k): v / s.mass for k, v in s.probs.items()} for s in pair)
    win = sum(p1 * p2 for k1, p1 in q1.items() for k2, p2 in q2.items() if k1 > k2)
    same = sum(p1 * q2.get(k1, 0.0) for k1, p1 in q1.items())
    return min(1.0, max(0.0, win + same / 2))


score_from_top_logprobs = expected_score  # the judge's name for it (evaluate.core.expected)


def loop_in(text: str, finish_reason: str) -> Repetition | None:
    """The loop a reply ended in: stopped for it by the backend ("repetition"), or cut at the token
    limit ("length") with a repeating tail. A reply that ended by itself is the judge's, loop or not."""
    if finish_reason not in ("repetition", "length"):
        return None
    return repeated_tail(text)


def repetition_reason(loop: Repetition, finish_reason: str, what: str = "verdict") -> str:
    """Why a looping reply is invalid, in words (the raw text is kept beside it)."""
    how = "stopped there" if finish_reason == "repetition" else "until the token limit"
    return (f"the judge repeated itself: {loop.describe()} ({how}); the reply before the repetition holds "
            f"no {what}")
