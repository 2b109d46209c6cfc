"""CachedBackend: pay once, resume after a kill, never store failures or the key."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from evaluate.backends.base import Backend, Completion, JudgeRequest
from evaluate.backends.cache import CachedBackend
from evaluate.backends.openai_compat import OpenAICompatBackend
from evaluate.core.errors import InputError

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401

KEY = "sk-cache-test-SECRET-0e9d77"
ENV = "EVAL_TEST_CACHE_KEY"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")


def echo(rec: RecordedRequest) -> Reply:
    """Answer depends on the request, with logprobs, so a wrong cache mapping shows."""
    text = rec.user_text
    digit = str(len(text) % 5 + 1)
    return Reply(content=f"{digit}|{text}", top_logprobs=[{digit: -0.25, "0": -1.75}], usage=(20, 3))


@pytest.fixture
def server() -> FakeOpenAIServer:
    with FakeOpenAIServer(echo) as s:
        yield s


def cached(server: FakeOpenAIServer, path: Path, **kw) -> CachedBackend:
    opts = dict(base_url=server.url, api_key_env=ENV, backoff_base=0.01, backoff_max=0.02, timeout=5.0, max_retries=0)
    opts.update(kw)
    return CachedBackend(OpenAICompatBackend("judge-model", **opts), path)


def reqs(n: int, start: int = 0) -> list[JudgeRequest]:
    return [JudgeRequest.chat("judge", f"answer number {i}", top_logprobs=2) for i in range(start, start + n)]


def test_second_run_makes_zero_calls(server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    first = cached(server, path).complete_many(reqs(12))
    assert server.chat_calls == 12 and not any(c.cached for c in first)

    again = cached(server, path, concurrency=3)  # concurrency does not change answers: same cache
    second = again.complete_many(reqs(12))
    assert server.chat_calls == 12  # not one more
    assert all(c.cached for c in second)
    assert [c.to_dict() for c in second] == [c.to_dict() for c in first]
    assert again.usage()["cache_hits"] == 12 and again.usage()["calls"] == 0


def test_hits_first_then_misses_in_order(server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cached(server, path).complete_many(reqs(5)[::2])  # items 0, 2, 4
    server.reset()
    b = cached(server, path)
    out = b.complete_many(reqs(5))
    assert [c.text.split("|")[1] for c in out] == [f"answer number {i}" for i in range(5)]
    assert [c.cached for c in out] == [True, False, True, False, True]
    assert sorted(r.user_text for r in server.chat_requests()) == ["answer number 1", "answer number 3"]
    assert (b.hits, b.misses) == (3, 2)


def test_killed_half_way_resumes_paying_only_for_the_rest(server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    done = []

    def killer(comp: Completion) -> None:
        done.append(comp)
        if len(done) == 7:
            raise KeyboardInterrupt  # what Ctrl-C in the middle of a run looks like here

    with pytest.raises(KeyboardInterrupt):
        cached(server, path, concurrency=4).complete_many(reqs(30), progress=killer)
    paid_first = server.chat_calls
    b = cached(server, path, concurrency=4)
    assert 7 <= paid_first < 30
    assert len(b) == paid_first  # everything paid for was kept, in-flight calls included

    out = b.complete_many(reqs(30))
    assert all(c.ok for c in out)
    assert server.chat_calls - paid_first == 30 - paid_first  # the rest only
    assert sorted(r.user_text for r in server.chat_requests()) == sorted(f"answer number {i}" for i in range(30))


def test_server_failing_after_n_then_resume(tmp_path: Path) -> None:
    state = {"served": 0, "broken": True}
    lock = threading.Lock()

    def flaky(rec: RecordedRequest) -> Reply:
        with lock:
            state["served"] += 1
            if state["broken"] and state["served"] > 6:
                return Reply.server_error(503)
        return echo(rec)

    with FakeOpenAIServer(flaky) as s:
        path = tmp_path / "c.sqlite"
        first = cached(s, path, concurrency=1).complete_many(reqs(15))
        assert [c.ok for c in first] == [True] * 6 + [False] * 9
        assert len(cached(s, path)) == 6  # failures are not stored
        state["broken"] = False
        s.reset()
        second = cached(s, path).complete_many(reqs(15))
        assert all(c.ok for c in second)
        assert s.chat_calls == 9
        assert [c.cached for c in second] == [True] * 6 + [False] * 9


def test_malformed_and_empty_are_invalid_and_not_cached(server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    server.script(Reply.malformed(), Reply.empty())
    out = cached(server, path, concurrency=1).complete_many(reqs(3))
    assert [c.ok for c in out] == [False, False, True]
    assert "malformed" in out[0].error and "empty" in out[1].error
    assert len(cached(server, path)) == 1
    server.reset()
    again = cached(server, path).complete_many(reqs(3))
    assert all(c.ok for c in again) and server.chat_calls == 2


def test_api_key_never_written_to_the_cache_files(server: FakeOpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    path = tmp_path / "c.sqlite"
    server.script(Reply.server_error())
    b = cached(server, path, max_retries=2)
    b.complete_many(reqs(6))
    b.complete(JudgeRequest.chat(None, "single"))
    assert server.chat_requests()[0].headers["authorization"] == f"Bearer {KEY}"  # the key really was in use
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert path in files
    b.close()
    for p in [p for p in tmp_path.rglob("*") if p.is_file()] + files:
        if p.exists():
            assert KEY.encode() not in p.read_bytes(), p
    assert KEY not in caplog.text
    with sqlite3.connect(path) as db:
        judges = {row[0] for row in db.execute("SELECT judge FROM completions")}
    # the judge's identity: its model on its server (never the key)
    assert judges == {'{"backend":"openai","base_url":"%s","model":"judge-model"}' % server.url}


def test_a_different_model_does_not_share_answers(server: FakeOpenAIServer, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cached(server, path).complete_many(reqs(3))
    other = CachedBackend(OpenAICompatBackend("other-model", base_url=server.url, api_key_env=ENV, max_retries=0), path)
    out = other.complete_many(reqs(3))
    assert server.chat_calls == 6 and not any(c.cached for c in out)


def test_duplicates_in_a_batch_are_sent_once(server: FakeOpenAIServer, tmp_path: Path) -> None:
    r = reqs(2)
    got = []
    out = cached(server, tmp_path / "c.sqlite").complete_many([r[0], r[1], r[0], r[0]], progress=got.append)
    assert server.chat_calls == 2
    assert [c.text for c in out] == [out[0].text, out[1].text, out[0].text, out[0].text]
    assert len(got) == 4


def test_concurrent_complete_from_threads(server: FakeOpenAIServer, tmp_path: Path) -> None:
    b = cached(server, tmp_path / "c.sqlite")
    items = reqs(24)
    results: dict[int, Completion] = {}

    def worker(i: int) -> None:
        results[i] = b.complete(items[i])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[i].text.endswith(f"answer number {i}") for i in range(24))
    assert len(b) == 24
    assert [c.cached for c in b.complete_many(items)] == [True] * 24


class CountingBackend(Backend):
    """A backend without `complete_many_indexed`: the cache must fall back to chunks."""

    kind = "counting"

    def __init__(self) -> None:
        super().__init__("count-model")
        self.batches: list[int] = []

    def complete(self, request: JudgeRequest) -> Completion:
        return Completion(text=f"len={len(request.messages[-1][1])}")

    def complete_many(self, requests, progress=None):  # type: ignore[override]
        self.batches.append(len(requests))
        return super().complete_many(requests, progress)


def test_plain_backends_are_cached_chunk_by_chunk(tmp_path: Path) -> None:
    inner = CountingBackend()
    b = CachedBackend(inner, tmp_path / "c.sqlite", chunk_size=4)
    out = b.complete_many(reqs(10))
    assert inner.batches == [4, 4, 2]
    assert [c.text for c in out] == [f"len={len(f'answer number {i}')}" for i in range(10)]
    assert [c.cached for c in b.complete_many(reqs(10))] == [True] * 10
    assert inner.batches == [4, 4, 2]


def test_a_file_that_is_not_sqlite_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "cache.sqlite"
    bad.write_bytes(b"this is not a database at all, just text " * 50)
    with pytest.raises(InputError, match="cache.sqlite"):
        CachedBackend(CountingBackend(), bad)


def test_one_progress_bar_counts_ok_failed_cached(server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluate.backends import retry as runner

    bars: list[runner.Progress] = []
    real = runner.Progress

    def spy(total: int, desc: str = "") -> runner.Progress:
        bars.append(real(total, desc))
        return bars[-1]

    monkeypatch.setattr(runner, "Progress", spy)
    path = tmp_path / "c.sqlite"
    cached(server, path).complete_many(reqs(4))
    server.script(Reply.server_error())
    cached(server, path).complete_many(reqs(7))  # 4 hits, 3 misses of which the first fails
    assert len(bars) == 2  # one per top-level call: the wrapped backend reused the cache's bar
    assert (bars[1].ok, bars[1].failed, bars[1].cached) == (2, 1, 4)
