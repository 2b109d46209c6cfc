"""Where RepEval's (good, bad) training pairs come from.

1. A human-scored file in the shared meta-evaluation schema (``{doc_id, source, output,
   human: {dimension: score}}``): best vs worst output per document on one dimension, or — when
   every document has a single output, as in ASSET — the K best against the K worst rows.
2. Pairwise-labelled rows (``{instruction, input, response_a, response_b, label}``): winner vs
   loser, ties dropped.
3. Synthetic corruptions of good text, for users without labels: word shuffles/drops
   (fluency), sentence shuffles (coherence), swapped numbers and names against the source
   (consistency), another document's text (relevance). Seeded.
4. A user's own JSONL of ``{good, bad[, src][, question]}``.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from evaluate.core.errors import InputError
from evaluate.core.io import read_jsonl as core_read_jsonl


@dataclass(frozen=True)
class Pair:
    good: str
    bad: str
    src: str | None = None
    question: str | None = None


def as_pair(item: Any, where: str) -> Pair:
    """A Pair from a Pair, a (good, bad[, src]) tuple or a {good, bad[, src][, question]} dict."""
    if isinstance(item, Pair):
        pair = item
    elif isinstance(item, dict):
        missing = [k for k in ("good", "bad") if k not in item]
        if missing:
            raise InputError(f"{where}: missing field(s) {missing}; expected {{good, bad[, src][, question]}}")
        pair = Pair(item["good"], item["bad"], item.get("src"), item.get("question"))
    elif isinstance(item, (tuple, list)) and len(item) in (2, 3):
        pair = Pair(item[0], item[1], item[2] if len(item) == 3 else None)
    else:
        raise InputError(f"{where}: expected a (good, bad[, src]) pair or a {{good, bad}} dict, got {item!r:.80}")
    for name in ("good", "bad"):
        value = getattr(pair, name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{where}: field {name!r} must be a non-empty string")
    return pair


def as_pairs(items: Iterable[Any], where: str = "pairs") -> list[Pair]:
    return [as_pair(item, f"{where}[{i}]") for i, item in enumerate(items)]


def read_rows(path: Path) -> list[dict]:
    """The objects of a JSON Lines file, in order (the core reader, without line numbers)."""
    return [row for _, row in core_read_jsonl(Path(path), "pairs")]


def load_pairs_jsonl(path: Path) -> list[Pair]:
    """A user's pairs file: one ``{"good", "bad"[, "src"][, "question"]}`` object per line."""
    return [as_pair(row, f"{path}:{i + 1}") for i, row in enumerate(read_rows(path))]


