"""The backend kinds `backend:` accepts, registered once, and what the rest of the tool asks of them:
their names, what each can do, and the backend each opens.

This package's kinds are registered here, in the order `backend:` lists them: a new kind is its module
(kind_NAME.py: capabilities, own keys, checks, how it opens), imported and named in `_BUILT_IN`. An installed
package adds a kind without an edit here: an entry point of the group `llm_eval.backends` naming its
`Kind` (in its pyproject.toml: `[project.entry-points."llm_eval.backends"]` `toy = "toy_backend:KIND"`),
registered here after this package's own, before options.py builds the `judge:` block from them.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from .base import Backend
from .kind_local import KIND as LOCAL
from .kind_openai import KIND as OPENAI
from .kind_vllm import KIND as VLLM
from .kinds import (ENTRY_POINTS, Capabilities, Kind, ServerLog, capabilities, get, kind_name,  # noqa: F401  (the
                    names, register, registered)  # registry's API: what code outside the package asks)

_BUILT_IN = (LOCAL, OPENAI, VLLM)


def _register_all() -> None:
    for kind in _BUILT_IN:
        register(kind)
    for point in entry_points(group=ENTRY_POINTS):
        try:
            kind = point.load()
        except Exception as exc:  # a broken plugin names itself rather than failing somewhere below
            raise RuntimeError(f"backend kind {point.name!r} ({point.value}, an entry point of {ENTRY_POINTS}) "
                               f"failed to load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(kind, Kind) or kind.name != point.name:
            raise RuntimeError(f"entry point {point.name!r} of {ENTRY_POINTS} ({point.value}) must name a "
                               f"evaluate.backends.kinds.Kind called {point.name!r}")
        register(kind)


_register_all()


def open_inner(opts: Any, api_key: str | None = None, server_log: ServerLog | None = None) -> Backend:
    """The backend `opts` (a `judge:` block) names, bare (no cache, no batch jobs): `pool.open_backend`
    adds those."""
    return get(opts.backend).open(opts, api_key, server_log)


def identity(opts: Any) -> Backend:
    """The judge `opts` names, for its signature and capabilities only: no key, nothing started or sent."""
    return get(opts.backend).identity(opts)
