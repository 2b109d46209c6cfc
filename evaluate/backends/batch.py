"""Provider batch jobs (`judge.batch: true`) and the OpenAI batch file format.

The format (one JSON object a line) is the one of OpenAI's Batch API, which vLLM's offline runner
(`python -m vllm.entrypoints.openai.run_batch -i IN -o OUT --model M`) reads and writes as well:

    in:  {"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions", "body": {...}}
    out: {"id": ..., "custom_id": KEY, "response": {"status_code": 200, "body": {chat completion}},
          "error": null}

`custom_id` is always the judge cache key of the request (`cache.cache_key`), so any result
finds its cache row and nothing else is needed to map it back.

`BatchBackend` sits under the cache (`CachedBackend(BatchBackend(...))`): each `complete_many`
call the cache makes with its misses becomes one batch job (split at the provider's limits,
50,000 requests / 200 MB per file). Jobs are written to tables of the cache's SQLite file
*before* anything is uploaded, and each step (file uploaded, batch created, batch finished) is
recorded as it happens, so a run killed while polling finds its jobs on the next start and waits
for them instead of paying again. A job whose batch creation may have gone through unrecorded is
looked up on the server by its input file before anything is created again.

Per request: a success goes to the cache; a retryable failure (429, 5xx, a request left over when
the batch expired) goes into a later batch (at most `resubmits` times); anything else (4xx, a
cancelled batch, a batch the provider refused) comes back as a failed Completion with the reason,
which the evaluators record as invalid. The key is given to the client only: batch files hold
requests, never a credential.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .base import Backend, BackendError, Completion, JudgeRequest, ProgressFn, WrappingBackend
from .cache import request_from_dict
from ..core.errors import InputError

log = logging.getLogger("evaluate.backends.batch")

CHAT_URL = "/v1/chat/completions"
MAX_REQUESTS = 50_000  # OpenAI's limits per batch input file
MAX_BYTES = 200 * 1024 * 1024
TERMINAL = ("completed", "failed", "expired", "cancelled")
RETRYABLE_STATUS = (408, 409, 429, 500, 502, 503, 504)
# error codes of the error file that another batch may fix
RETRYABLE_CODES = ("batch_expired", "rate_limit_exceeded", "server_error", "timeout")


# ---------------------------------------------------------------------------------------- format
def request_body(model: str, request: JudgeRequest, *, token_limit_field: str = "max_tokens",
                 logprobs: bool = True) -> dict[str, Any]:
    """The chat-completions body of `request` (what the HTTP backend sends)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": r, "content": c} for r, c in request.messages],
        "temperature": request.temperature,
        token_limit_field: request.max_tokens,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.top_logprobs > 0 and logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = request.top_logprobs
    return body


def batch_line(custom_id: str, body: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body},
                      ensure_ascii=False, separators=(",", ":"))


def _merge_top(entries: Iterable[Any]) -> dict[str, float]:
    """{token text: logprob}; tokens that decode to the same text add up (as the HTTP backend does)."""
    out: dict[str, float] = {}
    for e in entries:
        if not isinstance(e, dict) or e.get("token") is None or e.get("logprob") is None:
            continue
        tok, lp = e["token"], float(e["logprob"])
        out[tok] = lp if tok not in out else max(out[tok], lp) + math.log1p(math.exp(-abs(out[tok] - lp)))
    return out


