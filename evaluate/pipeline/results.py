"""One model's results under a save path (`ModelResults`: every item, every score, signatures,
aggregates) and the long-format summary CSV.

Score keys are "<Family>/<name>", e.g. "Metrics/BLEU-4", "GPT/relevance",
"UniEval/summarization-fluency". `evaluate.pipeline.savedir.SaveDir` holds them during a run and
`evaluate.savepath` reads and writes the files (this module builds and parses their content); a result
file keeps the scores of earlier runs (other families, other categories) as long as the answer
text and the score's signature are unchanged.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..core.errors import InputError
from ..core.io import clean_json, sha256_text
from ..core.records import Record
from ..savepath import layout, read
from ..savepath import records as log_records
from ..savepath.log import write_run_log
from ..stats.panel import items_rating_agreement
from ..stats.scales import pass_fail, score_scale
from ..core.scores import ItemScores

SCHEMA = "llm-eval-results/1"


# signature fields that describe the run around a score, not how it was made
SIGNATURE_VIEW_FIELDS = ("judge_check", "scale", "corpus_note")


def comparable_signature(sig: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (sig or {}).items() if k not in SIGNATURE_VIEW_FIELDS}


def same_signature(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two scores were made the same way (evaluator, judge, prompt hash, tokenizer, options)."""
    return comparable_signature(a) == comparable_signature(b)


def signature_diff(sig_a: dict[str, Any] | None, sig_b: dict[str, Any] | None, a: str = "A", b: str = "B") -> str:
    """The fields two signatures disagree on, each with both values: `judge: a "x" vs b "y"`."""
    ca, cb = comparable_signature(sig_a), comparable_signature(sig_b)
    parts = []
    for key in sorted(set(ca) | set(cb)):
        if ca.get(key) != cb.get(key):
            va = json.dumps(ca.get(key), sort_keys=True, ensure_ascii=False, default=str)
            vb = json.dumps(cb.get(key), sort_keys=True, ensure_ascii=False, default=str)
            parts.append(f"{key}: {a} {va[:120]} vs {b} {vb[:120]}")
    return "; ".join(parts)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


BOOTSTRAP_MAX_N = 2000  # above this a t interval (clipped to the scale) is accurate and far cheaper
CI_METHOD = ("95% expanded percentile bootstrap of the mean (2000 resamples, seed 0) for 10 <= n <= 2000, else "
             "Student's t; always inside the score's scale and the range of the values; below 10 items none "
             "(`ci_note` says why); pass/fail scores (rule checks): the 95% Wilson interval of the pass rate at any n "
             "(`ci_method`)")


def _t975(dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def mean_ci(xs: list[float], scale: tuple[float, float] | None) -> list[float] | None:
    """A 95% interval of the mean that never leaves the score's scale (nor the values' range); None below
    MIN_INTERVAL_N values, where no bootstrap interval keeps 95% (a two-item "95% interval" of
    0.864 to 0.870 would claim a precision two items cannot give)."""
    from ..stats.intervals import MIN_INTERVAL_N

    n = len(xs)
    if n < MIN_INTERVAL_N:
        return None
    if n <= BOOTSTRAP_MAX_N:
        return list(_bootstrap_ci(tuple(xs), scale))
    mean = sum(xs) / n
    half = _t975(n - 1) * math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) / math.sqrt(n)
    lo, hi = max(mean - half, min(xs)), min(mean + half, max(xs))
    if scale:
        lo, hi = max(lo, scale[0]), min(hi, scale[1])
    return [lo, hi]


@functools.lru_cache(maxsize=8192)
def _bootstrap_ci(xs: tuple[float, ...], scale: tuple[float, float] | None) -> tuple[float, float]:
    """Seeded, so the same values always give the same interval; cached, so a group of values met
    again (the same model's group read back by merge or a benchmark) is not resampled again."""
    from ..stats.intervals import bootstrap_mean_ci

    return bootstrap_mean_ci(xs, bounds=scale, expanded=True)


