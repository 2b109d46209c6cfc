"""The `judge:` block of a config (and, with generation keys added, a `model:` block): which
engine answers, how requests reach it, and how it judges.

The keys are flat in YAML, as they always were; in the code they fall in three groups, each a
dataclass of its own that `JudgeOptions` joins:

- `TransportOptions`: which backend and model, and how requests reach it (servers, key, requests
  in flight, timeouts, retries, cache, price, batch jobs);
- `EngineOptions`: how the engine that computes runs (the local backend's dtype and decoding
  settings, the vLLM server's parallelism, memory and flags);
- `JudgingOptions`: what is asked of the judge (temperature, logprobs or a parsed reply, battles
  in both orders, reply length, explanations).

The keys declared here are common to the kinds: each is read by every kind, or by the kinds with one
capability (`when`: `concurrency` by those whose requests travel over HTTP, `base_url` by those whose
server the user names). The keys of one kind are declared with it (kind_*.py, `Kind.options`) and
join the engine group here, in the order the kinds are registered (registry.py). Which kinds read a
key (`readers`) decides what the docs list under them and what the report's judge panel shows; a
kind's exclusive keys are refused on another kind and written to a manifest only for their kind, so
the judge block of a judge that existed before a kind was added stays as it was.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

from ..core.options import option
from ..core.secrets import looks_like_key
from .kinds import seal
from .registry import capabilities, get as get_kind, names as kind_names, registered

BackendName = Literal[kind_names()]  # type: ignore[valid-type]  # the registered kinds: "local", "openai", "vllm"

GROUPS = ("transport", "engine", "judging")


def key(default: Any, doc: str, *, when: str | None = None, **bounds: Any) -> Any:
    """An option (core.options.option) common to the kinds: read by every kind, or (`when`, the name of a
    `Capabilities` field) by the kinds with that capability."""
    f: Field = option(default, doc, **bounds)
    f.metadata = MappingProxyType({**f.metadata, "when": when})
    return f


def _backend_doc() -> str:
    shown = [f"{k.name} ({k.doc})" for k in registered()]
    return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)


@dataclass
class TransportOptions:
    """Which backend and model, and how requests reach it."""

    backend: BackendName = key("local", _backend_doc())
    model: str = key("Qwen2.5-Coder-1.5B-Instruct", "a packaged model name, a local HF folder or .gguf, or a served "
                                                    "model name (openai); vllm: a packaged name, a folder, a GGUF or "
                                                    "a hub id", nonempty=True)
    base_url: str | list[str] | None = key(None, "server root ending in /v1, e.g. http://127.0.0.1:8000/v1 (openai "
                                                 "backend), or a list of replicas serving the same model",
                                           when="user_server")
    endpoints: list[dict[str, Any]] | None = key(None, "instead of base_url: [{base_url, concurrency}] replicas of the "
                                                       "same model, each with its own concurrency", when="user_server")
    endpoint_failures: int = key(5, "several endpoints: failed attempts in a row (connection, timeout, 5xx) that set "
                                    "one aside", when="user_server", min=1)
    endpoint_cooldown: float = key(30.0, "several endpoints: seconds one is set aside (doubling while it keeps "
                                         "failing)", when="user_server", gt=0)
    api_key_env: str = key("OPENAI_API_KEY", "the environment variable holding the API key (never the key itself)",
                           when="user_server", nonempty=True)
    concurrency: int | None = key(None, "requests in flight (HTTP), for the whole run; per endpoint with several; "
                                        "null: 8, or 32 for a vllm server (it batches them)", when="http", min=1)
    timeout: float | None = key(None, "seconds per HTTP attempt; doubled after each timeout (up to 8x); null: 120, "
                                      "or 600 for a vllm server (a request waits its turn in the batch)",
                                when="http", gt=0)
    max_retries: int = key(8, "retries of 429/5xx/timeouts/refused connections, exponential backoff with "
                              "jitter (the default spans ~45 s on average: a server restart)", when="http", min=0)
    cache: bool | str = key(True, "true: <save_path>/judge_cache.sqlite; a path; false: no cache")
    price: dict[str, float] | None = key(None, "{prompt, completion}: $ per 1M tokens, for the cost in the manifest",
                                         when="http")
    batch: bool = key(False, "openai backend: send the uncached requests as provider batch jobs (/v1/files, "
                             "/v1/batches; half price, results within 24 h)", when="batch_jobs")
    batch_poll: float = key(60.0, "batch jobs: the longest wait between two polls, in seconds (backoff from 1 s)",
                            when="batch_jobs", gt=0)


@dataclass
class _CommonEngineOptions:
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = key(
        "auto", "weights and activations: local: auto (bf16 with AMX, else float32), bfloat16, float32; vllm: auto "
                "(float32 on a CPU build, else vLLM's own choice), bfloat16, float16, float32", when="loads_weights")


# the engine group: the common engine keys, then each registered kind's own keys in registration order
# (the dataclass fields of bases come first, the last base's first)
EngineOptions = dataclass(type("EngineOptions", (*[k.options for k in reversed(registered()) if k.options],
                                                 _CommonEngineOptions),
                               {"__module__": __name__, "__qualname__": "EngineOptions",
                                "__doc__": "How the engine that computes runs: the keys each kind alone reads (the "
                                           "local backend's, the vLLM server's the tool starts) and those they share."}))
# which kind declared each of the kinds' own keys
OWNER = {f.name: k.name for k in registered() if k.options for f in fields(k.options)}


@dataclass
class JudgingOptions:
    """What is asked of the judge; the same whichever engine answers."""

    temperature: float = key(0.0, "sampling temperature (0: greedy)", min=0, max=2)
    mode: Literal["auto", "logprobs", "generate"] = key("auto", "logprobs (G-Eval expected score), generate (parsed "
                                                                "reply) or auto")
    both_orders: bool = key(True, "battles judged in both orders; a verdict that flips is a tie")
    max_tokens: int = key(512, "most tokens a reply may have", min=1)
    explain: bool = key(True, "battle: let the judge explain after its score line")


# the order of the judge block in manifests written before the keys were grouped (kept: a judge's
# block reads the same as before); keys added since follow in their groups' order
MANIFEST_ORDER = ("backend", "model", "base_url", "endpoints", "endpoint_failures", "endpoint_cooldown", "api_key_env",
                  "concurrency", "timeout", "max_retries", "temperature", "cache", "mode", "both_orders", "price",
                  "dtype", "device", "max_tokens", "explain", "batch", "batch_poll", "lookahead", "local_batch_size",
                  "local_sequences", "local_batch_tokens", "local_matmul", "local_pack_weights")


@dataclass
class JudgeOptions(JudgingOptions, EngineOptions, TransportOptions):  # type: ignore[misc, valid-type]
    """The whole `judge:` block: the three groups' keys side by side (flat, as in the YAML)."""

    def __post_init__(self) -> None:
        caps = capabilities(self.backend) if self.backend in kind_names() else None
        if self.concurrency is None:
            self.concurrency = caps.default_concurrency if caps else 8
        if self.timeout is None:
            self.timeout = caps.default_timeout if caps else 120.0

    @staticmethod
    def group_of(name: str) -> str:
        """"transport", "engine" or "judging": where key `name` belongs."""
        for group, cls in zip(GROUPS, (TransportOptions, EngineOptions, JudgingOptions)):
            if any(f.name == name for f in fields(cls)):
                return group
        raise KeyError(name)

    def group(self, name: str) -> Any:
        """One group's keys as its own dataclass (`opts.group("engine").dtype`)."""
        cls = dict(zip(GROUPS, (TransportOptions, EngineOptions, JudgingOptions)))[name]
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})

    def as_block(self) -> dict[str, Any]:
        """The block as a manifest writes it, in the order of manifests written before the groups: the keys
        this kind reads (local and openai: every key but the exclusive ones of another kind, as their blocks
        always listed them)."""
        known = {f.name: f for f in fields(self)}
        order = [k for k in MANIFEST_ORDER if k in known] + [k for k in known if k not in MANIFEST_ORDER]
        every = get_kind(self.backend).block_lists_all if self.backend in kind_names() else True
        out: dict[str, Any] = {}
        for k in order:
            who = readers(k)
            if who is not None and self.backend not in who and (_exclusive(k) or not every):
                continue
            value = getattr(self, k)
            out[k] = list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
        return out

    def endpoint_specs(self) -> list[dict[str, Any]] | None:
        """[{base_url, concurrency}] for several endpoints (or a list of one); None: the single base_url."""
        if self.endpoints:
            return [{"base_url": e["base_url"], "concurrency": e.get("concurrency", self.concurrency)}
                    for e in self.endpoints]
        if isinstance(self.base_url, list):
            return [{"base_url": u, "concurrency": self.concurrency} for u in self.base_url]
        return None

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        urls = [("base_url", self.base_url)] if isinstance(self.base_url, str) else \
            [(f"base_url[{i}]", u) for i, u in enumerate(self.base_url or [])]
        if isinstance(self.base_url, list) and not self.base_url:
            out.append(("base_url", "expected at least one URL in the list"))
        if self.endpoints is not None:
            if self.base_url is not None:
                out.append(("endpoints", "give the servers either as base_url or as endpoints, not both"))
            if not self.endpoints:
                out.append(("endpoints", "expected at least one {base_url, concurrency}"))
            for i, e in enumerate(self.endpoints):
                where = f"endpoints[{i}]"
                unknown = sorted(set(e) - {"base_url", "concurrency"})
                if unknown:
                    out.append((where, f"unknown key(s) {', '.join(map(str, unknown))} (known: base_url, concurrency)"))
                if not isinstance(e.get("base_url"), str):
                    out.append((f"{where}.base_url", "expected a URL string such as http://127.0.0.1:8000/v1"))
                else:
                    urls.append((f"{where}.base_url", e["base_url"]))
                n = e.get("concurrency", self.concurrency)
                if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                    out.append((f"{where}.concurrency", f"expected a positive integer, got {n!r}"))
        for key, url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                out.append((key, "expected an http:// or https:// URL such as http://127.0.0.1:8000/v1"))
        seen = [scrub for _, u in urls if (scrub := u.rstrip("/"))]
        if len(set(seen)) != len(seen):
            out.append(("endpoints" if self.endpoints else "base_url", "the same URL is listed twice"))
        if self.price is not None:
            if set(self.price) != {"prompt", "completion"}:
                out.append(("price", "expected {prompt: $ per 1M tokens, completion: $ per 1M tokens}, got keys "
                                     + ", ".join(sorted(map(str, self.price)))))
            elif any(v < 0 or v != v for v in self.price.values()):
                out.append(("price", "prices must be numbers >= 0"))
        if self.batch and not capabilities(self.backend).batch_jobs:
            out.append(("batch", "batch jobs need an OpenAI-compatible provider with /v1/files and /v1/batches: "
                                 "set judge.backend: openai (for a local engine, use --export-requests instead)"))
        if self.batch and self.cache is False:
            out.append(("batch", "batch jobs are recorded in the judge cache so that a killed run resumes them; "
                                 "keep judge.cache on"))
        if self.backend in kind_names():  # its own checks, where the common ones stand (local: the device)
            out.extend(get_kind(self.backend).problems(self))
        if looks_like_key(self.api_key_env):
            out.append(("api_key_env", "this looks like an API key, not the name of an environment variable; put the "
                                       "key in a variable (e.g. export OPENAI_API_KEY=...) and name the variable here "
                                       "(the value is not shown)"))
        for f in fields(self):
            owner = OWNER.get(f.name)
            if owner and owner != self.backend and _exclusive(f.name) and getattr(self, f.name) != _default(f):
                out.append((f.name, f"read by backend {owner} only; this block's backend is {self.backend}"))
        if not out:
            out.extend(get_kind(self.backend).problems_when_sound(self))
        return out


