"""The `Metrics` family: automatic metrics (BLEU, ROUGE, Distinct, BERTScore, P/R/F1, CHRF) and rule checks
(ExactMatch, Contains, NotContains, Regex, JSON, Length: pass/fail, `metrics.rule`).

Options per metric come from the config's `metric_options: {METRIC: {option: value}}`; each
metric checks its own options when it is built, which the config does at load for every metric
named there (used or not), so a typo is refused before anything runs.

A conversation is scored on its last reply against the last turn's reference (`Record.output` and
`Record.targets` are the last turn's), with the user's last message as the source; earlier turns
are not scored. Each of its scores says so in the item's details (`turn`, `of`, `scored`), so a
conversation's BLEU is never read as the BLEU of all its replies joined.
"""

from __future__ import annotations

import re

from typing import Any, Sequence

from ..core.errors import InputError
from ..core.records import Record
from ..core.scores import Invalid, ItemScores
from ..metrics import METRICS, Metric, MetricInput, build
from ..metrics.text import CJK_SCRIPTS, script_language
from .base import Context, Family, FamilyOutput, register_family


def check_metric_options(metric_options: Any, language: str) -> list[str]:
    """Problems with a `metric_options` block, each with its key path (metric_options.ROUGE.multi_reff...)."""
    if metric_options is None:
        return []
    if not isinstance(metric_options, dict):
        return ["metric_options: expected a mapping METRIC -> {option: value}"]
    problems = []
    for name, opts in metric_options.items():
        where = f"metric_options.{name}"
        if name not in METRICS:
            problems.append(METRICS.unknown_message(name, "metric_options"))
        elif not isinstance(opts, dict):
            problems.append(f"{where}: expected a mapping of options")
        else:
            try:
                build(METRICS.canonical(name), language, **opts)
            except (InputError, TypeError, ValueError) as exc:
                # a metric with typed options names every problem with its full key path already
                problems.extend(getattr(exc, "problems", None) or [_with_key_path(where, str(exc))])
    return problems


def resolve_option_paths(metric_options: Any, resolve: Any) -> Any:
    """`metric_options` with each metric's file options (its class's `path_options`, e.g. JSON's `schema`)
    resolved by `resolve` (against the config file's folder), so a run works from any directory."""
    if not isinstance(metric_options, dict):
        return metric_options
    out = {}
    for name, opts in metric_options.items():
        cls = METRICS.get(name) if name in METRICS else None
        keys = getattr(cls, "path_options", ()) if cls else ()
        if isinstance(opts, dict) and keys:
            opts = {k: (str(resolve(v)) if k in keys and isinstance(v, str) and v else v) for k, v in opts.items()}
        out[name] = opts
    return out


_OPTION_MESSAGE = re.compile(r"^[\w .+-]+: option (\w+)(?::\s*|\s+)(.*)$", re.S)


def _with_key_path(where: str, message: str) -> str:
    """'BERTScore: option num_layers: expected ...' -> 'metric_options.BERTScore.num_layers: expected ...'."""
    m = _OPTION_MESSAGE.match(message)
    return f"{where}.{m.group(1)}: {m.group(2)}" if m else f"{where}: {message}"


LAST_TURN = "the last reply, against the last turn's reference; earlier turns are not scored"


