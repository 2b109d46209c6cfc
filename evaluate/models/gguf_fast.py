"""Faster reading of a GGUF for the one-time conversion, with the same numbers as gguf's own code.

Converting Qwen2.5-Coder-1.5B's GGUF (Q4_K_M) into the bf16 safetensors cache took ~80 s on a
2-core machine (~110 s with gguf's and transformers' code untouched); most of it in four places:

- `GGUFReader` reads every piece of the header (151,936 tokens and as many merges) as a slice of
  a `numpy.memmap`; each slice of a memmap runs `memmap.__getitem__` and `__array_finalize__` in
  Python. `FastReader` slices a plain `ndarray` view of the same mapping instead: the same bytes,
  dtypes and shapes, ~3x faster to build and ~2x faster for transformers to parse.
- `gguf.dequantize` runs its numpy formulas on one thread. `dequantize` here runs the *same*
  formulas, operation for operation and in the same order (float32, no fused multiply-add), as
  torch operations, which use every core, in cache-sized steps; the results are bit for bit
  gguf's (tests compare them on constructed blocks and on the packaged models). Block types
  without a port here fall back to gguf's own function.
- transformers builds gguf's tensor-name map once per module of the model (371 times for Qwen);
  `patched()` remembers it per (architecture, layers).
- transformers' value parser decodes each string one Python int per byte; a uint8 string part is
  decoded in one step instead (the same string).

`patched()` installs all four for the duration of a conversion and restores them on exit; the
converted files are byte for byte those of the untouched code (tests and bench/gguf_convert.py).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any, Callable, Iterator

import numpy as np

QK_K = 256
CHUNK_BLOCKS = 1 << 11  # blocks per step: 2 MB float32 temporaries stay in cache (all of Qwen: 7 s; 16 MB: 16-17 s)


def _reader_class() -> type:
    from gguf import GGUFReader

    class FastReader(GGUFReader):  # type: ignore[misc, valid-type]
        """`GGUFReader` whose slices are plain ndarrays over the file's mapping (see the module doc)."""

        def _get(self, offset: int, dtype: Any, count: int = 1, override_order: Any = None) -> np.ndarray:
            plain = self.__dict__.get("_plain_data")
            if plain is None or plain.base is not self.data:
                plain = self._plain_data = self.data.view(np.ndarray)
            count = int(count)
            dt = np.dtype(dtype)
            arr = plain[offset:offset + dt.itemsize * count].view(dtype=dt)[:count]
            return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return FastReader


# --------------------------------------------------------------------------- dequantizing with torch

def _f16(col: Any) -> Any:
    """A (n, 2) uint8 column pair read as float16, widened to float32 (exact), shape (n, 1)."""
    import torch

    return col.contiguous().view(torch.float16).to(torch.float32)


def _shifts(*values: int) -> Any:
    import torch

    return torch.tensor(values, dtype=torch.uint8)


def _q4_k(b: Any) -> Any:
    """gguf.quants.Q4_K.dequantize_blocks, in torch: (n, 144) uint8 -> (n, 256) float32."""
    import torch

    n = b.shape[0]
    d, dmin = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    scales = b[:, 4:16].reshape(n, 3, 4)
    sd, m, m_d = scales[:, 0], scales[:, 1], scales[:, 2]
    sc = torch.cat([sd & 0x3F, (m_d & 0x0F) | ((sd >> 2) & 0x30)], dim=-1)
    mn = torch.cat([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], dim=-1)
    d = (d * sc.to(torch.float32)).reshape(n, -1, 1)
    dm = (dmin * mn.to(torch.float32)).reshape(n, -1, 1)
    qs = b[:, 16:].reshape(n, -1, 1, 32) >> _shifts(0, 4).reshape(1, 1, 2, 1)
    qs = (qs & 0x0F).reshape(n, -1, 32).to(torch.float32)
    return (d * qs - dm).reshape(n, QK_K)


