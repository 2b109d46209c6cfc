"""A judge that cannot be reached is known within seconds, and a shared cache stays whole.

Real sockets on 127.0.0.1: a closed port (connection refused), a listener whose accept queue is
full (the handshake times out), a server that accepts and never answers, and the fake OpenAI
server for the endpoints that work, answer 401, or do not serve the model.
"""

from __future__ import annotations

import collections
import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from evaluate.backends.base import Backend, Completion, JudgeRequest
from evaluate.backends.cache import CachedBackend
from evaluate.backends.endpoints import Endpoint, EndpointSet
from evaluate.backends.openai_compat import OpenAICompatBackend, hung_request_seconds
from evaluate.backends.options import JudgeOptions
from evaluate.backends.pool import open_backend
from evaluate.backends.probe import UNREACHABLE, JudgeUnreachable, probe
from evaluate.core.options import parse_options
from tests import fake_openai_server
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-dead-judge-SECRET-7f3a9c1d"
ENV = "EVAL_TEST_DEAD_JUDGE_KEY"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")


# ---------------------------------------------------------------- dead servers, as sockets
def closed_port() -> str:
    """A base URL on which nothing listens: bound, then closed (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


class SilentServer:
    """Accepts every connection, reads what comes, never answers (a hung server)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)

    def close(self) -> None:
        self._stop.set()
        for c in self.conns:
            c.close()
        self.sock.close()


