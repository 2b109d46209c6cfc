"""Is the judge there? One cheap call per endpoint, before anything is paid for.

`probe(opts)` asks each OpenAI-compatible endpoint for its model list (GET /models: free, no
tokens) and says, per endpoint, what a user has to fix: nothing listens there (connection
refused, DNS, TLS, no route), it accepts connections but never answers (a timeout), the key is
refused (401/403: which variable holds it, never the key), or the model is not served (with the
names that are). Only when /models is not offered (404/405), or does not list the model, does it
send one 1-token chat completion. A local judge has nothing to probe.

Whether a failure was one to connect: connect.py (shared with the HTTP backend).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import openai

from .connect import CONNECT_TIMEOUT, connect_failure
from .openai_compat import OPENAI_URL
from .options import JudgeOptions
from .registry import capabilities
from .retry import UNREACHABLE, JudgeUnreachable  # noqa: F401  (exported: the runner stops on these)
from ..core.secrets import scrub_url, scrub_words

MAX_MODELS_SHOWN = 20


@dataclass
class ProbeResult:
    """What one endpoint answered. `kind`: ok, unreachable (refused, DNS, TLS, no route, handshake
    timeout), timeout (connected, no answer), auth (401/403 or no key), model (not served), http
    (any other status)."""

    url: str  # scrubbed: no user:password@, no ?key=
    ok: bool
    latency: float | None  # seconds the deciding call took (to the failure, for a failure)
    error: str | None = None
    kind: str = "ok"
    models: list[str] = field(default_factory=list)  # what /models listed, when it answered
    note: str = ""  # for an ok endpoint: something worth knowing (rate limited, served under another name)

    def line(self) -> str:
        """One line for the terminal."""
        took = f"{self.latency * 1000:.0f} ms" if self.latency is not None else "no answer"
        if self.ok:
            return f"judge {self.url}: ok ({took})" + (f"; {self.note}" if self.note else "")
        return f"judge {self.url}: {self.error} (after {took})"


def _urls(opts: JudgeOptions) -> list[str]:
    specs = opts.endpoint_specs()
    if specs:
        return [str(s["base_url"]).rstrip("/") for s in specs]
    base = opts.base_url if isinstance(opts.base_url, str) else None
    return [(base or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")]


def probe(opts: JudgeOptions, api_key: str | None = None, timeout: float = 10.0) -> list[ProbeResult]:
    """One result per endpoint of an openai judge (in the order of the config), all endpoints at
    once; [] for a judge whose server is not the user's (a local model; a vllm server the tool starts
    waits for its own readiness). `api_key` (--openai_key) wins over the variable `opts.api_key_env`.
    Costs nothing when the server lists its models; at most one 1-token completion otherwise."""
    if not capabilities(opts).user_server:
        return []
    key = api_key or os.environ.get(opts.api_key_env) or None
    source = "the key given with --openai_key" if api_key else f"the key in ${opts.api_key_env}"
    urls = _urls(opts)
    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        return list(pool.map(lambda u: _probe_one(u, opts.model, key, source, opts.api_key_env, timeout), urls))


def _redactor(key: str | None) -> Callable[[str], str]:
    def redact(text: str) -> str:
        text = text.replace(key, "***") if key else text
        return scrub_words(text)[:300]

    return redact


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        msg = inner.get("message") or inner.get("detail")
        if isinstance(msg, str) and msg:
            return msg
    return exc.message


def _probe_one(url: str, model: str, key: str | None, source: str, env: str, timeout: float) -> ProbeResult:
    shown = scrub_url(url)
    if key is None and urlsplit(url).hostname == "api.openai.com":
        return ProbeResult(shown, False, None, f"no API key: set the environment variable {env} or pass --openai_key",
                           kind="auth")
    with openai.OpenAI(api_key=key or "EMPTY", base_url=url, max_retries=0,
                       timeout=openai.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))) as client:
        return _ask(client, shown, model, key, source, env, timeout)


def _ask(client: openai.OpenAI, shown: str, model: str, key: str | None, source: str, env: str,
         timeout: float) -> ProbeResult:
    """GET /models, then (if needed) one 1-token completion, mapped to what the user has to fix."""
    redact = _redactor(key)
    start = time.monotonic()

    def fail(kind: str, error: str) -> ProbeResult:
        return ProbeResult(shown, False, time.monotonic() - start, error, kind=kind)

    def auth(exc: openai.APIStatusError, what: str) -> ProbeResult:
        if key is None:
            return fail("auth", f"HTTP {exc.status_code} on {what}: the server wants an API key; put it in the "
                                f"environment variable {env} (or pass --openai_key)")
        verb = "refused" if exc.status_code == 401 else "is not allowed to use"
        return fail("auth", f"HTTP {exc.status_code} on {what}: the server {verb} {source} (the key is not shown): "
                            f"{redact(_status_message(exc))}")

    def transport(exc: openai.APIConnectionError, what: str) -> ProbeResult:
        down = connect_failure(exc, min(timeout, CONNECT_TIMEOUT))
        if down is not None:
            return fail("unreachable", f"unreachable: {redact(down)}")
        if isinstance(exc, openai.APITimeoutError):
            return fail("timeout", f"no answer to {what} within {timeout:g}s: the server accepts connections but does "
                                   f"not answer (hung, overloaded, or not an OpenAI-compatible server)")
        return fail("unreachable", f"connection failed on {what}: {redact(str(exc.__cause__ or exc))}")

    try:
        listing = client.get("/models", cast_to=object)
    except openai.APIConnectionError as exc:
        return transport(exc, "GET /models")
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            return auth(exc, "GET /models")
        if exc.status_code == 429:
            return ProbeResult(shown, True, time.monotonic() - start, note="rate limited right now (HTTP 429)")
        if exc.status_code not in (404, 405):
            return fail("http", f"HTTP {exc.status_code} on GET /models: {redact(_status_message(exc))}")
        listing = None
    except (ValueError, openai.OpenAIError):
        listing = None
    served = _model_ids(listing)
    if served is not None and model in served:
        return ProbeResult(shown, True, time.monotonic() - start, models=served)

    # /models is not offered or does not name the model (some servers list aliases): ask the model itself
    start = time.monotonic()
    try:
        client.post("/chat/completions", cast_to=object,
                    body={"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1})
    except openai.APIConnectionError as exc:
        return transport(exc, "a 1-token chat completion")
    except openai.APIStatusError as exc:
        status, msg = exc.status_code, redact(_status_message(exc))
        if status in (401, 403):
            return auth(exc, "a 1-token chat completion")
        low = msg.lower()
        if status == 404 or (status == 400 and "model" in low and ("not" in low or "exist" in low)):
            result = fail("model", f"model {model!r} is not served here (HTTP {status}: {msg}); {_served(served)}")
            result.models = served or []
            return result
        if status == 429:
            return ProbeResult(shown, True, time.monotonic() - start, models=served or [],
                               note="rate limited right now (HTTP 429)")
        result = fail("http", f"HTTP {status} on a 1-token chat completion: {msg}")
        result.models = served or []
        return result
    except (ValueError, openai.OpenAIError) as exc:
        return fail("http", f"a 1-token chat completion came back unreadable: {type(exc).__name__}: {redact(str(exc))}")
    note = f"{model!r} answers, though GET /models does not list it" if served is not None else ""
    return ProbeResult(shown, True, time.monotonic() - start, models=served or [], note=note)


def _served(served: list[str] | None) -> str:
    if served is None:
        return "the server does not list its models"
    if not served:
        return "it lists no model"
    more = f" and {len(served) - MAX_MODELS_SHOWN} more" if len(served) > MAX_MODELS_SHOWN else ""
    return f"served: {', '.join(served[:MAX_MODELS_SHOWN])}{more}"


def _model_ids(listing: Any) -> list[str] | None:
    """The ids of an OpenAI model list, or None when the body is not one."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None]
