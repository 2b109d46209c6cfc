"""The `UniEval` family: T5 Boolean-QA scores, P(Yes) / (P(Yes) + P(No)).

Two ways to answer the Boolean questions:
- `t5` (default): the real UniEval checkpoints, from `path_for_UniEval.<task>` (ColossalAI's key);
- `judge`: the same questions asked to the run's judge (a local causal LM or an OpenAI-compatible
  server with log-probabilities), for users without T5 checkpoints. Set `unieval: {evaluator: judge}`.

Inputs, as ColossalAI passed them: the source (document / dialogue history) is the question
(instruction + input) unless the record carries a `source`; the reference is the first target,
or the output itself when there is none; the dialogue fact is the record's `context` (or "").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

from ..core.errors import InputError
from ..core.options import option
from ..core.records import Record
from ..core.scores import ItemScores
from .base import Family, FamilyOutput, register_family


@dataclass
class UniEvalOptions:
    evaluator: Literal["t5", "judge"] = option("t5", "t5: the checkpoints of path_for_UniEval; judge: ask the run's judge")
    device: str = option("auto", "t5: where the checkpoints run: auto (a CUDA GPU when torch sees one, else the CPU), "
                                 "cpu, cuda, cuda:N or mps (as judge.device)", nonempty=True)

    def problems(self) -> list[tuple[str, str]]:
        from ..models.device import device_problem

        bad = device_problem(self.device) if self.evaluator == "t5" else None
        return [("device", bad)] if bad else []


def _resolve(cfg, path: str) -> Path:
    """Relative to the config file when such a folder exists there, else as given (ColossalAI's
    configs hold paths relative to where eval.py is started)."""
    near_config = cfg.resolve(path)
    return near_config if near_config.exists() else Path(path).expanduser()


def _inputs(records: Sequence[Record]) -> dict[str, list[str]]:
    return {
        "outputs": [r.output for r in records],
        "sources": [r.extra.get("source") or r.question for r in records],
        "references": [r.target or r.output for r in records],
        "contexts": [r.extra.get("context") or "" for r in records],
    }


@register_family
class UniEvalFamily(Family):
    name = "UniEval"
    options_key = "unieval"
    Options = UniEvalOptions
    scale = (0.0, 1.0)

    def uses_judge(self, ctx):
        return ctx.options.evaluator == "judge"

    def judge_bound(self, ctx):
        return ctx.options.evaluator == "judge"

    def validate(self, ctx, category, names, where, *, used):
        import unieval

        problems = []
        for i, name in enumerate(names):
            try:
                task, _ = unieval.parse_name(name)
            except InputError as exc:
                problems.append(f"{where}[{i}]: {exc}")
                continue
            if used and ctx.options.evaluator == "t5":
                path = ctx.cfg.path_for_unieval.get(task)
                if path is None:
                    problems.append(f"{where}[{i}]: \"{name}\" needs path_for_UniEval.{task}; "
                                    f"{unieval.download_hint(task)} (or set unieval.evaluator: judge)")
                    continue
                try:
                    unieval.check_checkpoint(_resolve(ctx.cfg, path), task)
                except InputError as exc:
                    problems.append(f"{where}[{i}]: path_for_UniEval.{task}: {exc}")
        return problems

    def plan(self, ctx, category, names, n_items):
        out = {"scores": n_items * len(names)}
        if ctx.options.evaluator == "judge":
            out["judge_calls"] = n_items * len(names)  # at least; per-sentence dimensions ask more
        return out

    def score(self, ctx, category, names, records):
        import unieval
        from unieval.judge import judge_scores

        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        args = _inputs(records)
        for name in names:
            task, dim = unieval.parse_name(name)
            if ctx.options.evaluator == "t5":
                path = str(_resolve(ctx.cfg, ctx.cfg.path_for_unieval[task]))
                key = ("t5", path)
                if key not in ctx.memo:
                    ctx.memo[key] = unieval.UniEvaluator(path, task=task, device=ctx.options.device)
                ev = ctx.memo[key]
                for it, s in zip(items, ev.score(task, dim, **args)):
                    it.scores[name] = s
                out.signatures[name] = {**ev.signature(), "evaluator": "UniEval T5", "dimension": name}
            else:
                out.signatures[name] = judge_scores(ctx.judge(), task, dim, name, args, items)
        return out
