"""The `judge:` block of a config: which judge, where, how hard to try, what it costs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..core.options import option
from ..core.secrets import looks_like_key


OPENAI_URL = "https://api.openai.com/v1"  # where an openai judge with no base_url (nor $OPENAI_BASE_URL) goes


@dataclass
class JudgeOptions:
    backend: Literal["local", "openai"] = option("local", "local (transformers, offline) or openai (any OpenAI-compatible server)")
    model: str = option("Qwen2.5-Coder-1.5B-Instruct", "a packaged model name, a local HF folder or .gguf, or a served model name", nonempty=True)
    base_url: str | list[str] | None = option(None, "server root ending in /v1, e.g. http://127.0.0.1:8000/v1 (openai backend), or a list of replicas serving the same model")
    endpoints: list[dict[str, Any]] | None = option(None, "instead of base_url: [{base_url, concurrency}] replicas of the same model, each with its own concurrency")
    endpoint_failures: int = option(5, "several endpoints: failed attempts in a row (connection, timeout, 5xx) that set one aside", min=1)
    endpoint_cooldown: float = option(30.0, "several endpoints: seconds one is set aside (doubling while it keeps failing)", gt=0)
    api_key_env: str = option("OPENAI_API_KEY", "the environment variable holding the API key (never the key itself)", nonempty=True)
    concurrency: int = option(8, "requests in flight (HTTP), for the whole run; per endpoint with several", min=1)
    timeout: float = option(120.0, "seconds per HTTP attempt; doubled after each timeout (up to 8x)", gt=0)
    max_retries: int = option(8, "retries of 429/5xx/timeouts/refused connections, exponential backoff with "
                                 "jitter (the default spans ~45 s on average: a server restart)", min=0)
    temperature: float = option(0.0, "sampling temperature (0: greedy)", min=0, max=2)
    cache: bool | str = option(True, "true: <save_path>/judge_cache.sqlite; a path; false: no cache")
    mode: Literal["auto", "logprobs", "generate"] = option("auto", "logprobs (G-Eval expected score), generate (parsed reply) or auto")
    both_orders: bool = option(True, "battles judged in both orders; a verdict that flips is a tie")
    price: dict[str, float] | None = option(None, "{prompt, completion}: $ per 1M tokens, for the cost in the manifest")
    dtype: Literal["auto", "bfloat16", "float32"] = option("auto", "local judge: auto (bfloat16 on a GPU; on a CPU bfloat16 with AMX, else float32), bfloat16, float32")
    device: str = option("auto", "local judge: where the model runs: auto (a CUDA GPU when torch sees one, else the CPU), "
                                 "cpu, cuda, cuda:N or mps (the same key as UniEval's and BERTScore's)", nonempty=True)
    max_tokens: int = option(512, "most tokens a reply may have", min=1)
    explain: bool = option(True, "battle: let the judge explain after its score line")
    batch: bool = option(False, "openai backend: send the uncached requests as provider batch jobs (/v1/files, /v1/batches; half price, results within 24 h)")
    batch_poll: float = option(60.0, "batch jobs: the longest wait between two polls, in seconds (backoff from 1 s)", gt=0)
    lookahead: int = option(3, "local judge: most tokens drafted per step by prompt-lookup decoding (0: off)", min=0)
    local_batch_size: int = option(1, "local judge: one-token requests per forward pass (a GPU wants 8-32; "
                                      "1: one at a time with prefix reuse, faster on a CPU)", min=1)
    local_sequences: int = option(8, "local judge: multi-token requests (explanations, MT-bench judgments, SAGEval, "
                                     "generation) decoded together, one token each per forward pass (1: one at a time)",
                                  min=1, max=256)
    local_batch_tokens: int = option(16384, "local judge: memory bound of the sequences in flight: rows x padded "
                                            "tokens of their KV cache (about 57 KB a token for Qwen-1.5B in float32)",
                                     min=256)
    local_matmul: Literal["auto", "onednn", "default"] = option(
        "auto", "local judge: kernel of the float32 matrix products: auto (oneDNN for float32 on x86-64: 1.3x one "
                "sequence, 2x eight at a time on a Zen 3), onednn, or default (torch's own; the earlier numbers)")
    local_pack_weights: Literal["auto", "always", "never"] = option(
        "auto", "local judge with oneDNN: keep a second copy of the float32 weights in oneDNN's packed layout for "
                "products of 2+ rows (prompts, drafts, sequences in flight; the same numbers, faster): auto (once "
                "a call brings 1,024 tokens of decoding budget, if the copy takes at most half the memory "
                "available and the process with it at most half the machine's), always (at load), never; CPU only")

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
        if self.batch and self.backend != "openai":
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
        return out
