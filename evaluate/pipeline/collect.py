"""Judge requests out of the run and results back in: any batch engine can do the judging.

`eval.py --config C --export-requests FILE.jsonl` writes every judge request the run still needs
(what the cache does not hold) in the OpenAI batch format, which vLLM's offline runner reads:

    python -m vllm.entrypoints.openai.run_batch -i FILE.jsonl -o OUT.jsonl --model M

`eval.py --config C --import-results OUT.jsonl` loads that output into the judge cache, each line
checked against the requests of the run (`custom_id` is the cache key; an unknown id or a reply of
another model is refused, nothing is stored then); the next normal run completes from the cache.

How the requests are found: the run's judge families (GPT, SAGEval, UniEval with the judge) are
driven exactly as a run drives them, with a judge that answers from the cache and records every
miss instead of sending it. Nothing is scored or written to the save path. Work that depends on
earlier replies (SAGEval's second agent, re-asks after an unparsable reply) shows up only once
those replies are in the cache: export, judge, import, and export again until nothing is left.
The same collection gives `--dry-run` its token and cost estimate.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..backends.base import (Backend, Completion, JudgeRequest, ProgressFn, WrappingBackend, cost_usd,
                             estimate_tokens)
from ..backends.batch import batch_line, read_result_file, request_body
from ..backends.cache import CachedBackend
from ..backends.pool import JudgePool
from ..backends.registry import capabilities
from ..backends import speed
from ..core.errors import InputError
from .plan import Prepared, family_context
from .savedir import SaveDir

EXPORTED = "not judged yet: exported for a batch engine"


class _Recorder(WrappingBackend):
    """Under the cache: records each miss and answers it with an error (the families record invalid);
    the judge it stands for (`inner`, never called) gives its signature and capabilities."""

    def complete(self, request: JudgeRequest) -> Completion:
        return Completion(error=EXPORTED)

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        return [Completion(error=EXPORTED) for _ in requests]


class _SeeingCache(CachedBackend):
    """The cache, noting every request asked (hits and misses) with its key."""

    def __init__(self, inner: Backend, path: Path | str):
        super().__init__(inner, path)
        self.seen: dict[str, JudgeRequest] = {}
        self.missing: dict[str, JudgeRequest] = {}
        # Set once a call of the current family step had a miss: the step's later requests may be
        # built from that unanswered reply (SAGE reads the first agent's), so they are not exported
        # now (that would pay for a request made from an error) but in the next round.
        self.tainted = False
        self.deferred = 0

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        out = super().complete_many(requests, progress)
        missed = False
        for req, comp in zip(requests, out):
            key = self.key(req)
            self.seen.setdefault(key, req)
            if not comp.cached:
                missed = True
                if self.tainted:
                    self.deferred += 1
                else:
                    self.missing.setdefault(key, req)
        self.tainted = self.tainted or missed
        return out

    def complete(self, request: JudgeRequest) -> Completion:
        return self.complete_many([request])[0]


class _RecordingPool(JudgePool):
    def __init__(self, cache_dir: Path):
        super().__init__(api_key=None)
        self._scratch = cache_dir
        self.caches: list[_SeeingCache] = []

    def backend(self, opts, cache_path):  # type: ignore[override]
        key = self.key(opts, cache_path)
        with self._lock:
            if key not in self._backends:
                real = _identity(opts)
                # an existing cache answers; a missing one is not created in the save path
                path = cache_path if cache_path is not None and cache_path.exists() else self._scratch / "empty.sqlite"
                cache = _SeeingCache(_Recorder(real), path)
                cache.price = opts.price  # a panel's estimate prices each judge's requests at its own price
                cache.in_process = capabilities(opts).in_process  # its time is estimated from its measured speed
                self.caches.append(cache)
                self._keep(key, cache)
            return self._backends[key]


def _identity(opts) -> Backend:
    """The judge's backend object for its signature and capabilities only (no call is made, no key needed)."""
    from ..backends.registry import identity

    return identity(opts)


def cached_flags(opts: Any, cache_path: Path | None, requests: Sequence[JudgeRequest]) -> list[bool]:
    """Which of `requests` the judge cache at `cache_path` answers now for the judge `opts` describe (a
    benchmark's dry run counts them as not to send): no call is made, and a cache that does not exist is
    not created."""
    if cache_path is None or not Path(cache_path).exists() or not requests:
        return [False] * len(requests)
    cache = CachedBackend(_Recorder(_identity(opts)), cache_path)
    try:
        return [c.cached for c in cache.complete_many(list(requests))]
    finally:
        cache.close()