def summarize(values: list[tuple[str, float]], invalid: int, scale: tuple[float, float] | None = None,
              binary: bool = False) -> dict[str, Any]:
    """mean, sample std, 95% interval of the mean (inside the scale; see CI_METHOD), n, invalid, best and worst item.
    binary: pass (1) / fail (0) scores, whose mean is a pass rate: the interval is Wilson's, at any n."""
    n = len(values)
    agg: dict[str, Any] = {"mean": None, "std": None, "ci95": None, "n": n, "invalid": invalid,
                           "best": None, "worst": None}
    if n == 0:
        return agg
    xs = [v for _, v in values]
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    best = max(values, key=lambda p: p[1])
    worst = min(values, key=lambda p: p[1])
    if binary:
        from ..stats.intervals import wilson_interval

        wilson = wilson_interval(sum(xs), n)
        agg.update(mean=mean, std=std, ci95=list(wilson) if wilson else None, ci_method="wilson",
                   best={"id": best[0], "value": best[1]}, worst={"id": worst[0], "value": worst[1]})
        return agg
    ci = mean_ci(xs, scale)
    agg.update(mean=mean, std=std, ci95=ci,
               best={"id": best[0], "value": best[1]}, worst={"id": worst[0], "value": worst[1]})
    if ci is None:
        from ..stats.intervals import too_few_reason

        agg["ci_note"] = too_few_reason(n)
    return agg


def item_entry(rec: Record) -> dict[str, Any]:
    """A record's entry in a result file, before any score. A conversation also carries its `turns`
    (`user`, `assistant`, `references`); its `output` and `targets` are the last turn's, and
    `output_sha256` hashes every reply (`Record.answer_text`), so a changed earlier turn drops the
    scores that were judged after it."""
    entry: dict[str, Any] = {
        "id": rec.id, "category": rec.category, "instruction": rec.instruction, "input": rec.input,
        "output": rec.output, "targets": list(rec.targets), "output_sha256": sha256_text(rec.answer_text()),
        "flags": ["empty_output"] if not rec.output.strip() else [],
        "scores": {}, "invalid": {}, "details": {},
    }
    if rec.turns:
        entry["turns"] = [t.to_dict() for t in rec.turns]
    return entry


