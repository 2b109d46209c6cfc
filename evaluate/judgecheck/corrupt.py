"""Sanity pairs: an intact text against a corrupted copy of it (shuffled, truncated, another
question's answer, a number or entity swapped), drawn from a run's own records."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.errors import InputError
from ..core.records import Record
from .rules import CORRUPTIONS


_SENT_EN = re.compile(r"[^.!?\n]+(?:[.!?]+[\"')\]]*|\n+|$)")
_SENT_CN = re.compile(r"[^。！？!?\n]+(?:[。！？!?]+[”」』）)]*|\n+|$)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[0-9]+(?:[.,][0-9]+)?(?![A-Za-z0-9_])")  # ASCII: CJK text is \w too
_ENTITY = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*\b")
_NOT_ENTITIES = {"I", "I'm", "The", "A", "An", "This", "That", "It", "In", "On", "At", "If", "But", "And", "Or",
                 "We", "You", "He", "She", "They", "My", "Our", "Your", "Yes", "No", "OK"}


def split_sentences(text: str, language: str = "en") -> list[str]:
    pat = _SENT_CN if language == "cn" else _SENT_EN
    return [s.strip() for s in pat.findall(text) if s.strip()]


def _rng(seed: int, kind: str, key: str) -> random.Random:
    # a str seed is hashed with sha512 by `random`: the same draw on every machine and Python run
    return random.Random(f"{seed}|{kind}|{key}")


def _entities(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _ENTITY.finditer(text):
        before = text[:m.start()].rstrip()
        if not before or before[-1] in ".!?:\n\"'(-*#" or m.group() in _NOT_ENTITIES:
            continue  # sentence-initial capitals are not names
        out.append((m.start(), m.end(), m.group()))
    return out


def _new_number(s: str, rng: random.Random) -> str:
    if "." in s or "," in s:
        sep = "." if "." in s else ","
        whole, frac = s.split(sep, 1)
        return f"{int(whole) + rng.randint(1, 9)}{sep}{frac}"
    v = int(s)
    new = v + rng.randint(1, 9) if v < 20 else v * rng.choice((2, 3)) if rng.random() < 0.5 else max(1, v // 2)
    return str(new) if str(new) != s else str(v + 1)


def corrupt(text: str, kind: str, *, seed: int = 0, key: str = "", others: Sequence[str] = (),
            language: str = "en") -> tuple[str, str] | None:
    """A corrupted copy of `text` and a note of what changed, or None when the corruption does
    not apply (one sentence to shuffle, fewer than three words, no other answer, nothing to swap).
    Deterministic in (seed, kind, key); `others`: texts of other items of the same category."""
    rng = _rng(seed, kind, key)
    if kind == "shuffle":
        sents, unit = split_sentences(text, language), "sentences"
        if len(set(sents)) < 2:  # one sentence: its clauses (split after , ; ， ；) instead
            sents, unit = [c.strip() for c in re.split(r"(?<=[,;，；、])", text) if c.strip()], "clauses"
        if len(set(sents)) < 2:
            return None
        order = list(range(len(sents)))
        while order == sorted(order) or [sents[i] for i in order] == sents:
            rng.shuffle(order)
        return ("" if language == "cn" else " ").join(sents[i] for i in order), f"{unit} in order {order}"
    if kind == "truncate":
        if language == "cn":
            chars = text.strip()
            if len(chars) < 3:
                return None
            return chars[:len(chars) // 3], f"first {len(chars) // 3} of {len(chars)} characters"
        words = text.split()
        if len(words) < 3:
            return None
        keep = len(words) // 3
        return " ".join(words[:keep]), f"first {keep} of {len(words)} words"
    if kind == "other_answer":
        pool = sorted({o for o in others if o.strip() and o.strip() != text.strip()})
        if not pool:
            return None
        return rng.choice(pool), "another question's answer"
    if kind == "swap":
        nums = list(_NUMBER.finditer(text))
        if nums:
            m = rng.choice(nums)
            new = _new_number(m.group(), rng)
            return text[:m.start()] + new + text[m.end():], f"number {m.group()} -> {new}"
        if language == "cn":
            return None
        ents = _entities(text)
        names = sorted({e[2] for e in ents})
        if not names:
            return None
        old = rng.choice(names)
        pool = sorted({e[2] for o in others for e in _entities(o)} - set(names))
        if pool:
            new = rng.choice(pool)
            return re.sub(rf"\b{re.escape(old)}\b", new, text), f"entity {old} -> {new}"
        if len(names) < 2:
            return None
        new = rng.choice([n for n in names if n != old])
        tmp = "\x00"
        swapped = re.sub(rf"\b{re.escape(old)}\b", tmp, text)
        swapped = re.sub(rf"\b{re.escape(new)}\b", old, swapped).replace(tmp, new)
        return swapped, f"entities {old} <-> {new}"
    raise InputError(f'unknown corruption "{kind}" (known: {", ".join(CORRUPTIONS)})')


@dataclass
class SanityPair:
    id: str
    kind: str
    category: str
    record: Record  # the question (and targets)
    source: str  # "reference" or "answer:<model>"
    intact: str
    corrupted: str
    note: str
    intact_first: bool  # shown as "A" (first in the first order)


def sanity_pairs(sets: Sequence[Any], categories: Sequence[str], *, limit: int | None, seed: int,
                 language: str, use_reference: bool) -> tuple[list[SanityPair], dict[str, int]]:
    """Up to `limit` pairs per corruption (all applicable ones when None), seeded, taken from the
    categories in turn so that a handful of pairs covers them all. Returns the pairs and, per
    corruption, how many candidate texts it could not be applied to. Conversations are left out: a
    pair judges one answer to one question, and a corrupted last reply shown without its earlier
    turns would test the judge on a question nobody asked."""
    cands: dict[str, list[tuple[Record, str, str]]] = {c: [] for c in categories}
    for r in sets[0].records:
        if r.category not in cands or r.turns:
            continue
        ref = next((t for t in r.targets if t.strip()), None)
        if use_reference and ref:
            cands[r.category].append((r, "reference", ref))
            continue
        for s in sets:
            rec = next((x for x in s.records if x.id == r.id), None)
            if rec is not None and rec.output.strip():
                cands[r.category].append((rec, f"answer:{s.name}", rec.output))
    pairs: list[SanityPair] = []
    skipped: dict[str, int] = {}
    for kind in CORRUPTIONS:
        queues = []
        for cat in categories:
            items = list(cands[cat])
            _rng(seed, kind, cat).shuffle(items)
            queues.append(items)
        taken = 0
        skipped[kind] = 0
        while any(queues) and (limit is None or taken < limit):
            for q in queues:
                if not q or (limit is not None and taken >= limit):
                    continue
                rec, source, text = q.pop(0)
                others = [t for _, _, t in cands[rec.category] if t != text]
                key = f"{rec.category}/{rec.id}/{source}"
                out = corrupt(text, kind, seed=seed, key=key, others=others, language=language)
                if out is None:
                    skipped[kind] += 1
                    continue
                pid = f"{kind}/{key}"
                pairs.append(SanityPair(id=pid, kind=kind, category=rec.category, record=rec, source=source,
                                        intact=text, corrupted=out[0], note=out[1],
                                        intact_first=_rng(seed, "position", pid).random() < 0.5))
                taken += 1
    return pairs, skipped


