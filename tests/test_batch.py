"""Provider batch jobs (`judge.batch: true`) against a fake server with /v1/files and /v1/batches."""

from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluate.backends.base import JudgeRequest
from evaluate.backends.options import JudgeOptions
from evaluate.backends.pool import open_backend
from evaluate.cli import main

try:
    from tests.fake_batch_server import FakeBatchServer, fake_batch  # noqa: F401
    from tests.fake_openai_server import Reply
except ImportError:
    from fake_batch_server import FakeBatchServer, fake_batch  # noqa: F401
    from fake_openai_server import Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
KEY = "sk-batch-NEVER-WRITTEN-4242"


def echo(rec):
    """Deterministic: the reply names the request, so a result mapped to the wrong request shows."""
    return Reply(content="reply to " + rec.user_text, top_logprobs=[{"5": math.log(0.8), "4": math.log(0.2)}])


def backend(server, tmp_path, **kw):
    opts = JudgeOptions(backend="openai", model="fake-judge", base_url=server.url, api_key_env="BATCH_KEY",
                        batch=True, batch_poll=0.02, **kw)
    b = open_backend(opts, tmp_path / "cache.sqlite", api_key=KEY)
    return b


def reqs(n, start=0, top=0):
    return [JudgeRequest.chat(None, f"question {i}", max_tokens=8, top_logprobs=top) for i in range(start, start + n)]


