"""float32 matrix products through oneDNN for the local backend's forward passes.

torch's CPU wheels run a float32 `nn.Linear` through MKL's GEMM. On AMD CPUs MKL takes a generic
code path, and for the few rows that decoding multiplies at a time it is slow: on a 2-core Zen 3
(AVX2) a Qwen-1.5B MLP projection took 3.2 ms for one row and 10-12 ms for eight, where oneDNN
(shipped in the same wheel, `torch.ops.mkldnn._linear_pointwise`, the kernel torch's own compiler
emits for CPU linears) took 2.2-2.5 ms and 5.2-5.5 ms, on the same dense weight with no copy
(BENCHMARKS.md). A whole decoding step of 8 rows went from 1.5 s to 0.7 s, one row from 0.48 s to
0.36 s.

The two kernels round differently (about 1e-4 on a logit), so the choice is part of the local
judge's signature (`"matmul": "onednn"`): judgments cached with one are not served for the other,
and `judge.local_matmul: default` gives back torch's own kernel and the earlier numbers.

Routing, not replacing: the model object is shared within a process (RepEval reads hidden states
from the same loaded weights), so each body `nn.Linear` gets a forward that takes the oneDNN path
only while the calling thread is inside `onednn_scope()`; anything else computes exactly what it
computed before.

Packed weights: called on a plain (row-major) weight, oneDNN reorders it into its blocked layout on
every call of more than one row, which made a 2-row product cost twice a 1-row one (a 1-row call
takes a matrix-vector path on the plain weight). `pack_linears` keeps a second copy of each routed
weight in the blocked layout (`torch.ops.mkldnn._reorder_linear_weight`, the packing torch's own
compiler does); products of two rows or more use it, one-row products keep the plain weight. The
results are bit for bit those of the plain weight (tested for 2 to 300 rows; a one-row product on the
packed copy would round differently, so it is never used for one row), so packing changes speed and
memory, not a number, and is not in the judge's signature. On the 2-core Zen 3, Qwen-1.5B's MLP
projections: 2 rows 4.3 -> 2.6 ms, 8 rows 5.3 -> 4.1 ms (BENCHMARKS.md). The cost is a second copy
of the float32 weights (6.2 GB for Qwen-1.5B) and the time to make it (16-17 s on the 2-core
development VM), which is why `LocalBackend(pack="auto")` packs only for enough work and memory.
"""

from __future__ import annotations

import contextlib
import platform
import threading
from typing import Any, Iterator

_STATE = threading.local()
_MARK = "_eval_onednn_routed"
PACKED_ATTR = "_eval_onednn_packed"
PACK_ROWS = 8  # the row count oneDNN is told to pack for (decoding 8 sequences); any count >= 2 uses the copy


def resolve_matmul(choice: str, dtype: str) -> str:
    """"auto" -> "onednn" for float32 on an x86-64 CPU whose torch has oneDNN, else "default"."""
    if choice != "auto":
        return choice
    if dtype != "float32" or platform.machine().lower() not in ("x86_64", "amd64"):
        return "default"
    return "onednn" if available() else "default"


def available() -> bool:
    import torch

    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def linear(x: Any, weight: Any, bias: Any = None, packed: Any = None) -> Any:
    """x @ weight.T + bias through oneDNN, for float32 `x` of any leading shape; with `packed` (`pack(weight)`)
    a product of two rows or more reads that copy instead (the same numbers, faster)."""
    import torch

    flat = x.reshape(-1, x.shape[-1]).contiguous()
    w = packed if packed is not None and flat.shape[0] > 1 else weight
    y = torch.ops.mkldnn._linear_pointwise(flat, w, bias, "none", [], "")
    return y.reshape(*x.shape[:-1], y.shape[-1])


def active() -> bool:
    return bool(getattr(_STATE, "on", False))


@contextlib.contextmanager
def onednn_scope(on: bool = True) -> Iterator[None]:
    """While inside, routed linears of this thread run through oneDNN (nothing changes when `on` is false)."""
    before = active()
    _STATE.on = on
    try:
        yield
    finally:
        _STATE.on = before


def route_linears(model: Any) -> int:
    """Give every float32 `nn.Linear` of `model` a forward that takes oneDNN inside `onednn_scope()`;
    returns how many were routed now (a model routed before is left as it is)."""
    import torch

    F = torch.nn.functional
    n = 0
    for mod in model.modules():
        if type(mod) is not torch.nn.Linear or getattr(mod, _MARK, False) or mod.weight.dtype != torch.float32:
            continue

        def forward(x: Any, _m: Any = mod) -> Any:
            if active() and x.dtype == torch.float32 and not torch.is_grad_enabled():
                return linear(x, _m.weight, _m.bias, packed_copy(_m))
            return F.linear(x, _m.weight, _m.bias)

        mod.forward = forward
        setattr(mod, _MARK, True)
        n += 1
    return n


def pack(weight: Any) -> Any:
    """`weight` (out, in) in oneDNN's blocked layout, for `linear(..., packed=)`: a copy (an opaque tensor)."""
    import torch

    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS)


def packed_copy(mod: Any) -> Any:
    """The packed copy `pack_module` hung on `mod`, or None."""
    return getattr(mod, PACKED_ATTR, None)


def pack_module(mod: Any, weight: Any = None) -> bool:
    """Hang a packed copy of `weight` (default: `mod.weight`) on `mod` unless it has one; whether it was
    packed now. The copy is not a parameter or buffer: the module's state_dict is unchanged."""
    if packed_copy(mod) is not None:
        return False
    object.__setattr__(mod, PACKED_ATTR, pack(mod.weight if weight is None else weight))
    return True


def routed_linears(model: Any) -> list[Any]:
    return [mod for mod in model.modules() if getattr(mod, _MARK, False)]


def unpacked_bytes(model: Any) -> int:
    """Bytes a `pack_linears(model)` would add now (routed linears not yet packed)."""
    return sum(m.weight.numel() * m.weight.element_size() for m in routed_linears(model) if packed_copy(m) is None)


def pack_linears(model: Any) -> int:
    """Keep a packed copy of every routed linear's weight (see the module's docstring); returns how many
    were packed now. Packing is shared by every backend on the same loaded model, like the routing."""
    return sum(pack_module(mod) for mod in routed_linears(model))
