"""UniEval's Boolean questions asked to a causal-LM judge instead of the T5 checkpoints.

Each question becomes a one-token request; the answer's score is P(Yes) / (P(Yes) + P(No)) read
from the judge's top log-probabilities (`evaluate.core.expected.yes_probability`), combined over
a dimension's questions (sentence-level dimensions ask one per sentence) the way UniEval
combines its T5 probabilities.
"""

from __future__ import annotations

from typing import Any, Sequence

from evaluate.backends.base import Backend, JudgeRequest
from evaluate.core.expected import yes_probability
from evaluate.core.scores import Invalid, ItemScores

from .questions import build_inputs
from .scoring import combine

JUDGE_INSTRUCTION = "Answer with one word, Yes or No."


def judge_scores(backend: Backend, task: str, dim: str, name: str, args: dict[str, Sequence[str]],
                 items: list[ItemScores]) -> dict[str, Any]:
    """Score every item of `args` on `task`/`dim` into `items[i]` (under `name`); returns the signature."""
    units = build_inputs(task, dim, **args, lm_instruction=JUDGE_INSTRUCTION)
    requests = [JudgeRequest.chat(None, text, max_tokens=1, top_logprobs=20) for text, _ in units]
    comps = backend.complete_many(requests)
    per_unit = [yes_probability(c.top_logprobs[0]) if c.ok and c.top_logprobs else None for c in comps]
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
        it.scores[name] = combine(task, dim, [per_unit[u] for u in us], [0] * len(us), 1)[0]
    return {"evaluator": "UniEval questions asked to a causal-LM judge", "dimension": name,
            "judge": backend.signature(), "score": "P(Yes)/(P(Yes)+P(No)) from top-20 logprobs"}
