"""Several judge endpoints and the run-wide pool of requests: real fake servers on 127.0.0.1.

One endpoint slow, one failing with 500s, one stopped in the middle of the run: every request is
judged exactly once (counted on the servers: replies actually written), none is lost, and the
completions equal those of a single endpoint. Concurrent callers share one `concurrency`.
"""

from __future__ import annotations

import collections
import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evaluate.backends.base import Completion, JudgeRequest
from evaluate.backends.cache import VOLATILE_FIELDS, CachedBackend
from evaluate.backends.endpoints import CANCELLED, Endpoint, EndpointSet, RequestPool
from evaluate.backends.openai_compat import OpenAICompatBackend
from evaluate.backends.options import JudgeOptions
from evaluate.core.options import parse_options
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

KEY = "sk-endpoints-test-0123456789"


def rating(rec: RecordedRequest) -> Reply:
    """A reply that depends only on the request, as replicas of one model give."""
    h = hashlib.sha256(rec.user_text.encode()).digest()
    score = str(h[0] % 5 + 1)
    others = {d: -2.0 - i for i, d in enumerate(x for x in "12345" if x != score)}
    return Reply(content=f"{score}\nbecause {h[1]}", top_logprobs=[{score: -0.1 - h[2] / 1000, **others}])


def failing(_: RecordedRequest) -> Reply:
    return Reply.server_error(500)


def reqs(n: int, tag: str = "q") -> list[JudgeRequest]:
    return [JudgeRequest.chat("rate 1-5", f"{tag} {i}", max_tokens=1, top_logprobs=5) for i in range(n)]


def judged(servers: list[FakeOpenAIServer]) -> collections.Counter:
    """user text -> how many 200 replies the servers actually wrote for it."""
    return collections.Counter(r.user_text for s in servers for r in s.chat_requests() if r.answered == 200)


def backend(urls, **kw) -> OpenAICompatBackend:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_max", 0.05)
    kw.setdefault("timeout", 10.0)
    return OpenAICompatBackend("judge", base_url=urls, api_key=KEY, **kw)


def as_tuple(c: Completion) -> tuple:
    return (c.ok, c.text, c.top_logprobs)


