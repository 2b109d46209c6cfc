"""OpenAICompatBackend against a real local HTTP server speaking the OpenAI protocol."""

from __future__ import annotations

import logging
import math
import random
import threading
import time

import pytest

from evaluate.backends.base import BackendError, JudgeRequest
from evaluate.backends.openai_compat import OpenAICompatBackend, _merge_top, scrub_url
from evaluate.backends.retry import RetryPolicy, call_with_retries
from evaluate.core.errors import InputError

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path (pytest's rootdir-less import mode)
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401

KEY = "sk-test-THIS-MUST-NEVER-LEAK-8c1f"
ENV = "EVAL_TEST_JUDGE_KEY"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")


def make(server: FakeOpenAIServer, **kw) -> OpenAICompatBackend:
    opts = dict(base_url=server.url, api_key_env=ENV, backoff_base=0.01, backoff_max=0.05, timeout=5.0)
    opts.update(kw)
    return OpenAICompatBackend("judge-model", **opts)


def req(text: str = "Rate this answer.", **kw) -> JudgeRequest:
    return JudgeRequest.chat("You are a strict judge.", text, **kw)


# ---------------------------------------------------------------- mapping request and response
def test_request_is_sent_as_openai_chat_params(fake_openai: FakeOpenAIServer) -> None:
    b = make(fake_openai)
    b.complete(req("hello", max_tokens=7, temperature=0.3, stop=("\n",), seed=11))
    body = fake_openai.chat_requests()[0].body
    assert body["model"] == "judge-model"
    assert body["messages"] == [{"role": "system", "content": "You are a strict judge."}, {"role": "user", "content": "hello"}]
    assert (body["max_tokens"], body["temperature"], body["stop"], body["seed"]) == (7, 0.3, ["\n"], 11)
    assert "logprobs" not in body and "top_logprobs" not in body  # not asked for: not sent


def test_logprobs_are_parsed_to_topk_dicts(fake_openai: FakeOpenAIServer) -> None:
    positions = [{"4": -0.1, "5": -2.4, "3": -3.1, "2": -6.0}, {".": -0.01, "!": -4.7, ",": -5.2, " ": -9.0}]
    fake_openai.script(Reply(content="4.", top_logprobs=positions, usage=(123, 2), finish_reason="length"))
    comp = make(fake_openai).complete(req(top_logprobs=3))
    sent = fake_openai.chat_requests()[0].body
    assert sent["logprobs"] is True and sent["top_logprobs"] == 3
    assert comp.text == "4."
    assert comp.top_logprobs == [{"4": -0.1, "5": -2.4, "3": -3.1}, {".": -0.01, "!": -4.7, ",": -5.2}]
    assert (comp.prompt_tokens, comp.completion_tokens, comp.finish_reason) == (123, 2, "length")


def test_server_without_logprobs_gives_empty_list(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply(content="Score: 4", top_logprobs=None, usage=None))
    comp = make(fake_openai).complete(req(top_logprobs=5))
    assert comp.ok and comp.text == "Score: 4"
    assert comp.top_logprobs == [] and comp.prompt_tokens == 0


def test_same_text_tokens_add_their_probabilities() -> None:
    entries = [{"token": "4", "logprob": -1.0}, {"token": "4", "logprob": -2.0}, {"token": "5", "logprob": -3.0}, {"token": "6"}]
    merged = _merge_top(entries)
    assert merged["4"] == pytest.approx(math.log(math.exp(-1.0) + math.exp(-2.0)))
    assert merged["5"] == -3.0


def test_complete_many_keeps_order_and_bounds_concurrency() -> None:
    inflight = peak = 0
    lock = threading.Lock()

    def echo(rec: RecordedRequest) -> Reply:
        nonlocal inflight, peak
        with lock:
            inflight += 1
            peak = max(peak, inflight)
        time.sleep(0.15)
        with lock:
            inflight -= 1
        return Reply(content=rec.user_text.upper())

    with FakeOpenAIServer(echo) as server:
        b = make(server, concurrency=6)
        texts = [f"item {i}" for i in range(24)]
        seen = []
        t0 = time.monotonic()
        out = b.complete_many([req(t) for t in texts], progress=seen.append)
        elapsed = time.monotonic() - t0
    assert [c.text for c in out] == [t.upper() for t in texts]
    assert len(seen) == 24 and all(c.ok for c in seen)
    assert peak == 6  # reached the bound, never above it
    assert elapsed < 24 * 0.15 / 2  # serial would take 3.6 s; 6-wide takes about 0.6 s


# ---------------------------------------------------------------- retries and faults
def test_429_retry_after_is_honoured_then_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.rate_limited(1.0), Reply(content="5"))
    b = make(fake_openai)
    comp = b.complete(req())
    first, second = fake_openai.chat_requests()
    gap = second.time - first.time
    assert comp.text == "5"
    assert 1.0 <= gap < 1.0 * 1.1 + 0.5  # at least Retry-After, at most its 10 % jitter plus slack
    assert b.usage()["calls"] == 2 and b.usage()["retries"] == 1 and b.usage()["failures"] == 0


