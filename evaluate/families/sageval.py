"""The `SAGEval` family: an evaluator agent scores each aspect, a SAGE meta-evaluator rectifies.

Per item, the final (rectified) scores are `SAGEval/<aspect>` and the first agent's scores
`SAGEval/<aspect>@evaluator`; reasons, suggested definitions and new aspects are in the item's
details. Per model and category, `sageval/<model>.json` holds the run summary: means before and
after, how many scores were lowered and raised, suggested definitions, frequent new aspects.
Settings: `sageval: {max_retries: 2, use_logprobs: null, aspects_file: ..., prompts_file: ...}`;
both agents use the run's judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..results import atomic_write_json, safe_name
from . import Family, FamilyOutput

OPTIONS = ("max_retries", "use_logprobs", "aspects_file", "prompts_file", "max_new_aspects", "max_tokens")


class SAGEvalFamily(Family):
    name = "SAGEval"

    def __init__(self) -> None:
        self._summaries: dict[str, dict[str, Any]] = {}

    def validate(self, cfg, category, names, where, *, used):
        from evaluate.errors import InputError
        from sageval import validate_aspects
        from sageval.aspects import load_aspects

        problems = [f"sageval: unknown option \"{k}\" (known: {', '.join(OPTIONS)})"
                    for k in cfg.sageval if k not in OPTIONS]
        aspects_file = cfg.sageval.get("aspects_file")
        try:  # the aspects of the run's language, so a cn config may name 公平性 as well as fairness
            known = load_aspects(str(cfg.resolve(aspects_file)) if aspects_file else None, language=cfg.language)
        except InputError as exc:
            return problems + [str(exc)]
        return problems + validate_aspects(names, where, known=known)

    def plan(self, cfg, category, names, n_items):
        # two JSON replies per item (evaluator, SAGE), plus one scoring call per aspect and agent
        # when log-probabilities are used; retries not counted
        return {"scores": n_items * len(names), "judge_calls": n_items * 2}

    def run(self, cfg, category, names, records):
        from sageval import run_sage

        from .judging import make_backend

        opts = {k: v for k, v in cfg.sageval.items() if k in OPTIONS}
        for key in ("aspects_file", "prompts_file"):
            if key in opts:
                opts[key] = str(cfg.resolve(opts[key]))
        result = run_sage(make_backend(cfg), records, names, language=cfg.language, **opts)
        self._summaries.setdefault(self.model or "model", {})[category] = result.summary()
        keys = {k for it in result.items for k in (*it.scores.scores, *it.scores.invalid)}
        return FamilyOutput(items=[it.scores for it in result.items],
                            signatures={k: {**result.signature, "score": k} for k in keys})

    def run_all(self, cfg, sets, categories, save: Path, log) -> dict[str, Any] | None:
        written = []
        for model, by_cat in self._summaries.items():
            path = save / "sageval" / f"{safe_name(model)}.json"
            atomic_write_json(path, {"model": model, "by_category": by_cat})
            written.append(str(path))
        return {"summaries": written} if written else None