# ---------------------------------------------------------------- one pool for concurrent callers
def test_concurrent_callers_share_one_concurrency_limit() -> None:
    inside = [0]
    peak = [0]
    lock = threading.Lock()

    def held(rec: RecordedRequest) -> Reply:
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.05)  # hold the request so that callers overlap
        with lock:
            inside[0] -= 1
        return Reply(content="3")

    with FakeOpenAIServer(held) as server:
        b = backend(server.url, concurrency=4)
        outs: dict[int, list[Completion]] = {}
        threads = [threading.Thread(target=lambda i=i: outs.__setitem__(i, b.complete_many(reqs(6, f"t{i}"))))
                   for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        b.close()
        assert server.chat_calls == 18
    # three callers of 6 each: separate pools would have allowed 12 in flight at once
    assert 2 <= peak[0] <= 4
    assert all(c.ok and c.text == "3" for i in range(3) for c in outs[i])


def test_pool_keeps_order_and_stops_a_batch_whose_callback_raises() -> None:
    pool = RequestPool(2)
    gate = threading.Event()

    def work(x: int) -> Completion:
        gate.wait(5)
        return Completion(text=str(x))

    gate.set()
    assert [c.text for c in pool.run(list(range(20)), work)] == [str(i) for i in range(20)]
    gate.clear()
    seen: list[int] = []

    def on_result(i: int, comp: Completion) -> None:
        seen.append(i)
        raise KeyboardInterrupt

    threading.Timer(0.05, gate.set).start()
    with pytest.raises(KeyboardInterrupt):
        pool.run(list(range(50)), work, on_result)
    assert 1 <= len(seen) <= 2  # the two in flight come back; nothing new started
    pool.close()


def test_cancel_returns_unsent_requests_as_errors_at_once() -> None:
    pool = RequestPool(1)
    gate = threading.Event()
    out: list[list[Completion]] = []
    t = threading.Thread(target=lambda: out.append(pool.run(list(range(10)), lambda x: (gate.wait(5), Completion(text="x"))[1])))
    t.start()
    time.sleep(0.05)
    pool.cancel()
    gate.set()
    t.join(5)
    [comps] = out
    assert comps[0].ok and all(c.error == CANCELLED for c in comps[1:])
    assert all(c.error == CANCELLED for c in pool.run([1, 2], lambda x: Completion(text="y")))  # refused after


# ---------------------------------------------------------------- endpoint choice and the breaker
def test_fewest_in_flight_then_breaker_sets_aside_and_probes() -> None:
    now = [0.0]
    a, b = Endpoint("http://a/v1", limit=2), Endpoint("http://b/v1", limit=2)
    eps = EndpointSet([a, b], failures=2, cooldown=10.0, clock=lambda: now[0])
    first, second = eps.acquire(), eps.acquire()
    assert {first.url, second.url} == {"http://a/v1", "http://b/v1"}  # spread, not piled on one
    eps.release(first, "ok")
    eps.release(second, "ok")
    for _ in range(2):
        eps.release(eps.acquire(avoid=[b]), "fail")  # a fails twice in a row: set aside
    assert a.set_aside == 1 and a.open_until == 10.0
    assert eps.acquire() is b and eps.acquire() is b  # only b while a cools down
    now[0] = 11.0
    probe = eps.acquire(avoid=[b])
    assert probe is a  # back from cool-down: one probe at a time
    eps.release(probe, "fail")
    assert a.open_until == 11.0 + 20.0  # failed again: twice as long
    now[0] = 40.0
    eps.release(eps.acquire(avoid=[b]), "ok")
    assert a.failures == 0 and a.trips == 0
    eps.release(b, "ok")
    eps.release(b, "ok")


def test_all_set_aside_still_sends_to_the_first_back() -> None:
    now = [0.0]
    a, b = Endpoint("http://a/v1", limit=1), Endpoint("http://b/v1", limit=1)
    eps = EndpointSet([a, b], failures=1, cooldown=5.0, clock=lambda: now[0])
    eps.release(eps.acquire(), "fail")
    eps.release(eps.acquire(), "fail")
    assert a.open_until > 0 and b.open_until > 0
    assert eps.acquire() is min((a, b), key=lambda e: e.open_until)  # never waits for the breaker


# ---------------------------------------------------------------- several real servers
def test_slow_failing_and_dying_endpoints_every_item_judged_once() -> None:
    n = 120
    requests = reqs(n)
    with FakeOpenAIServer(rating) as single:
        reference = backend(single.url, concurrency=8).complete_many(requests)
    assert all(c.ok for c in reference)

    slow = FakeOpenAIServer(rating, latency=0.25).start()
    bad = FakeOpenAIServer(failing).start()
    dying = FakeOpenAIServer(rating, latency=0.02).start()
    good = FakeOpenAIServer(rating, latency=0.01).start()
    servers = [slow, bad, dying, good]
    try:
        b = backend([s.url for s in servers], concurrency=4, endpoint_failures=3, endpoint_cooldown=60.0)

        def kill_when_busy() -> None:
            while dying.chat_calls < 15:
                time.sleep(0.005)
            dying.stop()

        killer = threading.Thread(target=kill_when_busy)
        killer.start()
        out = b.complete_many(requests)
        killer.join(10)
        usage = b.usage()
        b.close()
    finally:
        for s in servers:
            s.stop()

    assert [as_tuple(c) for c in out] == [as_tuple(c) for c in reference]  # same as one endpoint, in order
    counts = judged(servers)
    assert set(counts) == {r.messages[-1][1] for r in requests} and set(counts.values()) == {1}  # once each
    assert usage["requests"] == n and usage["failures"] == 0
    per = usage["endpoints"]
    assert per[bad.url]["set_aside"] >= 1 and per[bad.url]["calls"] <= 3 + 4  # tripped: threshold + in flight
    assert per[dying.url]["set_aside"] >= 1
    assert judged([slow]).total() < judged([good]).total()  # the slow one holds its requests: it gets fewer


def test_one_endpoint_down_for_good_the_run_finishes_on_the_other() -> None:
    with FakeOpenAIServer(rating) as up:
        down = FakeOpenAIServer(rating).start()
        dead_url = down.url
        down.stop()
        b = backend([dead_url, up.url], concurrency=2, endpoint_failures=2, max_retries=3)
        out = b.complete_many(reqs(30))
        b.close()
        assert all(c.ok for c in out) and up.chat_calls == 30


def test_the_cache_names_the_server_and_an_old_cache_is_still_read(tmp_path: Path) -> None:
    """The key holds the judge's server (one model name on two servers may be two models, issue 47); a
    replica set reads what any one of its servers answered alone; caches written by earlier versions
    (the model name alone, or the URL as a string) are read and copied under the current key."""
    path = tmp_path / "c.sqlite"
    with FakeOpenAIServer(rating) as a, FakeOpenAIServer(rating) as b2, FakeOpenAIServer(rating) as c:
        first = CachedBackend(backend(a.url), path)
        one = first.complete_many(reqs(10))
        first.close()
        again = CachedBackend(backend([b2.url, a.url]), path)  # a among the replicas: its replies are read
        two = again.complete_many(reqs(10))
        again.close()
        assert b2.chat_calls == 0 and a.chat_calls == 10 and all(x.cached for x in two)
        assert [as_tuple(x) for x in one] == [as_tuple(x) for x in two]
        other = CachedBackend(backend([c.url, b2.url]), path)  # other servers: asked, never answered from a's
        got = other.complete_many(reqs(10))
        other.close()
        assert c.chat_calls + b2.chat_calls == 10 and not any(x.cached for x in got)

        # a cache written by the previous version, its key the model name alone: found, never paid again
        old_path = tmp_path / "old.sqlite"
        legacy = CachedBackend(backend(a.url), old_path, volatile_fields=VOLATILE_FIELDS)
        legacy.complete_many(reqs(5, "old"))
        legacy.close()
        calls = a.chat_calls, c.chat_calls
        now = CachedBackend(backend([c.url, a.url]), old_path)
        got = now.complete_many(reqs(5, "old"))
        now.close()
        assert (a.chat_calls, c.chat_calls) == calls and all(x.cached for x in got)
        moved = CachedBackend(backend(c.url), old_path)  # the same judge moved to another port: read too
        assert all(x.cached for x in moved.complete_many(reqs(5, "old")))
        moved.close()
        assert c.chat_calls == calls[1]
    with sqlite3.connect(old_path) as db:  # copied under the current keys, which name the servers
        judges = dict(db.execute("SELECT judge, COUNT(*) FROM completions GROUP BY judge").fetchall())
    assert judges[f'{{"backend":"openai","base_url":["{sorted([a.url, c.url])[0]}","{sorted([a.url, c.url])[1]}"],'
                  f'"model":"judge"}}'] == 5
    assert judges[f'{{"backend":"openai","base_url":"{c.url}","model":"judge"}}'] == 5
    for p in tmp_path.iterdir():
        assert KEY.encode() not in p.read_bytes()


def test_signature_names_the_endpoints_without_credentials() -> None:
    b = backend([f"http://u:{KEY}@127.0.0.1:9/v1", "http://127.0.0.1:10/v1/"])
    assert b.signature() == {"backend": "openai", "model": "judge",
                             "base_url": ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]}
    assert b.concurrency == 16 and KEY not in repr(b) and KEY not in str(vars(b))
    b.close()
    e = OpenAICompatBackend("judge", endpoints=[{"base_url": "http://127.0.0.1:9/v1", "concurrency": 3},
                                                {"base_url": "http://127.0.0.1:10/v1"}], concurrency=5, api_key=KEY)
    assert e.concurrency == 8
    e.close()