class FullBacklog:
    """A listener that never accepts, its one-slot queue already taken: Linux drops further SYNs,
    so a connect times out (what a host that is down, or a firewall, looks like)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.held = []
        for _ in range(2):
            c = socket.socket()
            c.settimeout(0.3)
            try:
                c.connect(self.sock.getsockname())
                self.held.append(c)
            except OSError:
                c.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def drops_syns(self) -> bool:
        c = socket.socket()
        c.settimeout(0.3)
        try:
            c.connect(self.sock.getsockname())
            return False
        except OSError:
            return True
        finally:
            c.close()

    def close(self) -> None:
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    s = SilentServer()
    yield s
    s.close()


def rating(rec: RecordedRequest) -> Reply:
    return Reply(content=f"5|{rec.user_text}")


def reqs(n: int, tag: str = "q") -> list[JudgeRequest]:
    return [JudgeRequest.chat("rate 1-5", f"{tag} {i}", max_tokens=1) for i in range(n)]


def judge_opts(**raw) -> JudgeOptions:
    opts, errors = parse_options(JudgeOptions, {"backend": "openai", "model": "fake-judge", "api_key_env": ENV, **raw},
                                 "test: judge")
    assert not errors, errors
    return opts


# ---------------------------------------------------------------- the rule, on a clock we control
def test_an_endpoint_is_dropped_after_connect_failures_over_the_grace_never_before() -> None:
    now = [0.0]
    gone: list[str] = []
    never = Endpoint("http://never/v1", limit=4)
    eps = EndpointSet([never], clock=lambda: now[0], unreachable_after=2.0, down_after=60.0, on_unreachable=gone.append)
    for t in (0.0, 0.1, 0.2, 1.9):  # four refusals, but within 2 s: not yet
        now[0] = t
        eps.release(eps.acquire(), "down", started=t, error="connection failed: connection refused")
    assert not never.dropped and eps.unreachable is None and gone == []
    now[0] = 2.05
    eps.release(eps.acquire(), "down", started=2.0, error="connection failed: connection refused")
    assert never.dropped.startswith("connection refused (5 attempts in a row over 2.0s; it never answered")
    assert gone == [eps.unreachable] and eps.unreachable.startswith("http://never/v1: connection refused")
    with pytest.raises(JudgeUnreachable) as err:
        eps.acquire()
    assert str(err.value).startswith(UNREACHABLE)

    # one that answered before gets the restart grace; any other outcome ends the streak
    now[0] = 0.0
    known = Endpoint("http://known/v1", limit=4)
    eps = EndpointSet([known], clock=lambda: now[0], unreachable_after=2.0, down_after=60.0)
    eps.release(eps.acquire(), "ok")
    for t in (1.0, 10.0, 30.0, 59.0):
        now[0] = t
        eps.release(eps.acquire(), "down", started=t, error="refused")
    now[0] = 60.5
    eps.release(eps.acquire(), "fail")  # a timeout: the server accepted a connection again
    now[0] = 70.0
    for t in (70.0, 71.0, 129.0):
        now[0] = t
        eps.release(eps.acquire(), "down", started=t, error="refused")
    assert not known.dropped  # 59 s of refusals since 70.0
    now[0] = 131.0
    eps.release(eps.acquire(), "down", started=130.5, error="refused")
    assert known.dropped and "it had answered before" in known.dropped and eps.unreachable


def test_a_set_aside_endpoint_that_cannot_connect_is_probed_when_its_grace_ends() -> None:
    now = [0.0]
    dead, live = Endpoint("http://dead/v1", limit=2), Endpoint("http://live/v1", limit=2)
    eps = EndpointSet([dead, live], failures=3, cooldown=30.0, clock=lambda: now[0], unreachable_after=2.0)
    for _ in range(3):
        eps.release(eps.acquire(avoid=[live]), "down", started=0.0, error="refused")
    assert dead.set_aside == 1 and dead.open_until == 2.0  # not the 30 s cool-down
    now[0] = 2.1
    probe_ep = eps.acquire(avoid=[live])
    assert probe_ep is dead
    eps.release(probe_ep, "down", started=2.1, error="refused")
    assert dead.dropped and eps.unreachable is None  # the live one carries on
    assert all(eps.acquire(avoid=[live]) is live for _ in range(2))


# ---------------------------------------------------------------- a closed port, default options
def test_closed_port_is_unreachable_within_seconds_with_default_options(tmp_path: Path) -> None:
    opts = judge_opts(base_url=closed_port())
    assert (opts.max_retries, opts.concurrency, opts.timeout) == (8, 8, 120.0)  # the defaults of the issue
    backend = open_backend(opts, tmp_path / "cache.sqlite")
    t0 = time.monotonic()
    out = backend.complete_many(reqs(104))
    elapsed = time.monotonic() - t0
    try:
        assert elapsed < 15.0
        assert len(out) == 104 and all(c is not None and not c.ok for c in out)
        assert all(c.error.startswith(UNREACHABLE) for c in out)
        assert backend.unreachable and "connection refused" in backend.unreachable
        assert "base_url" in backend.unreachable  # what to check
        usage = backend.usage()
        assert usage["requests"] <= opts.concurrency  # only the first wave was ever started
        assert sum("not sent" in c.error for c in out) >= 104 - opts.concurrency
        assert len(backend) == 0  # nothing cached
        t1 = time.monotonic()
        again = backend.complete_many(reqs(10, "later"))  # a later family: refused at once, nothing sent
        assert time.monotonic() - t1 < 1.0 and all(c.error.startswith(UNREACHABLE) for c in again)
        assert backend.usage()["calls"] == usage["calls"]
    finally:
        backend.close()


def test_dns_failure_and_full_accept_queue_are_unreachable_too() -> None:
    t0 = time.monotonic()
    try:
        socket.getaddrinfo("no-such-judge.invalid", 80)
    except OSError:
        pass
    if time.monotonic() - t0 > 2.0:
        pytest.skip("name lookups are slow here (no DNS server answers)")
    b = OpenAICompatBackend("m", base_url="http://no-such-judge.invalid/v1", api_key=KEY, max_retries=8)
    t0 = time.monotonic()
    out = b.complete_many(reqs(6))
    assert time.monotonic() - t0 < 15.0 and all(c.error.startswith(UNREACHABLE) for c in out)
    assert "DNS lookup failed" in b.unreachable
    b.close()

    full = FullBacklog()
    try:
        if not full.drops_syns():
            pytest.skip("this system refuses instead of dropping connects to a full accept queue")
        b = OpenAICompatBackend("m", base_url=full.url, api_key=KEY, max_retries=8, connect_timeout=1.0)
        t0 = time.monotonic()
        out = b.complete_many(reqs(4))
        elapsed = time.monotonic() - t0
        b.close()
        assert elapsed < 8.0 and all(c.error.startswith(UNREACHABLE) for c in out)
        assert "connect timed out after 1s" in b.unreachable
    finally:
        full.close()


# ---------------------------------------------------------------- one dead among three
def test_one_dead_among_three_the_run_finishes_on_the_others() -> None:
    dead = closed_port()
    with FakeOpenAIServer(rating, latency=0.01) as a, FakeOpenAIServer(rating, latency=0.01) as b:
        urls = [a.url, dead, b.url]
        baseline = OpenAICompatBackend("judge", base_url=[a.url, b.url], api_key=KEY, concurrency=4)
        t0 = time.monotonic()
        assert all(c.ok for c in baseline.complete_many(reqs(200, "warm")))
        base_time = time.monotonic() - t0
        baseline.close()
        a.reset()
        b.reset()

        judge = OpenAICompatBackend("judge", base_url=urls, api_key=KEY, concurrency=4)  # default retries and breaker
        t0 = time.monotonic()
        first = judge.complete_many(reqs(200))
        took = time.monotonic() - t0
        calls_set_aside = judge.usage()["endpoints"][dead]["calls"]
        time.sleep(max(0.0, 2.2 - took))  # past the grace: the next batch's probe of it finds it still dead
        second = judge.complete_many(reqs(100, "second"))
        dropped = judge.usage()["endpoints"][dead]
        third = judge.complete_many(reqs(100, "third"))
        after = judge.usage()["endpoints"][dead]
        judge.close()

    assert all(c.ok for c in first + second + third) and judge.unreachable is None
    assert took < base_time + 3.0  # the dead one costs no more than a few seconds
    assert calls_set_aside <= 5 + 4  # the breaker's threshold, plus what was in flight
    assert dropped.get("dropped", "").startswith("connection refused")
    assert after["calls"] == dropped["calls"]  # nothing sent to it once dropped
    counts = collections.Counter(r.user_text for s in (a, b) for r in s.chat_requests() if r.answered == 200)
    assert len(counts) == 400 and set(counts.values()) == {1}  # every item once, on the live two


# ---------------------------------------------------------------- accepts, never answers
def test_a_server_that_never_answers_is_unreachable_after_its_timeout(silent: SilentServer) -> None:
    b = OpenAICompatBackend("m", base_url=silent.url, api_key=KEY, timeout=1.0, max_retries=8, concurrency=4)
    t0 = time.monotonic()
    out = b.complete_many(reqs(12))
    elapsed = time.monotonic() - t0
    b.close()
    assert all(c.error.startswith(UNREACHABLE) for c in out)
    assert "accepts connections but never answers" in b.unreachable
    # first attempts time out (1 s), their GET /models too (1 s); the next wave (2 s timeouts) passes the 2 s grace
    assert 2.0 <= elapsed < 1.0 + 1.0 + 2.0 + 1.0 + 3.0
    bound = hung_request_seconds(1.0, 8)  # what it would have cost per request without the check
    assert bound == pytest.approx(1 + 2 + 4 + 6 * 8 + 0.5 + 1 + 2 + 4 + 8 + 16 + 30 + 30)
    assert hung_request_seconds(120.0, 8) == pytest.approx(120 + 240 + 480 + 6 * 960 + 91.5)


def test_a_busy_server_that_answers_models_keeps_its_retries() -> None:
    with FakeOpenAIServer(lambda rec: Reply(content="4", hang=0.8)) as s:  # slower than the first timeout
        b = OpenAICompatBackend("m", base_url=s.url, api_key=KEY, timeout=0.5, max_retries=2, concurrency=4,
                                backoff_base=0.01, backoff_max=0.02)
        out = b.complete_many(reqs(4))  # 0.5 s times out; the retry with 1 s gets the reply
        models_checks = sum(r.path.endswith("/models") for r in s.requests)
        b.close()
    assert all(c.ok and c.text == "4" for c in out) and b.unreachable is None
    assert models_checks >= 1  # it was asked whether it answers at all, and it did


# ---------------------------------------------------------------- the probe
def test_probe_ok_costs_nothing_and_scrubs_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer(rating) as s:
        port = s.url.split(":")[2].split("/")[0]
        url = f"http://user:pa55word@127.0.0.1:{port}/v1?key=abc"
        [r] = probe(judge_opts(base_url=f"http://127.0.0.1:{port}/v1"))
        assert r.ok and r.kind == "ok" and r.error is None and r.models == ["fake-judge"]
        assert 0 < r.latency < 2.0 and s.chat_calls == 0  # GET /models only
        assert [r.url for r in probe(judge_opts(endpoints=[{"base_url": url}]))] == [f"http://127.0.0.1:{port}/v1"]
        assert "pa55word" not in probe(judge_opts(endpoints=[{"base_url": url}]))[0].line()
    assert probe(JudgeOptions(backend="local")) == []


def test_probe_tells_refused_dns_tls_timeout_apart(silent: SilentServer) -> None:
    with FakeOpenAIServer(rating) as plain:
        https = plain.url.replace("http://", "https://")
        t0 = time.monotonic()
        refused, dns, tls, hung = probe(judge_opts(base_url=[closed_port(), "http://no-such-judge.invalid/v1", https,
                                                              silent.url]), timeout=1.5)
        elapsed = time.monotonic() - t0
    assert elapsed < 6.0  # the endpoints are probed together: about the longest (1.5 s), not the sum
    assert (refused.kind, dns.kind, tls.kind, hung.kind) == ("unreachable", "unreachable", "unreachable", "timeout")
    assert not any(r.ok for r in (refused, dns, tls, hung))
    assert "connection refused" in refused.error and refused.latency < 1.0
    assert "DNS lookup failed" in dns.error
    assert "TLS handshake failed" in tls.error
    assert "accepts connections but does not answer" in hung.error and 1.4 <= hung.latency < 3.0


def _auth_checking_get(monkeypatch: pytest.MonkeyPatch, status: int = 401) -> None:
    """The fake server's GET /models, refusing any key but KEY."""
    plain = fake_openai_server._Handler.do_GET

    def do_get(self) -> None:  # type: ignore[no-untyped-def]
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            self._record(b"")
            self._send(status, json.dumps({"error": {"message": "Incorrect API key provided: "
                                                                f"{self.headers.get('Authorization', '')[7:]}"}}).encode())
            return
        plain(self)

    monkeypatch.setattr(fake_openai_server._Handler, "do_GET", do_get)


