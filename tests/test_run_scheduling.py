"""The run-wide pool: judge-bound units side by side, battles started early, several endpoints.

A run with three models, every example category, two GPT metrics, BLEU (a unit that stays in the
runner's thread) and battles is made twice: sequentially against one server, and side by side
against two replicas. The files must be the same, key order and item order included (apart from
run ids, times and the judge's URL in the signatures), and each request must be sent once.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from evaluate.pipeline.config import parse_config
from evaluate.pipeline.run import run
from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
VOLATILE = {"run_id", "runs", "started", "finished", "created", "time", "base_url", "updated", "last_run"}


def reply(rec: RecordedRequest) -> Reply:
    h = hashlib.sha256(rec.user_text.encode()).digest()
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content=f"{h[0] % 10 + 1} {h[1] % 10 + 1}\nbecause")
    probs = {str(h[0] % 5 + 1): 0.6, str((h[0] + 1) % 5 + 1): 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


def answers(tmp: Path) -> list[dict[str, str]]:
    c = json.loads((EN / "answers_model_b.json").read_text())
    for i, r in enumerate(c):
        r["output"] = f"{r['output']} (variant {i % 3})"
    (tmp / "model_c.json").write_text(json.dumps(c))
    return [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
            {"name": "model_b", "path": str(EN / "answers_model_b.json")},
            {"name": "model_c", "path": str(tmp / "model_c.json")}]


def config(tmp: Path, save: str, **judge: Any):
    cats = {c: {"GPT": ["relevance", "language organization"], **({"Metrics": ["BLEU"]} if i % 2 else {})}
            for i, c in enumerate(["brainstorming", "chat", "classification", "closed_qa", "extraction",
                                   "generation", "open_qa", "rewriting", "roleplay", "summarization"])}
    raw = {"language": "en", "save_path": str(tmp / save), "category": cats, "answers": answers(tmp),
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "api_key_env": "SCHED_KEY", "mode": "logprobs",
                     "max_retries": 2, "timeout": 10, **judge}}
    return parse_config(raw, tmp / "c.json")


def strip(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def files(save: Path) -> dict[str, Any]:
    out = {}
    for p in sorted(save.rglob("*")):
        rel = str(p.relative_to(save))
        if p.suffix == ".json" and not rel.startswith(("runs/", "manifest")):
            out[rel] = json.dumps(strip(json.loads(p.read_text())))  # order kept: dumps of the dict as read
        elif p.suffix == ".csv":
            out[rel] = p.read_text()
    return out


def test_side_by_side_on_two_replicas_equals_sequential_on_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SCHED_KEY", "sk-sched-test-never-written-1234")
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")
    logs: list[str] = []
    with FakeOpenAIServer(reply) as one:
        seq = run(config(tmp_path, "seq", base_url=one.url, concurrency=4), families=["GPT", "Metrics"],
                  charts=False, parallel=False, log=lambda s: None)
        sequential_calls = one.chat_calls
    with FakeOpenAIServer(reply, latency=0.005) as r1, FakeOpenAIServer(reply) as r2:
        par = run(config(tmp_path, "par", endpoints=[{"base_url": r1.url, "concurrency": 3},
                                                     {"base_url": r2.url, "concurrency": 5}]),
                  families=["GPT", "Metrics"], charts=False, log=logs.append)
        texts = [r.user_text for s in (r1, r2) for r in s.chat_requests() if r.answered == 200]
    assert seq["status"] == par["status"] == "ok", (seq["errors"], par["errors"])
    assert any("side by side" in line for line in logs)
    assert len(texts) == len(set(texts)) == sequential_calls  # each request once, none lost
    plan = par["plan"]["work"]["GPT"]
    assert sequential_calls == plan["judge_calls"] + plan["battle_calls"]
    a, b = files(tmp_path / "seq"), files(tmp_path / "par")
    assert "battles/model_a__vs__model_b.json" in a and "results/model_c.json" in a
    assert list(a) == list(b)
    for name in a:
        assert a[name] == b[name], name
    assert par["outputs"] == json.loads(json.dumps(par["outputs"]))
    assert list(par["outputs"]) == list(seq["outputs"])
    usage = par["usage"]["(judge)"]
    assert usage["failures"] == 0 and set(usage["endpoints"]) == {r1.url, r2.url}


def test_a_stopped_run_ends_at_once_and_keeps_what_was_paid(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SCHED_KEY", "sk-sched-test-never-written-1234")
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")

    def stop_on_first_result(line: str) -> None:
        if " items in " in line:
            raise KeyboardInterrupt

    with FakeOpenAIServer(reply, latency=0.02) as one:
        try:
            run(config(tmp_path, "stop", base_url=one.url, concurrency=2), families=["GPT"], charts=False,
                log=stop_on_first_result)
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("the interrupt was swallowed")
        sent = one.chat_calls
        manifest = json.loads((tmp_path / "stop" / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        assert 0 < sent < 300  # 150 ratings + 150 battle calls in all: stopped before the end
        import sqlite3

        with sqlite3.connect(tmp_path / "stop" / "judge_cache.sqlite") as db:
            stored = db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
        answered = sum(1 for r in one.chat_requests() if r.answered == 200)
        assert stored == answered  # every reply that came back is in the cache
