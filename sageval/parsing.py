"""Strict parsing of both agents' JSON replies.

One JSON object is taken from the reply (the first `{` that opens an object, i.e. is followed
by a quote or `}`; code fences and prose around it are ignored) and checked against the schema:

evaluator  {"<aspect id>": {"score": int 1-5 | "label": one of the labels, "reason": str}, ...}
SAGE       {"aspects": {"<aspect id>": {"score"|"label": ..., "reason": str,
                                        "definition": str | null (optional)}, ...},
            "new_aspects": [{"name": str, "definition": str, "score": int 1-5 | null}, ...]  (optional)}

Keys are matched after `normalise_name` ("Semantic Diversity" is `semantic_diversity`). A score
must be a JSON integer (4 or 4.0, never "4" or true). Problems are kept per aspect, so a reply
with one bad aspect still gives the others; the caller sends the problems back to the model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from .aspects import SCORE_MAX, SCORE_MIN, Aspect, normalise_name

REPLY = ""  # problem key: the reply as a whole
NEW_ASPECTS = "new_aspects"  # problem key: the SAGE agent's new aspects
_OBJECT_START = re.compile(r"\{(?=\s*[\"}])")


class ReplyError(ValueError):
    """The reply holds no usable JSON object."""


@dataclass
class Judgement:
    """One agent's judgement of one aspect as the reply stated it."""

    value: int | str  # a score 1-5, or a label
    reason: str
    definition: str | None = None  # SAGE only: a suggested better definition


@dataclass
class NewAspect:
    name: str
    definition: str
    score: int | None = None

    @property
    def key(self) -> str:
        return aspect_key(self.name)


