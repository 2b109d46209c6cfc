"""Asking the model under test: every question's turns through the judge's own machinery.

The backend is opened exactly as a run opens its judge (`ProbingPool.backend`: the one request pool
with its concurrency, endpoints with failover, retries, the probe that finds a dead endpoint in
seconds, under the SQLite cache keyed by the full request). Turns go out in rounds: every
question's turn 1 in one `complete_many` (all in flight together), then every turn 2 with the
conversation so far (the model's own turn-1 answer included), and so on. A request that still
fails after its retries, or comes back empty, leaves its question *missing* with the reason; it is
never written as an empty answer, and a later turn of that question is not asked.
"""

from __future__ import annotations

import contextvars
import json
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..backends.base import Backend, JudgeRequest, estimate_tokens
from ..backends.cache import cache_key, judge_blobs
from ..backends.retry import progress_bar
from .formats import Question, QuestionFile, default_temperature

TEMPLATE = ("openai-chat: [system], then user and assistant turns alternating, each turn sent with the "
            "conversation so far")


def temperature_of(opts: Any, kind: str, q: Question) -> float:
    return opts.temperature if opts.temperature is not None else default_temperature(kind, q.category)


def system_of(opts: Any, q: Question) -> str | None:
    """The record's own setup (a conversation's instruction) wins over the model config's `system`."""
    return q.system or opts.system or None


def build_request(opts: Any, kind: str, q: Question, history: list[str]) -> JudgeRequest:
    """Turn len(history)+1 of `q`, sent with the conversation so far."""
    msgs: list[tuple[str, str]] = []
    system = system_of(opts, q)
    if system:
        msgs.append(("system", system))
    for user, reply in zip(q.turns, history):
        msgs += [("user", user), ("assistant", reply)]
    msgs.append(("user", q.turns[len(history)]))
    return JudgeRequest(messages=tuple(msgs), max_tokens=opts.max_tokens, temperature=temperature_of(opts, kind, q),
                        stop=tuple(opts.stop or ()), seed=opts.seed, top_p=opts.top_p)


@dataclass
class Answers:
    """What came back: complete answers by question id, and why the others are missing."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    requests: int = 0
    cached: int = 0


def answer_all(qf: QuestionFile, opts: Any, backend: Backend, *, name: str,
               unreachable: Callable[[], str | None] = lambda: None,
               on_round: Callable[[Answers], None] | None = None, in_flight: int = 0) -> Answers:
    """Every question of `qf` asked of `backend`, turn by turn.

    `in_flight` > 0 (an HTTP model; the number of requests its pool keeps in flight): the questions of
    several turns are pipelined, each conversation going on as soon as its last reply is back (turn 2
    of a fast question does not wait for turn 1 of the slowest), through the backend's one shared pool.
    Otherwise (a local model, batch jobs) the turns go in rounds, each round one `complete_many`: what
    batches best. `on_round(result)` after each round (the answer file is rewritten there, so a killed
    run keeps what it has on disk as well as in the cache)."""
    out = Answers(answers={q.id: [] for q in qf.questions})
    total = sum(len(q.turns) for q in qf.questions)
    rounds = max((len(q.turns) for q in qf.questions), default=0)
    with progress_bar(total, desc=f"generate {name}"):
        if in_flight > 0 and rounds > 1:
            _pipelined(qf, opts, backend, out, unreachable, in_flight)
            if on_round is not None:
                on_round(out)
        else:
            _rounds(qf, opts, backend, out, unreachable, on_round, rounds)
    for qid in out.missing:
        out.answers.pop(qid, None)
    return out


def _take(out: Answers, q: Question, turn: int, c: Any) -> bool:
    out.requests += 1
    out.cached += int(c.cached)
    if c.ok and c.text.strip():
        out.answers[q.id].append(c.text)
        return True
    out.missing[q.id] = f"turn {turn + 1}: {c.error or 'empty reply'}"
    return False


def _unsent(out: Answers, qs: list[Question], turn: int, why: str) -> None:
    for q in qs:
        out.missing[q.id] = f"turn {turn + 1}: not sent: the model's server is unreachable: {why}"


def _rounds(qf: QuestionFile, opts: Any, backend: Backend, out: Answers, unreachable: Callable[[], str | None],
            on_round: Callable[[Answers], None] | None, rounds: int) -> None:
    for turn in range(rounds):
        batch = [q for q in qf.questions if len(q.turns) > turn and q.id not in out.missing]
        if not batch:
            break
        why = unreachable()
        if why is not None:
            _unsent(out, batch, turn, why)
            break
        comps = backend.complete_many([build_request(opts, qf.kind, q, out.answers[q.id]) for q in batch])
        for q, c in zip(batch, comps):
            _take(out, q, turn, c)
        if on_round is not None:
            on_round(out)


def _pipelined(qf: QuestionFile, opts: Any, backend: Backend, out: Answers,
               unreachable: Callable[[], str | None], in_flight: int) -> None:
    lock = threading.Lock()

    def converse(q: Question) -> None:
        for turn in range(len(q.turns)):
            why = unreachable()
            if why is not None:
                with lock:
                    _unsent(out, [q], turn, why)
                return
            c = backend.complete_many([build_request(opts, qf.kind, q, out.answers[q.id])])[0]
            with lock:
                if not _take(out, q, turn, c):
                    return

    # one thread per conversation in progress (they wait on the backend's pool, which bounds what is in
    # flight); each runs in a copy of this context, so the progress bar opened above is the one they add to
    workers = max(1, min(len(qf.questions), 2 * in_flight, 512))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="generate") as pool:
        for f in [pool.submit(contextvars.copy_context().run, converse, q) for q in qf.questions]:
            f.result()


@dataclass
class Estimate:
    """A dry run's count: requests in all, those the cache already answers, and the most tokens the rest take."""

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def to_send(self) -> int:
        return self.requests - self.cached


