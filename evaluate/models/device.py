"""Where an in-process model runs: the one reading of `device: auto | cpu | cuda | cuda:N | mps`.

The local judge (and a model under test with `backend: local`), RepEval, UniEval and BERTScore all
take this key with the same meaning, so one function parses it, one says what torch sees, and one
resolves `auto`:

- `auto`: the first CUDA GPU when torch sees one, else the CPU. MPS (Apple GPUs) is taken only when
  asked for: some operations are missing there and the numbers differ from the CPU's, so a config
  that ran on a Mac's CPU yesterday does not silently change today.
- `cpu`, `cuda` (torch's current CUDA device, 0 unless set), `cuda:N`, `mps`.

A device that is not there is bad input, said at config load (exit 2) with what torch does see, e.g.
"cuda requested, but torch sees no CUDA device (torch 2.13.0+cpu, a CPU-only build); devices
here: cpu". Only values other than `auto` and `cpu` import torch to check (a CPU config stays fast to load).
"""

from __future__ import annotations

import re

CHOICES = "auto, cpu, cuda, cuda:N, mps"
_SYNTAX = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def syntax_problem(value: object) -> str | None:
    """Why `value` is not a device name of the five forms (None: it is one)."""
    if isinstance(value, str) and _SYNTAX.match(value.strip()):
        return None
    return f"expected one of {CHOICES} (N: a GPU's index), got {value!r}"


def torch_sees() -> str:
    """What this process's torch can run on, for an error message: "(torch 2.13.0+cpu, a CPU-only
    build); devices here: cpu"."""
    import torch

    build = f"torch {torch.__version__}"
    if torch.version.cuda:
        build += f", built for CUDA {torch.version.cuda}"
    elif getattr(torch.version, "hip", None):
        build += f", built for ROCm {torch.version.hip}"
    else:
        build += ", a CPU-only build"
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i} ({torch.cuda.get_device_name(i)})" for i in range(torch.cuda.device_count())]
    if _mps_available():
        devices.append("mps")
    return f"({build}); devices here: {', '.join(devices)}"


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def device_problem(value: object) -> str | None:
    """Why `value` cannot be used here (bad syntax, or a device torch does not see); None when it can."""
    bad = syntax_problem(value)
    if bad:
        return bad
    name = str(value).strip()
    if name in ("auto", "cpu"):
        return None
    import torch

    if name == "mps":
        return None if _mps_available() else f"mps requested, but torch sees no MPS device {torch_sees()}"
    if not torch.cuda.is_available():
        return f"{name} requested, but torch sees no CUDA device {torch_sees()}"
    index = int(name.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        return f"{name} requested, but torch sees {torch.cuda.device_count()} CUDA device(s) {torch_sees()}"
    return None


def resolve_device(value: str | None, where: str = "device") -> str:
    """The device to load on: `auto` (or None) -> "cuda" where torch sees a CUDA GPU, else "cpu"; any
    other name checked and returned as written. Raises InputError naming `where` for a device that is
    not there."""
    from ..core.errors import InputError

    name = "auto" if value is None else str(value).strip()
    problem = device_problem(name)
    if problem:
        raise InputError(f"{where}: {problem}")
    if name != "auto":
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_type(name: str) -> str:
    """"cuda:1" -> "cuda": what a signature names (the index moves work between GPUs, not numbers)."""
    return name.partition(":")[0]
