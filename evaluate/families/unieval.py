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

import math
from typing import Any, Sequence

from ..backends.base import JudgeRequest
from ..errors import InputError
from ..records import Record
from ..scores import Invalid, ItemScores
from . import Family, FamilyOutput

JUDGE_INSTRUCTION = "Answer with one word, Yes or No."


def yes_probability(top: dict[str, float]) -> float | None:
    """P(Yes) / (P(Yes) + P(No)) from one position's top log-probabilities (token text -> logprob).

    Token texts are compared stripped and case-folded, so "Yes", " yes" and "YES" all count.
    None when neither word is among the top tokens."""
    yes = no = 0.0
    for tok, lp in top.items():
        word = tok.strip().lower()
        if word == "yes":
            yes += math.exp(lp)
        elif word == "no":
            no += math.exp(lp)
    return yes / (yes + no) if yes + no > 0 else None


class UniEvalFamily(Family):
    name = "UniEval"

    def __init__(self) -> None:
        self._evaluators: dict[str, Any] = {}

    @staticmethod
    def mode(cfg) -> str:
        mode = cfg.unieval.get("evaluator", "t5")
        if mode not in ("t5", "judge"):
            raise InputError(f'unieval.evaluator: expected "t5" or "judge", got "{mode}"')
        return mode

    def validate(self, cfg, category, names, where, *, used):
        import unieval

        problems = []
        try:
            mode = self.mode(cfg)
        except InputError as exc:
            return [str(exc)]
        for i, name in enumerate(names):
            try:
                task, _ = unieval.parse_name(name)
            except InputError as exc:
                problems.append(f"{where}[{i}]: {exc}")
                continue
            if used and mode == "t5":
                path = cfg.path_for_unieval.get(task)
                if path is None:
                    problems.append(f"{where}[{i}]: \"{name}\" needs path_for_UniEval.{task}; "
                                    f"{unieval.model.download_hint(task)} (or set unieval.evaluator: judge)")
                    continue
                try:
                    unieval.check_checkpoint(_resolve(cfg, path), task)
                except InputError as exc:
                    problems.append(f"{where}[{i}]: path_for_UniEval.{task}: {exc}")
        return problems

    def plan(self, cfg, category, names, n_items):
        out = {"scores": n_items * len(names)}
        if self.mode(cfg) == "judge":
            out["judge_calls"] = n_items * len(names)  # at least; per-sentence dimensions ask more
        return out

    def _inputs(self, records: Sequence[Record]) -> dict[str, list[str]]:
        return {
            "outputs": [r.output for r in records],
            "sources": [r.extra.get("source") or r.question for r in records],
            "references": [r.target or r.output for r in records],
            "contexts": [r.extra.get("context") or "" for r in records],
        }

    def run(self, cfg, category, names, records):
        import unieval

        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        args = self._inputs(records)
        for name in names:
            task, dim = unieval.parse_name(name)
            if self.mode(cfg) == "t5":
                ev = self._t5(cfg, task)
                scores = ev.score(task, dim, **args)
                for it, s in zip(items, scores):
                    it.scores[name] = s
                out.signatures[name] = {**ev.signature(), "evaluator": "UniEval T5", "dimension": name}
            else:
                self._judge_scores(cfg, task, dim, name, args, items, out)
        return out

    def _t5(self, cfg, task):
        import unieval

        path = str(_resolve(cfg, cfg.path_for_unieval[task]))
        if path not in self._evaluators:
            self._evaluators[path] = unieval.UniEvaluator(path, task=task)
        return self._evaluators[path]

    def _judge_scores(self, cfg, task, dim, name, args, items, out):
        import unieval

        from .judging import make_backend

        backend = make_backend(cfg)
        units = unieval.build_inputs(task, dim, **args, lm_instruction=JUDGE_INSTRUCTION)
        requests = [JudgeRequest.chat(None, text, max_tokens=1, top_logprobs=20)
                    for text, _ in units]
        comps = backend.complete_many(requests)
        per_unit: list[float | None] = []
        for c in comps:
            per_unit.append(yes_probability(c.top_logprobs[0]) if c.ok and c.top_logprobs else None)
        by_item: dict[int, list[int]] = {}
        for u, (_, idx) in enumerate(units):
            by_item.setdefault(idx, []).append(u)
        for idx, it in enumerate(items):
            us = by_item.get(idx, [])
            bad = [u for u in us if per_unit[u] is None]
            if bad:
                c = comps[bad[0]]
                reason = c.error or "neither Yes nor No among the judge's top tokens"
                it.invalid[name] = Invalid(reason=reason, raw=c.text or str(c.top_logprobs[:1]))
                continue
            it.scores[name] = unieval.combine(task, dim, [per_unit[u] for u in us], [0] * len(us), 1)[0]
        out.signatures[name] = {"evaluator": "UniEval questions asked to a causal-LM judge", "dimension": name,
                                "judge": backend.signature(), "score": "P(Yes)/(P(Yes)+P(No)) from top-20 logprobs"}

    def close(self):
        self._evaluators.clear()


def _resolve(cfg, path: str):
    """Relative to the config file when such a folder exists there, else as given (ColossalAI's
    configs hold paths relative to where eval.py is started)."""
    from pathlib import Path

    near_config = cfg.resolve(path)
    return near_config if near_config.exists() else Path(path).expanduser()
