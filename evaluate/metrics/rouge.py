"""ROUGE-1/2/L/Lsum F1 with Google's rouge-score package.

ROUGE-Lsum is summary-level LCS over sentences, and rouge-score only knows sentences by
newlines, so both texts are first split by `text.split_sentences` and joined with "\\n"
(which does not change the other ROUGE types: newlines are whitespace to the tokenizer).
With several references, `multi_ref` says how they combine: "max" (the best reference per
sub-score, rouge-score's `score_multi` rule) or "mean" (the average over references, as the
SummEval / G-Eval papers report).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..core.errors import InputError
from .base import METRICS, MetricInput
from .common import LibraryMetric, library_version
from .text import SENTENCE_SPLITTER, CachedRougeTokenizer, cjk_rule, script_language, split_sentences

ROUGE_TYPES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum"}
MULTI_REF_RULES = ("max", "mean")


@dataclass(frozen=True)
class RougeConfig:
    language: str
    multi_ref: str
    stemmer: bool


@functools.lru_cache(maxsize=8)
def _scorer(cfg: RougeConfig):
    """rouge-score's RougeScorer with our memoising tokenizer (imported here: nltk is slow)."""
    from rouge_score import rouge_scorer

    tokenizer = CachedRougeTokenizer(cfg.language, use_stemmer=cfg.stemmer)
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=tokenizer)


def prepare(text: str, language: str) -> str:
    """One sentence per line, the form rouge-score needs for ROUGE-Lsum."""
    return "\n".join(split_sentences(text, language))


def score_chunk(cfg: RougeConfig, items: Sequence[MetricInput]) -> list[dict[str, float]]:
    """Per-item F1 for each ROUGE type, references combined by `cfg.multi_ref`; an item with CJK text under
    language en is cut as language cn cuts it (`text.script_language`)."""
    out = []
    for item in items:
        refs = [ref for ref in item.references if ref.strip()]
        lang = script_language(cfg.language, item.output, *refs)
        scorer = _scorer(replace(cfg, language=lang))
        pred = prepare(item.output, lang)
        per_ref = [scorer.score(prepare(ref, lang), pred) for ref in refs]
        row = {}
        for key, name in ROUGE_TYPES.items():
            values = [s[key].fmeasure for s in per_ref]
            row[name] = max(values) if cfg.multi_ref == "max" else sum(values) / len(values)
        out.append(row)
    return out


@METRICS.register("ROUGE")
class Rouge(LibraryMetric):
    """ROUGE-1, ROUGE-2, ROUGE-L (sentence-level LCS), ROUGE-Lsum (summary-level LCS); F1, 0-1."""

    name = "ROUGE"
    sub_scores = tuple(ROUGE_TYPES.values())
    defaults = {"multi_ref": "max", "stemmer": True}

    def __init__(self, language: str = "en", **options: Any):
        super().__init__(language, **options)
        if self.options["multi_ref"] not in MULTI_REF_RULES:
            raise InputError(
                f"ROUGE: option multi_ref must be one of {', '.join(MULTI_REF_RULES)}, got {self.options['multi_ref']!r}"
            )
        self.config = RougeConfig(language, self.options["multi_ref"], bool(self.options["stemmer"]))

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        self.check_references(items)
        _scorer(self.config)  # build (and load jieba) before forking
        if any(script_language(self.language, it.output, *it.references) != self.language for it in items):
            _scorer(replace(self.config, language="cn"))  # CJK items under en: jieba loaded before forking too
        return self.map_items(functools.partial(score_chunk, self.config), items)

    def signature(self) -> dict[str, Any]:
        return self.describe(
            library=library_version("rouge-score"),
            tokenizer=CachedRougeTokenizer.description(self.language, self.config.stemmer),
            **({"cjk": cjk_rule(CachedRougeTokenizer.description("cn", False))} if self.language == "en" else {}),
            sentences=SENTENCE_SPLITTER,
            score="F1",
            refs=f"{self.config.multi_ref} over references",
            aggregate="mean of items",
            scale="0-1",
        )