def walk(qf: QuestionFile, opts: Any, signature: dict[str, Any], cache: Path | None
         ) -> tuple[Estimate, dict[str, JudgeRequest], int]:
    """Walk the turns as `answer_all` would, answering from the cache where it can (read only; nothing
    is sent or written). Returns the estimate, the requests that can be sent now (by cache key: each
    question's first turn the cache lacks) and how many later turns wait on those replies. A waiting
    turn is counted with the most its history can be: the earlier replies at max_tokens each."""
    est = Estimate()
    pending: dict[str, JudgeRequest] = {}
    deferred = 0
    conn = None
    if cache is not None and Path(cache).is_file():
        conn = sqlite3.connect(f"file:{Path(cache).resolve()}?mode=ro", uri=True)
    judge, replicas, model_only = judge_blobs(signature)
    older = replicas + ([model_only] if model_only else [])  # what CachedBackend reads too
    try:
        for q in qf.questions:
            history: list[str] | None = []
            for turn in range(len(q.turns)):
                est.requests += 1
                if history is not None:
                    req = build_request(opts, qf.kind, q, history)
                    key = cache_key(judge, req)
                    row = None
                    for k in ([key] + [cache_key(j, req) for j in older]) if conn is not None else []:
                        row = conn.execute("SELECT completion FROM completions WHERE key = ?", (k,)).fetchone()
                        if row is not None:
                            break
                    if row is not None:
                        est.cached += 1
                        history.append(json.loads(row[0]).get("text", ""))
                        continue
                    prompt, _ = estimate_tokens([req])
                    pending[key] = req
                    history = None
                else:
                    users = sum(len(t) for t in q.turns[:turn + 1]) + len(system_of(opts, q) or "")
                    prompt = users // 4 + turn * opts.max_tokens
                    deferred += 1
                est.prompt_tokens += prompt
                est.completion_tokens += opts.max_tokens
    finally:
        if conn is not None:
            conn.close()
    return est, pending, deferred


def estimate(qf: QuestionFile, opts: Any, signature: dict[str, Any], cache: Path | None) -> Estimate:
    """A dry run's count (see `walk`)."""
    return walk(qf, opts, signature, cache)[0]