def test_persistent_500_is_invalid_after_max_retries_plus_one_tries(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reply_fn = lambda rec: Reply.server_error(500)
    b = make(fake_openai, max_retries=3, concurrency=2)
    out = b.complete_many([req("a"), req("b")])
    assert [c.ok for c in out] == [False, False]
    assert all("HTTP 500" in c.error for c in out)
    assert fake_openai.chat_calls == 2 * (3 + 1)
    u = b.usage()
    assert (u["requests"], u["calls"], u["retries"], u["failures"]) == (2, 8, 6, 2)


def test_hang_times_out_is_retried_then_invalid(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reply_fn = lambda rec: Reply.stall(5.0)
    b = make(fake_openai, timeout=0.3, max_retries=1)
    t0 = time.monotonic()
    [comp] = b.complete_many([req()])
    elapsed = time.monotonic() - t0
    assert not comp.ok and "timed out" in comp.error
    assert fake_openai.chat_calls == 2
    assert elapsed < 2.0  # two 0.3 s timeouts, not the 5 s stall


def test_hang_once_then_success(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.stall(5.0), Reply(content="3"))
    comp = make(fake_openai, timeout=0.3).complete(req())
    assert comp.text == "3" and fake_openai.chat_calls == 2


def test_malformed_json_is_retried_then_invalid(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reply_fn = lambda rec: Reply.malformed()
    b = make(fake_openai, max_retries=2)
    [comp] = b.complete_many([req()])
    assert not comp.ok and "malformed" in comp.error
    assert fake_openai.chat_calls == 3


def test_malformed_once_then_success(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.malformed(), Reply(content="2"))
    assert make(fake_openai).complete(req()).text == "2"


def test_empty_content_is_invalid_and_not_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reply_fn = lambda rec: Reply.empty()
    b = make(fake_openai)
    [comp] = b.complete_many([req()])
    assert not comp.ok and "empty content" in comp.error
    assert fake_openai.chat_calls == 1
    with pytest.raises(BackendError) as info:
        b.complete(req())
    assert info.value.retryable is False


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(fake_openai: FakeOpenAIServer, status: int) -> None:
    fake_openai.reply_fn = lambda rec: Reply.client_error(status)
    [comp] = make(fake_openai).complete_many([req()])
    assert not comp.ok and f"HTTP {status}" in comp.error
    assert fake_openai.chat_calls == 1


def test_retry_policy_full_jitter_and_retry_after_bounds() -> None:
    pol = RetryPolicy(max_retries=5, backoff_base=0.5, backoff_max=4.0)
    rng = random.Random(0)
    for attempt in range(8):
        cap = min(4.0, 0.5 * 2**attempt)
        draws = [pol.delay(attempt, None, rng) for _ in range(200)]
        assert all(0.0 <= d <= cap for d in draws)
        assert max(draws) > 0.8 * cap  # full jitter spans the whole range
    assert all(2.0 <= pol.delay(0, 2.0, rng) <= 2.2 for _ in range(100))


def test_retry_after_longer_than_allowed_fails_at_once() -> None:
    calls = []

    def fn() -> str:
        calls.append(1)
        raise BackendError("429", retryable=True, retry_after=3600)

    with pytest.raises(BackendError) as info:
        call_with_retries(fn, RetryPolicy(max_retries=5), sleep=lambda s: pytest.fail("must not sleep"))
    assert len(calls) == 1 and "3600" in str(info.value)


# ---------------------------------------------------------------- accounting and identity
def test_usage_totals_and_cost(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.reply_fn = lambda rec: Reply(content="4", usage=(1000, 10))
    b = make(fake_openai, price={"prompt": 2.5, "completion": 10.0})
    b.complete_many([req(str(i)) for i in range(4)])
    u = b.usage()
    assert (u["requests"], u["calls"], u["prompt_tokens"], u["completion_tokens"]) == (4, 4, 4000, 40)
    assert u["cost_usd"] == pytest.approx(4000 * 2.5 / 1e6 + 40 * 10.0 / 1e6)


def test_signature_scrubs_url_and_never_has_the_key(fake_openai: FakeOpenAIServer) -> None:
    b = OpenAICompatBackend("m", base_url=f"http://user:{KEY}@127.0.0.1:9/v1/?api-key={KEY}&api-version=2024", api_key=KEY)
    sig = b.signature()
    assert sig == {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1?api-version=2024"}
    assert KEY not in repr(b) and KEY not in str(vars(b))
    assert scrub_url("https://api.openai.com/v1/") == "https://api.openai.com/v1"


def test_key_only_in_authorization_header_and_never_logged(fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, the openai client's and httpx's included
    # A proxy that echoes the key in its error body must not get it into our error message.
    fake_openai.script(Reply.server_error(), Reply(content="ok"), Reply(status=401, raw_body=f'{{"error": {{"message": "bad key {KEY}"}}}}'.encode()))
    b = make(fake_openai)
    good = b.complete(req("one"))
    [bad] = b.complete_many([req("two")])
    assert good.ok and not bad.ok
    assert KEY not in bad.error and "***" in bad.error
    for rec in fake_openai.chat_requests():
        auth = [v for k, v in rec.headers.items() if k.lower() == "authorization"]
        assert auth == [f"Bearer {KEY}"]
        others = {k: v for k, v in rec.headers.items() if k.lower() != "authorization"}
        assert KEY not in str(others) and KEY.encode() not in rec.raw and KEY not in rec.path
    assert caplog.records  # something was logged (retry and failure), and none of it holds the key
    assert KEY not in caplog.text
    assert KEY not in str(b.signature()) and KEY not in repr(b) and KEY not in str(b.usage())


def test_explicit_key_wins_over_env(fake_openai: FakeOpenAIServer) -> None:
    make(fake_openai, api_key="sk-explicit").complete(req())
    assert fake_openai.chat_requests()[0].headers["authorization"] == "Bearer sk-explicit"


def test_missing_key_is_an_input_error_for_openai_but_fine_locally(fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(InputError, match=ENV):
        OpenAICompatBackend("gpt-4o-mini", api_key_env=ENV)
    assert make(fake_openai).complete(req()).ok  # a local server needs no key


@pytest.mark.parametrize("bad", [dict(concurrency=0), dict(max_retries=-1), dict(timeout=0), dict(price={"prompt": 1.0})])
def test_bad_options_are_input_errors(fake_openai: FakeOpenAIServer, bad: dict) -> None:
    with pytest.raises(InputError, match=next(iter(bad))):
        make(fake_openai, **bad)


def test_models_endpoint_lists_the_fake_model(fake_openai: FakeOpenAIServer) -> None:
    import openai

    client = openai.OpenAI(base_url=fake_openai.url, api_key="x", max_retries=0)
    assert [m.id for m in client.models.list()] == ["fake-judge"]
