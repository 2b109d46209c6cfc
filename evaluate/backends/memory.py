"""The local backend's process memory: what Linux says about it, and glibc's heap kept in check.

Two things took a local Qwen-1.5B judge (float32, 6.2 GB of weights) to 14-16 GB of RSS on the
development VM (bench/judge_memory.py, BENCHMARKS.md):

- oneDNN's packed copy of the weights (onednn.py), 6.2 GB more; `LocalBackend(pack="auto")` now
  makes it only where the whole process, copy included, stays within half the machine's memory,
  besides the copy taking at most half the memory available;
- glibc's malloc. A block under its mmap threshold comes from the heap, and the threshold rises
  (up to 32 MB) each time a larger block is freed; after that every KV-cache tensor and logits row
  of a decoding step (a few MB each) is carved from the heap, and the heap keeps what is freed:
  fragments that no later request fits. `tune_malloc` fixes the threshold (allocations of 1 MB or
  more are mapped and unmapped, so freed memory goes back to the system) and `trim` hands back the
  heap's free pages after each call. EVAL_MALLOC_TUNE=0 leaves malloc as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

M_MMAP_THRESHOLD = -3  # mallopt parameter (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20  # bytes: blocks this large are mapped on their own, and unmapped when freed

_tuned = False
_lock = threading.Lock()


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> int | None:
    """Bytes the kernel says are available (Linux's MemAvailable); None where unknown."""
    return _meminfo("MemAvailable")


def total_memory() -> int | None:
    """Bytes of memory the machine has (MemTotal); None where unknown."""
    return _meminfo("MemTotal")


def process_rss() -> int | None:
    """Bytes this process holds in memory now (VmRSS); None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _libc() -> ctypes.CDLL | None:
    if os.environ.get("EVAL_MALLOC_TUNE") == "0":
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None  # glibc only


def tune_malloc() -> bool:
    """Fix glibc's mmap threshold at 1 MB, once per process (see the module doc); whether it was set."""
    global _tuned
    with _lock:
        if _tuned:
            return True
        libc = _libc()
        if libc is None:
            return False
        _tuned = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
        return _tuned


def trim() -> None:
    """Give the heap's free pages back to the system (after a call that decoded many tokens)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
