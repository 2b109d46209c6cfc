"""A panel's judges as a user and an attacker meet them (issue 47), through `eval.py` as a subprocess
against real OpenAI-compatible servers on 127.0.0.1 (tests/fake_openai_server.py: the client under test
is the real one):

- two judges with the same `model` name on two servers: each server is asked its own requests and the
  panel's agreement is between two judges, also on a re-run, and with a cache the previous version wrote
  (keyed on the model name alone), which a single judge still reads;
- a judge whose server moves: an HTTP judge's cache names its server; `backend: vllm`'s names the
  weights (its keys computed from the config and the weights file, no server started);
- a judge that answers nothing usable beside a good one: exit 3 naming it, each judge's counts;
- a judge on a closed port beside a live one: exit 3 before the live one is paid anything;
- a panel inherits its judges' warnings (position bias, invalid verdicts), per judge;
- a list of one judge block runs as that judge, under its name.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaluate.backends.cache import VOLATILE_FIELDS, cache_key, judge_blob, request_from_dict

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
    from tests.test_dead_judge import closed_port  # a base URL on which nothing listens
except ImportError:  # run from inside tests/
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
    from test_dead_judge import closed_port

REPO = Path(__file__).resolve().parents[1]
ENV = "EVAL_TEST_PANEL_KEY"
MODELS = ("ma", "mb")
BATTLE = "[Assistant 1's answer]"


def is_battle(rec: RecordedRequest) -> bool:
    return BATTLE in rec.user_text


def judge_fn(rating: str, battle: str):
    """A judge that rates every answer `rating` and answers every battle `battle`."""
    return lambda rec: Reply(content=battle if is_battle(rec) else rating)


def answers(tmp: Path, n: int) -> list[dict[str, str]]:
    out = []
    for m in MODELS:
        rows = [{"id": i, "category": "open_qa", "instruction": f"question {i}?", "input": "",
                 "output": f"answer of {m} to {i}", "target": f"reference {i}"} for i in range(1, n + 1)]
        (tmp / f"{m}.json").write_text(json.dumps(rows))
        out.append({"name": m, "path": str(tmp / f"{m}.json")})
    return out


def http_judge(name: str | None, url: str, model: str = "same", **extra: Any) -> dict[str, Any]:
    block = {"backend": "openai", "model": model, "base_url": url, "api_key_env": ENV, "mode": "generate",
             "max_retries": 0, "timeout": 10, "explain": False, "max_tokens": 16, **extra}
    return {"name": name, **block} if name else block


def config(tmp: Path, judge: Any, n: int = 4, **more: Any) -> Path:
    cfg = {"answers": answers(tmp, n), "save_path": str(tmp / "out"), "category": {"open_qa": {"GPT": ["correctness"]}},
           "judge": judge, **more}
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def eval_py(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "eval.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO,
                          env={**os.environ, ENV: "sk-panel-judges", "EVAL_NO_PROGRESS": "1", "PYTHONPATH": str(REPO),
                               **(env or {})})


def results(save: Path, model: str) -> dict[str, Any]:
    return json.loads((save / "results" / f"{model}.json").read_text())


def manifest(save: Path) -> dict[str, Any]:
    return json.loads((save / "manifest.json").read_text())


def means(save: Path, key: str) -> dict[str, float]:
    return {m: results(save, m)["aggregates"]["overall"][key]["mean"] for m in MODELS}


def battle_file(save: Path) -> dict[str, Any]:
    return json.loads(next((save / "battles").glob("ma__vs__mb.json")).read_text())


# ------------------------------------------------------------------ 1. the cache names each judge
def test_two_judges_with_one_model_name_on_two_servers_are_each_asked(tmp_path):
    n = 4
    with FakeOpenAIServer(judge_fn("4", "8 3"), model="same") as one, \
            FakeOpenAIServer(judge_fn("2", "3 8"), model="same") as two:
        cfg = config(tmp_path, [http_judge("one", one.url), http_judge("two", two.url)], n=n)
        done = eval_py("--config", str(cfg), "--no-charts")
        assert done.returncode == 0, done.stderr[-3000:]
        per_judge = 2 * n + 2 * n  # ratings of both models, battles in both orders
        assert one.chat_calls == per_judge and two.chat_calls == per_judge
        save = tmp_path / "out"
        assert means(save, "GPT/correctness@one") == {"ma": 4.0, "mb": 4.0}
        assert means(save, "GPT/correctness@two") == {"ma": 2.0, "mb": 2.0}
        assert means(save, "GPT/correctness") == {"ma": 3.0, "mb": 3.0}
        # one always prefers the first shown, two the second: every item flips for both, but their
        # single-order verdicts are opposite, so the agreement is between two judges, not one and itself
        own = battle_file(save)["panel"]["judges"]
        assert [o["verdict"] for o in own["one"]["items"][0]["orders"]] == ["A", "B"]
        assert [o["verdict"] for o in own["two"]["items"][0]["orders"]] == ["B", "A"]
        agree = results(save, "ma")["panel"]["agreement"]["GPT/correctness"]
        assert agree["judges"] == 2 and agree["alpha"] < 0  # 4 against 2 on every item: worse than chance

        # the re-run pays for nothing and mixes nothing
        again = eval_py("--config", str(cfg), "--no-charts")
        assert again.returncode == 0 and (one.chat_calls, two.chat_calls) == (per_judge, per_judge)
        assert means(save, "GPT/correctness@two") == {"ma": 2.0, "mb": 2.0}

        # the cache as the previous version wrote it (keys on the model name alone, from server one's
        # replies): neither judge reads those rows, whose server nobody can tell; both servers are asked
        with sqlite3.connect(save / "judge_cache.sqlite") as db:
            rows = db.execute("SELECT key, judge, request FROM completions").fetchall()
            db.execute("DELETE FROM completions WHERE judge LIKE ?", (f"%{two.url}%",))
            for key, judge, request in rows:
                if one.url in judge:
                    old = judge_blob(json.loads(judge), VOLATILE_FIELDS)
                    db.execute("UPDATE completions SET key = ?, judge = ? WHERE key = ?",
                               (cache_key(old, request_from_dict(json.loads(request))), old, key))
        third = eval_py("--config", str(cfg), "--no-charts")
        assert third.returncode == 0, third.stderr[-3000:]
        assert one.chat_calls == two.chat_calls == 2 * per_judge
        assert means(save, "GPT/correctness@two") == {"ma": 2.0, "mb": 2.0}

        # one judge alone still reads such a cache: a user's old cache keeps answering
        solo = config(tmp_path, http_judge(None, two.url), n=n, save_path=str(tmp_path / "solo"))
        assert eval_py("--config", str(solo), "--no-charts").returncode == 0
        calls = two.chat_calls
        with sqlite3.connect(tmp_path / "solo" / "judge_cache.sqlite") as db:
            rows = db.execute("SELECT key, judge, request FROM completions").fetchall()
            for key, judge, request in rows:
                old = judge_blob(json.loads(judge), VOLATILE_FIELDS)
                db.execute("UPDATE completions SET key = ?, judge = ? WHERE key = ?",
                           (cache_key(old, request_from_dict(json.loads(request))), old, key))
        assert eval_py("--config", str(solo), "--no-charts").returncode == 0
        assert two.chat_calls == calls


def test_an_http_judge_on_another_port_is_asked_again(tmp_path):
    """The cache names an HTTP judge's server: the same model name behind another port may be another
    model, so its replies are asked for, never taken from the first server's."""
    n = 2
    with FakeOpenAIServer(judge_fn("4", "8 3"), model="same") as first:
        cfg = config(tmp_path, http_judge(None, first.url), n=n)
        assert eval_py("--config", str(cfg), "--no-charts").returncode == 0
    with FakeOpenAIServer(judge_fn("2", "3 8"), model="same") as moved:
        cfg = config(tmp_path, http_judge(None, moved.url), n=n)
        done = eval_py("--config", str(cfg), "--no-charts")
        assert done.returncode == 0, done.stderr[-3000:]
        assert moved.chat_calls == 2 * n + 2 * n
        assert means(tmp_path / "out", "GPT/correctness") == {"ma": 2.0, "mb": 2.0}