@dataclass
class Collected:
    model: str
    seen: dict[str, JudgeRequest] = field(default_factory=dict)  # every request of the run (cache key -> request)
    missing: dict[str, JudgeRequest] = field(default_factory=dict)  # those the cache does not answer
    deferred: int = 0  # requests built on replies not in the cache yet: the next round's
    parts: list[tuple[list[JudgeRequest], dict[str, float] | None]] = field(default_factory=list)  # per judge
    timed: list[tuple[list[JudgeRequest], dict[str, Any]]] = field(default_factory=list)  # in-process: signature


def collect(prep: Prepared, log: Callable[[str], None] = lambda s: None) -> Collected:
    """Every judge request the run would make now (see the module docstring), from the inputs the
    run loaded (`plan.load_inputs`): the answers and the plan are not loaded or built again."""
    cfg, sets, plan, fam_objs, contexts = prep.cfg, prep.sets, prep.plan, prep.fam_objs, prep.contexts
    with tempfile.TemporaryDirectory(prefix="eval-export-") as tmp:
        pool = _RecordingPool(Path(tmp))
        ctxs = {f: family_context(cfg, f, sets, judges=pool, save_path=Path(tmp),
                                 save=SaveDir(Path(tmp)), log=log)
                for f, obj in fam_objs.items() if obj.uses_judge(contexts[f])}
        for s in sets:
            by_cat: dict[str, list] = {}
            for r in s.records:
                by_cat.setdefault(r.category, []).append(r)
            for cat, fams in plan.categories.items():
                for fam, names in fams.items():
                    if fam in ctxs and by_cat.get(cat):
                        for cache in pool.caches:
                            cache.tainted = False
                        fam_objs[fam].score(ctxs[fam].for_model(s.name), cat, names, by_cat[cat])
        for fam, ctx in ctxs.items():
            for cache in pool.caches:
                cache.tainted = False
            fam_objs[fam].score_run(ctx, plan.categories)
        out = Collected(model=cfg.judge.model)
        for cache in pool.caches:
            out.seen.update(cache.seen)
            out.missing.update(cache.missing)
            out.deferred += cache.deferred
            out.parts.append((list(cache.missing.values()), getattr(cache, "price", None)))
            if getattr(cache, "in_process", False):
                out.timed.append((list(cache.missing.values()), cache.inner.signature()))
            cache.close()
    return out


