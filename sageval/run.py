"""`run_sage`: the evaluator agent, then the SAGE agent, over a list of records."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from evaluate.backends.base import Backend
from evaluate.core.errors import InputError
from evaluate.core.records import Record
from evaluate.core.scores import Invalid, ItemScores

from .agents import Exchange, Progress, Weighted, ask_json, ask_weighted
from .aspects import ASPECTS_FILE, Aspect, file_hash, load_aspects, resolve_aspects
from .parsing import NEW_ASPECTS, REPLY, parse_evaluator_reply, parse_sage_reply
from .prompts import evaluator_request, load_prompts, sage_request, score_request
from .result import EVALUATOR_SUFFIX, AgentJudgement, SageItem, SageResult


def _wants_logprobs(backend: Backend, use_logprobs: bool | None, who: str) -> bool:
    if use_logprobs is None:
        return bool(backend.supports_logprobs)
    if use_logprobs and not backend.supports_logprobs:
        raise InputError(f"run_sage: use_logprobs=True but the {who} backend "
                         f"({backend.kind}:{backend.model}) gives no log-probabilities")
    return bool(use_logprobs)


def _stated(ex: Exchange, aspects: Sequence[Aspect], weighted: dict[str, Weighted | str],
            min_mass: float) -> dict[str, AgentJudgement]:
    """Each aspect's judgement from the kept JSON reply and, when asked, the weighted score."""
    best = ex.best
    out: dict[str, AgentJudgement] = {}
    for a in aspects:
        j = best.judgements.get(a.id) if best else None
        aj = AgentJudgement()
        if j is not None:
            aj.value, aj.reason, aj.stated, aj.source, aj.definition = j.value, j.reason, j.value, "reply", j.definition
        else:
            problems = best.problems if best else {}
            aj.invalid = problems.get(a.id) or problems.get(REPLY) or ex.backend_error or "no reply"
        w = weighted.get(a.id)
        if isinstance(w, Weighted):
            aj.digit_mass = round(w.mass, 4)
            if w.score is not None and w.mass >= min_mass:
                aj.value, aj.source, aj.invalid = w.score, "logprobs", None
            elif aj.value is None:
                aj.invalid = f"{aj.invalid}; and only {w.mass:.2f} of the one-digit probability fell on 1-5"
        elif isinstance(w, str) and aj.value is None:
            aj.invalid = f"{aj.invalid}; weighted score: {w}"
        out[a.id] = aj
    return out


def _weighted_round(backend: Backend, prompts, agent: str, records: Sequence[Record], aspects: Sequence[Aspect],
                    top_logprobs: int, context: list[dict[str, AgentJudgement]] | None = None,
                    progress: Progress | None = None) -> list[dict[str, Weighted | str]]:
    """One-token requests for every (item, score aspect), in one batch."""
    keys, requests = [], []
    for i, rec in enumerate(records):
        for a in aspects:
            if not a.is_score:
                continue
            ev = None
            if context is not None:
                prior = context[i][a.id]
                ev = (prior.value, prior.reason) if prior.value is not None else (None, prior.invalid or "")
            keys.append((i, a.id))
            requests.append(score_request(prompts, agent, rec, a, top_logprobs, ev))
    out: list[dict[str, Weighted | str]] = [{} for _ in records]
    for (i, aid), w in zip(keys, ask_weighted(backend, requests, progress, f"{agent} scores")):
        out[i][aid] = w
    return out


def _item_scores(rec: Record, aspects: Sequence[Aspect], ev: dict[str, AgentJudgement],
                 sg: dict[str, AgentJudgement], new_aspects: list, raws: dict[str, str],
                 sage_problems: dict[str, str]) -> ItemScores:
    s = ItemScores()
    labels: dict[str, dict[str, Any]] = {}
    for a in aspects:
        if a.is_score:
            for key, aj, agent in ((a.id, sg[a.id], "sage"), (a.id + EVALUATOR_SUFFIX, ev[a.id], "evaluator")):
                if aj.value is None:
                    s.invalid[key] = Invalid(f"{agent}: {aj.invalid}", raws[agent])
                else:
                    s.scores[key] = float(aj.value)
        else:
            labels[a.id] = {"evaluator": ev[a.id].value, "final": sg[a.id].value}
            for agent, aj in (("evaluator", ev[a.id]), ("sage", sg[a.id])):
                if aj.value is None:
                    labels[a.id][f"{agent}_invalid"] = aj.invalid
    s.details["sageval"] = {
        "evaluator": {aid: aj.to_dict() for aid, aj in ev.items()},
        "sage": {aid: aj.to_dict() for aid, aj in sg.items()},
        "suggested_definitions": {aid: aj.definition for aid, aj in sg.items() if aj.definition},
        "new_aspects": [{"name": n.name, "definition": n.definition, "score": n.score} for n in new_aspects],
        "labels": labels,
    }
    if NEW_ASPECTS in sage_problems:
        s.details["sageval"]["new_aspects_invalid"] = sage_problems[NEW_ASPECTS]
    label_aspects = [a for a in aspects if not a.is_score]
    if label_aspects:
        first = labels[label_aspects[0].id]
        s.details["sageval"]["sentiment"] = first["final"] if first["final"] is not None else first["evaluator"]
    return s


