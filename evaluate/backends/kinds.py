"""The backend kinds a `judge:` or `model:` block may name, and what each can do.

Code outside evaluate/backends/ never compares `backend:` with a kind's name: it asks what the
kind can do (`capabilities(opts).http`, `.starts_server`, ...), so a new kind is one entry here, its
factories in registry.py and a Backend subclass, with no edit in the pipeline, the generation, the
judges or the report (tests/test_backend_registry.py checks that no module outside this package
compares a kind's name).

This module is what the options need (the names `backend:` accepts, the defaults and checks each
kind brings); registry.py adds how each kind is opened. Which option keys a kind reads is declared
on the options themselves (`kinds=` in options.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from ..core.errors import InputError
from ..core.registry import suggest

if TYPE_CHECKING:
    from .options import JudgeOptions

# opens the file a server's output goes to, given a name (`vllm-<model>`); a save path's logs/ folder
ServerLog = Callable[[str], BinaryIO]


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
    default_concurrency: int = 8  # requests in flight when `concurrency` is not given
    default_timeout: float = 120.0  # seconds per HTTP attempt when `timeout` is not given


@dataclass(frozen=True)
class Kind:
    """A backend kind: its name, what it is, what it can do, and the checks of its options beyond
    their types (key, message) pairs, run when a block loads (exit 2)."""

    name: str
    doc: str
    capabilities: Capabilities
    problems: Callable[["JudgeOptions"], list[tuple[str, str]]] = field(default=lambda opts: [])
    # a manifest's judge block lists every key of the other kinds too (as the first kinds' blocks always
    # have: kept, so that their blocks read as before); False: only the keys this kind reads
    block_lists_all: bool = False


_KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if kind.name in _KINDS:
        raise ValueError(f"backend kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind
    return kind


def names() -> tuple[str, ...]:
    """The registered kinds, in registration order (what `backend:` accepts)."""
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


def _problems_local(opts: "JudgeOptions") -> list[tuple[str, str]]:
    if opts.dtype == "float16":
        return [("dtype", "the local backend computes in bfloat16 or float32 (auto picks); float16 is for "
                          "backend: vllm")]
    return []


def _problems_vllm(opts: "JudgeOptions") -> list[tuple[str, str]]:
    from .vllm_engine import problems

    return problems(opts)


register(Kind(
    "local", "transformers in this process, offline (the packaged models, a folder, a GGUF)",
    Capabilities(logprobs=True, hidden_states=True, parallel_decoding=True, in_process=True),
    _problems_local, block_lists_all=True))
register(Kind(
    "openai", "any OpenAI-compatible server you run or pay for (OpenAI, vLLM, Ollama, llama.cpp server)",
    Capabilities(logprobs=True, batch_jobs=True, http=True, user_server=True), block_lists_all=True))
register(Kind(
    "vllm", "vLLM's OpenAI-compatible server, started by the tool for the named model and stopped at the end",
    # a batching server: many requests in flight keep its batch full; a request queued behind others
    # on a CPU build waits its turn, so an attempt gets longer before it counts as timed out
    Capabilities(logprobs=True, starts_server=True, http=True, default_concurrency=32, default_timeout=600.0),
    _problems_vllm))
