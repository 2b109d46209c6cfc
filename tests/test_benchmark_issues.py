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


# ------------------------------------------------------------------ Arena-Hard
@pytest.fixture
def ah_data() -> Path:
    if not (AH / "question.jsonl").exists() or not AH_PROMPT.exists():
        pytest.skip("../shared/data/arena_hard is not present beside this checkout")
    return AH


def small_bench(tmp_path: Path, n: int = 6, drop: dict[str, int] | None = None) -> tuple[Path, list[str]]:
    """An Arena-Hard folder with the first n questions; `drop` removes the k-th question's answer from a
    model's file. Returns the folder and the question ids."""
    bench = tmp_path / "bench"
    (bench / "model_answer").mkdir(parents=True)
    lines = (AH / "question.jsonl").read_text().splitlines()[:n]
    (bench / "question.jsonl").write_text("\n".join(lines) + "\n")
    uids = [json.loads(x)["uid"] for x in lines]
    for m in (AH_BASELINE, AH_MODEL, "gpt-3.5-turbo-0125"):
        rows = [x for x in (AH / "model_answer" / f"{m}.jsonl").read_text().splitlines()
                if json.loads(x)["uid"] in uids]
        if drop and m in drop:
            rows = [x for x in rows if json.loads(x)["uid"] != uids[drop[m]]]
        (bench / "model_answer" / f"{m}.jsonl").write_text("\n".join(rows) + "\n")
    return bench, uids


def verdicts(req) -> Reply:
    """A judge that always prefers assistant A strongly: game 1 (baseline as A) a loss, game 2 a win."""
    return Reply(content="My final verdict is [[A>>B]].")


def ah_run(bench: Path, cfg: Path, out: Path, *extra: str, models=(AH_MODEL,)) -> subprocess.CompletedProcess:
    return eval_py("arena-hard", "--bench", bench, "--judge-config", cfg, "--model", *models,
                   "--judge-prompt", AH_PROMPT, "--save_path", out, *extra)


