"""What a backend kind is (`Kind`: its name, what it can do, the keys it alone reads, its checks and
how it opens) and the table of the kinds `backend:` accepts.

Each kind is declared once, in a module of its own (kind_local.py, kind_openai.py, kind_vllm.py, or
an installed package's module): registry.py registers them, and options.py builds the `judge:` block
from the common keys and each registered kind's own. Code outside evaluate/backends/ never compares
`backend:` with a kind's name: it asks what the kind can do (`capabilities(opts).http`,
`.starts_server`, ...), so a new kind is one module and one registration, with no edit in the
pipeline, the generation, the judges or the report (tests/test_backend_registry.py checks that no
module outside this package compares a kind's name, and that this package's imports form no circle).

This module imports nothing else of the package but the Backend interface, so that a kind's module
and a backend's module can build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from ..core.errors import InputError
from ..core.registry import suggest
from .base import Backend

# opens the file a server's output goes to, given a name (`vllm-<model>`); a save path's logs/ folder
ServerLog = Callable[[str], BinaryIO]
ENTRY_POINTS = "llm_eval.backends"  # the group an installed package declares its kinds in (as families: llm_eval.families)
# checks of a block beyond its keys' types: (key, message) pairs, each refusing the config (exit 2)
Checks = Callable[[Any], "list[tuple[str, str]]"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend kind can do; the tool asks these, never the kind's name."""

    logprobs: bool = False  # top log-probabilities of each generated token (G-Eval's expected score)
    hidden_states: bool = False  # the model's hidden states in this process (what RepEval reads)
    batch_jobs: bool = False  # provider batch jobs (/v1/files, /v1/batches; judge.batch)
    parallel_decoding: bool = False  # several sequences decoded together in this process (local_sequences)
    in_process: bool = False  # the model runs inside this process (judge.max_tokens caps every reply)
    starts_server: bool = False  # the tool starts the model's server itself and stops it at the end
    http: bool = False  # requests travel over HTTP: concurrency, retries, timeouts, units run in threads
    user_server: bool = False  # the user names the server (base_url / endpoints / a key): probed before use
    loads_weights: bool = False  # the weights are read on this machine (dtype; the model is found before a load)
    default_concurrency: int = 8  # requests in flight when `concurrency` is not given
    default_timeout: float = 120.0  # seconds per HTTP attempt when `timeout` is not given


def _none(opts: Any) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class Kind:
    """A backend kind, declared once.

    name: what `backend:` says. doc: what it is, in a few words (the `backend` key's doc lists them).
    capabilities: what it can do.
    open(opts, api_key, server_log): the backend that answers, given the block (`JudgeOptions`); nothing
        is loaded, started or sent before its first request (pool.open_backend puts batch jobs and the
        cache in front).
    identity(opts): the same judge for its signature and capabilities only (a dry run's estimate, an
        export): no key, nothing started or sent.
    options: a dataclass of the keys this kind alone reads (`core.options.option` fields, each with its
        doc and bounds): they join the `judge:` block's engine keys, checked like every key.
    exclusive: its keys are refused on another kind's block and left out of that block in a manifest
        (False: read by this kind only, but accepted everywhere and listed as the first kinds always were).
    problems(opts): checks of the block beyond its keys' types, made with the common ones.
    problems_when_sound(opts): checks made once the block has no other problem (slow ones: an install).
    block_lists_all: a manifest's judge block of this kind lists every key of the kinds that are not
        exclusive too (as the first kinds' blocks always have: kept, so that their blocks read as before).
    retired: keys that older versions wrote for this kind alone (read back from manifests).
    """

    name: str
    doc: str
    capabilities: Capabilities
    open: Callable[[Any, "str | None", "ServerLog | None"], Backend]
    identity: Callable[[Any], Backend]
    options: type | None = None
    exclusive: bool = True
    problems: Checks = _none
    problems_when_sound: Checks = _none
    block_lists_all: bool = False
    retired: tuple[str, ...] = ()


_KINDS: dict[str, Kind] = {}
_SEALED: list[str] = []  # why no kind may be registered any more (the `judge:` block was built from them)


def register(kind: Kind) -> Kind:
    """Add `kind` to the kinds `backend:` accepts (before the `judge:` block is built: registry.py)."""
    if _SEALED:
        raise RuntimeError(f"backend kind {kind.name!r} registered after {_SEALED[0]}; declare it as an entry point "
                           f"of the group {ENTRY_POINTS} (loaded before), or register it before "
                           "evaluate.backends.options is imported")
    if kind.name in _KINDS:
        raise ValueError(f"backend kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind
    return kind


def seal(why: str) -> None:
    """No kind may be registered after this (`why`: what was built from the kinds registered so far)."""
    _SEALED.append(why)


def registered() -> tuple[Kind, ...]:
    """The registered kinds, in registration order."""
    return tuple(_KINDS.values())


def names() -> tuple[str, ...]:
    """The registered kinds' names, in registration order (what `backend:` accepts)."""
    return tuple(_KINDS)


def get(name: str) -> Kind:
    if name not in _KINDS:
        raise InputError(f'backend "{name}"{suggest(str(name), list(_KINDS))}: expected one of ' + ", ".join(_KINDS))
    return _KINDS[name]


def kind_name(of: Any) -> str:
    """The kind of a `judge:`/`model:` block (its `backend`), of a Backend (its `kind`), or a name."""
    if isinstance(of, str):
        return of
    backend = getattr(of, "backend", None)
    if isinstance(backend, str):
        return backend
    kind = getattr(of, "kind", None)
    if isinstance(kind, str):
        return kind
    raise TypeError(f"not a backend, options or kind name: {type(of).__name__}")


def capabilities(of: Any) -> Capabilities:
    """What the kind of `of` (options, a backend or a kind name) can do. A Backend object of a kind that
    is not registered (a test double, a subclass of a user's own) is asked itself: its `capabilities`
    attribute where it declares one, else a backend in this process with the log-probabilities it says
    it gives (nothing travels over HTTP, nothing is started)."""
    name = kind_name(of)
    if name not in _KINDS and not isinstance(of, str) and getattr(of, "backend", None) is None:
        declared = getattr(of, "capabilities", None)
        if isinstance(declared, Capabilities):
            return declared
        return Capabilities(logprobs=bool(getattr(of, "supports_logprobs", False)), in_process=True)
    return get(name).capabilities