VLLM_PYTHON = os.environ.get("EVAL_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")


@pytest.mark.skipif(not Path(VLLM_PYTHON).exists(), reason=f"no vLLM interpreter at {VLLM_PYTHON} (make setup-vllm)")
def test_a_vllm_judge_is_keyed_on_its_weights_whatever_its_port(tmp_path):
    """`backend: vllm` starts its server on a free port each run; its cache keys are computed from the
    config and the weights (no server): requests exported and answered offline are read back in a panel
    beside an HTTP judge serving the same model name, and no vLLM server is started."""
    vllm = {"backend": "vllm", "model": "SmolLM2-135M-Instruct", "max_model_len": 1024, "mode": "generate",
            "explain": False, "max_tokens": 16}
    n = 3
    alone = config(tmp_path, vllm, n=n)
    env = {"EVAL_VLLM_PYTHON": VLLM_PYTHON}
    exported = eval_py("--config", str(alone), "--export-requests", str(tmp_path / "req.jsonl"), env=env)
    assert exported.returncode == 0, exported.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "req.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * n + 2 * n
    with open(tmp_path / "res.jsonl", "w") as fh:
        for line in lines:
            user = line["body"]["messages"][-1]["content"]
            text = "9 1" if BATTLE in user else "5"
            fh.write(json.dumps({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": {
                "model": line["body"]["model"], "choices": [{"index": 0, "finish_reason": "stop",
                                                            "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}}}) + "\n")
    imported = eval_py("--config", str(alone), "--import-results", str(tmp_path / "res.jsonl"), env=env)
    assert imported.returncode == 0, imported.stderr[-3000:]
    with FakeOpenAIServer(judge_fn("1", "1 9"), model="SmolLM2-135M-Instruct") as http:
        panel = config(tmp_path, [{"name": "v", **vllm}, http_judge("h", http.url, model="SmolLM2-135M-Instruct")], n=n)
        done = eval_py("--config", str(panel), "--no-charts", env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert http.chat_calls == 2 * n + 2 * n  # the HTTP judge of the same model name is asked its own
    save = tmp_path / "out"
    assert means(save, "GPT/correctness@v") == {"ma": 5.0, "mb": 5.0}  # the imported replies: from the cache
    assert means(save, "GPT/correctness@h") == {"ma": 1.0, "mb": 1.0}
    assert not list(save.rglob("vllm-*.log")), "a vLLM server was started"
    assert manifest(save)["usage"]["GPT@v"]["cache_hits"] == 2 * n + 2 * n


# ------------------------------------------------------------------ 2. a judge that gives nothing valid
@pytest.mark.parametrize("bad", ["empty", "malformed"])
def test_a_judge_with_nothing_valid_fails_the_run_naming_it(tmp_path, bad):
    n = 3
    reply = Reply.empty() if bad == "empty" else Reply.malformed()
    with FakeOpenAIServer(judge_fn("4", "8 3"), model="good") as good, \
            FakeOpenAIServer(lambda rec: reply, model="junk") as junk:
        cfg = config(tmp_path, [http_judge("good", good.url, model="good"), http_judge("junk", junk.url, model="junk")], n=n)
        done = eval_py("--config", str(cfg), "--no-charts")
    assert done.returncode == 3, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("exit 3: GPT: judge junk: 6 of 6 of its scores invalid"), last
    # each request that failed for good is said once, naming the judge, not only its URL
    assert done.stderr.count("request failed for good") == done.stderr.count("judge junk: request failed for good") == 4 * n
    m = manifest(tmp_path / "out")
    assert m["status"] == "finished with errors"
    assert {(e.get("family"), e.get("judge")) for e in m["errors"]} == {("GPT", "junk"), ("GPT battles", "junk")}
    assert m["invalid"]["GPT"]["judges"] == {"good": {"valid": 2 * n, "invalid": 0},
                                             "junk": {"valid": 0, "invalid": 2 * n}}
    assert m["invalid"]["GPT battles"]["judges"]["junk"] == {"valid": 0, "invalid": n}
    assert m["usage"]["GPT@junk"]["failures"] == 4 * n  # every request: an empty reply is a failed one too
    flat = " ".join(done.stdout.split())
    assert f"invalid scores: GPT {2 * n} of {4 * n} (judge good 0 of {2 * n}, judge junk {2 * n} of {2 * n})" in flat
    assert f"0 of {n} invalid (per judge: good 0 of {n}, junk {n} of {n})" in flat  # the panel's count was the good one's
    html = (tmp_path / "out" / "report.html").read_text()
    row = re.search(r"<tr><td>junk</td>(.*?)</tr>", html.split('id="panel-judges"')[1]).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    assert cells == [str(4 * n), str(4 * n), "0", str(2 * n), "0", str(n)]


def test_max_invalid_share_holds_each_judge(tmp_path):
    """A judge with half of its ratings invalid passes the default (1.0) and fails max_invalid_share 0.5;
    the closing lines give its counts either way."""
    def half(rec: RecordedRequest) -> Reply:
        if is_battle(rec):
            return Reply(content="8 3")
        return Reply(content="3" if "answer of ma" in rec.user_text else "no score here")

    with FakeOpenAIServer(judge_fn("4", "8 3"), model="good") as good, FakeOpenAIServer(half, model="half") as hs:
        judges = [http_judge("good", good.url, model="good"), http_judge("half", hs.url, model="half")]
        done = eval_py("--config", str(config(tmp_path, judges, n=2)), "--no-charts")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "(judge good 0 of 4, judge half 2 of 4)" in " ".join(done.stdout.split())
        strict = eval_py("--config", str(config(tmp_path, judges, n=2, max_invalid_share=0.5)), "--no-charts")
    assert strict.returncode == 3
    assert "exit 3: GPT: judge half: 2 of 4 of its scores invalid (50% >= max_invalid_share 0.5" in strict.stderr


# ------------------------------------------------------------------ 3. a dead judge stops the panel first
def test_a_dead_judge_stops_the_panel_before_the_live_one_is_paid(tmp_path):
    dead = closed_port()
    with FakeOpenAIServer(judge_fn("4", "8 3"), model="live") as live:
        cfg = config(tmp_path, [http_judge("live", live.url, model="live"), http_judge("gone", dead, model="gone")])
        done = eval_py("--config", str(cfg), "--no-charts")
        paid = live.chat_calls
    assert done.returncode == 3, done.stderr[-3000:]
    assert paid == 0
    assert done.stderr.strip().splitlines()[-1].startswith(f"exit 3: judge unreachable: gone: {dead}: connection refused")
    assert f"warning: judge gone: {dead}: unreachable" in done.stderr


# ------------------------------------------------------------------ 4. a panel inherits its judges' warnings
def test_a_panel_inherits_its_judges_warnings_and_counts_each_ones_invalid_verdicts(tmp_path):
    """12 items: judge `first` prefers whatever is shown first (position bias: every verdict flips),
    judge `fair` prefers ma in both orders but names no winner on 4 items. The panel's own summary has
    no per-order figures; its closing lines and report warn about each judge."""
    n = 12

    def fair(rec: RecordedRequest) -> Reply:
        if not is_battle(rec):
            return Reply(content="3")
        first = re.search(re.escape(BATTLE) + r"\s*answer of (\w+) to (\d+)", rec.user_text)
        if int(first.group(2)) <= 4:
            return Reply(content="I will not pick.")
        return Reply(content="9 2" if first.group(1) == "ma" else "2 9")

    with FakeOpenAIServer(judge_fn("3", "8 3"), model="first") as fs, FakeOpenAIServer(fair, model="fair") as fr:
        judges = [http_judge("first", fs.url, model="first"), http_judge("fair", fr.url, model="fair")]
        done = eval_py("--config", str(config(tmp_path, judges, n=n)), "--no-charts")
    assert done.returncode == 0, done.stderr[-3000:]
    flat = " ".join(done.stdout.split())
    assert "judge warning: battle ma vs mb, judge first: the answer shown first wins 100% of single-order verdicts" in flat
    assert "judge warning: battle ma vs mb, judge first: the winner reverses with the order on 100% of items" in flat
    assert "judge warning: battle ma vs mb, judge fair: 4 of 12 verdicts invalid (33%)" in flat
    assert "(per judge: first 0 of 12, fair 4 of 12)" in flat
    html = (tmp_path / "out" / "report.html").read_text()
    box = html.split('id="judge-warning"')[1].split("</div>")[0]
    assert "judge first: the answer shown first wins 100%" in box and "judge fair: 4 of 12 verdicts invalid" in box


# ------------------------------------------------------------------ 5. a list of one judge
def test_a_list_of_one_judge_runs_as_that_judge_under_its_name(tmp_path):
    with FakeOpenAIServer(judge_fn("4", "8 3"), model="solo-model") as server:
        cfg = config(tmp_path, [http_judge("solo", server.url, model="solo-model")], n=2)
        done = eval_py("--config", str(cfg), "--no-charts")
    assert done.returncode == 0, done.stderr[-3000:]
    save = tmp_path / "out"
    assert means(save, "GPT/correctness") == {"ma": 4.0, "mb": 4.0}
    assert not any("@solo" in k for k in results(save, "ma")["aggregates"]["overall"])  # one judge, not a panel
    assert manifest(save)["config"]["judge"]["name"] == "solo"
    dead = closed_port()
    down = eval_py("--config", str(config(tmp_path, [http_judge("solo", dead)], n=2)), "--no-charts")
    assert down.returncode == 3
    assert down.stderr.strip().splitlines()[-1].startswith(f"exit 3: judge unreachable: solo: {dead}")
    bad = eval_py("--config", str(config(tmp_path, [{"name": "solo", "model": "m", "temprature": 0}])), "--dry-run")
    assert bad.returncode == 2 and 'judge[0]: unknown key "temprature"' in bad.stderr and "Traceback" not in bad.stderr
