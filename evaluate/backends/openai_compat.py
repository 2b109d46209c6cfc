"""A judge behind any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server...).

Transport goes through the `openai` package; retries are ours (the client's own are switched
off) so that every attempt is counted, backoff uses full jitter, and Retry-After is honoured the
same way for every server. The API key lives only inside the openai client and a redactor: it
is never part of `signature()`, `repr()`, logs, cache entries or error messages.

A judge that cannot be connected to at all (see `endpoints.EndpointSet`: refused, DNS, TLS, no
route, a handshake that times out) is declared unreachable within seconds, one that accepts
connections and answers nothing (a request times out, and a GET /models right after does too)
within `timeout` plus 10 s: `unreachable` says why, every request not finished fails with an
error starting with `retry.UNREACHABLE`, and none not yet sent is sent. Other failures (429,
5xx, a busy server's timeouts) keep their retries.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import threading
import time
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

import openai

from .base import Backend, BackendError, Completion, JudgeRequest, ProgressFn
from .endpoints import Endpoint, EndpointSet, RequestPool
from .connect import CONNECT_TIMEOUT, connect_failure
from .retry import JudgeUnreachable, ResultFn, RetryPolicy, call_with_retries, progress_bar
from ..core.errors import InputError
from ..core.secrets import scrub_url  # noqa: F401  (re-exported: signatures and reprs show the scrubbed URL)

log = logging.getLogger("evaluate.backends.openai")

OPENAI_URL = "https://api.openai.com/v1"  # where an openai judge with no base_url (nor $OPENAI_BASE_URL) goes
MAX_TIMEOUT_GROWTH = 8  # a timed-out attempt doubles the next one's timeout, up to 8x the configured one


def hung_request_seconds(timeout: float, max_retries: int, backoff_base: float = 0.5,
                         backoff_max: float = 30.0) -> float:
    """The longest one request can take when every attempt runs to its timeout (each double the
    last, up to 8x), with the longest backoff drawn between them. A server that answers nothing is
    dropped long before (about `timeout` + 10 s); this is the bound for one whose GET /models still
    answers while its completions never come back (a stuck worker behind a live API server). Once
    the breaker trips, one request is tried at a time, so a run of N such requests can take up to N
    times this: what `timeout` and `max_retries` should be chosen against."""
    attempts = sum(min(timeout * 2.0 ** i, timeout * MAX_TIMEOUT_GROWTH) for i in range(max_retries + 1))
    pauses = sum(min(backoff_max, backoff_base * 2.0 ** i) for i in range(max_retries))
    return attempts + pauses


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds asked for by `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


class _Redactor:
    """Holds the key only to erase it from text; its repr shows nothing."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str | None):
        self._secret = secret or None

    def __call__(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def __repr__(self) -> str:
        return "<redactor>"


def _merge_top(entries: Sequence[Any]) -> dict[str, float]:
    """{token text: logprob}. Distinct token ids can decode to the same text; their probabilities
    add up (log-sum-exp), which is what a parser reading the text of a token wants."""
    out: dict[str, float] = {}
    for e in entries:
        if not isinstance(e, dict):
            continue
        tok, lp = e.get("token"), e.get("logprob")
        if tok is None or lp is None:
            continue
        lp = float(lp)
        out[tok] = lp if tok not in out else max(out[tok], lp) + math.log1p(math.exp(-abs(out[tok] - lp)))
    return out


class _Tries:
    """One request's attempts: the endpoints it failed on, and whether the last attempt was such a fault."""

    __slots__ = ("avoid", "faulted")

    def __init__(self) -> None:
        self.avoid: list[Endpoint] = []
        self.faulted = False


class OpenAICompatBackend(Backend):
    """Chat completions over HTTP, `concurrency` requests in flight, bounded retries.

    Every call of `complete_many` (from any thread) goes through one shared pool of workers, so
    concurrent callers share the `concurrency` limit instead of each getting their own.

    Args:
        model: the model name the server expects.
        base_url: server root ending in /v1, or a list of replicas serving the same model; default
            $OPENAI_BASE_URL or OpenAI's.
        endpoints: instead of base_url, [{"base_url": ..., "concurrency": n}, ...] (concurrency per
            endpoint; default `concurrency`). Each attempt goes to the endpoint with the fewest in
            flight; see `endpoints.EndpointSet` for the circuit breaker.
        api_key_env: name of the environment variable holding the key.
        api_key: an explicit key (the CLI's --openai_key); wins over the variable; never stored in clear.
        concurrency: requests in flight (per endpoint when there are several).
        endpoint_failures, endpoint_cooldown: failed attempts in a row that set an endpoint aside,
            and for how many seconds (doubling while it keeps failing).
        unreachable_after, down_after: seconds of failures to connect, or of requests that time out
            where GET /models does too (3 or more in a row), after which an endpoint is dropped for
            the run: if it never answered, and if it did (a restart); with every endpoint dropped
            the judge is unreachable (`unreachable`).
        connect_timeout: seconds for the TCP/TLS handshake (at most `timeout`); a live server
            answers it in milliseconds, whatever it is computing.
        timeout: seconds per HTTP attempt.
        max_retries: retries after the first attempt for retryable failures (429, 5xx, timeouts, malformed replies).
        price: {"prompt": USD per 1M tokens, "completion": USD per 1M tokens}, for `usage()["cost_usd"]`.
        backoff_base, backoff_max: exponential backoff (seconds) before full jitter.
        token_limit_field: "max_tokens" (most servers) or "max_completion_tokens" (OpenAI reasoning models).
        logprobs: set False for servers that reject the logprobs parameters.
    """

    kind = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | Sequence[str] | None = None,
        endpoints: Sequence[Mapping[str, Any]] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        price: Mapping[str, float] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        token_limit_field: str = "max_tokens",
        logprobs: bool = True,
        endpoint_failures: int = 5,
        endpoint_cooldown: float = 30.0,
        unreachable_after: float = 2.0,
        down_after: float = 60.0,
        connect_timeout: float = CONNECT_TIMEOUT,
    ):
        super().__init__(model)
        problems = []
        if not model:
            problems.append("model: expected a non-empty model name")
        if not isinstance(concurrency, int) or concurrency < 1:
            problems.append(f"concurrency: expected an integer >= 1, got {concurrency!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            problems.append(f"max_retries: expected an integer >= 0, got {max_retries!r}")
        if not timeout or timeout <= 0:
            problems.append(f"timeout: expected seconds > 0, got {timeout!r}")
        if token_limit_field not in ("max_tokens", "max_completion_tokens"):
            problems.append(f"token_limit_field: expected 'max_tokens' or 'max_completion_tokens', got {token_limit_field!r}")
        if price is not None:
            if set(price) != {"prompt", "completion"} or not all(isinstance(v, (int, float)) and v >= 0 for v in price.values()):
                problems.append(f"price: expected {{'prompt': USD/1M tokens, 'completion': USD/1M tokens}}, got {dict(price)!r}")
        if problems:
            raise InputError("openai backend: " + "; ".join(problems))

        if endpoints:
            specs = [(str(e["base_url"]), int(e.get("concurrency") or concurrency)) for e in endpoints]
        elif isinstance(base_url, (list, tuple)):
            specs = [(str(u), concurrency) for u in base_url]
        else:
            specs = [(base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL, concurrency)]
        if not specs or any(n < 1 for _, n in specs):
            raise InputError("openai backend: endpoints: expected at least one, each with concurrency >= 1")
        raw_urls = [u.rstrip("/") for u, _ in specs]
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        self.price = dict(price) if price else None
        self.token_limit_field = token_limit_field
        self._logprobs = logprobs
        self.policy = RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max)

        key = api_key or os.environ.get(api_key_env) or None
        if key is None and any(urlsplit(u).hostname == "api.openai.com" for u in raw_urls):
            raise InputError(f"openai backend: no API key; set the environment variable {api_key_env} or pass --openai_key")
        self._redact = _Redactor(key)
        # Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the client insists on one.
        # The raw URL, which may hold credentials, goes only to the client; we keep the scrubbed one.
        eps = [Endpoint(url=scrub_url(u), limit=n, client=openai.OpenAI(api_key=key or "EMPTY", base_url=u,
                                                                        timeout=self.timeout, max_retries=0))
               for u, (_, n) in zip(raw_urls, specs)]
        del key, raw_urls
        self._endpoints = EndpointSet(eps, failures=endpoint_failures, cooldown=endpoint_cooldown,
                                      unreachable_after=unreachable_after, down_after=down_after,
                                      on_unreachable=self._stop_unreachable)
        self.base_url = eps[0].url if len(eps) == 1 else [e.url for e in eps]
        self.concurrency = self._endpoints.capacity
        self._pool = RequestPool(self.concurrency, name=f"judge-{model}")
        self._stopped = threading.Event()  # wakes the retries that wait, when the judge is unreachable or closed

        self._lock = threading.Lock()
        self._usage = dict(requests=0, calls=0, retries=0, failures=0, prompt_tokens=0, completion_tokens=0)

    # ------------------------------------------------------------------ identity
    @property
    def supports_logprobs(self) -> bool:
        return self._logprobs

    @property
    def judge_name(self) -> str | None:  # type: ignore[override]
        return self._endpoints.label

    @judge_name.setter
    def judge_name(self, name: str | None) -> None:
        self._endpoints.label = name

    def _who(self) -> str:
        """What a message about this judge starts with: its name, where it has one (a panel's judges)."""
        return f"judge {self.judge_name}: " if self.judge_name else ""

    def signature(self) -> dict[str, Any]:
        sig: dict[str, Any] = {"backend": self.kind, "model": self.model, "base_url": self.base_url}
        if not self._logprobs:  # replies made without logprobs must not answer requests that want them
            sig["logprobs"] = False
        return sig

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(model={self.model!r}, base_url={self.base_url!r}, concurrency={self.concurrency})"

    @property
    def unreachable(self) -> str | None:
        """Why the judge cannot be reached (every endpoint dropped), or None; once set, the backend sends nothing more."""
        return self._endpoints.unreachable

    def _stop_unreachable(self, reason: str) -> None:
        log.error("%s%s; not sending the remaining requests", self._who(), JudgeUnreachable(reason))
        self._stopped.set()
        self._pool.cancel(str(JudgeUnreachable(reason, sent=False)))

    # ------------------------------------------------------------------ accounting
    def _count(self, **deltas: int) -> None:
        with self._lock:
            for k, v in deltas.items():
                self._usage[k] += v

    def usage(self) -> dict[str, Any]:
        """Totals since construction: items, HTTP calls, retries, items failed for good, tokens, cost
        (and, with several endpoints, calls, failed calls and times set aside per endpoint)."""
        with self._lock:
            out: dict[str, Any] = dict(self._usage)
        if len(self._endpoints.endpoints) > 1:
            out["endpoints"] = self._endpoints.usage()
        out["cost_usd"] = (
            round(out["prompt_tokens"] * self.price["prompt"] / 1e6 + out["completion_tokens"] * self.price["completion"] / 1e6, 6)
            if self.price
            else None
        )
        return out

    # ------------------------------------------------------------------ one attempt
    def _params(self, request: JudgeRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": r, "content": c} for r, c in request.messages],
            "temperature": request.temperature,
            self.token_limit_field: request.max_tokens,
        }
        if request.stop:
            params["stop"] = list(request.stop)
        if request.seed is not None:
            params["seed"] = request.seed
        if request.top_p is not None:
            params["top_p"] = request.top_p
        if request.top_logprobs > 0 and self._logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = request.top_logprobs
        return params

    def _error(self, message: str, *, retryable: bool, retry_after: float | None = None,
               fault: bool = False, down: bool = False) -> BackendError:
        """`fault`: the endpoint itself looks broken (counts towards setting it aside); `down`: no
        connection could be made (counts towards dropping it)."""
        exc = BackendError(self._redact(message), retryable=retryable, retry_after=retry_after)
        exc.endpoint_fault = fault or down  # type: ignore[attr-defined]
        exc.endpoint_down = down  # type: ignore[attr-defined]
        return exc

    def _attempt(self, request: JudgeRequest, tries: "_Tries", timeout: float | None = None) -> Completion:
        """One HTTP call on the least-loaded endpoint (preferring one this request has not failed on),
        mapped to a Completion or a BackendError that says whether to retry."""
        avoid = tries.avoid
        ep = self._endpoints.acquire(avoid)
        started = self._endpoints.clock()
        tries.faulted = False
        outcome, error = "neutral", ""
        try:
            comp = self._call(ep.client, request, timeout)
            outcome = "ok"
            return comp
        except BackendError as exc:
            if getattr(exc, "endpoint_fault", False):
                outcome = "down" if getattr(exc, "endpoint_down", False) else "fail"
                error = str(exc)
                if getattr(exc, "timed_out", False) and not self._answers(ep):
                    outcome = "hung"
                    error = (f"accepts connections but never answers (a request timed out after "
                             f"{timeout or self.timeout:g}s, and GET /models after {min(CONNECT_TIMEOUT, self.timeout):g}s)")
                avoid.append(ep)
                tries.faulted = True
            raise
        finally:
            self._endpoints.release(ep, outcome, started=started, error=error)

    def _answers(self, ep: Endpoint) -> bool:
        """After a timed-out request: whether the server still answers anything (GET /models, any
        status) within the connect timeout. A busy server does, and its request keeps its retries
        with a longer timeout; a hung one does not, and counts towards dropping the endpoint."""
        limit = min(CONNECT_TIMEOUT, self.timeout)
        try:
            ep.client.get("/models", cast_to=object, options={"timeout": limit})
        except openai.APIStatusError:
            return True
        except openai.APIConnectionError:  # timeouts included
            return False
        except (ValueError, openai.OpenAIError):  # an answer, if not a model list
            return True
        return True

    def _call(self, client: openai.OpenAI, request: JudgeRequest, timeout: float | None = None) -> Completion:
        self._count(calls=1)
        timeout = timeout or self.timeout
        limits = openai.Timeout(timeout, connect=min(self.connect_timeout, timeout))
        try:
            # The client's generic POST (its documented interface for any endpoint): the same
            # transport, headers, status and error handling as `chat.completions.create`, but the
            # body is neither transformed on the way out nor validated into pydantic models on the
            # way back (cast_to=object: the parsed JSON). Client CPU per request 1.7 -> 0.9 ms
            # (BENCHMARKS.md, "4 endpoints, 20,000 ratings").
            resp = client.post("/chat/completions", body=self._params(request), cast_to=object,
                               options={"timeout": limits})
        except openai.APIConnectionError as exc:  # timeouts included
            down = connect_failure(exc, limits.connect)
            if down is not None:
                raise self._error(f"connection failed: {down}", retryable=True, down=True)
            if isinstance(exc, openai.APITimeoutError):
                exc_t = self._error(f"timed out after {timeout:g}s", retryable=True, fault=True)
                exc_t.timed_out = True  # type: ignore[attr-defined]
                raise exc_t
            raise self._error(f"connection failed: {exc.__cause__ or exc}", retryable=True, fault=True)
        except openai.APIStatusError as exc:
            status = exc.status_code
            retryable = status in (408, 409, 429) or status >= 500
            wait = _retry_after(exc.response.headers) if status in (429, 503) else None
            raise self._error(f"HTTP {status}: {exc.message}", retryable=retryable, retry_after=wait,
                              fault=status >= 500)
        except ValueError as exc:  # body is not JSON, or JSON the client could not read
            raise self._error(f"malformed response: {type(exc).__name__}: {exc}", retryable=True, fault=True)
        except openai.OpenAIError as exc:
            raise self._error(f"{type(exc).__name__}: {exc}", retryable=False)
        return self._to_completion(resp)

    def _to_completion(self, resp: Any) -> Completion:
        """Map a chat-completion body (parsed JSON) to a Completion; anything malformed is a
        retryable error, an empty reply a final one."""
        choices = resp.get("choices") if isinstance(resp, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._error(f"malformed response: no choices in {str(resp)[:200]!r}", retryable=True, fault=True)
        choice = choices[0]
        usage = resp.get("usage") if isinstance(resp.get("usage"), dict) else {}
        try:
            pt = int(usage.get("prompt_tokens") or 0)
            ct = int(usage.get("completion_tokens") or 0)
        except (TypeError, ValueError):
            pt = ct = 0
        self._count(prompt_tokens=pt, completion_tokens=ct)  # paid for even if the text is unusable

        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        finish = str(choice.get("finish_reason") or "")
        if not isinstance(text, str) or not text.strip():
            # Deterministic for a given request (e.g. a reasoning model spent max_tokens thinking): not retried.
            raise self._error(f"empty content (finish_reason={finish or 'none'})", retryable=False)

        positions: list[dict[str, float]] = []
        logprobs = choice.get("logprobs")
        content_lp = (logprobs.get("content") if isinstance(logprobs, dict) else None) or []
        for pos in content_lp if isinstance(content_lp, list) else []:
            if not isinstance(pos, dict):
                continue
            top = _merge_top(pos.get("top_logprobs") or [])
            positions.append(top or _merge_top([pos]))
        return Completion(text=text, top_logprobs=positions, prompt_tokens=pt, completion_tokens=ct, finish_reason=finish)

    # ------------------------------------------------------------------ public
    def complete(self, request: JudgeRequest) -> Completion:
        """One request with retries; raises the last BackendError when they are spent."""

        # A slow server (a local model computing a long reply) times out again at the same limit, and
        # it keeps computing each abandoned request: every timeout doubles the next attempt's limit.
        limit = [self.timeout]

        def on_retry(n: int, exc: BackendError, pause: float) -> None:
            self._count(retries=1)
            if str(exc).startswith("timed out"):
                limit[0] = min(limit[0] * 2, self.timeout * MAX_TIMEOUT_GROWTH)
            # shown as it happens (WARNING reaches stderr), not only when the item finally fails; failures
            # to connect are said once per endpoint by the EndpointSet, with how long they may go on
            log.log(logging.INFO if getattr(exc, "endpoint_down", False) else logging.WARNING,
                    "%sjudge retry %d/%d in %.1fs%s: %s", self._who(), n, self.policy.max_retries, pause,
                    f" (next timeout {limit[0]:g}s)" if limit[0] != self.timeout else "", exc)

        tries = _Tries()

        def sleep(pause: float) -> None:
            # after a fault of one endpoint, another one that is up takes the retry at once;
            # a 429, a 4xx or a lone endpoint waits out its backoff
            if not (tries.faulted and self._endpoints.others_usable(tries.avoid)):
                self._stopped.wait(pause)  # woken at once when the judge is declared unreachable

        if (why := self._endpoints.unreachable) is not None:
            # declared a moment ago by another worker, whose cancel of the queue may not have run yet: the
            # items the pool still hands out are not sent, and not counted as requests
            raise JudgeUnreachable(why, sent=False)
        self._count(requests=1)
        try:
            return call_with_retries(lambda: self._attempt(request, tries, limit[0]), self.policy, on_retry=on_retry,
                                     sleep=sleep)
        except BackendError as exc:
            self._count(failures=1)
            if not isinstance(exc, JudgeUnreachable):  # said once, when declared
                log.warning("%srequest failed for good: %s", self._who(), exc)
            raise

    def _complete_or_error(self, request: JudgeRequest) -> Completion:
        try:
            return self.complete(request)
        except BackendError as exc:
            return Completion(error=str(exc))

    def complete_many_indexed(self, requests: Sequence[JudgeRequest], on_result: ResultFn | None = None) -> list[Completion]:
        """Like complete_many, but reports `(index, completion)` as each finishes (see RequestPool.run);
        the cache uses it to store every result the moment it is paid for."""
        return self._pool.run(requests, self._complete_or_error, on_result=on_result)

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        with progress_bar(len(requests), desc=f"judge {self.model}") as bar:

            def report(_: int, comp: Completion) -> None:
                bar.add(comp)
                if progress is not None:
                    progress(comp)

            return self.complete_many_indexed(requests, report)

    def cancel(self) -> None:
        """Stop sending: requests not yet sent come back as errors (a stopped run); in flight ones finish."""
        self._pool.cancel()

    def close(self) -> None:
        self._stopped.set()
        self._pool.close()
        for e in self._endpoints.endpoints:
            e.client.close()
