"""`backend: local`: transformers in this process, offline (the packaged models, a folder, a GGUF).

Its capabilities, the keys it alone reads, its checks and how it opens; the engine itself is local.py.
Its keys are not exclusive: a block of another kind may carry them (they are ignored there), and the
judge block of an openai judge lists them, as every block did before the kinds had keys of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..core.options import option
from .base import Backend
from .kinds import Capabilities, Kind, ServerLog


@dataclass
class LocalOptions:
    """The local engine's keys."""

    device: str = option("auto", "local judge: where the model runs: auto (a CUDA GPU when torch sees one, else the "
                                 "CPU), cpu, cuda, cuda:N or mps (the same key as UniEval's and BERTScore's); vllm: the "
                                 "server chooses its own devices", nonempty=True)
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


def _problems(opts: Any) -> list[tuple[str, str]]:
    """Where this process loads the model: a device that is not there stops at load."""
    from ..models.device import device_problem

    bad = device_problem(opts.device)
    return [("device", bad)] if bad else []


def _problems_when_sound(opts: Any) -> list[tuple[str, str]]:
    if opts.dtype == "float16":
        return [("dtype", "the local backend computes in bfloat16 or float32 (auto picks); float16 is for "
                          "backend: vllm")]
    return []


def _open(opts: Any, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .local import LocalBackend

    return LocalBackend(opts.model, dtype=opts.dtype, max_new_tokens=opts.max_tokens, lookahead=opts.lookahead,
                        batch_size=opts.local_batch_size, sequences=opts.local_sequences,
                        batch_tokens=opts.local_batch_tokens,
                        matmul=opts.local_matmul, pack=opts.local_pack_weights, device=opts.device)


def _identity(opts: Any) -> Backend:
    from .local import LocalBackend

    return LocalBackend(opts.model, dtype=opts.dtype, max_new_tokens=opts.max_tokens, lookahead=opts.lookahead,
                        matmul=opts.local_matmul, device=opts.device)


KIND = Kind(
    "local", "transformers in this process, offline",
    Capabilities(logprobs=True, hidden_states=True, parallel_decoding=True, in_process=True, loads_weights=True),
    _open, _identity, options=LocalOptions, exclusive=False, problems=_problems,
    problems_when_sound=_problems_when_sound, block_lists_all=True, retired=("threads",))
