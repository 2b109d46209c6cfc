"""One interface for every judge: evaluators never know whether they talk to an HTTP server
or to a local model.

A backend turns a `JudgeRequest` (chat messages plus decoding options) into a `Completion`
(text, per-position top log-probabilities, token counts). `complete` may raise `BackendError`;
`complete_many` never raises: a request that still fails after the bounded retries comes back
as a Completion with `error` set, which evaluators record as *invalid* (never as a score).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


class BackendError(Exception):
    """A request failed. `retryable` says whether trying again may help (429, 5xx, timeouts)."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class JudgeRequest:
    """What an evaluator asks of a judge. Frozen and canonically serialisable: it is the cache key."""

    messages: tuple[tuple[str, str], ...]  # ((role, content), ...)
    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 0  # 0: none; k > 0: the top-k next-token log-probabilities at each generated position
    stop: tuple[str, ...] = ()
    seed: int | None = None
    top_p: float | None = None  # nucleus sampling (generation); None: the server's default, and not in the key

    @classmethod
    def chat(cls, system: str | None, user: str, **kw: Any) -> "JudgeRequest":
        msgs = ((("system", system),) if system else ()) + (("user", user),)
        return cls(messages=msgs, **kw)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "messages": [{"role": r, "content": c} for r, c in self.messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_logprobs": self.top_logprobs,
            "stop": list(self.stop),
            "seed": self.seed,
        }
        if self.top_p is not None:  # only when set: every request made before top_p existed keeps its cache key
            out["top_p"] = self.top_p
        return out

    def key(self) -> str:
        """sha256 of the canonical JSON of the request."""
        blob = json.dumps(self.as_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class Completion:
    text: str = ""
    # One dict per generated position: token text -> log-probability (the top-k asked for).
    top_logprobs: list[dict[str, float]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    cached: bool = False
    error: str | None = None  # set when the request failed for good; the evaluator records it as invalid

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "top_logprobs": self.top_logprobs,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], cached: bool = False) -> "Completion":
        return cls(
            text=d.get("text", ""),
            top_logprobs=d.get("top_logprobs", []),
            prompt_tokens=d.get("prompt_tokens", 0),
            completion_tokens=d.get("completion_tokens", 0),
            finish_reason=d.get("finish_reason", ""),
            cached=cached,
        )


ProgressFn = Callable[[Completion], None]


class Backend(ABC):
    """A judge. Subclasses implement `complete`; `complete_many` may be overridden for batching
    or concurrency but must keep the order of the requests and never raise."""

    kind: str = "base"  # "openai", "local", ...
    judge_name: str | None = None  # a named judge's name (a panel's), set by the pool: its messages say it

    def __init__(self, model: str):
        self.model = model

    @property
    def supports_logprobs(self) -> bool:
        return False

    @abstractmethod
    def complete(self, request: JudgeRequest) -> Completion:
        """One request; raises BackendError on failure."""

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        out = []
        for req in requests:
            try:
                comp = self.complete(req)
            except BackendError as exc:
                comp = Completion(error=str(exc))
            out.append(comp)
            if progress:
                progress(comp)
        return out

    def signature(self) -> dict[str, Any]:
        """Identifies the judge in results and in the cache key (never contains a secret)."""
        return {"backend": self.kind, "model": self.model}

    def close(self) -> None:
        pass


class WrappingBackend(Backend):
    """A backend in front of another (the cache, a family's meter, batch jobs, the probe, the export's
    recorder): the judge is the inner one, so its model, kind, capabilities and signature are the
    inner one's, and `usage` and `close` pass through. A wrapper overrides only what it changes."""

    def __init__(self, inner: Backend):
        super().__init__(inner.model)
        self.inner = inner
        self.kind = inner.kind

    @property
    def supports_logprobs(self) -> bool:
        return self.inner.supports_logprobs

    def signature(self) -> dict[str, Any]:
        return self.inner.signature()

    def complete(self, request: JudgeRequest) -> Completion:
        return self.inner.complete(request)

    def usage(self) -> dict[str, Any]:
        usage = getattr(self.inner, "usage", None)
        return usage() if callable(usage) else {}

    def close(self) -> None:
        self.inner.close()


CHARS_PER_TOKEN = 4  # a dry run's estimate of prompt tokens; errs high for English prose


def estimate_tokens(requests: Sequence[JudgeRequest]) -> tuple[int, int]:
    """Prompt tokens (characters / CHARS_PER_TOKEN) and the most completion tokens (max_tokens) of
    `requests`: what a dry run can say before anything is sent."""
    prompt = sum(len(c) for r in requests for _, c in r.messages) // CHARS_PER_TOKEN
    return prompt, sum(r.max_tokens for r in requests)


def cost_usd(prompt_tokens: float, completion_tokens: float, price: dict[str, float]) -> float:
    """Dollars for these tokens at `price` ($ per million prompt and completion tokens, judge.price)."""
    return prompt_tokens * price["prompt"] / 1e6 + completion_tokens * price["completion"] / 1e6
