"""The local backend's KV cache: transformers' DynamicCache, appending in place.

transformers' `DynamicLayer.update` concatenates the new keys and values onto the old ones, so every
decoding step copies the whole cache of every layer. For one sequence that is a few percent of a
step; for 8 rows decoded together (Qwen-1.5B, float32, 200 positions) the copies took 0.2 s of a
0.9 s step on a 2-core Zen 3 (torch's profiler: `aten::cat` 24% of the step; BENCHMARKS.md).

`GrowingLayer` keeps each layer's keys and values in a buffer with spare positions and writes a
step's new positions into it; `keys` / `values` stay what they were, a tensor of the cached
positions (now a view of the buffer), so everything that reads them, crops them (a view of the same
buffer: the next step writes over the cut positions) or replaces them (the batch's padding and row
changes assign new tensors: the next update adopts them into a new buffer, one copy, as before) works
unchanged. The numbers are the same: the same values at the same positions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A `DynamicLayer` whose `update` writes into spare capacity instead of concatenating."""

        _buf: Any = None  # (keys, values) buffers; self.keys / self.values are views of their first positions

        def _owns(self, k: Any) -> bool:
            buf = self._buf
            return (buf is not None and k.dim() == 4 and k.data_ptr() == buf[0].data_ptr()
                    and k.shape[:-2] == buf[0].shape[:-2] and k.stride() == buf[0].stride()
                    and self.values.data_ptr() == buf[1].data_ptr() and self.values.stride() == buf[1].stride())

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            k, v = self.keys, self.values
            n = k.shape[-2] if k.dim() == 4 else 0
            add = key_states.shape[-2]
            if not (n and self._owns(k) and n + add <= self._buf[0].shape[-2]):
                cap = n + add + max(64, (n + add) // 4)  # headroom: the next steps write in place
                bk = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
                bv = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
                if n:
                    bk[..., :n, :] = k
                    bv[..., :n, :] = v
                self._buf = (bk, bv)
            bk, bv = self._buf
            bk[..., n:n + add, :] = key_states
            bv[..., n:n + add, :] = value_states
            self.keys, self.values = bk[..., :n + add, :], bv[..., :n + add, :]
            return self.keys, self.values

    return GrowingLayer


def new_cache(config: Any, data: list[tuple[Any, Any]] | None = None) -> Any:
    """A DynamicCache for `config` whose plain dynamic layers append in place (sliding-window and other
    layers are left as transformers made them), holding a copy of `data` ([(keys, values)] per layer)
    when given."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    grow = growing_layer_class()
    for layer in cache.layers:
        if type(layer) is DynamicLayer:
            layer.__class__ = grow
    if data is not None:
        if len(data) != len(cache.layers):
            raise ValueError(f"KV data for {len(data)} layers, the model has {len(cache.layers)}")
        for layer, (k, v) in zip(cache.layers, data):
            layer.update(k, v)  # a copy into the layer's own buffer: `data` is never written
    return cache


def compact(cache: Any, slack: int = 64) -> None:
    """Give back a growing layer's spare positions when it holds more than `slack` of them (a prompt's
    cache kept for prefix reuse need not keep the room its reply was decoded into)."""
    for layer in cache.layers:
        buf = getattr(layer, "_buf", None)
        if buf is not None and buf[0].shape[-2] - layer.keys.shape[-2] > slack:
            layer.keys, layer.values = layer.keys.clone(), layer.values.clone()
            layer._buf = None


def cache_kwarg(model: Any) -> str:
    """The keyword a model body's `forward` takes its KV cache by: "cache" (transformers >= 5.2x; the
    old name then warns) or "past_key_values" (earlier 5.x, e.g. 5.17, where an unknown `cache=` would
    be swallowed by **kwargs and every step would run without its past)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def plain_layers(cache: Any) -> bool:
    """Every layer is a plain, initialised dynamic layer (growing or not): its keys can be sliced,
    padded and joined with another cache's."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) in (DynamicLayer, growing_layer_class()) and layer.is_initialized for layer in cache.layers)