@dataclass
class ModelResults:
    """Everything known about one model's answers under one save_path."""

    model: str
    answer_file: str = ""
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> item entry (insertion order = file order)
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)
    corpus: dict[str, dict[str, float]] = field(default_factory=dict)  # category -> score key -> corpus value
    skipped_categories: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    earlier_signatures: dict[str, dict[str, Any]] = field(default_factory=dict)  # as read from the file
    scored_now: dict[str, set[str]] = field(default_factory=dict)  # score key -> ids scored in this run
    _aggregates: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def path_for(cls, save_path: Path, model: str) -> Path:
        return layout.results_file(save_path, model)

    @classmethod
    def load(cls, path: Path) -> "ModelResults":
        return cls.from_dict(read.read_json(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelResults":
        """A result file's content (as `evaluate.savepath.read` parsed it) back in memory."""
        res = cls(model=data["model"], answer_file=data.get("answer_file", ""))
        for item in data.get("items", []):
            res.items[str(item["id"])] = item
        res.signatures = data.get("signatures", {})
        for cat, aggs in data.get("aggregates", {}).get("by_category", {}).items():
            for key, agg in aggs.items():
                if agg.get("corpus") is not None:
                    res.corpus.setdefault(cat, {})[key] = agg["corpus"]
        res.skipped_categories = data.get("skipped_categories", {})
        res.runs = data.get("runs", [])
        return res

    @classmethod
    def open(cls, save_path: Path, model: str, answer_file: str, records: Iterable[Record],
             earlier: "dict[str, Any] | read.Unreadable | None" = None) -> "ModelResults":
        """Start from the model's earlier results (`earlier`: its file as the save path's reader parsed
        it, if any) so runs of different families accumulate.

        Scores of an item whose output text changed since are dropped: they describe another answer.
        """
        path = cls.path_for(save_path, model)
        res = cls(model=model, answer_file=answer_file)
        old = None
        why = earlier.reason if isinstance(earlier, read.Unreadable) else None
        if isinstance(earlier, dict):
            try:
                old = cls.from_dict(earlier)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                why = f"{type(exc).__name__}: {str(exc)[:200]}"
        if why is not None:
            raise InputError(f"{path}: cannot read the earlier results of model {model!r} "
                             f"({why}); move the file away or fix it (it was not overwritten)") from None
        for rec in records:
            entry = item_entry(rec)
            prev = old.items.get(rec.id) if old else None
            if prev and prev.get("output_sha256") == entry["output_sha256"] and prev.get("category") == rec.category:
                for k in ("scores", "invalid", "details"):
                    entry[k] = dict(prev.get(k, {}))
            res.items[rec.id] = entry
        if old:
            res.signatures = dict(old.signatures)
            res.earlier_signatures = dict(old.signatures)
            res.corpus = {c: dict(v) for c, v in old.corpus.items()}
            res.runs = list(old.runs)
        return res

    def add(self, family: str, category: str, records: list[Record], out_items: list[ItemScores],
            signatures: dict[str, dict[str, Any]], corpus: dict[str, float]) -> None:
        """Merge one family's results for one category (replacing that family's earlier keys for these items)."""
        self._aggregates = None
        names = set(signatures) | {k for it in out_items for k in (*it.scores, *it.invalid)}
        keys = {f"{family}/{n}" for n in names}
        for k in keys:
            self.scored_now.setdefault(k, set()).update(rec.id for rec in records)
        for rec, it in zip(records, out_items):
            entry = self.items[rec.id]
            for part in ("scores", "invalid", "details"):
                for k in list(entry[part]):
                    if k in keys:
                        del entry[part][k]
            for name, value in it.scores.items():
                entry["scores"][f"{family}/{name}"] = float(value) if _finite(value) else None
            for name, inv in it.invalid.items():
                entry["invalid"][f"{family}/{name}"] = inv.to_dict()
            for name, det in it.details.items():
                entry["details"][f"{family}/{name}"] = det
        for name, sig in signatures.items():
            self.signatures[f"{family}/{name}"] = sig
        if corpus:
            cat = self.corpus.setdefault(category, {})
            for name, value in corpus.items():
                cat[f"{family}/{name}"] = value

    def signature_changes(self) -> list[dict[str, Any]]:
        """Scores of an earlier run whose signature differs from this run's (another judge, prompt,
        tokenizer or metric option): they are dropped, never averaged with the new ones. Returns what
        was dropped, naming both signatures."""
        out = []
        for key, was in self.earlier_signatures.items():
            now = self.signatures.get(key)
            if key not in self.scored_now or now is None or same_signature(was, now):
                continue
            dropped = 0
            for item_id, entry in self.items.items():
                if item_id in self.scored_now[key]:
                    continue
                for part in ("scores", "invalid", "details"):
                    if key in entry[part]:
                        del entry[part][key]
                        dropped += part != "details"
            self._aggregates = None
            out.append({"model": self.model, "score": key, "earlier": was, "now": now, "dropped_items": dropped})
        return out

    def aggregates(self) -> dict[str, Any]:
        """Per category, overall and macro aggregates; computed once until a score is added."""
        if self._aggregates is None:
            self._aggregates = self._aggregate()
        return self._aggregates

    def _aggregate(self) -> dict[str, Any]:
        by_cat: dict[str, dict[str, list[tuple[str, float]]]] = {}
        inv_cat: dict[str, dict[str, int]] = {}
        for item in self.items.values():
            cat = item["category"]
            for key, value in item["scores"].items():
                if _finite(value):
                    by_cat.setdefault(cat, {}).setdefault(key, []).append((item["id"], value))
            for key in item["invalid"]:
                inv_cat.setdefault(cat, {})[key] = inv_cat.get(cat, {}).get(key, 0) + 1
        out_cat: dict[str, dict[str, Any]] = {}
        overall_vals: dict[str, list[tuple[str, float]]] = {}
        overall_inv: dict[str, int] = {}
        for cat in sorted(set(by_cat) | set(inv_cat)):
            keys = sorted(set(by_cat.get(cat, {})) | set(inv_cat.get(cat, {})))
            out_cat[cat] = {}
            for key in keys:
                vals = by_cat.get(cat, {}).get(key, [])
                inv = inv_cat.get(cat, {}).get(key, 0)
                agg = summarize(vals, inv, score_scale(key, self.signatures.get(key)), pass_fail(self.signatures.get(key)))
                corpus = self.corpus.get(cat, {}).get(key)
                if corpus is not None:
                    agg["corpus"] = corpus
                out_cat[cat][key] = agg
                overall_vals.setdefault(key, []).extend(vals)
                overall_inv[key] = overall_inv.get(key, 0) + inv
        overall = {k: summarize(overall_vals.get(k, []), overall_inv.get(k, 0), score_scale(k, self.signatures.get(k)),
                                pass_fail(self.signatures.get(k)))
                   for k in sorted(overall_vals)}
        macro = {}
        for key in overall:
            means = [out_cat[c][key]["mean"] for c in out_cat if key in out_cat[c] and out_cat[c][key]["mean"] is not None]
            macro[key] = {"mean": sum(means) / len(means) if means else None, "categories": len(means)}
        return {"by_category": out_cat, "overall": overall, "macro": macro}

    def to_dict(self, run_id: str | None = None) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "model": self.model,
            "answer_file": self.answer_file,
            "runs": self.runs + ([run_id] if run_id and run_id not in self.runs else []),
            "signatures": self.signatures,
            "aggregates": self.aggregates(),
            "skipped_categories": self.skipped_categories,
            **self._panel(),
            "items": list(self.items.values()),
        }

    def _panel(self) -> dict[str, Any]:
        """A panel of judges' agreement on this model's items, per panel score (nothing for one judge)."""
        agreement = items_rating_agreement(list(self.items.values()))
        return {"panel": {"agreement": clean_json(agreement), "level": "Krippendorff's alpha, interval level, over "
                          "this model's items; pairwise Spearman correlation; effective judges n / (1 + (n - 1) r)"}
                } if agreement else {}


def load_all(save_path: Path, unreadable: list[read.Unreadable] | None = None) -> list[ModelResults]:
    """Every model's results under save_path, in file-name order (models run one at a time are all
    found); a file that cannot be read is added to `unreadable` (naming it and why) instead."""
    found, unread = read.read_results(save_path)
    out = []
    bad = list(unread)
    for path, data in found:
        try:
            out.append(ModelResults.from_dict(data))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            bad.append(read.Unreadable(path, f"{type(exc).__name__}: {exc}"))
    if unreadable is not None:
        unreadable.extend(bad)
    return out


CSV_FIELDS = log_records.SUMMARY_FIELDS


def summary_rows(results: list[ModelResults]) -> list[dict[str, Any]]:
    rows = []
    for res in results:
        aggs = res.aggregates()
        blocks = list(aggs["by_category"].items()) + [("(all)", aggs["overall"])]
        for cat, block in blocks:
            for key, agg in block.items():
                family, _, metric = key.partition("/")
                ci = agg.get("ci95") or [None, None]
                rows.append({"model": res.model, "category": cat, "family": family, "metric": metric,
                             "mean": agg["mean"], "std": agg["std"], "ci95_low": ci[0], "ci95_high": ci[1],
                             "n": agg["n"], "invalid": agg["invalid"], "corpus": agg.get("corpus")})
    return rows


def write_summary_csv(save_path: Path, results: list[ModelResults]) -> Path:
    return write_run_log(save_path, [log_records.SummaryCsv(rows=summary_rows(results))])[0]