def completion_from_body(body: Any) -> Completion:
    """A chat-completion body -> Completion; raises BackendError (retryable=False) when it holds no reply."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BackendError(f"malformed response: no choices in {str(body)[:200]!r}")
    choice = choices[0]
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    finish = str(choice.get("finish_reason") or "")
    if not isinstance(text, str) or not text.strip():
        raise BackendError(f"empty content (finish_reason={finish or 'none'})")
    positions = []
    lp = choice.get("logprobs")
    content = (lp.get("content") if isinstance(lp, dict) else None) or []
    for pos in content if isinstance(content, list) else []:
        if isinstance(pos, dict):
            positions.append(_merge_top(pos.get("top_logprobs") or []) or _merge_top([pos]))
    return Completion(text=text, top_logprobs=positions, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0), finish_reason=finish)


def parse_result_line(obj: Any) -> tuple[str, Completion | None, str | None, bool]:
    """One line of a batch output or error file -> (custom_id, completion or None, error, retryable)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        raise ValueError("expected an object with a string custom_id")
    cid = obj["custom_id"]
    resp = obj.get("response") if isinstance(obj.get("response"), dict) else None
    err = obj.get("error") if isinstance(obj.get("error"), dict) else None
    status = resp.get("status_code") if resp else None
    if resp is not None and status == 200 and not err:
        try:
            return cid, completion_from_body(resp.get("body")), None, False
        except BackendError as exc:
            return cid, None, str(exc), False
    code = str((err or {}).get("code") or "")
    message = str((err or {}).get("message") or "")
    if not message and resp is not None:
        body = resp.get("body")
        inner = body.get("error") if isinstance(body, dict) else None
        message = str(inner.get("message") if isinstance(inner, dict) else body)[:300]
    reason = f"batch: {'HTTP ' + str(status) if status else code or 'error'}: {message or 'no detail'}"
    retryable = (status in RETRYABLE_STATUS) or code in RETRYABLE_CODES
    return cid, None, reason, retryable


# ---------------------------------------------------------------------------------------- jobs store
_TABLES = """
CREATE TABLE IF NOT EXISTS batch_jobs (
    job TEXT PRIMARY KEY, judge TEXT NOT NULL, state TEXT NOT NULL, input_file TEXT, batch_id TEXT,
    n INTEGER NOT NULL, created REAL NOT NULL, finished REAL, info TEXT
);
CREATE TABLE IF NOT EXISTS batch_requests (
    job TEXT NOT NULL, custom_id TEXT NOT NULL, request TEXT NOT NULL, PRIMARY KEY (job, custom_id)
);
"""


