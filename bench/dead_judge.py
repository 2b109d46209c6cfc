"""How long until a run knows its judge is dead, and what a dead endpoint costs a live run.

Real sockets on 127.0.0.1 and the real openai client; judge options are the config's defaults
(max_retries 8, concurrency 8, timeout 120 s) unless a line says otherwise.

1. Nothing listens (connection refused), the host name does not resolve, the accept queue is
   full (the TCP handshake times out): seconds from the first request to `unreachable`, HTTP
   attempts made, WARNING lines logged, requests never sent.
2. One dead endpoint among three (two fake servers): wall time of N requests against the two
   live ones alone; every item must be judged.
3. A server that accepts connections and never answers, with the default timeout and a short one,
   next to what one request would have cost by retries alone (`hung_request_seconds`).
4. `probe()` on each case.

    python bench/dead_judge.py [--requests 104] [--skip-default-hang]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EVAL_NO_PROGRESS", "1")

from evaluate.backends.openai_compat import OpenAICompatBackend, hung_request_seconds  # noqa: E402
from evaluate.backends.options import JudgeOptions  # noqa: E402
from evaluate.backends.probe import UNREACHABLE, probe  # noqa: E402
from evaluate.core.options import parse_options  # noqa: E402
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply  # noqa: E402
from tests.test_dead_judge import FullBacklog, SilentServer, closed_port, reqs  # noqa: E402


class Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += 1


def defaults(**raw) -> JudgeOptions:
    opts, errors = parse_options(JudgeOptions, {"backend": "openai", "model": "m", **raw}, "bench: judge")
    assert not errors, errors
    return opts


def backend(opts: JudgeOptions, **kw) -> OpenAICompatBackend:
    return OpenAICompatBackend(opts.model, base_url=opts.base_url, api_key="sk-bench", concurrency=opts.concurrency,
                               timeout=opts.timeout, max_retries=opts.max_retries,
                               endpoint_failures=opts.endpoint_failures, endpoint_cooldown=opts.endpoint_cooldown, **kw)


def until_unreachable(name: str, opts: JudgeOptions, n: int, stop_after: float | None = None) -> None:
    """`stop_after`: the rule switched off (as before it existed), the run closed after that many seconds."""
    counter = Count()
    logging.getLogger("evaluate").addHandler(counter)
    b = backend(opts, **({"unreachable_after": 1e9} if stop_after else {}))
    seen: dict = {}
    if stop_after:
        def stop() -> None:
            seen.update(b.usage(), lines=counter.n)
            b.close()

        threading.Timer(stop_after, stop).start()
    t0 = time.monotonic()
    out = b.complete_many(reqs(n))
    took = time.monotonic() - t0
    usage = b.usage()
    b.close()
    logging.getLogger("evaluate").removeHandler(counter)
    if stop_after:
        print(f"| {name}, without the rule (as before): stopped after {stop_after:g} s | {seen['failures']} of {n} "
              f"requests had failed for good | {seen['calls']} | {seen['retries']} retry lines (each a WARNING "
              f"before; now INFO) | - | - |")
        return
    marked = sum(c.error is not None and c.error.startswith(UNREACHABLE) for c in out)
    unsent = sum(c.error is not None and "not sent" in c.error for c in out)
    print(f"| {name} | {took:.1f} s | {usage['calls']} | {counter.n} | {marked}/{n} | {unsent} |")
    print(f"|   reason: {b.unreachable} | | | | | |")


def rating(rec: RecordedRequest) -> Reply:
    return Reply(content=f"5|{rec.user_text}")


def one_dead_among_three(n: int) -> None:
    with FakeOpenAIServer(rating, latency=0.02) as a, FakeOpenAIServer(rating, latency=0.02) as c:
        rows = []
        for name, urls in (("two live", [a.url, c.url]), ("two live + one refusing", [a.url, closed_port(), c.url]),
                           ("two live + one never answering", [a.url, "SILENT", c.url])):
            silent = SilentServer() if "SILENT" in urls else None
            urls = [silent.url if u == "SILENT" else u for u in urls]
            b = backend(defaults(base_url=urls))
            t0 = time.monotonic()
            out = b.complete_many(reqs(n, name))
            took = time.monotonic() - t0
            per = b.usage()["endpoints"]
            b.close()
            if silent is not None:
                silent.close()
            dead = [u for u in urls if u not in (a.url, c.url)]
            rows.append((name, took, sum(x.ok for x in out), per[dead[0]] if dead else None))
    print(f"\n## One dead endpoint among three ({n} requests, 20 ms per reply, default options: concurrency 8 "
          f"per endpoint, timeout 120 s)\n")
    print("| endpoints | wall | ok | calls to the dead one | dropped |")
    print("|---|---|---|---|---|")
    for name, took, ok, dead in rows:
        print(f"| {name} | {took:.2f} s | {ok}/{n} | {dead['calls'] if dead else '-'} | "
              f"{(dead or {}).get('dropped', '-') if dead else '-'} |")


def never_answers(n: int, timeouts: list[float]) -> None:
    print(f"\n## A server that accepts connections and never answers ({n} requests, concurrency 8, max_retries 8)\n")
    print("| timeout | until unreachable | one request by retries alone (before) | a run of "
          f"{n} by retries alone (before): ceil(n/8) x to n x that, once the breaker lets one through at a time |")
    print("|---|---|---|---|")
    for t in timeouts:
        silent = SilentServer()
        b = backend(defaults(base_url=silent.url, timeout=t))
        t0 = time.monotonic()
        out = b.complete_many(reqs(n))
        took = time.monotonic() - t0
        b.close()
        silent.close()
        assert all(c.error and c.error.startswith(UNREACHABLE) for c in out), out[0]
        bound = hung_request_seconds(t, 8)
        print(f"| {t:g} s | {took:.1f} s | {bound:,.0f} s ({bound / 3600:.2f} h) | "
              f"{bound * -(-n // 8) / 3600:,.1f} h to {bound * n / 3600:,.0f} h |")


def stuck_completions(n: int, timeout: float, retries: int) -> None:
    """GET /models answers, chat completions never come back (a stuck worker behind a live API
    server): the one case left to timeout and retries."""
    with FakeOpenAIServer(lambda rec: Reply(content="5", hang=3600)) as s:
        b = backend(defaults(base_url=s.url, timeout=timeout, max_retries=retries))
        t0 = time.monotonic()
        out = b.complete_many(reqs(n))
        took = time.monotonic() - t0
        b.close()
    assert not any(c.ok for c in out) and b.unreachable is None
    bound = hung_request_seconds(timeout, retries)
    print(f"| {timeout:g} s | {retries} | {n} | {took:.1f} s | {bound:.1f} s | {took / bound:.1f} |")


def probes() -> None:
    print("\n## probe() (timeout 10 s, all endpoints at once)\n")
    silent, full = SilentServer(), FullBacklog()
    def served_only(rec: RecordedRequest) -> Reply:  # as vLLM answers for a model it does not serve
        return Reply(content="OK") if rec.body.get("model") == "fake-judge" else Reply.client_error(404)

    with FakeOpenAIServer(served_only) as live:
        urls = {"live": live.url, "refused": closed_port(), "DNS": "http://no-such-judge.invalid/v1",
                "TLS (https:// to an http server)": live.url.replace("http://", "https://"),
                "full accept queue": full.url, "never answers": silent.url}
        t0 = time.monotonic()
        results = probe(defaults(base_url=list(urls.values()), model="fake-judge"))
        took = time.monotonic() - t0
        wrong_model = probe(defaults(base_url=live.url, model="gpt-4o"))[0]
    silent.close()
    full.close()
    print("| case | ok | kind | latency | says |")
    print("|---|---|---|---|---|")
    for name, r in list(zip(urls, results)) + [("unknown model", wrong_model)]:
        print(f"| {name} | {r.ok} | {r.kind} | {r.latency:.2f} s | {r.error or r.note or 'ok'} |")
    print(f"\nall six endpoints probed in {took:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=104, help="requests per run (the issue's run had 104)")
    ap.add_argument("--live-requests", type=int, default=2000, help="requests of the one-dead-among-three runs")
    ap.add_argument("--skip-default-hang", action="store_true", help="skip the never-answering run at timeout 120 s")
    ap.add_argument("--before-seconds", type=float, default=60.0,
                    help="run the refused case this long with the rule off, for comparison (0: skip)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, handlers=[logging.NullHandler()])  # counted, not shown
    print(f"# dead judge ({platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs)\n")
    print(f"## Until unreachable (default options, {args.requests} requests)\n")
    print("| case | until unreachable | HTTP attempts | WARNING+ lines | failed with the marker | never sent |")
    print("|---|---|---|---|---|---|")
    until_unreachable("connection refused", defaults(base_url=closed_port()), args.requests)
    if args.before_seconds:
        until_unreachable("connection refused", defaults(base_url=closed_port()), args.requests, args.before_seconds)
    until_unreachable("DNS name does not resolve", defaults(base_url="http://no-such-judge.invalid/v1"), args.requests)
    full = FullBacklog()
    if full.drops_syns():
        until_unreachable("accept queue full (handshake times out, 10 s)", defaults(base_url=full.url), args.requests)
    full.close()
    one_dead_among_three(args.live_requests)
    never_answers(args.requests, [10.0] if args.skip_default_hang else [120.0, 10.0])
    print("\n## Completions never come back, GET /models answers (left to timeout and retries; concurrency 8)\n")
    print("| timeout | max_retries | requests | wall | one request's bound | wall / bound |")
    print("|---|---|---|---|---|---|")
    stuck_completions(8, 0.5, 2)
    stuck_completions(16, 0.5, 2)
    probes()


if __name__ == "__main__":
    main()