def test_arena_hard_missing_answer_refused_or_common(ah_data, fake_openai, tmp_path) -> None:
    bench, uids = small_bench(tmp_path, drop={AH_MODEL: 2})
    fake_openai.reply_fn = verdicts
    cfg = judge_config(tmp_path, fake_openai)
    for extra in ((), ("--dry-run",)):  # refused before anything is planned or paid
        r = ah_run(bench, cfg, tmp_path / "out", *extra)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"model_answer/{AH_MODEL}.jsonl: 1 ({uids[2]})" in r.stderr and "--missing common" in r.stderr
    assert fake_openai.chat_calls == 0
    dry = ah_run(bench, cfg, tmp_path / "out", "--dry-run", "--missing", "common")
    assert dry.returncode == 0 and f"{AH_MODEL}: 10 judge calls" in dry.stdout  # 5 common questions x 2 games
    assert f"left out for every model, not answered by {AH_MODEL} ({uids[2]})" in one_line(dry.stdout)
    cfg2 = judge_config(tmp_path, fake_openai, extra="missing: common\n")  # the config key, as a run's
    r = ah_run(bench, cfg2, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    row = next(x for x in r.stdout.splitlines() if x.startswith(AH_MODEL))
    assert row.split()[-2:] == ["5", "0"]  # n questions, n invalid
    assert f"missing: common: 1 question(s) left out for every model, not answered by {AH_MODEL} ({uids[2]})" \
        in one_line(r.stdout)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["arena_hard"]["left_out"] == {AH_MODEL: [uids[2]]}
    r = eval_py("arena-hard", "--bench", bench, "--judge-config", cfg, "--model", AH_MODEL, "--judge-prompt",
                AH_PROMPT, "--save_path", tmp_path / "o2", "--missing", "comon")
    assert r.returncode == 2 and "invalid choice: 'comon'" in r.stderr


def test_arena_hard_copied_judgment_file_is_refused_naming_both(ah_data, fake_openai, tmp_path) -> None:
    bench, _ = small_bench(tmp_path)
    fake_openai.reply_fn = verdicts
    out = tmp_path / "out"
    r = ah_run(bench, judge_config(tmp_path, fake_openai), out)
    assert r.returncode == 0, r.stderr
    jdir = out / "model_judgment" / "gpt-4"
    shutil.copy(jdir / f"{AH_MODEL}.jsonl", jdir / "copy.jsonl")
    for again in (eval_py("leaderboard", "--arena-hard", out),
                  ah_run(bench, judge_config(tmp_path, fake_openai), out)):
        assert again.returncode == 2 and "Traceback" not in again.stderr
        assert f"{jdir / 'copy.jsonl'}, record 1" in again.stderr and f"{jdir / (AH_MODEL + '.jsonl')}, record 1" \
            in again.stderr and "judged twice" in again.stderr


def test_arena_hard_tokens_limit_nargs_and_flags(ah_data, fake_openai, tmp_path) -> None:
    from evaluate.benchmarks.arena_hard.run import _metadata, read_answers

    fake_openai.reply_fn = verdicts
    out = tmp_path / "out"
    # --model a b is accepted; -h says so
    assert "--model a b" in one_line(eval_py("arena-hard", "-h").stdout)
    r = ah_run(AH, judge_config(tmp_path, fake_openai), out, "--limit", "4", models=(AH_MODEL, "gpt-3.5-turbo-0125"))
    assert r.returncode == 0, r.stderr
    uids = [json.loads(x)["uid"] for x in (AH / "question.jsonl").read_text().splitlines()[:4]]
    import csv

    board = {row["model"]: row for row in csv.DictReader(open(out / "leaderboard.csv", encoding="utf-8"))}
    for m in (AH_MODEL, "gpt-3.5-turbo-0125", AH_BASELINE):
        meta = _metadata(read_answers(AH / "model_answer" / f"{m}.jsonl"))
        want = round(sum(meta[u]["token_len"] for u in uids) / 4, 1)
        everything = round(sum(d["token_len"] for d in meta.values()) / len(meta), 1)
        assert abs(want - everything) >= 1  # the 4 judged answers, not all 500
        assert float(board[m]["avg_tokens"]) == want
        row = next(x for x in r.stdout.splitlines() if x.startswith(m)).split()
        assert row[-3] == f"{want:.0f}"
    # a save path that is a file: the dry run refuses it as the run does
    f = tmp_path / "file"
    f.write_text("x")
    for extra in (("--dry-run",), ()):
        r = ah_run(AH, judge_config(tmp_path, fake_openai), f, "--limit", "2", *extra)
        assert r.returncode == 2 and "is a file, not a folder" in r.stderr
    # several judges: the message names the flag that picks one
    (out / "model_judgment" / "other-judge").mkdir()
    r = eval_py("leaderboard", "--arena-hard", out)
    assert r.returncode == 2 and "several judges (gpt-4, other-judge); name one with --judge" in r.stderr


def test_lc_align_help_says_what_was_measured() -> None:
    said = one_line(eval_py("leaderboard", "-h").stdout)
    assert "reproduces its published numbers" not in said
    assert "0.19 pp at the median, 2.19 pp at worst" in said


def test_mt_bench_third_turn_is_named_not_dropped_silently(mt_data, fake_openai, tmp_path) -> None:
    data = tmp_path / "mt_bench"
    data.mkdir()
    (data / "reference_answer").symlink_to(MT_BENCH / "reference_answer")
    lines = (MT_BENCH / "question.jsonl").read_text().splitlines()
    q = json.loads(lines[0])
    q["turns"].append("Now say it all again in one sentence.")
    (data / "question.jsonl").write_text("\n".join([json.dumps(q), *lines[1:]]) + "\n")
    answers = []
    for m in MT_MODELS:
        rows = [json.loads(x) for x in (MT_ANSWERS / f"{m}.jsonl").read_text().splitlines()]
        for r in rows:
            if r["question_id"] == q["question_id"]:
                r["choices"][0]["turns"].append("All again, in one sentence.")
        answers.append(tmp_path / f"{m}.jsonl")
        answers[-1].write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    fake_openai.reply_fn = lambda req: Reply(content="Fine.\n\nRating: [[5]]")
    cfg = judge_config(tmp_path, fake_openai)
    prompts = MT_BENCH.parent / "judge_prompts.jsonl"
    note = (f"FastChat's prompts judge turns 1 and 2 only, so their later turns are neither judged nor scored: "
            f"question {q['question_id']} (3 turns)")
    dry = mt_run(cfg, tmp_path / "out", "single", "--dry-run", "--judge-prompts", prompts, answers=answers, data=data)
    assert dry.returncode == 0 and note in one_line(dry.stdout), dry.stderr
    r = mt_run(cfg, tmp_path / "out", "single", "--judge-prompts", prompts, answers=answers, data=data)
    assert r.returncode == 0, r.stderr
    assert note in one_line(r.stdout)
    summary = json.loads((tmp_path / "out" / "mt_bench_summary.json").read_text())
    assert summary["unjudged_turns"]["questions"] == {str(q["question_id"]): 3}


def test_gpt_rating_outside_the_scale_is_invalid_with_its_text(fake_openai, tmp_path) -> None:
    """The project's own rating path (evaluate/judges/parsing.py) on the 1-5 scale: a 7 is invalid, kept
    with its raw reply, counted in the invalid share, never averaged (this held before; kept holding)."""
    en = REPO / "examples" / "en"
    fake_openai.reply_fn = lambda req: Reply(content="7" if "Classify the animal" in req.user_text else
                                             "2" if "Label the topic" in req.user_text else "4")
    cfg = {"save_path": str(tmp_path / "out"), "battle": False,
           "category": {"classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(en / "answers_model_a.json")}],
           "target_file": str(en / "targets.json"), "max_invalid_share": 0.5,
           "judge": {"backend": "openai", "model": "fake", "base_url": fake_openai.url, "api_key_env": "EVAL_TEST_KEY",
                     "mode": "generate", "max_retries": 0, "concurrency": 1}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    r = eval_py("--config", tmp_path / "c.json")
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    agg = res["aggregates"]["overall"]["GPT/correctness"]
    assert agg["mean"] == 3.0 and agg["invalid"] == 1  # (4 + 2) / 2: the 7 is not averaged
    bad = [it["invalid"]["GPT/correctness"] for it in res["items"] if "GPT/correctness" in it["invalid"]]
    assert len(bad) == 1 and bad[0]["raw"] == "7" and "outside 1-5" in bad[0]["reason"]


LONG = "my-team-finetune-checkpoint-2026-11-25-step-12000"  # longer than any name column


def _table_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line and not line.startswith(("written:", "wrote "))]


def test_mt_bench_tables_wrap_long_model_names_never_cut(mt_data, fake_openai, tmp_path) -> None:
    """Issue 30 item 8: a model name wider than its column has a line of its own (or a legend), whole;
    the tables stay within 80 columns."""
    rows = [json.loads(x) for x in (MT_ANSWERS / "gpt-3.5-turbo.jsonl").read_text().splitlines() if x.strip()]
    long_file = tmp_path / f"{LONG}.jsonl"
    long_file.write_text("".join(json.dumps({**r, "model_id": LONG}) + "\n" for r in rows))
    answers = [long_file, MT_ANSWERS / "vicuna-13b-v1.3.jsonl"]
    cfg = judge_config(tmp_path, fake_openai)
    fake_openai.reply_fn = lambda req: "Rating: [[5]]" if "[[rating]]" in req.user_text or "Rating" in req.user_text \
        else "[[A]]"
    for mode in ("single", "pairwise-all"):
        proc = mt_run(cfg, tmp_path / mode, mode, answers=answers)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = _table_lines(proc.stdout)
        assert any(line.strip() == LONG or line.startswith(f"(1) {LONG}") or line.startswith(LONG)
                   for line in lines), proc.stdout
        assert not [x for x in lines if ("~" in x or "…" in x) and "my-team" in x], proc.stdout  # never cut
        assert any(x.startswith(f"  A = {LONG};") for x in lines), proc.stdout  # the closing lines too
        assert max(len(x) for x in lines if "/" not in x) <= 80, proc.stdout  # paths aside


def test_arena_hard_table_wraps_a_long_model_name(ah_data, fake_openai, tmp_path) -> None:
    bench, _ = small_bench(tmp_path, n=3)
    src = bench / "model_answer" / f"{AH_MODEL}.jsonl"
    rows = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    (bench / "model_answer" / f"{LONG}.jsonl").write_text("".join(json.dumps({**r, "model": LONG}) + "\n"
                                                                  for r in rows))
    fake_openai.reply_fn = verdicts
    proc = ah_run(bench, judge_config(tmp_path, fake_openai), tmp_path / "out", models=(LONG,))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _table_lines(proc.stdout)
    i = lines.index(LONG)  # the name whole, on its own line
    assert re.match(r"^ {22}\s*[\d.]+ ", lines[i + 1]), lines[i:i + 2]  # its numbers under their columns
    assert max(len(x) for x in lines if "/" not in x) <= 80
