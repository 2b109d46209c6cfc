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

Each key also says which backend kinds read it (`kinds`, see kinds.py): the docs list it under
them, the report's judge panel shows only those of the judge's kind, and a key made for one kind
(`own`) is refused on another and written to a manifest only for its kind, so the judge block of a
judge that existed before a kind was added stays as it was.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

from ..core.options import option
from ..core.secrets import looks_like_key
from .kinds import capabilities, get as get_kind, names as kind_names

OPENAI_URL = "https://api.openai.com/v1"  # where an openai judge with no base_url (nor $OPENAI_BASE_URL) goes

BackendName = Literal[kind_names()]  # type: ignore[valid-type]  # the registered kinds: "local", "openai", "vllm"

GROUPS = ("transport", "engine", "judging")
HTTP = ("openai", "vllm")  # the kinds whose requests travel over HTTP


def key(default: Any, doc: str, *, kinds: tuple[str, ...] | None = None, own: bool = False, **bounds: Any) -> Any:
    """An option (core.options.option) read by the backend `kinds` (None: every kind). `own`: made for
    those kinds alone: refused on another kind and left out of its manifest block."""
    f: Field = option(default, doc, **bounds)
    f.metadata = MappingProxyType({**f.metadata, "kinds": kinds, "own": own})
    return f


@dataclass
class TransportOptions:
    """Which backend and model, and how requests reach it."""

    backend: BackendName = key("local", "local (transformers in this process, offline), openai (any OpenAI-compatible "
                                        "server: OpenAI, vLLM, Ollama, llama.cpp server) or vllm (vLLM's server, "
                                        "started by the tool for this model and stopped at the end)")
    model: str = key("Qwen2.5-Coder-1.5B-Instruct", "a packaged model name, a local HF folder or .gguf, or a served "
                                                    "model name (openai); vllm: a packaged name, a folder, a GGUF or "
                                                    "a hub id", nonempty=True)
    base_url: str | list[str] | None = key(None, "server root ending in /v1, e.g. http://127.0.0.1:8000/v1 (openai "
                                                 "backend), or a list of replicas serving the same model",
                                           kinds=("openai",))
    endpoints: list[dict[str, Any]] | None = key(None, "instead of base_url: [{base_url, concurrency}] replicas of the "
                                                       "same model, each with its own concurrency", kinds=("openai",))
    endpoint_failures: int = key(5, "several endpoints: failed attempts in a row (connection, timeout, 5xx) that set "
                                    "one aside", kinds=("openai",), min=1)
    endpoint_cooldown: float = key(30.0, "several endpoints: seconds one is set aside (doubling while it keeps "
                                         "failing)", kinds=("openai",), gt=0)
    api_key_env: str = key("OPENAI_API_KEY", "the environment variable holding the API key (never the key itself)",
                           kinds=("openai",), nonempty=True)
    concurrency: int | None = key(None, "requests in flight (HTTP), for the whole run; per endpoint with several; "
                                        "null: 8, or 32 for a vllm server (it batches them)", kinds=HTTP, min=1)
    timeout: float | None = key(None, "seconds per HTTP attempt; doubled after each timeout (up to 8x); null: 120, "
                                      "or 600 for a vllm server (a request waits its turn in the batch)",
                                kinds=HTTP, gt=0)
    max_retries: int = key(8, "retries of 429/5xx/timeouts/refused connections, exponential backoff with "
                              "jitter (the default spans ~45 s on average: a server restart)", kinds=HTTP, min=0)
    cache: bool | str = key(True, "true: <save_path>/judge_cache.sqlite; a path; false: no cache")
    price: dict[str, float] | None = key(None, "{prompt, completion}: $ per 1M tokens, for the cost in the manifest",
                                         kinds=HTTP)
    batch: bool = key(False, "openai backend: send the uncached requests as provider batch jobs (/v1/files, "
                             "/v1/batches; half price, results within 24 h)", kinds=("openai",))
    batch_poll: float = key(60.0, "batch jobs: the longest wait between two polls, in seconds (backoff from 1 s)",
                            kinds=("openai",), gt=0)