def _q6_k(b: Any) -> Any:
    """gguf.quants.Q6_K.dequantize_blocks, in torch: (n, 210) uint8 -> (n, 256) float32."""
    import torch

    n = b.shape[0]
    ql, qh = b[:, :128], b[:, 128:192]
    scales = b[:, 192:208].contiguous().view(torch.int8).to(torch.float32)
    d = (_f16(b[:, 208:210]) * scales).reshape(n, QK_K // 16, 1)
    ql = ql.reshape(n, -1, 1, 64) >> _shifts(0, 4).reshape(1, 1, 2, 1)
    ql = (ql & 0x0F).reshape(n, -1, 32)
    qh = qh.reshape(n, -1, 1, 32) >> _shifts(0, 2, 4, 6).reshape(1, 1, 4, 1)
    qh = (qh & 0x03).reshape(n, -1, 32)
    q = (ql | (qh << 4)).view(torch.int8) - 32
    q = q.reshape(n, QK_K // 16, -1).to(torch.float32)
    return (d * q).reshape(n, QK_K)


def _q4_1(b: Any) -> Any:
    """gguf.quants.Q4_1.dequantize_blocks, in torch: (n, 20) uint8 -> (n, 32) float32."""
    import torch

    n = b.shape[0]
    d, m = _f16(b[:, 0:2]), _f16(b[:, 2:4])
    qs = b[:, 4:].reshape(n, -1, 1, 16) >> _shifts(0, 4).reshape(1, 1, 2, 1)
    qs = (qs & 0x0F).reshape(n, -1).to(torch.float32)
    return (d * qs) + m


def _q8_0(b: Any) -> Any:
    """gguf.quants.Q8_0.dequantize_blocks, in torch: (n, 34) uint8 -> (n, 32) float32."""
    import torch

    x = b[:, 2:].contiguous().view(torch.int8).to(torch.float32)
    return x * _f16(b[:, 0:2])


_PORTED: dict[str, Callable[[Any], Any]] = {"Q4_K": _q4_k, "Q6_K": _q6_k, "Q4_1": _q4_1, "Q8_0": _q8_0}


def ported(qtype: Any) -> bool:
    return getattr(qtype, "name", None) in _PORTED


def dequantize(data: np.ndarray, qtype: Any, fallback: Callable[[np.ndarray, Any], np.ndarray] | None = None) -> np.ndarray:
    """`gguf.dequantize(data, qtype)` with the same float32 result; ported block types run in torch."""
    import torch
    from gguf import GGML_QUANT_SIZES
    from gguf.quants import quant_shape_from_byte_shape

    fn = _PORTED.get(getattr(qtype, "name", ""))
    if fn is None:
        if fallback is None:
            from gguf import dequantize as fallback  # type: ignore[no-redef]
        return fallback(data, qtype)  # type: ignore[misc]
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    raw = np.ascontiguousarray(data).view(np.uint8)
    oshape = quant_shape_from_byte_shape(raw.shape, qtype)
    with warnings.catch_warnings():  # a read-only mapping: torch warns that writing would be undefined; nothing writes
        warnings.simplefilter("ignore", UserWarning)
        blocks = torch.from_numpy(raw.reshape(-1)).reshape(-1, type_size)
    out = torch.empty((blocks.shape[0], block_size), dtype=torch.float32)
    for start in range(0, blocks.shape[0], CHUNK_BLOCKS):
        stop = start + CHUNK_BLOCKS
        out[start:stop] = fn(blocks[start:stop])
    return out.numpy().reshape(oshape)


# --------------------------------------------------------------------------- installing them

def _fast_parse_value(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """transformers' `_gguf_parse_value` with a shortcut for strings: it decodes a string part as
    `array("B", list(part)).tobytes().decode()`, one Python int per byte (~300k strings per parse
    for Qwen's vocabulary and merges); for a uint8 array that is `part.tobytes().decode()`."""

    def parse(value: Any, data_type: Any) -> Any:
        types = data_type if isinstance(data_type, list) else [data_type]
        if types in ([8], [9, 8]) and isinstance(value, np.ndarray) and value.dtype == np.uint8:
            return value.tobytes().decode()
        return original(value, data_type)

    return parse


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """While a GGUF is converted: `gguf.GGUFReader(path)` is one shared `FastReader` per path,
    `gguf.dequantize` is `dequantize` above, `gguf.get_tensor_name_map` is remembered per
    (architecture, layers) (transformers builds it once per module of the model: 371 times, 7 s,
    for Qwen) and transformers' GGUF value parser decodes strings in one step.

    transformers parses the GGUF's header anew for the tokenizer, the config and the weights, and
    imports the `gguf` names from the module at call time, so replacing module attributes is
    enough; everything is restored on exit. EVAL_GGUF_PLAIN=1 leaves all of it untouched (gguf's
    and transformers' own code: what the tests compare with)."""
    try:
        import gguf
    except ImportError:  # transformers will raise its own clear error
        yield
        return
    if os.environ.get("EVAL_GGUF_PLAIN") == "1":
        yield
        return
    try:
        import transformers.modeling_gguf_pytorch_utils as tgguf
    except ImportError:
        tgguf = None
    saved = {name: getattr(gguf, name) for name in ("GGUFReader", "dequantize", "get_tensor_name_map")}
    parse_original = getattr(tgguf, "_gguf_parse_value", None)
    fast = _reader_class()
    readers: dict[tuple[str, str], Any] = {}
    name_maps: dict[tuple[Any, int], Any] = {}

    def shared(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = fast(path, mode)
        return readers[key]

    def fast_dequantize(data: np.ndarray, qtype: Any) -> np.ndarray:
        return dequantize(data, qtype, fallback=saved["dequantize"])

    def name_map(arch: Any, n_blocks: int) -> Any:
        key = (arch, int(n_blocks))
        if key not in name_maps:
            name_maps[key] = saved["get_tensor_name_map"](arch, n_blocks)
        return name_maps[key]

    gguf.GGUFReader = shared  # type: ignore[assignment]
    gguf.dequantize = fast_dequantize  # type: ignore[assignment]
    gguf.get_tensor_name_map = name_map  # type: ignore[assignment]
    if parse_original is not None:
        tgguf._gguf_parse_value = _fast_parse_value(parse_original)  # type: ignore[union-attr]
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(gguf, name, value)
        if parse_original is not None:
            tgguf._gguf_parse_value = parse_original  # type: ignore[union-attr]
        readers.clear()
        name_maps.clear()
