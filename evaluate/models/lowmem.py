"""Loading a model in less memory than transformers' own `from_pretrained` takes, with the same weights.

Two things took a Qwen2.5-Coder-1.5B judge (float32 on the CPU, from its converted bfloat16 folder)
past 8 GB of RSS (bench/judge_memory.py, BENCHMARKS.md):

- while loading, transformers maps each safetensors file into memory and reads every tensor out of
  the mapping (a view of the file's pages, converted straight to float32); the pages it touched stay
  mapped, and counted in the process's RSS, until the file is closed after the last tensor: 3.6 GB
  of the bfloat16 file on top of 7.1 GB of float32 weights (11.2 GB at the highest). `lean_loading`
  wraps the file handles transformers opens so that each tensor's pages are given back
  (madvise(MADV_DONTNEED)) shortly after it was read: loading holds the weights and the pages of
  the few tensors in conversion. The read stays the mapped one, so the tensors are the same bytes
  and no copy is added. (safetensors' pread reader, which transformers uses on Windows, frees a
  tensor's bytes as well, but copies every tensor before converting it: on the busy 2-core host,
  Qwen's loads took 18-36 s with it against 13-21 s mapped.)
- the input embedding table of a model whose output projection is a separate tensor (Qwen's
  converted GGUF: 151,936 x 1,536) is only ever read a few rows at a time, yet is kept in float32:
  0.93 GB whose values all came from a bfloat16 file. `keep_embedding_stored` keeps it in the
  checkpoint's own 16-bit dtype and upcasts the rows it looks up, so every forward pass gets the
  same float32 rows as before (a 16-bit float converts to float32 exactly) for half the memory.
  A tied table (SmolLM2: embedding and output projection are one tensor) is the output projection's
  weight as well and stays as it is.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any, Iterator

_PATCH_LOCK = threading.Lock()
_SIXTEEN_BIT = {"BF16": "bfloat16", "F16": "float16"}


@contextlib.contextmanager
def lean_loading() -> Iterator[bool]:
    """While inside, each safetensors file that transformers' `from_pretrained` maps gives its pages back
    to the system as soon as a tensor has been read out of them (see the module doc). Yields whether it
    could: False where transformers does not open them through `modeling_utils.safe_open` or the
    system has no madvise (nothing changes then)."""
    try:
        import transformers.modeling_utils as mu
    except ImportError:
        yield False
        return
    original = getattr(mu, "safe_open", None)
    if original is None or _madvise() is None:
        yield False
        return

    def safe_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        handle = original(path, *args, **kwargs)
        if kwargs.get("device", "cpu") != "cpu" or kwargs.get("backend", "mmap") != "mmap":
            return handle
        return _Dropping(handle, str(path))

    with _PATCH_LOCK:
        mu.safe_open = safe_open
        try:
            yield True
        finally:
            mu.safe_open = original


MADV_DONTNEED = 4  # Linux: drop the pages of a range from this process; a mapped file's pages stay cached


def _madvise() -> Any:
    """libc's madvise through ctypes, or None (not Linux, no libc)."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


