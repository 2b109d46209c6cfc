"""Precision, Recall and F1 of the answer's bag of tokens against the target (SQuAD style).

Each is its own config name ("Precision", "Recall", "F1 score"), but they are one computation:
the three metrics share `overlap_scores`, which remembers its last result, so a category
asking for all three tokenizes and counts once.

Tokens: `text.squad_tokens` (en: SQuAD normalisation; cn, and an item with CJK text under en:
characters). Overlap is the size
of the multiset intersection (a token counts as often as it appears in both). This is not
ColossalAI's position-by-position comparison, which scores a correct answer shifted by one
word as wrong. With several references the one giving the best F1 is used for all three.
If the answer or the reference has no token, all three are 1.0 when both have none, else 0.0.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from .base import METRICS, MetricInput
from .common import LibraryMetric
from .parallel import map_chunks
from .text import cjk_rule, script_language, squad_description, squad_tokens


@dataclass(frozen=True)
class Overlap:
    precision: float
    recall: float
    f1: float


def _prf(pred: Counter, n_pred: int, ref: Counter, n_ref: int) -> tuple[float, float, float]:
    if not n_pred or not n_ref:
        v = float(n_pred == n_ref)
        return v, v, v
    same = sum((pred & ref).values())
    if same == 0:
        return 0.0, 0.0, 0.0
    p, r = same / n_pred, same / n_ref
    return p, r, 2 * p * r / (p + r)


def score_chunk(language: str, items: Sequence[MetricInput]) -> list[Overlap]:
    """Best-F1 reference per item. Reference bags are memoised within the chunk: answers to
    the same question share their references, which are then counted once."""
    bags: dict[tuple[str, str], tuple[Counter, int]] = {}
    out = []
    for item in items:
        lang = script_language(language, item.output, *item.references)  # CJK text under en: characters, as cn
        toks = squad_tokens(item.output, lang)
        pred, n_pred = Counter(toks), len(toks)
        best: tuple[float, float, float] | None = None
        for ref in item.references:
            if not ref.strip():
                continue
            bag = bags.get((lang, ref))
            if bag is None:
                rt = squad_tokens(ref, lang)
                bag = bags[(lang, ref)] = (Counter(rt), len(rt))
            prf = _prf(pred, n_pred, *bag)
            if best is None or prf[2] > best[2]:  # first reference wins a tie
                best = prf
        assert best is not None, "check_references lets no item without a reference through"
        out.append(Overlap(*best))
    return out


_cache_lock = threading.Lock()
_cache: tuple[tuple, list[Overlap]] | None = None


def overlap_scores(items: Sequence[MetricInput], language: str, workers: int) -> list[Overlap]:
    """Per-item best-reference overlap; the last call's result is reused for the same items."""
    global _cache
    key = (language, tuple((it.output, tuple(it.references)) for it in items))
    with _cache_lock:
        if _cache is not None and _cache[0] == key:
            return _cache[1]
    result = map_chunks(functools.partial(score_chunk, language), items, workers)
    with _cache_lock:
        _cache = (key, result)
    return result


class _OverlapMetric(LibraryMetric):
    field: str = ""

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        self.check_references(items)
        return [{self.sub_scores[0]: getattr(o, self.field)} for o in overlap_scores(items, self.language, self.workers)]

    def signature(self) -> dict[str, Any]:
        return self.describe(
            library="evaluate.metrics.overlap",
            tokenizer=squad_description(self.language),
            **({"cjk": cjk_rule(squad_description("cn"))} if self.language == "en" else {}),
            overlap="multiset intersection (SQuAD)",
            empty="no tokens on one side: 1.0 if none on both, else 0.0",
            refs="multi: the reference with the best F1",
            aggregate="mean of items",
            scale="0-1",
        )


@METRICS.register("Precision")
class Precision(_OverlapMetric):
    """Share of the answer's tokens found in the reference."""

    name = "Precision"
    sub_scores = ("Precision",)
    field = "precision"


@METRICS.register("Recall")
class Recall(_OverlapMetric):
    """Share of the reference's tokens found in the answer."""

    name = "Recall"
    sub_scores = ("Recall",)
    field = "recall"


@METRICS.register("F1 score", "F1", "F1-score")
class F1(_OverlapMetric):
    """Harmonic mean of the bag-of-tokens precision and recall."""

    name = "F1 score"
    sub_scores = ("F1",)
    field = "f1"
