"""Send every request of an evaluation through ONE `backend.complete_many` call.

One call lets the backend batch, cache and run concurrently. Before the call, identical
requests are merged (a repeated record costs one judgment) and the rest are sorted by their
message text. Lexicographic order is a depth-first walk of the prefix trie, so requests with
the longest common prefix end up next to each other whatever the template's placeholder order
is: for ColossalAI's templates (question and answer before the rubric) that groups the metrics
of one answer; for a rubric-first template it groups one metric's answers. A local backend can
then reuse the KV cache of the shared prefix. Results come back in the caller's order.
"""

from __future__ import annotations

from typing import Sequence

from ..backends.base import Backend, Completion, JudgeRequest, ProgressFn


def _sort_key(req: JudgeRequest) -> tuple:
    return (req.messages, req.max_tokens, req.top_logprobs, req.stop, req.temperature, req.seed or 0)


def complete_all(backend: Backend, requests: Sequence[JudgeRequest],
                 progress: ProgressFn | None = None) -> list[Completion]:
    """Completions for `requests`, in their order, from a single `complete_many` call."""
    unique: dict[JudgeRequest, int] = {}
    for req in requests:
        unique.setdefault(req, len(unique))
    ordered = sorted(unique, key=_sort_key)
    got = backend.complete_many(ordered, progress) if ordered else []
    if len(got) != len(ordered):
        raise RuntimeError(f"backend {backend.kind} returned {len(got)} completions for {len(ordered)} requests")
    by_request = dict(zip(ordered, got))
    return [by_request[req] for req in requests]
