"""`backend: openai`: any OpenAI-compatible server you run or pay for (OpenAI, vLLM, Ollama, llama.cpp
server), reached over HTTP (openai_compat.py).

It has no key of its own: the keys it reads (base_url, endpoints, api_key_env, concurrency, timeout,
batch, ...) are those of every kind with its capabilities (a server the user names, HTTP, batch jobs;
options.py says which capability makes a key read).
"""

from __future__ import annotations

from typing import Any

from .base import Backend
from .kinds import Capabilities, Kind, ServerLog


def _open(opts: Any, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(opts.model, base_url=opts.base_url, endpoints=opts.endpoint_specs(),
                               api_key_env=opts.api_key_env, api_key=api_key,
                               concurrency=opts.concurrency, timeout=opts.timeout,
                               max_retries=opts.max_retries, price=opts.price,
                               endpoint_failures=opts.endpoint_failures,
                               endpoint_cooldown=opts.endpoint_cooldown)


def _identity(opts: Any) -> Backend:
    from .openai_compat import OpenAICompatBackend

    return OpenAICompatBackend(opts.model, base_url=opts.base_url or "http://127.0.0.1:1/v1",
                               api_key="EMPTY", concurrency=opts.concurrency, timeout=opts.timeout)


KIND = Kind(
    "openai", "any OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp server",
    Capabilities(logprobs=True, batch_jobs=True, http=True, user_server=True),
    _open, _identity, block_lists_all=True)
