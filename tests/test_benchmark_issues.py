"""Nothing silently left out or counted twice by the benchmark commands (issue 32, and issue 30's
MT-bench and Arena-Hard items): each case runs `eval.py` as a subprocess against the fake
OpenAI-compatible judge and checks the number a user sees and the line that explains it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # type: ignore[no-redef]  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MT_BENCH = DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench"
MT_ANSWERS = DATA / "mt_bench" / "model_answer"
MT_MODELS = ["vicuna-13b-v1.3", "gpt-3.5-turbo"]
AH = DATA / "arena_hard" / "arena-hard-v0.1"
AH_PROMPT = DATA / "arena_hard" / "judge_prompt_v0.1.json"
AH_BASELINE, AH_MODEL = "gpt-4-0314", "gpt-4-0613"


def eval_py(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "eval.py", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "EVAL_NO_PROGRESS": "1", "EVAL_TEST_KEY": "sk-test", **(env or {})},
                          timeout=600)


def judge_config(tmp_path: Path, server: FakeOpenAIServer, model: str = "gpt-4", extra: str = "") -> Path:
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: {model}\n  base_url: {server.url}\n  concurrency: 2\n"
                   f"  max_retries: 0\n  api_key_env: EVAL_TEST_KEY\n{extra}")
    return cfg


def one_line(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------ MT-bench
@pytest.fixture
def mt_data() -> Path:
    if not (MT_BENCH / "question.jsonl").exists() or not (MT_ANSWERS / "gpt-3.5-turbo.jsonl").exists():
        pytest.skip("../shared/data/fastchat_mt_bench or mt_bench/model_answer is not present")
    return MT_BENCH


def first_question_id() -> int:
    return json.loads((MT_BENCH / "question.jsonl").read_text().splitlines()[0])["question_id"]


def mt_run(cfg: Path, out: Path, mode: str, *extra: str, answers: list[Path] | None = None,
           data: Path = MT_BENCH) -> subprocess.CompletedProcess:
    answers = answers or [MT_ANSWERS / f"{m}.jsonl" for m in MT_MODELS]
    return eval_py("mt-bench", "--data", data, "--answers", *answers, "--judge-config", cfg, "--mode", mode,
                   "--save_path", out, "--limit", "1", "--no-charts", *extra)


def test_mt_bench_rating_outside_the_scale_is_invalid_and_said(mt_data, fake_openai, tmp_path) -> None:
    """[[11]] on the 1-10 scale: invalid (kept with its text), not averaged; FastChat's reading beside."""
    writing = MT_ANSWERS / "gpt-3.5-turbo.jsonl"
    first = json.loads(writing.read_text().splitlines()[0])["choices"][0]["turns"][0]

    def reply(req) -> str:  # 11 for gpt-3.5-turbo's first answer, turn 1; 5 for everything else
        user = req.body["messages"][-1]["content"]
        return "Too good.\n\nRating: [[11]]" if first[:200] in user and "multi" not in str(req.body) and \
            "<|The Start of Assistant A's Conversation" not in user else "Fine.\n\nRating: [[5]]"

    fake_openai.reply_fn = lambda req: Reply(content=reply(req))
    out = tmp_path / "out"
    r = mt_run(judge_config(tmp_path, fake_openai), out, "single")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (out / "model_judgment" / "gpt-4_single.jsonl").read_text().splitlines()]
    assert sum(1 for x in rows if x["score"] == 11) == 1  # FastChat's file keeps what its parser reads
    line = next(x for x in r.stdout.splitlines() if x.startswith("gpt-3.5-turbo"))
    assert line.split()[-2:] == ["5.00", "15"]  # 16 ratings, the 11 left out
    said = one_line(r.stdout)
    assert "left out: 1 invalid 1 of them outside the prompt's 1-10 scale; show_result.py averages it: 5.38" in said
    res = json.loads((out / "results" / "gpt-3.5-turbo.json").read_text())
    bad = [it for it in res["items"] if "MT-bench/score@turn1" in it["invalid"]]
    assert len(bad) == 1 and "[[11]]" in bad[0]["invalid"]["MT-bench/score@turn1"]["raw"]
    assert "outside the prompt's scale 1-10" in bad[0]["invalid"]["MT-bench/score@turn1"]["reason"]
    assert res["aggregates"]["overall"]["MT-bench/score@turn1"]["mean"] == 5.0
    # a re-run reads the file back: the 11 stays invalid, nothing is judged again
    calls = fake_openai.chat_calls
    again = mt_run(judge_config(tmp_path, fake_openai), out, "single")
    assert again.returncode == 0 and fake_openai.chat_calls == calls
    assert "show_result.py averages it: 5.38" in one_line(again.stdout)
