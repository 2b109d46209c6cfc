"""The `judge:` block of a config: which judge, where, how hard to try, what it costs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..core.options import option
from ..core.secrets import looks_like_key



@dataclass
class JudgeOptions:
    backend: Literal["local", "openai"] = option("local", "local (transformers, offline) or openai (any OpenAI-compatible server)")
    model: str = option("Qwen2.5-Coder-1.5B-Instruct", "a packaged model name, a local HF folder or .gguf, or a served model name", nonempty=True)
    base_url: str | None = option(None, "server root ending in /v1, e.g. http://127.0.0.1:8000/v1 (openai backend)")
    api_key_env: str = option("OPENAI_API_KEY", "the environment variable holding the API key (never the key itself)", nonempty=True)
    concurrency: int = option(8, "requests in flight (HTTP)", min=1)
    timeout: float = option(120.0, "seconds per HTTP attempt; doubled after each timeout (up to 8x)", gt=0)
    max_retries: int = option(8, "retries of 429/5xx/timeouts/refused connections, exponential backoff with "
                                 "jitter (the default spans ~45 s on average: a server restart)", min=0)
    temperature: float = option(0.0, "sampling temperature (0: greedy)", min=0, max=2)
    cache: bool | str = option(True, "true: <save_path>/judge_cache.sqlite; a path; false: no cache")
    mode: Literal["auto", "logprobs", "generate"] = option("auto", "logprobs (G-Eval expected score), generate (parsed reply) or auto")
    both_orders: bool = option(True, "battles judged in both orders; a verdict that flips is a tie")
    price: dict[str, float] | None = option(None, "{prompt, completion}: $ per 1M tokens, for the cost in the manifest")
    dtype: Literal["auto", "bfloat16", "float32"] = option("auto", "local judge: auto (bf16 with AMX, else float32), bfloat16, float32")
    max_tokens: int = option(512, "most tokens a reply may have", min=1)
    explain: bool = option(True, "battle: let the judge explain after its score line")
    lookahead: int = option(3, "local judge: most tokens drafted per step by prompt-lookup decoding (0: off)", min=0)

    def problems(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.base_url is not None:
            parts = urlsplit(self.base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                out.append(("base_url", "expected an http:// or https:// URL such as http://127.0.0.1:8000/v1"))
        if self.price is not None:
            if set(self.price) != {"prompt", "completion"}:
                out.append(("price", "expected {prompt: $ per 1M tokens, completion: $ per 1M tokens}, got keys "
                                     + ", ".join(sorted(map(str, self.price)))))
            elif any(v < 0 or v != v for v in self.price.values()):
                out.append(("price", "prices must be numbers >= 0"))
        if looks_like_key(self.api_key_env):
            out.append(("api_key_env", "this looks like an API key, not the name of an environment variable; put the "
                                       "key in a variable (e.g. export OPENAI_API_KEY=...) and name the variable here "
                                       "(the value is not shown)"))
        return out
