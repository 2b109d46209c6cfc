"""--export-requests / --import-results: any batch engine judges, the next run pays nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from evaluate.cli import main

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
KEY = "sk-export-NEVER-WRITTEN-31337"


def rating(rec):
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content="8 4\nfirst is better")
    return Reply(content=str(1 + len(rec.user_text) % 5))


def write_config(tmp_path, url, name, model="fake-judge"):
    cfg = {"language": "en", "save_path": str(tmp_path / name),
           "category": {"closed_qa": {"GPT": ["relevance", "correctness"]}, "classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": model, "base_url": url, "api_key_env": "EXP_KEY",
                     "mode": "generate", "max_retries": 0}}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def run_batch(server: FakeOpenAIServer, src: Path, dst: Path, model: str | None = None) -> None:
    """What vLLM's run_batch does with the file: one output line per input line, same custom_id."""
    lines = []
    for i, line in enumerate(src.read_text().splitlines()):
        req = json.loads(line)
        rec = RecordedRequest("POST", req["url"], {}, json.dumps(req["body"]).encode(), 0.0)
        reply = server.reply_fn(rec)
        body = server._completion_body(rec, Reply(content=reply) if isinstance(reply, str) else reply)
        if model:
            body["model"] = model
        lines.append({"id": f"vllm-{i}", "custom_id": req["custom_id"],
                      "response": {"status_code": 200, "request_id": f"vllm-batch-{i}", "body": body}, "error": None})
    dst.write_text("".join(json.dumps(x) + "\n" for x in lines))


def items(path):
    return {i["id"]: (i["scores"], sorted(i["invalid"])) for i in json.loads(path.read_text())["items"]}


