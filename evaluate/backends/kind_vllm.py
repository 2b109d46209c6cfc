"""`backend: vllm`: vLLM's OpenAI-compatible server, started by the tool for the named model and
stopped at the end (vllm.py; where vLLM lives and the server's flags: vllm_engine.py).

A batching server: many requests in flight keep its batch full, and a request queued behind others on
a CPU build waits its turn, so it gets more requests in flight and a longer attempt by default than a
server of the user's. Its keys are exclusive: refused on a block of another kind, and a manifest's
block of another kind never lists them (the judge blocks written before this kind existed read the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.options import option
from .base import Backend
from .kinds import Capabilities, Kind, ServerLog


@dataclass
class VllmOptions:
    """The vLLM server's keys: its parallelism, memory and flags, and where vLLM is."""

    tensor_parallel_size: int = option(1, "GPUs one copy of the model is split over (--tensor-parallel-size)", min=1)
    data_parallel_size: int = option(1, "copies of the model serving requests side by side (--data-parallel-size)",
                                     min=1)
    gpu_memory_utilization: float | None = option(None, "share of each GPU's memory the server may take "
                                                        "(null: vLLM's 0.9)", gt=0, max=1)
    max_model_len: int | None = option(None, "longest prompt + reply in tokens (null: the model's own; 4096 on "
                                             "a CPU build); a reply is cut to fit", min=16)
    quantization: str | None = option(None, "its --quantization method (awq, gptq, fp8, ...; null: as the "
                                            "weights are)", nonempty=True)
    enable_prefix_caching: bool | None = option(None, "reuse the KV cache of shared prompt prefixes (null: "
                                                      "vLLM's default)")
    vllm_args: list[str] = option([], "more server flags, as on its command line, e.g. [\"--max-num-seqs\", "
                                      "\"64\"]")
    vllm_python: str | None = option(None, "the Python that has vLLM installed (null: $EVAL_VLLM_PYTHON, else "
                                           ".venv-vllm in the working directory, made by make setup-vllm in a "
                                           "checkout, else this one)", nonempty=True)
    startup_timeout: float = option(600.0, "seconds the server may take to load before the run stops (exit 3)", gt=0)


def _problems_when_sound(opts: Any) -> list[tuple[str, str]]:
    from .vllm_engine import problems

    return problems(opts)


def _open(opts: Any, api_key: str | None, server_log: ServerLog | None) -> Backend:
    from .vllm import VllmBackend

    return VllmBackend(opts, server_log=server_log)


def _identity(opts: Any) -> Backend:
    from .vllm import VllmBackend

    return VllmBackend(opts)


KIND = Kind(
    "vllm", "vLLM's server, started by the tool for this model and stopped at the end",
    Capabilities(logprobs=True, starts_server=True, http=True, loads_weights=True, default_concurrency=32,
                 default_timeout=600.0),
    _open, _identity, options=VllmOptions, problems_when_sound=_problems_when_sound)
