"""Many ratings against several fake endpoints; the cache at a million entries.

1. N rating requests (prompts of about 1.5 KB, max_tokens=1, top-5 logprobs asked) through
   CachedBackend(OpenAICompatBackend) with 4 endpoints (fake servers, each in its own process,
   fixed latency, 64 in flight each): wall over the ideal N x latency / 256, client CPU per
   request, peak RSS of the client (run in a fresh child process per N, so sizes compare).
2. The cache: filled in bulk to --cache-entries rows (default 1,000,000 with the N of the last
   run), then the last N again from it: zero HTTP calls, lookup rate, size on disk.

    python bench/endpoints_scale.py [--sizes 5000 20000] [--latency 0.2] [--per-endpoint 64]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.cache import CachedBackend  # noqa: E402
from evaluate.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply  # noqa: E402

FILLER = "The answer explains the steps, cites the source and checks the result. " * 20  # ~1.4 KB


def rating(rec: RecordedRequest) -> Reply:
    score = str(len(rec.raw) % 5 + 1)
    others = {d: -2.0 - i for i, d in enumerate(x for x in "12345" if x != score)}
    return Reply(content=score, top_logprobs=[{score: -0.2, **others}], usage=(350, 1))


def _serve(conn, latency: float) -> None:
    server = FakeOpenAIServer(rating, latency=latency)
    server.requests = _Forget()  # a long run: keep no per-request record in the server (memory)
    with server:
        conn.send(server.url)
        conn.recv()


class _Forget(list):
    """Counts chat calls without keeping the requests."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def append(self, rec) -> None:  # type: ignore[override]
        self.n += rec.path.endswith("/chat/completions")

    def __iter__(self):
        return iter([_Chat()] * self.n)


class _Chat:
    path = "/v1/chat/completions"


def request(i: int, tag: str = "item") -> JudgeRequest:
    return JudgeRequest.chat("You rate answers from 1 to 5. Reply with the digit only.",
                             f"{tag} {i}\nQuestion: ...\nAnswer: {FILLER}\nScore:", max_tokens=1, top_logprobs=5)


def make_backend(urls: list[str], per_endpoint: int, cache: str | None):
    inner = OpenAICompatBackend("fake-judge", endpoints=[{"base_url": u, "concurrency": per_endpoint} for u in urls],
                                api_key="sk-bench", timeout=60)
    return CachedBackend(inner, cache) if cache else inner


def calls(urls: list[str]) -> int:
    total = 0
    for u in urls:
        with urllib.request.urlopen(u + "/_stats", timeout=10) as resp:
            total += json.load(resp)["chat_calls"]
    return total


def child(n: int, urls: list[str], per_endpoint: int, cache: str | None) -> None:
    """One measured pass in a fresh process: prints a JSON line."""
    os.environ["EVAL_NO_PROGRESS"] = "1"
    backend = make_backend(urls, per_endpoint, cache)
    requests = [request(i) for i in range(n)]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    c_before = calls(urls)
    t0, c0 = time.perf_counter(), time.process_time()
    out = backend.complete_many(requests)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "wall": wall, "cpu": cpu, "ok": sum(c.ok for c in out),
                      "cached": sum(c.cached for c in out), "calls": calls(urls) - c_before,
                      "rss_before_kb": base, "rss_peak_kb": peak,
                      "prompt_bytes": len(requests[0].messages[-1][1])}))
    backend.close()


def fill(path: Path, urls: list[str], entries: int) -> float:
    """Bulk rows in the cache's own format and keys (other prompts), as a long history would leave."""
    cb = make_backend(urls, 1, str(path))
    t0 = time.perf_counter()
    comp = json.dumps({"text": "3", "top_logprobs": [{"3": -0.2, "1": -2.0, "2": -3.0, "4": -4.0, "5": -5.0}],
                       "prompt_tokens": 350, "completion_tokens": 1, "finish_reason": "stop"})
    batch = []
    for i in range(entries):
        req = request(i, "history")
        batch.append((cb.key(req), cb._judge, json.dumps(req.as_dict(), ensure_ascii=False), comp, time.time()))
        if len(batch) == 20000:
            cb._conn.executemany("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)", batch)
            batch.clear()
    if batch:
        cb._conn.executemany("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)", batch)
    cb.close()
    return time.perf_counter() - t0


def run_child(args, n: int, urls: list[str], cache: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", str(n), "--urls", *urls, "--per-endpoint", str(args.per_endpoint)]
    if cache:
        cmd += ["--cache", cache]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--per-endpoint", type=int, default=64)
    ap.add_argument("--endpoints", type=int, default=4)
    ap.add_argument("--cache-entries", type=int, default=1_000_000)
    ap.add_argument("--child", type=int)
    ap.add_argument("--urls", nargs="+")
    ap.add_argument("--cache")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.urls, args.per_endpoint, args.cache)
        return

    ctx = mp.get_context("fork")
    procs, pipes, urls = [], [], []
    for _ in range(args.endpoints):
        parent, kid = ctx.Pipe()
        p = ctx.Process(target=_serve, args=(kid, args.latency), daemon=True)
        p.start()
        procs.append(p)
        pipes.append(parent)
        urls.append(parent.recv())
    capacity = args.endpoints * args.per_endpoint
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "judge.sqlite"
            for n in args.sizes[:-1]:
                rows.append(("live, no cache", run_child(args, n, urls, None)))
            n = args.sizes[-1]
            fill_s = fill(db, urls, max(0, args.cache_entries - n))
            rows.append(("live, into the big cache", run_child(args, n, urls, str(db))))
            rows.append(("again, from the cache", run_child(args, n, urls, str(db))))
            with sqlite3.connect(db) as con:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                entries = con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
            size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    finally:
        for parent, p in zip(pipes, procs):
            parent.send("stop")
            p.join(timeout=10)

    print(f"{args.endpoints} fake endpoints x {args.per_endpoint} in flight, {args.latency * 1000:.0f} ms latency; "
          f"client {platform.python_version()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
    print("| run | items | wall (s) | ideal (s) | wall / ideal | req/s | client CPU (ms/req) | HTTP calls | ok | cached "
          "| peak RSS (MiB) | RSS growth during the run (KiB/item) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, r in rows:
        ideal = r["n"] * args.latency / capacity
        growth = (r["rss_peak_kb"] - r["rss_before_kb"]) / r["n"]
        print(f"| {label} | {r['n']} | {r['wall']:.2f} | {ideal:.2f} | {r['wall'] / ideal:.2f} | {r['n'] / r['wall']:.0f} "
              f"| {r['cpu'] / r['n'] * 1000:.2f} | {r['calls']} | {r['ok']} | {r['cached']} | {r['rss_peak_kb'] / 1024:.0f} "
              f"| {growth:.2f} |")
    print(f"\nprompt {rows[0][1]['prompt_bytes']} bytes per item; cache: {entries:,} entries, {size / 2**20:.0f} MiB on "
          f"disk ({size / max(entries, 1):.0f} B/entry), bulk fill {fill_s:.0f} s; re-run of {n:,} from it: "
          f"{n / rows[-1][1]['wall']:,.0f} lookups/s")


if __name__ == "__main__":
    main()