def export_requests(prep: Prepared, path: Path, *, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Write the requests the run still needs to `path` (OpenAI batch JSONL); returns counts."""
    cfg = prep.cfg
    got = collect(prep, log)
    logprobs = _identity(cfg.judge).supports_logprobs
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for key, req in got.missing.items():
            fh.write(batch_line(key, request_body(cfg.judge.model, req, logprobs=logprobs)) + "\n")
    tmp.replace(path)
    return {"requests": len(got.missing), "cached": len(got.seen) - len(got.missing) - got.deferred,
            "deferred": got.deferred, "file": str(path), "model": cfg.judge.model}


def import_results(prep: Prepared, path: Path, *, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Load a batch engine's output into the judge cache; refuses the whole file (InputError) on an
    unknown custom_id or a reply from another model, before storing anything."""
    from ..backends.cache_path import judge_cache_path

    cfg = prep.cfg
    cache_path = judge_cache_path(cfg)
    if cache_path is None:
        raise InputError("--import-results: judge.cache is false; the results go to the judge cache, turn it on")
    got = collect(prep, log)
    if not path.is_file():
        raise InputError(f"--import-results: {path}: no such file")
    ok, failed, problems = read_result_file(
        path, got.seen, cfg.judge.model, unknown="a request of this run (exported from another config, judge or cache?)",
        model_key="the run's judge (judge.model)")
    if problems:
        raise InputError("--import-results refused, nothing was stored:\n  " + "\n  ".join(problems[:20]))
    cache = CachedBackend(_Recorder(_identity(cfg.judge)), cache_path)
    try:
        stored = 0
        for start in range(0, len(ok), 5000):  # one transaction per 5,000 rows
            stored += cache.store_many([(cid, got.seen[cid], comp) for cid, comp in ok[start:start + 5000]])
    finally:
        cache.close()
    left = len(set(got.missing) - {cid for cid, _ in ok})
    return {"stored": stored, "failed": len(failed), "failures": failed[:10], "still_missing": left,
            "cache": str(cache_path)}


def estimate(prep: Prepared) -> dict[str, Any] | None:
    """--dry-run: the judge requests still to send, their tokens (prompt: characters / 4; completion:
    at most max_tokens) and, with judge.price, the cost with and without batch (batch = half price)."""
    cfg = prep.cfg
    got = collect(prep)
    if not got.seen:
        return None
    prompt, completion = estimate_tokens(list(got.missing.values()))
    out: dict[str, Any] = {"requests": len(got.missing), "cached": len(got.seen) - len(got.missing) - got.deferred,
                           "prompt_tokens": prompt, "completion_tokens_max": completion, "cost_usd_max": None,
                           "batch_cost_usd_max": None}
    if getattr(cfg, "panel", None) is not None:  # each judge's requests at its own price; all priced, or none
        if all(price for _, price in got.parts):
            cost = sum(cost_usd(*estimate_tokens(reqs), price) for reqs, price in got.parts)  # type: ignore[arg-type]
            out["cost_usd_max"] = round(cost, 4)
            out["batch_cost_usd_max"] = round(cost / 2, 4)
        else:
            out["cost_note"] = "not every judge of the panel has a price (judge[i].price): no cost estimate"
    elif cfg.judge.price:
        cost = cost_usd(prompt, completion, cfg.judge.price)
        out["cost_usd_max"] = round(cost, 4)
        out["batch_cost_usd_max"] = round(cost / 2, 4)
    if got.timed:
        out.update(local_time(got.timed))
    return out


def local_time(timed: list[tuple[list[JudgeRequest], dict[str, Any]]]) -> dict[str, Any]:
    """The seconds an in-process judge's requests will take, from its measured speed on this machine
    (evaluate.backends.speed): `local_seconds` (None where a judge was never measured here) and how."""
    total, how = 0.0, []
    for reqs, sig in timed:
        if not reqs:
            continue
        fitted = speed.measured(sig)
        if fitted is None:
            return {"local_seconds": None, "local_time": f"{sig.get('model', 'the judge')} has not been measured on "
                                                          "this machine yet (a run records its speed)"}
        total += fitted.seconds(reqs)
        short = "" if fitted.generated or all(r.max_tokens <= 1 for r in reqs) else "at least "
        how.append(f"{short}{sig.get('model', 'the judge')}: {fitted.describe()}")
    return {"local_seconds": round(total, 3), "local_time": "; ".join(how)}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return (f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h") + f" ({seconds:,.0f} s)"


def describe_estimate(est: dict[str, Any] | None) -> str:
    if est is None:
        return "judge: no judge requests in this run"
    text = (f"judge requests to send: {est['requests']} (already cached: {est['cached']}); prompt tokens ~"
            f"{est['prompt_tokens']:,} (characters / 4), completion tokens at most {est['completion_tokens_max']:,}")
    if est["cost_usd_max"] is not None:
        text += (f"; cost at most ${est['cost_usd_max']:.4f}, with judge.batch (half price) "
                 f"${est['batch_cost_usd_max']:.4f}")
    elif est.get("cost_note"):
        text += f"; {est['cost_note']}"
    text += ("\n  (requests that depend on earlier replies, e.g. SAGEval's second agent and re-asks, are "
             "counted once those replies are cached)")
    if "local_seconds" in est:
        text += ("\nlocal judge time: " + (f"about {_duration(est['local_seconds'])}, an upper bound where replies end "
                                           f"before max_tokens ({est['local_time']})" if est["local_seconds"] is not None
                                           else f"not estimated: {est['local_time']}"))
    return text


def prefetch_batches(prep: Prepared, judges: JudgePool, *, max_rounds: int = 6,
                     log: Callable[[str], None] = lambda s: None) -> int:
    """judge.batch: send the whole run's requests as one batch job per round before scoring.

    Without this, each (model, category) of a run would be its own batch, waited for in turn. A
    round is what `collect` finds missing; the families then ask again from the cache, and what
    depends on those replies (SAGEval's second agent, re-asks) is the next round. Requests that
    failed for good are not asked again in this run. Returns the number of rounds sent.
    """
    from ..backends.cache_path import judge_cache_path

    backend = judges.backend(prep.cfg.judge, judge_cache_path(prep.cfg))
    tried: set[str] = set()
    for n in range(max_rounds):  # each round drives the families again (the cache changed), never reloads
        todo = {k: r for k, r in collect(prep).missing.items() if k not in tried}
        if not todo:
            return n
        log(f"batch round {n + 1}: {len(todo)} judge requests in one batch job")
        backend.complete_many(list(todo.values()))
        tried.update(todo)
    return max_rounds
