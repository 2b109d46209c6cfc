"""Throughput of the HTTP judge path: is concurrency really used, and does the cache really stop calls?

Runs N rating requests (top-5 logprobs asked, as a G-Eval style judge does) against the fake
OpenAI server with a fixed per-request latency, through CachedBackend(OpenAICompatBackend) with an
empty cache; then the same N again from the cache. The ideal wall time of the first run is
N * latency / concurrency; the ratio to it measures client-side overhead (threads, JSON, pydantic,
SQLite writes). Prints a markdown table.

    python bench/api_throughput.py [--n 1000] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.cache import CachedBackend  # noqa: E402
from evaluate.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply  # noqa: E402


def rating(rec: RecordedRequest) -> Reply:
    score = str(len(rec.user_text) % 5 + 1)
    others = {d: -2.0 - i for i, d in enumerate(x for x in "12345" if x != score)}
    return Reply(content=score, top_logprobs=[{score: -0.2, **others}], usage=(350, 1))


def _serve(conn, latency: float, reply: Callable[[RecordedRequest], Reply | str]) -> None:
    with FakeOpenAIServer(reply, latency=latency) as server:
        conn.send(server.url)
        conn.recv()  # until told to stop


@contextmanager
def fake_server(latency: float, where: str = "process",
                reply: Callable[[RecordedRequest], Reply | str] = rating) -> Iterator[str]:
    """The URL of the fake server answering with `reply` (a module-level function); in another process
    by default, as a real server would be (a server in this process would compete with the client for
    the GIL and inflate the client's overhead). The other benchmarks of a served judge or model use it."""
    if where == "thread":
        with FakeOpenAIServer(reply, latency=latency) as server:
            yield server.url
        return
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, latency, reply), daemon=True)
    proc.start()
    try:
        yield parent.recv()
    finally:
        parent.send("stop")
        proc.join(timeout=10)


def chat_calls(url: str) -> int:
    with urllib.request.urlopen(url + "/_stats", timeout=10) as resp:
        return json.load(resp)["chat_calls"]


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        name = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except Exception:
        name = platform.processor() or "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--server", choices=("process", "thread"), default="process",
                    help="run the fake server in a child process (default) or in a thread of this one")
    args = ap.parse_args()
    os.environ.setdefault("EVAL_NO_PROGRESS", "1")

    requests = [
        JudgeRequest.chat("You rate answers from 1 to 5. Reply with the digit only.",
                          f"Question {i}: ...\nAnswer: ...{'x' * (i % 17)}\nScore:", max_tokens=1, top_logprobs=5)
        for i in range(args.n)
    ]
    ideal = args.n * args.latency / args.concurrency
    rows = []
    with fake_server(args.latency, args.server) as url, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "judge.sqlite"
        for label in ("first run (empty cache)", "second run (from cache)"):
            inner = OpenAICompatBackend("fake-judge", base_url=url, api_key="sk-bench", concurrency=args.concurrency, timeout=30)
            backend = CachedBackend(inner, db)
            calls_before = chat_calls(url)
            t0, c0 = time.perf_counter(), time.process_time()
            out = backend.complete_many(requests)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            calls = chat_calls(url) - calls_before
            ok = sum(c.ok for c in out)
            assert all(c.top_logprobs for c in out), "logprobs were lost"
            rows.append((label, wall, cpu, calls, ok, sum(c.cached for c in out), backend.usage()["retries"]))
            backend.close()

    print(f"{args.n} requests, {args.latency * 1000:.0f} ms server latency, concurrency {args.concurrency}; "
          f"ideal first run {ideal:.2f} s; server in a {args.server}; {cpu_model()}, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}\n")
    print("| run | wall (s) | wall / ideal | req/s | client CPU (ms/req) | HTTP calls | ok | cached | retries |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, wall, cpu, calls, ok, n_cached, retries in rows:
        print(f"| {label} | {wall:.2f} | {wall / ideal:.3f} | {args.n / wall:.0f} | {cpu / args.n * 1000:.2f} "
              f"| {calls} | {ok} | {n_cached} | {retries} |")


if __name__ == "__main__":
    main()