def test_completed_batch_fills_the_cache_and_is_never_paid_twice(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    b = backend(fake_batch, tmp_path)
    got = b.complete_many(reqs(5, top=2))
    assert [c.text for c in got] == [f"reply to question {i}" for i in range(5)]
    assert all(c.ok and c.top_logprobs[0]["5"] == pytest.approx(math.log(0.8)) for c in got)
    assert fake_batch.chat_calls == 0 and len(fake_batch.batches) == 1
    assert b.usage()["batches"] == 1
    again = b.complete_many(reqs(6, top=2))  # five from the cache, one new batch of one
    assert [c.cached for c in again] == [True] * 5 + [False]
    assert sorted(fake_batch.created_ids()) == sorted(set(fake_batch.created_ids()))
    assert len(fake_batch.batches) == 2
    b.close()
    # the upload holds requests, never the key
    assert all(KEY.encode() not in u for u in fake_batch.uploads)
    lines = [json.loads(x) for x in fake_batch.uploads[0].decode().splitlines()]
    assert lines[0]["method"] == "POST" and lines[0]["url"] == "/v1/chat/completions"
    assert lines[0]["body"]["model"] == "fake-judge" and lines[0]["body"]["max_tokens"] == 8
    b2 = backend(fake_batch, tmp_path / "priced", price={"prompt": 2.0, "completion": 4.0})
    b2.complete_many(reqs(2, start=900))
    u = b2.usage()  # the fake reports 10 prompt and 1 completion tokens a reply; batch = half price
    assert u["batch_prompt_tokens"] == 20 and u["cost_usd"] == pytest.approx((20 * 2.0 + 2 * 4.0) / 1e6 / 2)
    b2.close()


def test_split_at_the_request_and_byte_limits(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    b = backend(fake_batch, tmp_path)
    b.inner.max_requests = 3
    got = b.inner.complete_many(reqs(7))
    assert all(c.ok for c in got) and len(fake_batch.batches) == 3
    b.inner.max_requests, b.inner.max_bytes = 1000, 1024  # each line is about 200 bytes
    got = b.inner.complete_many(reqs(12, start=100))
    assert all(c.ok for c in got)
    assert len(fake_batch.batches) > 4
    assert all(len(u) <= 1024 for u in fake_batch.uploads[3:])
    b.close()


def test_partly_failed_batch_retries_the_retryable_in_a_later_batch(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    fake_batch.outcomes = ["partial"]  # every other line: HTTP 500 in the error file
    b = backend(fake_batch, tmp_path)
    got = b.complete_many(reqs(6))
    assert [c.text for c in got] == [f"reply to question {i}" for i in range(6)]
    first, second = fake_batch.batches.values()
    assert len(second["custom_ids"]) == 3 and set(second["custom_ids"]) < set(first["custom_ids"])
    b.close()


def test_client_errors_are_recorded_invalid_with_the_reason_and_not_cached(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    fake_batch.outcomes = ["bad_request"]
    b = backend(fake_batch, tmp_path)
    got = b.complete_many(reqs(4))
    assert [c.ok for c in got] == [True, False, True, False]
    assert "HTTP 400" in got[1].error and "scripted 400" in got[1].error
    assert len(fake_batch.batches) == 1  # a 400 is not retried
    again = b.complete_many(reqs(4))  # not cached; the same process does not send them again
    assert [c.cached for c in again] == [True, False, True, False] and "HTTP 400" in again[1].error
    assert len(fake_batch.batches) == 1
    b.close()
    b = backend(fake_batch, tmp_path)  # a later run asks again for the failures only
    b.complete_many(reqs(4))
    assert len(fake_batch.batches) == 2 and len(list(fake_batch.batches.values())[1]["custom_ids"]) == 2
    b.close()


def test_expired_batch_resubmits_the_rest_and_cancelled_batch_records_them(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    fake_batch.outcomes = ["expired"]
    b = backend(fake_batch, tmp_path)
    got = b.complete_many(reqs(4))
    assert all(c.ok for c in got) and len(fake_batch.batches) == 2
    assert len(list(fake_batch.batches.values())[1]["custom_ids"]) == 2
    fake_batch.outcomes = ["cancelled"]
    got = b.complete_many(reqs(4, start=10))
    assert [c.ok for c in got] == [True, True, False, False]
    assert "cancelled" in got[3].error
    fake_batch.outcomes = ["failed"]
    got = b.complete_many(reqs(2, start=20))
    assert not any(c.ok for c in got) and "refused" in got[0].error and "the file was refused" in got[0].error
    b.close()


def test_retryable_failures_stop_after_the_resubmits(fake_batch, tmp_path):
    fake_batch.reply_fn = echo
    fake_batch.outcomes = ["partial"] + ["server_error"] * 10
    b = backend(fake_batch, tmp_path)
    got = b.complete_many(reqs(2))
    assert got[0].ok and not got[1].ok and "resubmitted 2 times" in got[1].error
    assert len(fake_batch.batches) == 3  # the first and two resubmits
    b.close()


def test_options_are_validated(tmp_path):
    from evaluate.core.options import parse_options

    _, problems = parse_options(JudgeOptions, {"batch": True}, "judge")
    assert any("judge.batch" in p and "backend: openai" in p for p in problems), problems
    _, problems = parse_options(JudgeOptions, {"batch": True, "backend": "openai", "cache": False}, "judge")
    assert any("keep judge.cache on" in p for p in problems), problems
    _, problems = parse_options(JudgeOptions, {"batch": "yes"}, "judge")
    assert problems


# ------------------------------------------------------------------------------ end to end, with a kill
def write_config(tmp_path, server, name, batch=True):
    cfg = {"language": "en", "save_path": str(tmp_path / name),
           "category": {"closed_qa": {"GPT": ["relevance"]}, "classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "BATCH_KEY",
                     "mode": "generate", "max_retries": 0, "batch": batch, "batch_poll": 0.05}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def rating(rec):
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        return Reply(content="7 3\nfirst")
    return Reply(content=str(1 + len(text) % 5))


def scores(path):
    data = json.loads(path.read_text())
    return {i["id"]: (i["scores"], sorted(i["invalid"])) for i in data["items"]}


def test_killed_while_polling_resumes_the_same_batches(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BATCH_KEY", KEY)
    with FakeBatchServer(rating) as ref_server:
        ref = write_config(tmp_path, ref_server, "ref", batch=False)
        assert main(["--config", str(ref), "--no-charts"]) == 0
    with FakeBatchServer(rating) as server:
        cfg = write_config(tmp_path, server, "out")
        server.hold.set()
        env = {**os.environ, "BATCH_KEY": KEY, "EVAL_NO_PROGRESS": "1"}
        proc = subprocess.Popen([sys.executable, "eval.py", "--config", str(cfg), "--no-charts"], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not any(r.method == "GET" and "/batches/" in r.path for r in list(server.requests)):
                assert proc.poll() is None, "the run ended before it polled a batch"
                assert time.monotonic() < deadline, "no batch was polled"
                time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        first = list(server.batches)
        assert len(first) == 1
        jobs = sqlite3.connect(tmp_path / "out" / "judge_cache.sqlite").execute(
            "SELECT state, batch_id FROM batch_jobs").fetchall()
        assert jobs == [("open", first[0])]
        server.hold.clear()
        assert main(["--config", str(cfg), "--no-charts"]) == 0, capsys.readouterr().err
        ids = server.created_ids()
        assert len(ids) == len(set(ids)), "a request was sent in two batches"
        # the whole run (ratings of both models, both categories, battles) was one batch job
        assert list(server.batches) == first and len(ids) == 2 * (2 + 3) + 2 * 5
        assert server.chat_calls == 0
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["usage"]["(judge)"]["resumed_batches"] == 1
    for model in ("model_a", "model_b"):
        assert scores(tmp_path / "out" / "results" / f"{model}.json") == \
            scores(tmp_path / "ref" / "results" / f"{model}.json")
    a = json.loads((tmp_path / "out" / "battles" / "model_a__vs__model_b.json").read_text())
    b = json.loads((tmp_path / "ref" / "battles" / "model_a__vs__model_b.json").read_text())
    assert a["summary"] == b["summary"] and a["summary"]["items"] == 5
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_a_batch_created_but_not_recorded_is_found_by_its_file_not_created_again(fake_batch, tmp_path):
    """Killed between batches.create and recording its id: the next start finds it on the server."""
    from evaluate.backends.batch import batch_line, request_body

    fake_batch.reply_fn = echo
    b = backend(fake_batch, tmp_path)
    batch = b.inner
    rs = reqs(3)
    keys = [b.key(r) for r in rs]
    job = batch.store.add(batch._judge(), list(zip(keys, rs)))
    data = "".join(batch_line(k, request_body("fake-judge", r)) + "\n" for k, r in zip(keys, rs)).encode()
    file_id = batch._client.files.create(file=("x.jsonl", data), purpose="batch").id
    batch.store.update(job, state="creating", input_file=file_id)
    batch._client.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert len(fake_batch.batches) == 1
    got = b.complete_many(rs)
    assert [c.text for c in got] == [f"reply to question {i}" for i in range(3)]
    assert len(fake_batch.batches) == 1  # adopted, not created again
    # and one uploaded but never created is created once from the same file
    rs2 = reqs(2, start=50)
    keys2 = [b.key(r) for r in rs2]
    job2 = batch.store.add(batch._judge(), list(zip(keys2, rs2)))
    data2 = "".join(batch_line(k, request_body("fake-judge", r)) + "\n" for k, r in zip(keys2, rs2)).encode()
    file2 = batch._client.files.create(file=("y.jsonl", data2), purpose="batch").id
    batch.store.update(job2, state="creating", input_file=file2)
    got = b.complete_many(rs2)
    assert all(c.ok for c in got) and len(fake_batch.batches) == 2
    assert [x["state"] for x in batch.store.jobs()] == ["done", "done"]
    b.close()