seal("the judge: block was built from the kinds (evaluate.backends.options)")


def _default(f: Field) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]


def _exclusive(name: str) -> bool:
    """Whether key `name` belongs to one kind alone (refused on another kind, left out of its block)."""
    return name in OWNER and get_kind(OWNER[name]).exclusive


def readers(name: str) -> tuple[str, ...] | None:
    """The kinds that read key `name`, in registration order; None: every kind (or not a key)."""
    if name in OWNER:
        return (OWNER[name],)
    f = next((f for f in fields(JudgeOptions) if f.name == name), None)
    when = f.metadata.get("when") if f is not None else None
    if when is None:
        return None
    return tuple(k.name for k in registered() if getattr(k.capabilities, when))


def reads(kind: str, key: str) -> bool:
    """Whether backend `kind` reads option `key` (a key that is not an option, from an older or newer
    version's manifest, counts as read, but for a key another kind retired)."""
    if not any(f.name == key for f in fields(JudgeOptions)):
        return not any(key in k.retired for k in registered() if k.name != kind)
    who = readers(key)
    return who is None or kind in who


def shown_options(block: dict[str, Any]) -> dict[str, Any]:
    """A judge block (a manifest's `judge`) without the keys its kind does not read, nor those
    that do not apply (batch_poll without batch jobs, base_url beside endpoints, the endpoints'
    settings without endpoints): what the report's judge panel shows."""
    kind = str(block.get("backend", "local"))
    if kind not in kind_names():
        return dict(block)
    drop = {k for k in block if k != "backend" and not reads(kind, k)}
    if not block.get("batch"):
        drop.add("batch_poll")
    if block.get("endpoints"):
        drop.add("base_url")
    else:
        drop.update(("endpoints", "endpoint_failures", "endpoint_cooldown"))
    return {k: v for k, v in block.items() if k not in drop}
