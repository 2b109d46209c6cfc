"""BLEU-1..4 with sacrebleu: sentence BLEU per item, corpus BLEU per category.

BLEU-n is cumulative BLEU with uniform weights over orders 1..n (ColossalAI's weights
(1,0,0,0), (.5,.5,0,0), ...). sacrebleu's n-gram counts for order k do not depend on the
maximum order, so one order-4 extraction per item gives the statistics of all four scores;
`BLEU.compute_bleu` then turns each prefix of them into BLEU-n, exactly as
`BLEU(max_ngram_order=n, effective_order=True).sentence_score` would (checked in the tests).
The corpus aggregate sums the same statistics, as `corpus_score` does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

from sacrebleu.metrics.bleu import BLEU

from .base import METRICS, MetricInput
from .common import LastCall, LibraryMetric, library_version
from .text import bleu_pretokenize, cjk_rule, ensure_jieba, jieba_version, script_language

ORDERS = (1, 2, 3, 4)
SUB_SCORES = tuple(f"BLEU-{n}" for n in ORDERS)
SMOOTH = "exp"


@dataclass(frozen=True)
class BleuStats:
    """sacrebleu's sufficient statistics of one item (all orders up to 4)."""

    counts: tuple[int, ...]
    totals: tuple[int, ...]
    sys_len: int
    ref_len: int


@dataclass(frozen=True)
class BleuConfig:
    language: str


def tokenize_for(language: str) -> str:
    """sacrebleu's tokenizer: none for jieba-cut Chinese (already words joined by spaces), else 13a."""
    return "none" if language == "cn" else "13a"


@functools.lru_cache(maxsize=4)
def _bleu(tokenize: str) -> BLEU:
    return BLEU(max_ngram_order=max(ORDERS), effective_order=True, tokenize=tokenize)


def bleu_from_stats(stats: BleuStats, n: int, *, sentence: bool) -> float:
    """Cumulative BLEU-n on the 0-1 scale from order-4 statistics.

    sentence=True: exp smoothing with effective order (sacrebleu's sentence BLEU settings);
    sentence=False: exp smoothing without effective order (sacrebleu's corpus defaults).
    """
    res = BLEU.compute_bleu(
        list(stats.counts[:n]),
        list(stats.totals[:n]),
        stats.sys_len,
        stats.ref_len,
        smooth_method=SMOOTH,
        effective_order=sentence,
        max_ngram_order=n,
    )
    return res.score / 100.0


def score_chunk(cfg: BleuConfig, items: Sequence[MetricInput]) -> list[tuple[dict[str, float], BleuStats]]:
    out = []
    for item in items:
        refs = [r for r in item.references if r.strip()]
        lang = script_language(cfg.language, item.output, *refs)  # CJK text under en: cut as cn cuts it
        hyp = bleu_pretokenize(item.output, lang)
        res = _bleu(tokenize_for(lang)).sentence_score(hyp, [bleu_pretokenize(r, lang) for r in refs])
        stats = BleuStats(tuple(res.counts), tuple(res.totals), res.sys_len, res.ref_len)
        out.append(({f"BLEU-{n}": bleu_from_stats(stats, n, sentence=True) for n in ORDERS}, stats))
    return out


def corpus_bleu(stats: Sequence[BleuStats]) -> dict[str, float]:
    """Corpus BLEU-1..4 from summed per-item statistics."""
    if not stats:
        return {k: float("nan") for k in SUB_SCORES}
    total = BleuStats(
        tuple(sum(s.counts[i] for s in stats) for i in range(len(ORDERS))),
        tuple(sum(s.totals[i] for s in stats) for i in range(len(ORDERS))),
        sum(s.sys_len for s in stats),
        sum(s.ref_len for s in stats),
    )
    return {f"BLEU-{n}": bleu_from_stats(total, n, sentence=False) for n in ORDERS}


@METRICS.register("BLEU")
class Bleu(LibraryMetric):
    """Per item: sentence BLEU-1..4. Per category: corpus BLEU-1..4 (not the mean of items)."""

    name = "BLEU"
    sub_scores = SUB_SCORES

    def __init__(self, language: str = "en", **options: Any):
        super().__init__(language, **options)
        self.config = BleuConfig(language)
        self._last = LastCall()

    def _stats_and_scores(self, items: Sequence[MetricInput]) -> list[tuple[dict[str, float], BleuStats]]:
        self.check_references(items)
        if any(script_language(self.language, it.output, *it.references) == "cn" for it in items):
            ensure_jieba()  # load jieba before forking
        return self.map_items(functools.partial(score_chunk, self.config), items)

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        rows = self._stats_and_scores(items)
        self._last.store(items, [s for _, s in rows])
        return [scores for scores, _ in rows]

    def aggregate(self, items: Sequence[MetricInput], per_item: Sequence[dict[str, float]]) -> dict[str, float]:
        stats = self._last.get(items)
        if stats is None:
            stats = [s for _, s in self._stats_and_scores(items)]
        return corpus_bleu(stats)

    def signature(self) -> dict[str, Any]:
        cn = f"{jieba_version()} words joined by spaces, sacrebleu tokenize=none"
        return self.describe(
            library=library_version("sacrebleu"),
            tokenizer=cn if self.language == "cn" else "13a",
            **({"cjk": cjk_rule(cn)} if self.language == "en" else {}),
            orders="cumulative 1..n, uniform weights",
            smooth=f"{SMOOTH} (item: effective order; corpus: full order)",
            case="mixed",
            refs="multi (sacrebleu: all references' n-grams clipped together, closest ref length)",
            aggregate="corpus BLEU (summed statistics)",
            scale="0-1",
        )