# ---------------------------------------------------------------- the judge: block
@pytest.mark.parametrize("raw, where", [
    ({"base_url": ["http://127.0.0.1:1/v1", "ftp://x"]}, "base_url[1]"),
    ({"base_url": []}, "base_url"),
    ({"base_url": ["http://a:1/v1", "http://a:1/v1/"]}, "the same URL is listed twice"),
    ({"endpoints": [{"base_url": "http://a:1/v1", "concurrency": 0}]}, "endpoints[0].concurrency"),
    ({"endpoints": [{"url": "http://a:1/v1"}]}, "endpoints[0]: unknown key(s) url"),
    ({"endpoints": [{"base_url": "http://a:1/v1"}], "base_url": "http://b:1/v1"}, "either as base_url or as endpoints"),
    ({"endpoint_failures": 0}, "judge.endpoint_failures"),
    ({"endpoint_cooldown": 0}, "judge.endpoint_cooldown"),
])
def test_judge_options_reject_bad_endpoints(raw: dict, where: str) -> None:
    opts, problems = parse_options(JudgeOptions, {"backend": "openai", **raw}, "judge")
    found = problems + [f"{k}: {m}" for k, m in (opts.problems() if not problems else [])]
    assert any(where in p for p in found), found


def test_judge_options_endpoint_specs() -> None:
    opts, problems = parse_options(JudgeOptions, {"backend": "openai", "concurrency": 6,
                                                  "endpoints": [{"base_url": "http://a:1/v1", "concurrency": 64},
                                                                {"base_url": "http://b:1/v1"}]}, "judge")
    assert not problems and not opts.problems()
    assert opts.endpoint_specs() == [{"base_url": "http://a:1/v1", "concurrency": 64},
                                     {"base_url": "http://b:1/v1", "concurrency": 6}]
    listed, _ = parse_options(JudgeOptions, {"backend": "openai", "base_url": ["http://a:1/v1", "http://b:1/v1"]}, "judge")
    assert [e["base_url"] for e in listed.endpoint_specs()] == ["http://a:1/v1", "http://b:1/v1"]
    single, _ = parse_options(JudgeOptions, {"backend": "openai", "base_url": "http://a:1/v1"}, "judge")
    assert single.endpoint_specs() is None