class _Dropping:
    """A safetensors file handle (`safe_open`, mapped) that gives back the pages of the tensors read from
    it: `madvise(MADV_DONTNEED)` on their byte ranges in every mapping of the file. A mapped tensor is
    read as a view of the mapping, converted (to float32) by whoever read it after the read returns;
    so a tensor's pages go once `LAG` more tensors have been read since (transformers converts at most
    4 at a time). The pages are clean and the mapping read-only: a view that reads them after they
    went faults them in again from the page cache, so what is read is the file's bytes either way."""

    LAG = 8

    def __init__(self, handle: Any, path: str):
        import mmap
        import os
        import struct

        self._handle, self._path = handle, os.path.realpath(path)
        self._page = mmap.PAGESIZE
        self._madvise = _madvise()
        self._maps: list[tuple[int, int, int]] | None = None  # (start address, end address, file offset)
        self._lock = threading.Lock()
        self._read: list[str] = []  # tensors read whose pages are still there, oldest first
        with open(self._path, "rb") as fh:
            size = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(size))
        self._ranges = {name: (8 + size + e["data_offsets"][0], 8 + size + e["data_offsets"][1])
                        for name, e in header.items() if isinstance(e, dict) and "data_offsets" in e}

    def was_read(self, name: str) -> None:
        """Note that `name` was read; give back the pages of the tensors read `LAG` reads before it."""
        with self._lock:
            self._read.append(name)
            old, self._read = self._read[:-self.LAG], self._read[-self.LAG:]
        for done in old:
            self.drop(done)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> "_Dropping":
        self._handle.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._handle.__exit__(*exc)

    def get_slice(self, name: str) -> "_DroppingSlice":
        return _DroppingSlice(self._handle.get_slice(name), self, name)

    def get_tensor(self, name: str) -> Any:
        tensor = self._handle.get_tensor(name)
        self.was_read(name)
        return tensor

    def _mappings(self) -> list[tuple[int, int, int]]:
        with self._lock:
            if self._maps is None:  # read once: the file is mapped when it is opened
                found = []
                try:
                    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
                        for line in fh:
                            parts = line.split(maxsplit=5)
                            if len(parts) == 6 and parts[5].rstrip("\n") == self._path:
                                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                                found.append((lo, hi, int(parts[2], 16)))
                except OSError:
                    pass
                self._maps = found
            return self._maps

    def drop(self, name: str) -> None:
        """Give back the pages of tensor `name` (rounded out to whole pages: a neighbour's page is only
        read in again if it is needed)."""
        if name not in self._ranges:
            return
        first, last = self._ranges[name]
        for lo, hi, offset in self._mappings():
            start = max(lo, lo + first - offset) // self._page * self._page
            end = min(hi, -(-(lo + last - offset) // self._page) * self._page)
            if end > start:
                self._madvise(start, end - start, MADV_DONTNEED)


class _DroppingSlice:
    """A slice of a `_Dropping` file: reading it counts towards giving its pages back."""

    def __init__(self, slice_: Any, owner: _Dropping, name: str):
        self._slice, self._owner, self._name = slice_, owner, name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._slice, name)

    def __getitem__(self, index: Any) -> Any:
        tensor = self._slice[index]
        self._owner.was_read(self._name)
        return tensor


def open_pread(opener: Any, *args: Any, **kwargs: Any) -> Any:
    """`opener(*args, **kwargs)` (safetensors' `safe_open`) with the pread reader for a CPU file."""
    if kwargs.get("device", "cpu") != "cpu" or "backend" in kwargs and kwargs["backend"] != "mmap":
        return opener(*args, **kwargs)
    try:
        return opener(*args, **{**kwargs, "backend": "pread"})
    except TypeError:  # an older safetensors: no backend argument, it maps the file
        return opener(*args, **kwargs)


def weight_file(folder: Path, name: str) -> Path | None:
    """The safetensors file of `folder` that holds tensor `name` (model.safetensors, or the shard the
    index names), or None."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shard = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).get(name)
        except (OSError, ValueError):
            return None
        return folder / shard if shard and (folder / shard).is_file() else None
    single = folder / "model.safetensors"
    return single if single.is_file() else None


def _stored_dtype(path: Path, name: str) -> tuple[str, list[int]] | None:
    """(dtype name as safetensors writes it, shape) of tensor `name` in `path`, from the file's header."""
    import struct

    try:
        with open(path, "rb") as fh:
            size = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(size))
    except (OSError, ValueError, struct.error):
        return None
    entry = header.get(name)
    return (entry["dtype"], list(entry["shape"])) if isinstance(entry, dict) else None


def keep_embedding_stored(model: Any, folder: Path) -> bool:
    """Keep `model`'s float32 input embedding table in the 16-bit dtype its checkpoint in `folder` stores
    it in, upcasting the rows each forward pass looks up (see the module doc). Only for a plain
    `nn.Embedding` that is not tied to the output projection and is read from a bfloat16 or float16
    safetensors tensor of its own name and shape; whether it was done."""
    import torch

    emb = model.get_input_embeddings()
    head = model.get_output_embeddings()
    if type(emb) is not torch.nn.Embedding or emb.weight.dtype != torch.float32 or emb.weight.device.type != "cpu":
        return False
    if head is not None and getattr(head, "weight", None) is not None \
            and head.weight.untyped_storage().data_ptr() == emb.weight.untyped_storage().data_ptr():
        return False  # tied: the table is the output projection's weight too
    name = next((n for n, p in model.named_parameters() if p is emb.weight), None)
    path = weight_file(Path(folder), name) if name else None
    stored = _stored_dtype(path, name) if path else None
    if stored is None or stored[0] not in _SIXTEEN_BIT or stored[1] != list(emb.weight.shape):
        return False
    from safetensors import safe_open

    emb.weight = None  # the float32 table goes before the 16-bit one is read: never both at once
    with open_pread(safe_open, str(path), framework="pt", device="cpu") as f:
        table = f.get_tensor(name)
    if table.dtype != getattr(torch, _SIXTEEN_BIT[stored[0]]):  # pragma: no cover - the header said otherwise
        raise RuntimeError(f"{path}: {name} read as {table.dtype}, its header says {stored[0]}")
    emb.weight = torch.nn.Parameter(table, requires_grad=False)
    F = torch.nn.functional

    def forward(ids: Any, _m: Any = emb) -> Any:
        return F.embedding(ids, _m.weight, _m.padding_idx, _m.max_norm, _m.norm_type, _m.scale_grad_by_freq,
                           _m.sparse).to(torch.float32)

    emb.forward = forward
    return True
