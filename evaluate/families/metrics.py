"""The `Metrics` family: automatic metrics (BLEU, ROUGE, Distinct, BERTScore, P/R/F1, CHRF)."""

from __future__ import annotations

from typing import Sequence

from ..metrics.base import METRICS, Metric, MetricInput
from ..records import Record
from ..scores import Invalid, ItemScores
from . import Family, FamilyOutput


class MetricsFamily(Family):
    name = "Metrics"

    def __init__(self) -> None:
        self._built: dict[tuple[str, str], Metric] = {}

    def validate(self, cfg, category, names, where, *, used):
        import evaluate.metrics  # noqa: F401  (registers every metric)

        problems = []
        for i, name in enumerate(names):
            if name not in METRICS:
                problems.append(METRICS.unknown_message(name, f"{where}[{i}]"))
        for name, opts in cfg.metric_options.items():
            if name not in METRICS:
                problems.append(METRICS.unknown_message(name, "metric_options"))
            elif not isinstance(opts, dict):
                problems.append(f"metric_options.{name}: expected a mapping of options")
        return problems

    def metric(self, name: str, language: str, options: dict) -> Metric:
        from ..metrics import build

        canon = METRICS.canonical(name) or name
        key = (canon, language)
        if key not in self._built:
            self._built[key] = build(canon, language, **options.get(canon, options.get(name, {})))
        return self._built[key]

    def run(self, cfg, category, names, records: Sequence[Record]) -> FamilyOutput:
        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        for name in names:
            metric = self.metric(name, cfg.language, cfg.metric_options)
            idx = list(range(len(records)))
            if metric.needs_reference:
                missing = [i for i in idx if not records[i].targets]
                for i in missing:
                    for sub in metric.sub_scores:
                        items[i].invalid[sub] = Invalid(reason=f"{metric.name} needs a reference and record "
                                                               f"{records[i].id} has no target")
                idx = [i for i in idx if records[i].targets]
            if not idx:
                continue
            inputs = [MetricInput(output=records[i].output, references=records[i].targets,
                                  source=records[i].question) for i in idx]
            per_item = metric.score(inputs)
            for i, scores in zip(idx, per_item):
                items[i].scores.update(scores)
            sig = metric.signature()
            for sub in metric.sub_scores:
                out.signatures[sub] = sig
            if not str(sig.get("aggregate", "mean")).startswith("mean"):  # e.g. corpus BLEU / chrF
                out.corpus.update(metric.aggregate(inputs, per_item))
        return out