@pytest.mark.parametrize("status", [401, 403])
def test_probe_names_the_variable_of_a_refused_key_never_the_key(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    _auth_checking_get(monkeypatch, status)
    wrong = "sk-wrong-key-0123456789abcdef"
    monkeypatch.setenv(ENV, wrong)
    with FakeOpenAIServer(rating) as s:
        [r] = probe(judge_opts(base_url=s.url))
        [good] = probe(judge_opts(base_url=s.url), api_key=KEY)
        [given] = probe(judge_opts(base_url=s.url), api_key=wrong)
    assert not r.ok and r.kind == "auth" and f"HTTP {status}" in r.error and f"${ENV}" in r.error
    assert wrong not in r.error and wrong not in r.line() and "***" in r.error
    assert good.ok  # the key given on the command line wins over the variable
    assert "--openai_key" in given.error and wrong not in given.error


def test_probe_unknown_model_lists_the_served_ones() -> None:
    def served_only(rec: RecordedRequest) -> Reply:  # as vLLM answers for a model it does not serve
        return Reply(content="OK") if rec.body.get("model") == "fake-judge" else Reply.client_error(404)

    with FakeOpenAIServer(served_only) as s:
        [r] = probe(judge_opts(base_url=s.url, model="gpt-4o"))
        sent = s.chat_requests()
    assert not r.ok and r.kind == "model" and r.models == ["fake-judge"]
    assert "'gpt-4o' is not served" in r.error and "served: fake-judge" in r.error
    assert [q.body["max_tokens"] for q in sent] == [1]  # confirmed with one 1-token request


def test_probe_without_models_endpoint_falls_back_to_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_models(self) -> None:  # type: ignore[no-untyped-def]
        self._record(b"")
        self._send(404, b'{"error": {"message": "not found"}}')

    monkeypatch.setattr(fake_openai_server._Handler, "do_GET", no_models)
    with FakeOpenAIServer(rating) as s:
        [r] = probe(judge_opts(base_url=s.url))
        assert r.ok and s.chat_calls == 1 and s.chat_requests()[0].body["max_tokens"] == 1


# ---------------------------------------------------------------- a cache shared by processes
WRITER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from evaluate.backends.base import Backend, Completion, JudgeRequest
from evaluate.backends.cache import CachedBackend

class Echo(Backend):
    kind = "echo"
    def complete(self, request):
        return Completion(text="echo " + request.messages[-1][1])

path, first, last, start_at, busy = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
time.sleep(max(0.0, start_at - time.time()))
t0 = time.monotonic()
cache = CachedBackend(Echo("m"), path, chunk_size=1, busy_timeout=busy)
print("opened", flush=True)
out = cache.complete_many([JudgeRequest.chat(None, f"item {i}") for i in range(first, last)])
assert all(c.ok and c.text == f"echo item {i}" for i, c in zip(range(first, last), out))
print(json.dumps({"hits": cache.hits, "misses": cache.misses, "lock_retries": cache.lock_retries,
                  "seconds": time.monotonic() - t0}))
"""


class Echo(Backend):
    kind = "echo"

    def complete(self, request: JudgeRequest) -> Completion:
        return Completion(text="echo " + request.messages[-1][1])


def _writers(path: Path, ranges: list[tuple[int, int]], busy: float, delay: float = 1.5) -> list[subprocess.Popen]:
    start_at = time.time() + delay
    return [subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(path), str(a), str(b), str(start_at),
                              str(busy)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for a, b in ranges]


def _results(procs: list[subprocess.Popen]) -> list[dict]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, stderr
        out.append(json.loads(stdout.splitlines()[-1]))
    return out


def test_two_processes_write_one_new_cache_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "judge_cache.sqlite"
    a, b = _results(_writers(path, [(0, 300), (150, 450)], busy=30.0))
    assert a["misses"] + a["hits"] == 300 and b["misses"] + b["hits"] == 300
    assert a["misses"] + b["misses"] >= 450  # every item paid at least once; an overlap may be paid twice
    cache = CachedBackend(Echo("m"), path)
    out = cache.complete_many([JudgeRequest.chat(None, f"item {i}") for i in range(450)])
    assert all(c.cached and c.text == f"echo item {i}" for i, c in enumerate(out))
    stats = cache.stats()
    assert (stats.entries, stats.hits, stats.misses) == (450, 450, 0)
    assert stats.bytes >= path.stat().st_size > 0 and "450 entries" in stats.line()
    cache.close()


def test_a_writer_outwaits_a_lock_held_longer_than_its_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedBackend(Echo("m"), path).close()  # the file exists, in WAL mode
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    try:
        other = sqlite3.connect(path, isolation_level=None, timeout=0.05)
        with pytest.raises(sqlite3.OperationalError, match="locked"):  # what SQLite alone would do
            other.execute("INSERT INTO completions VALUES ('k', 'j', 'r', 'c', 0)")
        other.close()
        procs = _writers(path, [(0, 20)], busy=0.05, delay=0.0)
        assert procs[0].stdout.readline().strip() == "opened"
        time.sleep(1.0)
        assert procs[0].poll() is None  # still waiting for the lock
    finally:
        holder.execute("COMMIT")
        holder.close()
    [result] = _results(procs)
    assert result["misses"] == 20 and result["lock_retries"] > 0
    cache = CachedBackend(Echo("m"), path)
    assert len(cache) == 20
    cache.close()


def test_items_handed_out_after_the_judge_is_declared_unreachable_are_not_sent_nor_counted(tmp_path: Path) -> None:
    """The window between one worker declaring the judge unreachable and its cancel of the queue: other workers
    may still take queued items (on a loaded CI host all 104 of the test above were taken so). Such an item is
    failed at once as not sent, and not counted as a request. The endpoint set's verdict is set here without
    the cancel, which is exactly that window."""
    opts = judge_opts(base_url=closed_port())
    backend = open_backend(opts, tmp_path / "cache.sqlite")
    try:
        inner = backend.inner
        inner._endpoints.unreachable = "connection refused (nothing listens on that port)"
        out = backend.complete_many(reqs(20, "window"))
        assert len(out) == 20 and all(c.error.startswith(UNREACHABLE) and "not sent" in c.error for c in out)
        assert backend.usage()["requests"] == 0 and backend.usage()["calls"] == 0
    finally:
        backend.close()