class JobStore:
    """Batch jobs in the cache's SQLite file. States: uploading -> creating (file id known) ->
    open (batch id known) -> done."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_TABLES)
        self._lock = threading.Lock()

    def add(self, judge: str, items: Sequence[tuple[str, JudgeRequest]]) -> str:
        job = uuid.uuid4().hex
        with self._lock:
            self._conn.execute("BEGIN")
            self._conn.execute("INSERT INTO batch_jobs (job, judge, state, n, created) VALUES (?, ?, 'uploading', ?, ?)",
                               (job, judge, len(items), time.time()))
            self._conn.executemany("INSERT OR IGNORE INTO batch_requests VALUES (?, ?, ?)",
                                   ((job, k, json.dumps(r.as_dict(), ensure_ascii=False)) for k, r in items))
            self._conn.execute("COMMIT")
        return job

    def update(self, job: str, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._lock:
            self._conn.execute(f"UPDATE batch_jobs SET {cols} WHERE job = ?", (*fields.values(), job))

    def unfinished(self, judge: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT job, state, input_file, batch_id FROM batch_jobs WHERE judge = ? AND "
                                      "state != 'done' ORDER BY created", (judge,)).fetchall()
        return [dict(zip(("job", "state", "input_file", "batch_id"), r)) for r in rows]

    def requests(self, job: str) -> dict[str, JudgeRequest]:
        with self._lock:
            rows = self._conn.execute("SELECT custom_id, request FROM batch_requests WHERE job = ?", (job,)).fetchall()
        return {k: request_from_dict(json.loads(r)) for k, r in rows}

    def jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT job, state, batch_id, n, info FROM batch_jobs ORDER BY created").fetchall()
        return [dict(zip(("job", "state", "batch_id", "n", "info"), r)) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# ---------------------------------------------------------------------------------------- backend
class BatchBackend(WrappingBackend):
    """Sends each `complete_many` call as provider batch jobs; see the module docstring.

    `attach(cache)` must be called with the CachedBackend above it: the custom ids are its keys,
    and results of a resumed job that the current call did not ask for go straight to its table.
    """

    kind = "openai"

    def __init__(self, inner: Backend, db_path: str | Path, *, base_url: str | None, api_key: str | None,
                 timeout: float = 60.0, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES,
                 poll_min: float = 1.0, poll_max: float = 60.0, resubmits: int = 2,
                 token_limit_field: str = "max_tokens", sleep: Callable[[float], None] = time.sleep):
        import openai

        super().__init__(inner)
        self.max_requests, self.max_bytes = max(1, max_requests), max(1024, max_bytes)
        self.poll_min, self.poll_max = max(0.0, poll_min), max(poll_min, poll_max)
        self.resubmits = max(0, resubmits)
        self.token_limit_field = token_limit_field
        self._sleep = sleep
        self.store = JobStore(Path(db_path))
        self._cache: Any = None
        # requests that failed for good in this process: answered with the same error, not sent again
        # (after the run's prefetch, scoring asks once more for what is not cached)
        self._final: dict[str, str] = {}
        self._usage = dict(batches=0, batch_requests=0, resumed_batches=0, batch_failures=0,
                           batch_prompt_tokens=0, batch_completion_tokens=0)
        self._lock = threading.Lock()
        # the client gets the key (the raw URL may hold one too); nothing else here keeps it
        self._client = openai.OpenAI(api_key=api_key or "EMPTY",
                                     base_url=(base_url or os.environ.get("OPENAI_BASE_URL")
                                               or "https://api.openai.com/v1").rstrip("/"),
                                     timeout=timeout, max_retries=3)

    def attach(self, cache: Any) -> None:
        self._cache = cache

    # signature(): the inner one's (WrappingBackend): a reply from a batch is the same reply, one cache for both

    def usage(self) -> dict[str, Any]:
        """The inner backend's totals (batch tokens included) and the batch counts; `cost_usd` counts
        batch tokens at half the price (the Batch API's discount)."""
        inner = super().usage()
        with self._lock:
            out = {**inner, **self._usage}
        price = getattr(self.inner, "price", None)
        if price and out.get("cost_usd") is not None:
            out["cost_usd"] = round(out["cost_usd"] - (out["batch_prompt_tokens"] * price["prompt"]
                                                       + out["batch_completion_tokens"] * price["completion"]) / 2e6, 6)
        return out

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                self._usage[k] += v

    def complete(self, request: JudgeRequest) -> Completion:
        return self.inner.complete(request)  # one request is not worth a batch

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        out: list[Completion | None] = [None] * len(requests)

        def put(i: int, comp: Completion) -> None:
            out[i] = comp
            if progress is not None:
                progress(comp)

        self.complete_many_indexed(requests, put)
        return out  # type: ignore[return-value]

    # ---------------------------------------------------------------------------- the work
    def _key(self, request: JudgeRequest) -> str:
        if self._cache is None:
            raise RuntimeError("BatchBackend: attach(cache) first; batch jobs are keyed on the cache")
        return self._cache.key(request)

    def _judge(self) -> str:
        return self._cache._judge

    def complete_many_indexed(self, requests: Sequence[JudgeRequest],
                              on_result: Callable[[int, Completion], None] | None = None) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)

        keys = [self._key(r) for r in requests]

        def deliver(i: int, comp: Completion) -> None:
            results[i] = comp
            if comp.error is not None:
                self._final[keys[i]] = comp.error
            if on_result is not None:
                on_result(i, comp)

        wanted: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k in self._final:
                deliver(i, Completion(error=self._final[k]))
            else:
                wanted.setdefault(k, i)
        tries: dict[str, int] = {}
        # 1. jobs a killed run left behind: wait for them, never submit their requests again
        open_jobs = [self._resume(job) for job in self.store.unfinished(self._judge())]
        open_jobs = [j for j in open_jobs if j is not None]
        if open_jobs:
            self._count(resumed_batches=len(open_jobs))
        in_flight = {k for job in open_jobs for k in job["keys"]}
        todo = [k for k in wanted if k not in in_flight]
        while True:
            for chunk in self._chunks(todo, requests, wanted):
                open_jobs.append(self._submit(chunk))
            todo = []
            if not open_jobs:
                break
            retry = self._wait(open_jobs, wanted, deliver)
            open_jobs = []
            for key, reason in retry.items():
                tries[key] = tries.get(key, 0) + 1
                if tries[key] > self.resubmits:
                    deliver(wanted[key], Completion(error=f"{reason} (resubmitted {self.resubmits} times)"))
                else:
                    todo.append(key)
        for k, i in wanted.items():  # a request no job answered for (never expected): failed, not lost
            if results[i] is None:
                deliver(i, Completion(error="batch: no result for this request"))
        by_key = {k: results[i] for k, i in wanted.items()}
        return [results[i] if results[i] is not None else by_key[k] for i, k in enumerate(keys)]  # type: ignore[misc]

    def _chunks(self, keys: list[str], requests: Sequence[JudgeRequest], wanted: dict[str, int]):
        chunk: list[tuple[str, JudgeRequest, str]] = []
        size = 0
        for k in keys:
            req = requests[wanted[k]]
            line = batch_line(k, request_body(self.model, req, token_limit_field=self.token_limit_field,
                                              logprobs=self.inner.supports_logprobs))
            n = len(line.encode("utf-8")) + 1
            if chunk and (len(chunk) >= self.max_requests or size + n > self.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append((k, req, line))
            size += n
        if chunk:
            yield chunk

    def _submit(self, chunk: list[tuple[str, JudgeRequest, str]]) -> dict[str, Any]:
        job = self.store.add(self._judge(), [(k, r) for k, r, _ in chunk])
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as fh:
            for _, _, line in chunk:
                fh.write(line + "\n")
            name = fh.name
        try:
            with open(name, "rb") as fh:
                file_id = self._client.files.create(file=(f"judge-{job}.jsonl", fh), purpose="batch").id
        finally:
            os.unlink(name)
        self.store.update(job, state="creating", input_file=file_id)
        batch = self._client.batches.create(input_file_id=file_id, endpoint=CHAT_URL, completion_window="24h",
                                            metadata={"evaluate_job": job})
        self.store.update(job, state="open", batch_id=batch.id)
        self._count(batches=1, batch_requests=len(chunk))
        log.info("batch %s: %d requests", batch.id, len(chunk))
        return {"job": job, "batch_id": batch.id, "keys": [k for k, _, _ in chunk]}

    def _resume(self, row: dict[str, Any]) -> dict[str, Any] | None:
        job = row["job"]
        if row["state"] == "uploading":  # died before the file was known: nothing can run on it
            self.store.update(job, state="done", finished=time.time(), info="abandoned before upload")
            return None
        batch_id = row["batch_id"]
        if row["state"] == "creating":  # the batch may exist without us knowing its id: look before creating
            batch_id = next((b.id for b in self._client.batches.list(limit=100)
                             if b.input_file_id == row["input_file"]), None)
            if batch_id is None:
                batch_id = self._client.batches.create(input_file_id=row["input_file"], endpoint=CHAT_URL,
                                                       completion_window="24h", metadata={"evaluate_job": job}).id
                self._count(batches=1)
            self.store.update(job, state="open", batch_id=batch_id)
        log.info("resuming batch %s", batch_id)
        return {"job": job, "batch_id": batch_id, "keys": list(self.store.requests(job))}

    def _wait(self, jobs: list[dict[str, Any]], wanted: dict[str, int],
              deliver: Callable[[int, Completion], None]) -> dict[str, str]:
        """Poll until every job is terminal; deliver results; return {key: reason} to resubmit."""
        retry: dict[str, str] = {}
        pending = list(jobs)
        pause = self.poll_min
        while pending:
            still = []
            for job in pending:
                batch = self._client.batches.retrieve(job["batch_id"])
                if batch.status in TERMINAL:
                    retry.update(self._collect(job, batch, wanted, deliver))
                else:
                    still.append(job)
            pending = still
            if pending:
                self._sleep(pause)
                pause = min(self.poll_max, max(pause * 2, 0.05))
        return retry

    def _read(self, file_id: str | None) -> list[Any]:
        if not file_id:
            return []
        text = self._client.files.content(file_id).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _collect(self, job: dict[str, Any], batch: Any, wanted: dict[str, int],
                 deliver: Callable[[int, Completion], None]) -> dict[str, str]:
        requests = self.store.requests(job["job"])
        seen: set[str] = set()
        retry: dict[str, str] = {}
        for obj in self._read(batch.output_file_id) + self._read(batch.error_file_id):
            try:
                cid, comp, reason, retryable = parse_result_line(obj)
            except ValueError:
                continue
            if cid not in requests or cid in seen:
                continue
            seen.add(cid)
            if comp is not None:
                self.inner_usage(comp)
                if cid in wanted:
                    deliver(wanted[cid], comp)
                else:  # asked by the killed run, not by this call: keep it for whoever asks
                    self._cache._store(cid, requests[cid], comp)
            elif cid in wanted:
                if retryable:
                    retry[cid] = reason or "batch: failed"
                else:
                    self._count(batch_failures=1)
                    deliver(wanted[cid], Completion(error=reason))
        status = batch.status
        for cid in requests:
            if cid in seen or cid not in wanted:
                continue
            if status == "expired":
                retry[cid] = f"batch {batch.id} expired before this request ran"
            else:
                why = {"cancelled": "was cancelled", "failed": "was refused by the provider"}.get(status, status)
                errors = getattr(batch, "errors", None)
                detail = "; ".join(str(getattr(e, "message", e)) for e in (getattr(errors, "data", None) or []))
                self._count(batch_failures=1)
                deliver(wanted[cid], Completion(error=f"batch {batch.id} {why}" + (f": {detail}" if detail else "")))
        self.store.update(job["job"], state="done", finished=time.time(), info=status)
        return retry

    def inner_usage(self, comp: Completion) -> None:
        self._count(batch_prompt_tokens=comp.prompt_tokens, batch_completion_tokens=comp.completion_tokens)
        counter = getattr(self.inner, "_count", None)
        if callable(counter):
            try:
                counter(prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens)
            except (KeyError, TypeError):
                pass

    def close(self) -> None:
        self.store.close()
        self._client.close()
        super().close()


def wrap(inner: Backend, opts: Any, cache_path: Path | None, api_key: str | None) -> Backend:
    """The batch backend `opts` asks for, over `inner` (open_backend calls this when judge.batch is on)."""
    if cache_path is None:
        raise InputError("judge.batch needs the judge cache (batch ids are stored in it); set judge.cache")
    key = api_key or os.environ.get(opts.api_key_env) or None
    return BatchBackend(inner, cache_path, base_url=opts.base_url, api_key=key, timeout=opts.timeout,
                        poll_max=opts.batch_poll, poll_min=min(1.0, opts.batch_poll))


def read_result_file(path: Path, known: Any, model: str, unknown: str, model_key: str,
                     limit: int = 20) -> tuple[list[tuple[str, Completion]], list[str], list[str]]:
    """A batch engine's output file (one result line per request), checked before anything is stored:
    (answered: [(custom_id, Completion)], failed: ["<id>: why"], problems: ["file:line: why"]). A line
    whose custom_id is not in `known` is a problem (`unknown` says what it should have been); so is a
    reply from another model than `model` (`model_key` names the key that sets it). Stops after `limit`
    problems."""
    ok: list[tuple[str, Completion]] = []
    failed: list[str] = []
    problems: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                cid, comp, reason, _ = parse_result_line(obj)
            except (ValueError, TypeError) as exc:
                problems.append(f"{path}:{n}: not a batch result line ({exc})")
                continue
            if cid not in known:
                problems.append(f'{path}:{n}: custom_id "{cid[:16]}..." is not {unknown}')
                continue
            body = (obj.get("response") or {}).get("body")
            replied = body.get("model") if isinstance(body, dict) else None
            if comp is not None and replied is not None and replied != model:
                problems.append(f'{path}:{n}: the reply is from model "{replied}", {model_key} is "{model}"')
                continue
            if comp is None:
                failed.append(f"{cid[:12]}: {reason}")
            else:
                ok.append((cid, comp))
            if len(problems) >= limit:
                break
    return ok, failed, problems