def pairs_from_scored(rows: Sequence[dict], dimension: str, k: int | None = None, seed: int = 0,
                      where: str = "rows") -> list[Pair]:
    """Best vs worst output per document on `dimension` (ties skipped); K documents drawn at
    random (seeded). With one output per document, pair the K best rows with the K worst."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for i, row in enumerate(rows):
        human = row.get("human") or {}
        if dimension not in human:
            known = sorted(human)
            raise InputError(f"{where}: record {row.get('id', i)!r} has no human score {dimension!r} (has {known})")
        groups[str(row.get("doc_id", i))].append(row)
    if all(len(g) == 1 for g in groups.values()):
        ranked = sorted(rows, key=lambda r: r["human"][dimension])
        half = len(ranked) // 2
        k = half if k is None else k
        if k > half:
            raise InputError(f"{where}: {len(ranked)} rows give at most {half} best-vs-worst pairs, asked for {k}")
        best, worst = ranked[::-1][:k], ranked[:k]
        return [Pair(b["output"], w["output"], b.get("source")) for b, w in zip(best, worst)]
    pairs = []
    for doc_rows in groups.values():
        ranked = sorted(doc_rows, key=lambda r: r["human"][dimension])
        lo, hi = ranked[0], ranked[-1]
        if hi["human"][dimension] > lo["human"][dimension]:
            pairs.append(Pair(hi["output"], lo["output"], hi.get("source")))
    return _take(pairs, k, seed, where)


def pairs_from_pairwise(rows: Sequence[dict], k: int | None = None, seed: int = 0, where: str = "rows") -> list[Pair]:
    """Winner vs loser from rows labelled "a"/"b" (ties dropped); the question is instruction + input."""
    pairs = []
    for i, row in enumerate(rows):
        label = row.get("label")
        if label not in ("a", "b", "tie"):
            raise InputError(f"{where}: record {row.get('id', i)!r}: label {label!r}, expected 'a', 'b' or 'tie'")
        if label == "tie":
            continue
        # a few PandaLM answers are bare JSON literals (true, 42): they are still answers
        a, b = (_as_text(row.get(f"response_{x}")) for x in "ab")
        good, bad = (a, b) if label == "a" else (b, a)
        if good.strip() and bad.strip():
            pairs.append(Pair(good, bad, None, question_of(row)))
    return _take(pairs, k, seed, where)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, str) else str(value)


def question_of(row: dict) -> str:
    extra = (row.get("input") or "").strip()
    return row.get("instruction", "").strip() + (f"\n{extra}" if extra else "")


def _take(pairs: list[Pair], k: int | None, seed: int, where: str) -> list[Pair]:
    if k is None:
        return pairs
    if k > len(pairs):
        raise InputError(f"{where}: only {len(pairs)} usable pairs, asked for {k}")
    return random.Random(seed).sample(pairs, k)


# --------------------------------------------------------------------------- synthetic pairs

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s[A-Z][a-z]+)*\b")
CORRUPTIONS = ("fluency", "coherence", "consistency", "relevance")


def split_sentences(text: str) -> list[str]:
    """A regex splitter (no nltk data offline): good enough to shuffle sentence order."""
    return [s for s in _SENT.split(text.strip()) if s]


def corrupt_fluency(text: str, rng: random.Random) -> str:
    """Drop ~15% of the words, then swap ~20% of neighbouring word pairs."""
    words = text.split()
    if len(words) < 4:
        return " ".join(reversed(words))
    kept = [w for w in words if rng.random() > 0.15] or words[:]
    for _ in range(max(1, len(kept) // 5)):
        i = rng.randrange(len(kept) - 1)
        kept[i], kept[i + 1] = kept[i + 1], kept[i]
    return " ".join(kept)


def corrupt_coherence(text: str, rng: random.Random) -> str | None:
    """Shuffle the sentences (None when there are fewer than 3: no order to break)."""
    sents = split_sentences(text)
    if len(sents) < 3:
        return None
    shuffled = sents[:]
    while shuffled == sents:
        rng.shuffle(shuffled)
    return " ".join(shuffled)


def corrupt_consistency(text: str, source: str, rng: random.Random) -> str | None:
    """Change numbers and swap names for other names from the source (None when nothing to change)."""
    out = text
    numbers = _NUMBER.findall(text)
    for num in set(numbers):
        digits = num.replace(",", "").replace(".", "")
        new = str(int(digits) + rng.randint(2, 9)) if digits.isdigit() else num
        out = re.sub(rf"\b{re.escape(num)}\b", new, out)
    names = sorted(set(_NAME.findall(text)))
    pool = sorted(set(_NAME.findall(source)) - set(names))
    swapped = 0
    for name in rng.sample(names, len(names)):
        if not pool or swapped >= 2:
            break
        other = pool.pop(rng.randrange(len(pool)))
        out = re.sub(rf"\b{re.escape(name)}\b", other, out)
        swapped += 1
    return out if out != text else None


def synthetic_pairs(texts: Sequence[str], criterion: str, k: int | None = None, seed: int = 0,
                    sources: Sequence[str] | None = None) -> list[Pair]:
    """(text, corrupted text) pairs for `criterion`; texts that cannot be corrupted are skipped."""
    if criterion not in CORRUPTIONS:
        raise InputError(f'synthetic pairs for "{criterion}": expected one of {", ".join(CORRUPTIONS)}')
    if criterion in ("consistency", "relevance") and sources is None:
        raise InputError(f"synthetic {criterion} pairs need the source of each text")
    rng = random.Random(seed)
    pairs = []
    for i, text in enumerate(texts):
        src = sources[i] if sources is not None else None
        if criterion == "fluency":
            bad = corrupt_fluency(text, rng)
        elif criterion == "coherence":
            bad = corrupt_coherence(text, rng)
        elif criterion == "consistency":
            bad = corrupt_consistency(text, src, rng)
        else:  # relevance: a fluent text about another document
            others = [t for j, t in enumerate(texts) if sources[j] != src]
            bad = rng.choice(others) if others else None
        if bad and bad != text:
            pairs.append(Pair(text, bad, src))
    return _take(pairs, k, seed, f"synthetic {criterion} pairs")