def run_sage(backend: Backend, records: Sequence[Record], aspects: Sequence[str | Aspect] | None = None, *,
             sage_backend: Backend | None = None, max_retries: int = 2, use_logprobs: bool | None = None,
             language: str = "en", aspects_file: str | Path | None = None,
             prompts_file: str | Path | None = None, max_new_aspects: int = 3, max_tokens: int = 1024,
             top_logprobs: int = 20, min_digit_mass: float = 0.5, tolerance: float = 0.5,
             progress: Progress | None = None) -> SageResult:
    """Judge `records` with the evaluator agent on `backend`, then rectify with the SAGE agent.

    aspects: names (validated, did-you-mean on a typo) or Aspect objects; None: every aspect
        of the aspects file.
    sage_backend: the meta-evaluator's judge (default: the same backend).
    max_retries: follow-up requests, quoting the parse error, for a reply that fails the schema.
    use_logprobs: None: weighted scores wherever the backend gives log-probabilities;
        True: require them; False: use the scores stated in the JSON replies.
    max_tokens: the budget of a JSON reply (a reply cut there is closed after its last full
        sentence when that gives every aspect, and retried otherwise).
    min_digit_mass: below this probability on "1".."5" a weighted score is not used.
    tolerance: how far SAGE must move a score to count as lowered/raised.
    progress: called as (stage, done, total) after each judge call.
    """
    if max_retries < 0:
        raise InputError(f"run_sage: max_retries must be >= 0, got {max_retries}")
    if not 0 <= max_new_aspects <= 10:
        raise InputError(f"run_sage: max_new_aspects must be from 0 to 10, got {max_new_aspects}")
    for i, rec in enumerate(records):
        if not isinstance(rec, Record):
            raise InputError(f"run_sage: records[{i}] must be a Record (evaluate.core.records), "
                             f"got {type(rec).__name__}")
    sage_backend = sage_backend or backend
    known = load_aspects(aspects_file, language)
    chosen = resolve_aspects(aspects, known)
    prompts = load_prompts(prompts_file, language)
    evaluator_weighted = _wants_logprobs(backend, use_logprobs, "evaluator")
    sage_weighted = _wants_logprobs(sage_backend, use_logprobs, "SAGE")

    # 1. the evaluator agent
    evaluator_exchanges = ask_json(backend, [evaluator_request(prompts, r, chosen, max_tokens) for r in records],
                     lambda text: parse_evaluator_reply(text, chosen), prompts, "evaluator", max_retries,
                     progress)
    evaluator_weights: list[dict[str, Weighted | str]] = [{} for _ in records]
    if evaluator_weighted:
        evaluator_weights = _weighted_round(backend, prompts, "evaluator", records, chosen, top_logprobs, None,
                                            progress)
    evaluator = [_stated(ex, chosen, w, min_digit_mass) for ex, w in zip(evaluator_exchanges, evaluator_weights)]

    # 2. the SAGE agent reads each item with the evaluator's judgements
    sage_reqs = [sage_request(prompts, r, chosen,
                              {aid: (aj.value, aj.reason) for aid, aj in ev.items() if aj.value is not None},
                              max_tokens, max_new_aspects)
                 for r, ev in zip(records, evaluator)]
    sage_exchanges = ask_json(sage_backend, sage_reqs, lambda text: parse_sage_reply(text, chosen, max_new_aspects),
                     prompts, "sage", max_retries, progress)
    sage_weights: list[dict[str, Weighted | str]] = [{} for _ in records]
    if sage_weighted:
        sage_weights = _weighted_round(sage_backend, prompts, "sage", records, chosen, top_logprobs, evaluator,
                                       progress)
    sage = [_stated(ex, chosen, w, min_digit_mass) for ex, w in zip(sage_exchanges, sage_weights)]

    items = []
    for rec, exchange_ev, exchange_sage, ev, sg in zip(records, evaluator_exchanges, sage_exchanges, evaluator, sage):
        raws = {"evaluator": exchange_ev.raw, "sage": exchange_sage.raw}
        new = exchange_sage.best.new_aspects if exchange_sage.best else []
        problems = exchange_sage.best.problems if exchange_sage.best else {}
        scores = _item_scores(rec, chosen, ev, sg, new, raws, problems)
        closed = {"evaluator": exchange_ev.closed, "sage": exchange_sage.closed}
        if any(closed.values()):  # which agents' kept replies were cut at the token limit and closed
            scores.details["sageval"]["cut_and_closed"] = [agent for agent, c in closed.items() if c]
        items.append(SageItem(
            record_id=rec.id, category=rec.category, evaluator=ev, sage=sg, new_aspects=list(new), raw=raws,
            attempts={"evaluator": len(exchange_ev.attempts), "sage": len(exchange_sage.attempts)},
            closed=closed,
            scores=scores))

    aspects_path = Path(aspects_file) if aspects_file else ASPECTS_FILE
    signature = {
        "evaluator": "SAGEval",
        "language": language,
        "aspects": [a.id for a in chosen],
        "aspects_file": str(aspects_path), "aspects_sha256": file_hash(aspects_path),
        "prompts_file": prompts.source, "prompts_sha256": prompts.sha,
        "evaluator_backend": backend.signature(), "sage_backend": sage_backend.signature(),
        "weighted_scores": {"evaluator": evaluator_weighted, "sage": sage_weighted},
        "top_logprobs": top_logprobs, "min_digit_mass": min_digit_mass,
        "max_retries": max_retries, "max_new_aspects": max_new_aspects, "max_tokens": max_tokens,
    }
    return SageResult(aspects=chosen, items=items, signature=signature, tolerance=tolerance)

