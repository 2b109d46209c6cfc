"""The `SAGEval` family: an evaluator agent scores each aspect, a SAGE meta-evaluator rectifies.

Per item, the final (rectified) scores are `SAGEval/<aspect>` and the first agent's scores
`SAGEval/<aspect>@evaluator`; reasons, suggested definitions and new aspects are in the item's
details. Per model, `sageval/<model>.json` holds the run summary by category: means before and
after, how many scores were lowered and raised, suggested definitions, frequent new aspects.
Both agents use the run's judge.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from ..core.errors import InputError
from ..savepath.layout import sageval_file
from ..savepath.log import write_run_log
from ..savepath.records import SagevalSummary
from ..core.options import option
from .base import Family, FamilyOutput, register_family


_SUMMARY_LOCK = threading.Lock()


@dataclass
class SAGEvalOptions:
    max_retries: int = option(2, "new requests after a reply that does not parse", min=0)
    use_logprobs: bool | None = option(None, "probability-weighted scores too (null: when the judge gives log-probabilities)")
    aspects_file: str | None = option(None, "a JSON file of aspect definitions (default: the packaged aspects)")
    prompts_file: str | None = option(None, "a JSON file of the agents' prompts (default: the packaged prompts)")
    max_new_aspects: int = option(3, "most new aspects SAGE may suggest per item", min=0)
    max_tokens: int = option(1024, "most tokens of each agent's JSON reply", min=16)


@register_family
class SAGEvalFamily(Family):
    name = "SAGEval"
    options_key = "sageval"
    Options = SAGEvalOptions
    scale = (1.0, 5.0)

    def _kwargs(self, ctx) -> dict:
        opts = asdict(ctx.options)
        for key in ("aspects_file", "prompts_file"):
            if opts[key]:
                opts[key] = str(ctx.cfg.resolve(opts[key]))
        return opts

    def validate(self, ctx, category, names, where, *, used):
        from sageval import validate_aspects
        from sageval.aspects import load_aspects

        aspects_file = ctx.options.aspects_file
        try:  # the aspects of the run's language, so a cn config may name 公平性 as well as fairness
            known = load_aspects(str(ctx.cfg.resolve(aspects_file)) if aspects_file else None,
                                 language=ctx.cfg.language)
        except InputError as exc:
            return [str(exc)]
        return validate_aspects(names, where, known=known)

    def plan(self, ctx, category, names, n_items):
        # per item: the evaluator's JSON reply and SAGE's, plus one one-token scoring call per aspect
        # and agent when probability-weighted scores are used (retries not counted)
        weighted = ctx.options.use_logprobs is not False  # None: wherever the judge gives log-probabilities
        per_item = 2 + (2 * len(names) if weighted else 0)
        return {"scores": n_items * len(names), "judge_calls": n_items * per_item}

    def uses_judge(self, ctx):
        return True

    def judge_bound(self, ctx):
        return True

    def score(self, ctx, category, names, records):
        from sageval import run_sage

        result = run_sage(ctx.judge(), records, names, language=ctx.cfg.language, **self._kwargs(ctx))
        with _SUMMARY_LOCK:  # categories may finish in any order (judge_bound): the file keeps the config's
            summaries = ctx.memo.setdefault("summaries", {})
            model = ctx.model or "model"
            mine = summaries.setdefault(model, {})
            mine[category] = result.summary()
            order = list(ctx.cfg.categories)
            summaries[model] = mine = dict(sorted(mine.items(), key=lambda kv: order.index(kv[0])
                                                  if kv[0] in order else len(order)))
            if ctx.save_path is not None:  # written after each category, so an interrupted run keeps it
                write_run_log(ctx.save_path, [SagevalSummary(model=model, by_category=mine)])
        keys = {k for it in result.items for k in (*it.scores.scores, *it.scores.invalid)}
        return FamilyOutput(items=[it.scores for it in result.items],
                            signatures={k: {**result.signature, "score": k} for k in keys})

    def score_run(self, ctx, categories):
        summaries = ctx.memo.get("summaries", {})
        if not summaries or ctx.save_path is None:
            return None
        models = [s.name for s in ctx.sets if s.name in summaries] + [m for m in summaries
                                                                       if m not in {s.name for s in ctx.sets}]
        return {"summaries": [str(sageval_file(ctx.save_path, m)) for m in models]}