@dataclass
class ParsedReply:
    judgements: dict[str, Judgement] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # aspect id | NEW_ASPECTS | REPLY -> problem
    new_aspects: list[NewAspect] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def error_message(self) -> str:
        """All problems in one line, the text sent back to the model on a retry."""
        return "; ".join(self.problems.values())


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text`; ReplyError says why there is none."""
    m = _OBJECT_START.search(text)
    if m is None:
        raise ReplyError("the reply contains no JSON object")
    try:
        obj, _ = json.JSONDecoder(object_pairs_hook=_no_duplicates).raw_decode(text, m.start())
    except json.JSONDecodeError as exc:
        raise ReplyError(f"the JSON object does not parse ({exc.msg}; character {exc.pos - m.start()} "
                         "of the object)") from exc
    except _DuplicateKey as exc:
        raise ReplyError(f"the JSON object gives the key {exc} more than once") from exc
    return obj


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[\u3002\uff01\uff1f]")


def close_cut_reply(text: str) -> str | None:
    """The JSON object of a reply that was cut at the token limit, closed where it can be.

    Small judges often run on inside a "reason" until the token limit cuts the reply, after the
    score they were asked for. Rather than throw that judgement away, the object is closed: an
    open string value is ended after its last complete sentence (a string with no complete
    sentence is dropped with its member), the open arrays and objects are closed, and the
    result must then parse as strict JSON. Returns the closed object's text, or None when the
    object was complete (nothing to close) or cannot be closed. The caller checks the schema as
    for any reply; every member the cut touched is either ended at a sentence or left out.
    """
    m = _OBJECT_START.search(text)
    if m is None:
        return None
    stack: list[str] = []
    safe: list[tuple[int, str]] = []  # (cut here, closers) after each complete member / element
    in_str = esc = False
    str_start, str_is_key = -1, False
    prev = ""  # the last structural character outside strings
    for i in range(m.start(), len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                if not str_is_key:
                    safe.append((i + 1, _closers(stack)))
                prev = '"'
            continue
        if ch == '"':
            in_str, str_start = True, i
            str_is_key = bool(stack) and stack[-1] == "{" and prev in ("{", ",")
        elif ch in "{[":
            stack.append(ch)
            prev = ch
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # the object closed: whatever is wrong with it, it was not cut
            safe.append((i + 1, _closers(stack)))
            prev = ch
        elif ch == ",":
            safe.append((i, _closers(stack)))
            prev = ch
        elif ch == ":":
            prev = ch
    if not stack:
        return None
    candidates = []
    if in_str and not str_is_key:
        ends = list(_SENTENCE_END.finditer(text, str_start + 1))
        if ends:
            candidates.append(text[m.start():ends[-1].end()] + '"' + _closers(stack))
    candidates += [text[m.start():pos] + closers for pos, closers in reversed(safe)]
    for cand in candidates:
        try:
            extract_json_object(cand)
        except ReplyError:
            continue
        return cand
    return None


def _closers(stack: list[str]) -> str:
    return "".join("}" if c == "{" else "]" for c in reversed(stack))


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json would keep the last of two equal keys silently; two judgements of one aspect are ambiguous."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(json.dumps(k, ensure_ascii=False))
        out[k] = v
    return out


def aspect_key(name: str) -> str:
    """How suggested new aspects are counted: normalised, each long word singular."""
    words = normalise_name(name).split("_")
    singular = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "as")) else w
                for w in words]
    return "_".join(w for w in singular if w)


def _score(v: Any) -> int | None:
    """An integer in range, from a JSON int or integral float; None otherwise."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not v.is_integer():
        return None
    return int(v) if SCORE_MIN <= v <= SCORE_MAX else None


def _describe(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)[:60]


def _judgement(a: Aspect, entry: Any, with_definition: bool) -> Judgement | str:
    """A Judgement, or the problem with the entry as a string."""
    where = f'"{a.id}"'
    if not isinstance(entry, dict):
        return f"{where} must be an object with " + ('"score"' if a.is_score else '"label"') + \
            f' and "reason", got {_describe(entry)}'
    entry = {normalise_name(k): v for k, v in entry.items()}
    if a.is_score:
        if "score" not in entry:
            return f'{where} has no "score"'
        value: int | str | None = _score(entry["score"])
        if value is None:
            return f'{where}: "score" must be an integer from {SCORE_MIN} to {SCORE_MAX}, ' \
                f"got {_describe(entry['score'])}"
    else:
        raw = entry.get("label")
        if not isinstance(raw, str) or raw.strip().lower() not in a.labels:
            return f'{where}: "label" must be one of {list(a.labels)}, got {_describe(raw)}'
        value = raw.strip().lower()
    reason = entry.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return f'{where}: "reason" must be a non-empty string, got {_describe(reason)}'
    definition = None
    if with_definition:
        d = entry.get("definition")
        if d is not None and not isinstance(d, str):
            return f'{where}: "definition" must be a string or null, got {_describe(d)}'
        definition = d.strip() if isinstance(d, str) and d.strip() and d.strip().lower() != "null" else None
        if definition is not None and _same_text(definition, a.definition):
            definition = None  # the given definition copied back is no suggestion (Qwen-1.5B does this)
    return Judgement(value, reason.strip(), definition)


def _same_text(x: str, y: str) -> bool:
    return " ".join(x.lower().split()).rstrip(".") == " ".join(y.lower().split()).rstrip(".")


def _judgements(obj: dict[str, Any], aspects: Sequence[Aspect], with_definition: bool, out: ParsedReply) -> None:
    by_key: dict[str, Any] = {}
    counts = Counter(normalise_name(k) for k in obj)
    for k, v in obj.items():
        by_key[normalise_name(k)] = v
    for a in aspects:
        if counts[a.id] > 1:
            out.problems[a.id] = f'"{a.id}" is given more than once'
        elif a.id not in by_key:
            out.problems[a.id] = f'"{a.id}" is missing'
        else:
            j = _judgement(a, by_key[a.id], with_definition)
            if isinstance(j, str):
                out.problems[a.id] = j
            else:
                out.judgements[a.id] = j


def parse_evaluator_reply(text: str, aspects: Sequence[Aspect]) -> ParsedReply:
    out = ParsedReply()
    try:
        obj = extract_json_object(text)
    except ReplyError as exc:
        out.problems[REPLY] = str(exc)
        return out
    _judgements(obj, aspects, with_definition=False, out=out)
    return out


def _new_aspects(raw: Any, max_new: int) -> list[NewAspect] | str:
    if raw is None:
        return []
    if not isinstance(raw, list):
        return f'"new_aspects" must be a list, got {_describe(raw)}'
    if len(raw) > max_new:
        return f'"new_aspects" may hold at most {max_new} entries, got {len(raw)}'
    out = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict):
            return f'"new_aspects"[{i}] must be an object with "name" and "definition", got {_describe(e)}'
        e = {normalise_name(k): v for k, v in e.items()}
        name, definition, score = e.get("name"), e.get("definition"), e.get("score")
        if not isinstance(name, str) or not aspect_key(name):
            return f'"new_aspects"[{i}]: "name" must be a non-empty string, got {_describe(name)}'
        if not isinstance(definition, str) or not definition.strip():
            return f'"new_aspects"[{i}]: "definition" must be a non-empty string, got {_describe(definition)}'
        if score is not None and _score(score) is None:
            return f'"new_aspects"[{i}]: "score" must be null or an integer from {SCORE_MIN} to {SCORE_MAX}, ' \
                f"got {_describe(score)}"
        out.append(NewAspect(name.strip(), definition.strip(), _score(score) if score is not None else None))
    return out


def parse_sage_reply(text: str, aspects: Sequence[Aspect], max_new: int = 3) -> ParsedReply:
    out = ParsedReply()
    try:
        obj = extract_json_object(text)
    except ReplyError as exc:
        out.problems[REPLY] = str(exc)
        return out
    top = {normalise_name(k): v for k, v in obj.items()}
    if not isinstance(top.get("aspects"), dict):
        out.problems[REPLY] = f'the object needs "aspects", an object with one entry per aspect ' \
            f'({", ".join(a.id for a in aspects)}), got {_describe(top.get("aspects"))}'
        return out
    _judgements(top["aspects"], aspects, with_definition=True, out=out)
    new = _new_aspects(top.get("new_aspects"), max_new)
    if isinstance(new, str):
        out.problems[NEW_ASPECTS] = new
    else:
        out.new_aspects = new
    return out