def test_round_trip_export_judge_import_then_zero_calls(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXP_KEY", KEY)
    with FakeOpenAIServer(rating) as server:
        ref = write_config(tmp_path, server.url, "ref")
        assert main(["--config", str(ref), "--no-charts"]) == 0
        direct_calls = server.chat_calls
        server.reset()

        cfg = write_config(tmp_path, server.url, "out")
        req_file = tmp_path / "requests.jsonl"
        assert main(["--config", str(cfg), "--export-requests", str(req_file)]) == 0
        assert server.chat_calls == 0
        assert not (tmp_path / "out" / "results").exists()  # nothing scored, nothing written
        lines = [json.loads(x) for x in req_file.read_text().splitlines()]
        assert len(lines) == direct_calls == 2 * (2 * 2 + 3) + 2 * 5
        assert len({x["custom_id"] for x in lines}) == len(lines)
        assert all(x["method"] == "POST" and x["url"] == "/v1/chat/completions" and x["body"]["model"] == "fake-judge"
                   for x in lines)
        assert KEY not in req_file.read_text()

        out_file = tmp_path / "results.jsonl"
        run_batch(server, req_file, out_file)
        capsys.readouterr()
        assert main(["--config", str(cfg), "--import-results", str(out_file)]) == 0
        assert f"imported {len(lines)} results" in capsys.readouterr().out
        assert main(["--config", str(cfg), "--export-requests", str(req_file)]) == 0
        assert req_file.read_text() == ""  # nothing left to judge

        assert main(["--config", str(cfg), "--no-charts"]) == 0
        assert server.chat_calls == 0  # the run completed from the cache
    for model in ("model_a", "model_b"):
        assert items(tmp_path / "out" / "results" / f"{model}.json") == items(tmp_path / "ref" / "results" / f"{model}.json")
    a = json.loads((tmp_path / "out" / "battles" / "model_a__vs__model_b.json").read_text())
    b = json.loads((tmp_path / "ref" / "battles" / "model_a__vs__model_b.json").read_text())
    assert a["summary"] == b["summary"]


def test_import_refuses_unknown_ids_and_other_models_and_stores_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXP_KEY", KEY)
    with FakeOpenAIServer(rating) as server:
        cfg = write_config(tmp_path, server.url, "out")
        req_file, out_file = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
        assert main(["--config", str(cfg), "--export-requests", str(req_file)]) == 0
        run_batch(server, req_file, out_file)
        good = out_file.read_text().splitlines()

        bad = json.loads(good[3])
        bad["custom_id"] = "0" * 64
        out_file.write_text("\n".join(good[:3] + [json.dumps(bad)] + good[4:]) + "\n")
        capsys.readouterr()
        assert main(["--config", str(cfg), "--import-results", str(out_file)]) == 2
        err = capsys.readouterr().err
        assert "results.jsonl:4" in err and "not a request of this run" in err and "nothing was stored" in err

        run_batch(server, req_file, out_file, model="another-model")
        assert main(["--config", str(cfg), "--import-results", str(out_file)]) == 2
        err = capsys.readouterr().err
        assert 'from model "another-model"' in err and '"fake-judge"' in err
        cache = tmp_path / "out" / "judge_cache.sqlite"
        assert not cache.exists() or sqlite3.connect(cache).execute("SELECT COUNT(*) FROM completions").fetchone()[0] == 0

        # results of another config's judge (another model name) are unknown ids for this one
        other = write_config(tmp_path, server.url, "other", model="judge-2")
        assert main(["--config", str(other), "--import-results", str(tmp_path / "nope.jsonl")]) == 2
        assert "no such file" in capsys.readouterr().err
        (tmp_path / "good.jsonl").write_text("\n".join(good) + "\n")
        assert main(["--config", str(other), "--import-results", str(tmp_path / "good.jsonl")]) == 2
        assert "not a request of this run" in capsys.readouterr().err

        # failed lines are counted, not stored: they are exported again
        rows = [json.loads(x) for x in good]
        rows[0] = {"id": "x", "custom_id": rows[0]["custom_id"], "response": {"status_code": 400, "body": {
            "error": {"message": "context too long"}}}, "error": None}
        out_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert main(["--config", str(cfg), "--import-results", str(out_file)]) == 0
        assert "failed lines: 1" in capsys.readouterr().out
        assert main(["--config", str(cfg), "--export-requests", str(req_file)]) == 0
        assert [json.loads(x)["custom_id"] for x in req_file.read_text().splitlines()] == [rows[0]["custom_id"]]
        assert server.chat_calls == 0


def test_dry_run_estimates_tokens_and_cost_with_and_without_batch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXP_KEY", KEY)
    with FakeOpenAIServer(rating) as server:
        cfg = write_config(tmp_path, server.url, "out")
        data = json.loads(cfg.read_text())
        data["judge"]["price"] = {"prompt": 2.0, "completion": 8.0}
        cfg.write_text(json.dumps(data))
        assert main(["--config", str(cfg), "--dry-run"]) == 0
        text = capsys.readouterr().out
        assert server.chat_calls == 0
    assert "judge requests to send: 24 (already cached: 0)" in text
    line = next(x for x in text.splitlines() if x.startswith("judge requests to send"))
    full = float(line.split("cost at most $")[1].split(",")[0])
    half = float(line.split("(half price) $")[1].split()[0])
    assert full > 0 and abs(half - full / 2) <= 1e-4


def test_sageval_needs_two_export_import_rounds(tmp_path, monkeypatch, capsys):
    """SAGE's requests carry the first agent's replies: they appear in a second export only."""
    try:
        from tests.test_family_sageval import SURVEYS, reply
    except ImportError:
        from test_family_sageval import SURVEYS, reply
    with FakeOpenAIServer(reply) as server:
        def cfg_for(name):
            cfg = {"save_path": str(tmp_path / name), "answers": [{"name": "gen", "path": str(SURVEYS)}],
                   "category": {c: {"SAGEval": ["accuracy", "cohesion"]} for c in ("survey", "form", "quiz")},
                   "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "mode": "generate"},
                   "sageval": {"use_logprobs": False}}
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(cfg))
            return path

        assert main(["--config", str(cfg_for("ref")), "--no-charts"]) == 0
        direct = server.chat_calls
        server.reset()
        cfg = cfg_for("out")
        req, res = tmp_path / "req.jsonl", tmp_path / "res.jsonl"
        rounds = []
        for _ in range(4):
            assert main(["--config", str(cfg), "--export-requests", str(req)]) == 0
            n = len(req.read_text().splitlines())
            rounds.append(n)
            if n == 0:
                break
            run_batch(server, req, res)
            assert main(["--config", str(cfg), "--import-results", str(res)]) == 0
        assert rounds[0] > 0 and rounds[1] > 0 and rounds[-1] == 0 and sum(rounds) == direct
        assert main(["--config", str(cfg), "--no-charts"]) == 0
        assert server.chat_calls == 0
    assert items(tmp_path / "out" / "results" / "gen.json") == items(tmp_path / "ref" / "results" / "gen.json")
