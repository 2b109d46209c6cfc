"""chrF with sacrebleu: sentence chrF per item, corpus chrF per category.

chrF compares character n-grams (1..6, beta=2, whitespace ignored), so it needs no word
segmentation and works as is for Chinese. With several references sacrebleu keeps, per
item, the reference with the best chrF.

sacrebleu's sentence and corpus chrF are both computed from per-item statistics (the best
reference's n-gram counts). We take those statistics once per item, through the same two
calls `CHRF.sentence_score` makes (`_extract_corpus_statistics`, `_compute_score_from_stats`:
private in sacrebleu 2.x, so the tests compare the results with the public `sentence_score`
and `corpus_score`), and sum them for the corpus score instead of reading every text twice.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

from sacrebleu.metrics.chrf import CHRF

from ..core.errors import InputError
from .base import METRICS, MetricInput
from .common import LastCall, LibraryMetric, library_version


@dataclass(frozen=True)
class ChrfConfig:
    word_order: int


@functools.lru_cache(maxsize=4)
def _chrf(word_order: int) -> CHRF:
    return CHRF(word_order=word_order)


def _refs(item: MetricInput) -> list[str]:
    return [r for r in item.references if r.strip()]


def item_stats(chrf: CHRF, item: MetricInput) -> list[int]:
    """The best reference's [hyp, ref, match] counts per order, as sentence_score gets them."""
    return chrf._extract_corpus_statistics([item.output], [[r] for r in _refs(item)])[0]


def score_chunk(cfg: ChrfConfig, items: Sequence[MetricInput]) -> list[tuple[float, list[int]]]:
    chrf = _chrf(cfg.word_order)
    out = []
    for item in items:
        stats = item_stats(chrf, item)
        out.append((chrf._compute_score_from_stats(stats).score / 100.0, stats))
    return out


def corpus_chrf(stats: Sequence[list[int]], word_order: int = 0) -> float:
    """Corpus chrF from summed per-item statistics (what sacrebleu's corpus_score does)."""
    if not stats:
        return float("nan")
    total = [sum(col) for col in zip(*stats)]
    return _chrf(word_order)._compute_score_from_stats(total).score / 100.0


@METRICS.register("CHRF", "chrF")
class Chrf(LibraryMetric):
    """Per item: sentence chrF. Per category: corpus chrF (statistics summed over items)."""

    name = "CHRF"
    sub_scores = ("CHRF",)
    defaults = {"word_order": 0}

    def __init__(self, language: str = "en", **options: Any):
        super().__init__(language, **options)
        wo = self.options["word_order"]
        if not isinstance(wo, int) or isinstance(wo, bool) or not 0 <= wo <= 2:
            raise InputError(f"CHRF: option word_order must be 0 (chrF), 1 or 2 (chrF++), got {wo!r}")
        self.config = ChrfConfig(wo)
        self._last = LastCall()

    def _rows(self, items: Sequence[MetricInput]) -> list[tuple[float, list[int]]]:
        self.check_references(items)
        return self.map_items(functools.partial(score_chunk, self.config), items)

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        rows = self._rows(items)
        self._last.store(items, [s for _, s in rows])
        return [{"CHRF": v} for v, _ in rows]

    def aggregate(self, items: Sequence[MetricInput], per_item: Sequence[dict[str, float]]) -> dict[str, float]:
        stats = self._last.get(items)
        if stats is None:
            stats = [s for _, s in self._rows(items)]
        return {"CHRF": corpus_chrf(stats, self.config.word_order)}

    def signature(self) -> dict[str, Any]:
        c = _chrf(self.config.word_order)
        return self.describe(
            library=library_version("sacrebleu"),
            tokenizer="characters, whitespace removed",
            orders=f"char 1..{c.char_order}, word 1..{c.word_order}, beta {c.beta}",
            case="mixed",
            refs="multi: best reference per item (sacrebleu)",
            aggregate="corpus chrF (summed statistics)",
            scale="0-1",
        )
