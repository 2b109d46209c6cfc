"""What the judge backend keeps per item: tracemalloc around `complete_many` (cache + openai backend).

    .venv/bin/python bench/backend_memory.py [--sizes 2000 8000]

One fake server (0 ms latency) in a child process; the caller's request list is built before
tracing starts, so what is measured is what the pool, the client and the cache allocate: the
memory still held after the call (the returned completions and anything the backend kept) and
the peak during it, per item, with the files that hold the most. A prompt copy kept per item would
show as at least its 1,456 bytes per item.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import endpoints_scale as es  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    parent, kid = ctx.Pipe()
    ctx.Process(target=es._serve, args=(kid, 0.0), daemon=True).start()
    url = parent.recv()
    os.environ["EVAL_NO_PROGRESS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        be = es.make_backend([url], 64, os.path.join(tmp, "judge.sqlite"))
        be.complete_many([es.request(i, "warm-up") for i in range(200)])
        print("| items | prompt (B) | held after the call (B/item) | peak during the call (B/item) | largest holders (B/item) |")
        print("|---:|---:|---:|---:|---|")
        for n in args.sizes:
            reqs = [es.request(i, f"size-{n}") for i in range(n)]
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            out = be.complete_many(reqs)
            gc.collect()
            held, peak = tracemalloc.get_traced_memory()
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            top = after.compare_to(before, "filename")[:4]
            holders = ", ".join(f"{Path(s.traceback[0].filename).name} {s.size_diff / n:.0f}" for s in top)
            print(f"| {n} | {len(reqs[0].messages[-1][1])} | {held / n:.0f} | {peak / n:.0f} | {holders} |")
            assert all(c.ok for c in out)
            del out, reqs
        be.close()
    parent.send("stop")


if __name__ == "__main__":
    main()
