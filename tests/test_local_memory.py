"""Where a local judge's memory went, and the two changes that keep a Qwen-1.5B judge under 8 GB
(evaluate/backends/memory.py; measured in BENCHMARKS.md with bench/judge_memory.py).

glibc's malloc raises its mmap threshold (up to 32 MB) when a large mapped block is freed; after
that, blocks of a few MB (a decoding step's KV caches and logits) come from the heap, and the heap
keeps them when they are freed as long as anything allocated later sits above them. The pattern
below (a 16 MB tensor freed, then 300 blocks of 4 MB freed while small ones stay) is what a run of
decoding steps does to the heap: a real process, real torch allocations, RssAnon read from /proc.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PATTERN = r"""
import sys
import torch
tuned = False
if sys.argv[1] == "tune":
    from evaluate.backends.memory import tune_malloc
    tuned = tune_malloc()
x = torch.empty(16 << 20, dtype=torch.uint8).fill_(1)
del x  # a large mapped block freed: glibc raises its mmap threshold
keep, big = [], []
for i in range(300):
    big.append(torch.empty(4 << 20, dtype=torch.uint8).fill_(1))  # a step's KV cache or logits
    keep.append(torch.empty(64 << 10, dtype=torch.uint8).fill_(1))  # what stays: a reply, a prefix slot
del big
print(tuned, [int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("RssAnon:")][0])
"""
linux_glibc = pytest.mark.skipif(not Path("/proc/self/status").exists() or "glibc" not in " ".join(
    __import__("platform").libc_ver()), reason="glibc on Linux")


def anon_after(mode: str, **env: str) -> int:
    """RssAnon of a process that ran the pattern (after `tune_malloc` with mode "tune")."""
    out = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert out.returncode == 0, out.stderr[-2000:]
    tuned, rss = out.stdout.strip().splitlines()[-1].split()
    assert tuned == str(mode == "tune" and env.get("EVAL_MALLOC_TUNE") != "0")
    return int(rss)


@linux_glibc
def test_freed_decoding_buffers_go_back_to_the_system_once_malloc_is_tuned():
    plain, tuned = anon_after("plain"), anon_after("tune")
    assert plain - tuned > 800e6, (plain, tuned)  # 1.2 GB of freed 4 MB blocks kept by the heap, untuned
    assert tuned < 600e6
    assert anon_after("tune", EVAL_MALLOC_TUNE="0") > tuned + 800e6  # the switch turns it off


def test_the_memory_readings():
    from evaluate.backends import memory

    if not Path("/proc/meminfo").exists():
        pytest.skip("Linux /proc")
    total, free, held = memory.total_memory(), memory.available_memory(), memory.process_rss()
    assert total and free and held and 0 < held < total and 0 < free <= total
    memory.trim()  # callable any number of times