@register_family
class MetricsFamily(Family):
    name = "Metrics"
    scale = (0.0, 1.0)
    conversations = LAST_TURN

    def validate(self, ctx, category, names, where, *, used):
        problems = [METRICS.unknown_message(name, f"{where}[{i}]") for i, name in enumerate(names) if name not in METRICS]
        if problems:
            return problems
        for i, name in enumerate(names):
            try:
                metric = self.metric(ctx, name)
            except InputError as exc:
                if name not in ctx.cfg.metric_options and METRICS.canonical(name) not in ctx.cfg.metric_options:
                    # no metric_options entry, so nothing checked it when the config loaded (a rule check needs one)
                    problems.extend(f"{where}[{i}] ({name}): {msg}" for msg in getattr(exc, "problems", None) or [str(exc)])
                continue  # otherwise reported under metric_options when the config loaded
            problems.extend(f"{where}[{i}] ({name}): {msg}" for msg in metric.check_category(category))
        return problems

    def plan(self, ctx, category, names, n_items):
        """One score per sub-score (BLEU is BLEU-1..4), as the run counts them when it says "scored"."""
        subs = sum(len(METRICS.get(n).sub_scores) if n in METRICS else 1 for n in names)
        return {"scores": n_items * subs}

    def plan_notes(self, ctx, categories):
        """Under language en, the categories whose answers or references hold CJK text, and the metrics that
        cut those items as language cn does (their signature's `cjk` field): said in the plan and the
        closing lines, since the same key then mixes two tokenizations (issue 47: a Chinese answer equal to
        its reference had scored ROUGE 0.0 under en, averaged in without a word)."""
        if ctx.cfg.language != "en":
            return []
        found, aware = [], set()
        for cat, fams in categories.items():
            names = [n for n in fams.get("Metrics") or [] if "cjk" in self.metric(ctx, n).signature()]
            recs = [r for r in ctx.records if r.category == cat] if names else []
            n = sum(script_language("en", r.output, *r.targets) == "cn" for r in recs)
            if n:
                found.append(f"{cat} ({n} of {len(recs)} answers)")
                aware.update(names)
        if not found:
            return []
        keys = sorted(f"Metrics/{sub}" for n in aware for sub in METRICS.get(n).sub_scores)
        return [{"text": f"Metrics: language en, and {CJK_SCRIPTS} in {', '.join(found)}: {', '.join(sorted(aware))} "
                         "tokenise those items as under language cn (jieba words; characters for Precision, Recall, "
                         "F1), the others as English (each signature's cjk field says so)", "scores": keys}]

    def metric(self, ctx: Context, name: str) -> Metric:
        canon = METRICS.canonical(name) or name
        key = ("metric", canon, ctx.cfg.language)
        if key not in ctx.memo:
            options = ctx.cfg.metric_options
            ctx.memo[key] = build(canon, ctx.cfg.language, **options.get(canon, options.get(name, {})))
        return ctx.memo[key]

    def score(self, ctx, category, names, records: Sequence[Record]) -> FamilyOutput:
        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        for name in names:
            metric = self.metric(ctx, name)
            idx = list(range(len(records)))
            if metric.needs_reference:
                missing = [i for i in idx if not records[i].targets]
                for i in missing:
                    what = (f"the last turn (turn {len(records[i].turns)}) of record {records[i].id} has none"
                            if records[i].turns else f"record {records[i].id} has no target")
                    for sub in metric.sub_scores:
                        items[i].invalid[sub] = Invalid(reason=f"{metric.name} needs a reference and {what}")
                idx = [i for i in idx if records[i].targets]
            if not idx:
                continue
            inputs = [MetricInput(output=records[i].output, references=records[i].targets,
                                  source=records[i].question, category=category) for i in idx]
            per_item, why = metric.score_details(inputs)
            for i, scores, det in zip(idx, per_item, why):
                items[i].scores.update(scores)
                if det:
                    items[i].details.update({sub: dict(det) for sub in scores})
            sig = metric.signature()
            for sub in metric.sub_scores:
                out.signatures[sub] = sig
            if not str(sig.get("aggregate", "mean")).startswith("mean"):  # e.g. corpus BLEU / chrF
                out.corpus.update(metric.aggregate(inputs, per_item))
        for record, item in zip(records, items):
            if record.turns:
                for sub in (*item.scores, *item.invalid):
                    item.details[sub] = {**item.details.get(sub, {}), "turn": len(record.turns),
                                         "of": len(record.turns), "scored": LAST_TURN}
        return out