@dataclass
class EngineOptions:
    """How the engine that computes runs: the local backend's, or the vLLM server's the tool starts."""

    dtype: Literal["auto", "bfloat16", "float16", "float32"] = key(
        "auto", "weights and activations: local: auto (bf16 with AMX, else float32), bfloat16, float32; vllm: auto "
                "(float32 on a CPU build, else vLLM's own choice), bfloat16, float16, float32", kinds=("local", "vllm"))
    device: str = key("auto", "local judge: where the model runs: auto (a CUDA GPU when torch sees one, else the CPU), "
                              "cpu, cuda, cuda:N or mps (the same key as UniEval's and BERTScore's); vllm: the server "
                              "chooses its own devices", kinds=("local",), nonempty=True)
    lookahead: int = key(3, "local judge: most tokens drafted per step by prompt-lookup decoding (0: off)",
                         kinds=("local",), min=0)
    local_batch_size: int = key(1, "local judge: one-token requests per forward pass (a GPU wants 8-32; "
                                   "1: one at a time with prefix reuse, faster on a CPU)", kinds=("local",), min=1)
    local_sequences: int = key(8, "local judge: multi-token requests (explanations, MT-bench judgments, SAGEval, "
                                  "generation) decoded together, one token each per forward pass (1: one at a time)",
                               kinds=("local",), min=1, max=256)
    local_batch_tokens: int = key(16384, "local judge: memory bound of the sequences in flight: rows x padded "
                                         "tokens of their KV cache (about 57 KB a token for Qwen-1.5B in float32)",
                                  kinds=("local",), min=256)
    local_matmul: Literal["auto", "onednn", "default"] = key(
        "auto", "local judge: kernel of the float32 matrix products: auto (oneDNN for float32 on x86-64: 1.3x one "
                "sequence, 2x eight at a time on a Zen 3), onednn, or default (torch's own; the earlier numbers)",
        kinds=("local",))
    local_pack_weights: Literal["auto", "always", "never"] = key(
        "auto", "local judge with oneDNN: keep a second copy of the float32 weights in oneDNN's packed layout for "
                "products of 2+ rows (prompts, drafts, sequences in flight; the same numbers, faster): auto (once "
                "a call brings 1,024 tokens of decoding budget, if the copy takes at most half the memory "
                "available and the process with it at most half the machine's), always (at load), never; CPU only",
        kinds=("local",))
    tensor_parallel_size: int = key(1, "GPUs one copy of the model is split over (--tensor-parallel-size)",
                                    kinds=("vllm",), own=True, min=1)
    data_parallel_size: int = key(1, "copies of the model serving requests side by side (--data-parallel-size)",
                                  kinds=("vllm",), own=True, min=1)
    gpu_memory_utilization: float | None = key(None, "share of each GPU's memory the server may take "
                                                     "(null: vLLM's 0.9)", kinds=("vllm",), own=True, gt=0, max=1)
    max_model_len: int | None = key(None, "longest prompt + reply in tokens (null: the model's own; 4096 on "
                                          "a CPU build); a reply is cut to fit", kinds=("vllm",), own=True, min=16)
    quantization: str | None = key(None, "its --quantization method (awq, gptq, fp8, ...; null: as the "
                                         "weights are)", kinds=("vllm",), own=True, nonempty=True)
    enable_prefix_caching: bool | None = key(None, "reuse the KV cache of shared prompt prefixes (null: "
                                                   "vLLM's default)", kinds=("vllm",), own=True)
    vllm_args: list[str] = key([], "more server flags, as on its command line, e.g. [\"--max-num-seqs\", "
                                   "\"64\"]", kinds=("vllm",), own=True)
    vllm_python: str | None = key(None, "the Python that has vLLM installed (null: $EVAL_VLLM_PYTHON, else "
                                        "the project's .venv-vllm made by make setup-vllm, else this one)",
                                  kinds=("vllm",), own=True, nonempty=True)
    startup_timeout: float = key(600.0, "seconds the server may take to load before the run stops (exit 3)",
                                 kinds=("vllm",), own=True, gt=0)


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
class JudgeOptions(JudgingOptions, EngineOptions, TransportOptions):
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
        this kind reads (local and openai: every key but those `own` by another kind, as their blocks
        always listed them)."""
        known = {f.name: f for f in fields(self)}
        order = [k for k in MANIFEST_ORDER if k in known] + [k for k in known if k not in MANIFEST_ORDER]
        every = get_kind(self.backend).block_lists_all if self.backend in kind_names() else True
        out: dict[str, Any] = {}
        for k in order:
            meta = known[k].metadata
            kinds = meta.get("kinds")
            if kinds is not None and self.backend not in kinds and (meta.get("own") or not every):
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
        if self.backend == "local":  # where this process loads the model: a device that is not there stops at load
            from ..models.device import device_problem

            if (bad := device_problem(self.device)):
                out.append(("device", bad))
        if looks_like_key(self.api_key_env):
            out.append(("api_key_env", "this looks like an API key, not the name of an environment variable; put the "
                                       "key in a variable (e.g. export OPENAI_API_KEY=...) and name the variable here "
                                       "(the value is not shown)"))
        for f in fields(self):
            kinds = f.metadata.get("kinds")
            if f.metadata.get("own") and self.backend not in kinds and getattr(self, f.name) != _default(f):
                out.append((f.name, f"read by backend {' or '.join(kinds)} only; this block's backend is "
                                    f"{self.backend}"))
        if not out:
            out.extend(get_kind(self.backend).problems(self))
        return out


def _default(f: Field) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
