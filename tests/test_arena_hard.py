"""Arena-Hard in its own formats: the judge gets Arena-Hard's exact messages, judgment files follow its
schema, unparseable replies are kept and not counted, and the leaderboard matches show_result.py."""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from evaluate.benchmarks.arena_hard import run as ah
from evaluate.benchmarks.arena_hard import scores
from evaluate.benchmarks.arena_hard.scores import battle_outcomes, markdown_counts, raw_scores
from evaluate.commands.arena_hard import main
from evaluate.core.errors import InputError
from evaluate.stats.bradley_terry import fit_logistic

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, fake_openai  # noqa: F401

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "arena_hard"
BENCH = DATA / "arena-hard-v0.1"
PROMPT = DATA / "judge_prompt_v0.1.json"
BASELINE = "gpt-4-0314"
MODELS = ["gpt-4-0613", "gpt-3.5-turbo-0125"]
LIMIT = 40
ENV = "EVAL_TEST_ARENA_KEY"
GARBAGE = "Both answers have merits; I cannot pick one."


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "sk-test-arena")
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")


@pytest.fixture
def data() -> Path:
    if not (BENCH / "question.jsonl").exists() or not PROMPT.exists():
        pytest.skip("../shared/data/arena_hard is not present beside this checkout")
    return DATA


def h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def verdict_text(user: str) -> str:
    """A deterministic judge: leans to the longer answer, one reply in nine has no verdict."""
    a = user.split("<|The Start of Assistant A's Answer|>")[-1].split("<|The End of Assistant A's Answer|>")[0]
    b = user.split("<|The Start of Assistant B's Answer|>")[-1].split("<|The End of Assistant B's Answer|>")[0]
    k = h(user)
    if k % 9 == 0:
        return GARBAGE
    labels = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
    i = (k // 9) % 5
    i = min(4, i + 1) if len(b) > len(a) else max(0, i - 1)
    return f"My own answer first... My final verdict is [[{labels[i]}]]."


def hashed_reply(req: RecordedRequest) -> Reply:
    return Reply(content=verdict_text(req.user_text))


def judge_config(tmp_path: Path, server: FakeOpenAIServer, extra: str = "") -> Path:
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: fake-judge\n  base_url: {server.url}\n  concurrency: 4\n"
                   f"  max_retries: 0\n  api_key_env: {ENV}\n{extra}")
    return cfg


def run(cfg: Path, out: Path, *extra: str) -> int:
    return main(["--bench", str(BENCH), "--judge-config", str(cfg), "--model", MODELS[0], "--model", MODELS[1],
                 "--judge-prompt", str(PROMPT), "--limit", str(LIMIT), "--save_path", str(out), *extra])


def test_messages_schema_invalid_kept_and_cache(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = hashed_reply
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out) == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()
               if not line.startswith("written:") and str(tmp_path) not in line) <= 80  # a path is never cut
    assert "style" in printed and "90% interval" in printed and "judge check: not checked" in printed
    sent = fake_openai.chat_requests()
    assert len(sent) == 2 * 2 * LIMIT
    prompt = json.loads(PROMPT.read_text())
    questions = [json.loads(x) for x in (BENCH / "question.jsonl").read_text().splitlines()[:LIMIT]]
    answers = {m: {r["uid"]: r["messages"][-1]["content"]["answer"] for r in map(json.loads, (
        BENCH / "model_answer" / f"{m}.jsonl").read_text().splitlines())} for m in [BASELINE, *MODELS]}
    expected = set()
    for q in questions:
        for m in MODELS:
            for a, b in [(BASELINE, m), (m, BASELINE)]:
                user = (f"<|User Prompt|>\n{q['prompt']}\n\n<|The Start of Assistant A's Answer|>\n{answers[a][q['uid']]}"
                        f"\n<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n"
                        f"{answers[b][q['uid']]}\n<|The End of Assistant B's Answer|>")
                expected.add(json.dumps([{"role": "system", "content": prompt["system_prompt"]},
                                         {"role": "user", "content": user}]))
    assert {json.dumps(r.body["messages"]) for r in sent} == expected
    assert all(r.body["temperature"] == 0.0 and r.body["max_tokens"] == 4096 for r in sent)

    n_garbage = 0
    for m in MODELS:
        recs = [json.loads(x) for x in (out / "model_judgment" / "fake-judge" / f"{m}.jsonl").read_text().splitlines()]
        assert [r["uid"] for r in recs] == [q["uid"] for q in questions]
        for r in recs:
            assert set(r) == {"uid", "category", "judge", "model", "baseline", "games"}
            assert (r["model"], r["baseline"], r["judge"], r["category"]) == (m, BASELINE, "fake-judge", "arena-hard-v0.1")
            for i, g in enumerate(r["games"]):
                reply = verdict_text(g["prompt"][1]["content"])
                assert g["judgment"] == {"answer": reply}
                assert g["score"] == (None if reply == GARBAGE else reply.split("[[")[1].split("]]")[0])
                assert (BASELINE if i == 0 else m) in [mm for mm in answers
                                                       if answers[mm][r["uid"]] in g["prompt"][1]["content"]
                                                       .split("<|The End of Assistant A's Answer|>")[0]]
            n_garbage += any(g["score"] is None for g in r["games"])
    assert n_garbage > 0
    _, rows = ah.leaderboard_table(out, None)
    by = {r["model"]: r for r in rows}
    assert sum(by[m]["n_invalid"] for m in MODELS) == n_garbage
    assert all(by[m]["n_questions"] + by[m]["n_invalid"] == LIMIT for m in MODELS)
    with open(out / "leaderboard.csv") as f:
        assert {r["model"] for r in csv.DictReader(f)} == {BASELINE, *MODELS}
    before = fake_openai.chat_calls
    assert run(judge_config(tmp_path, fake_openai), out) == 0
    assert fake_openai.chat_calls == before  # only games without a verdict are asked again, from the cache


def test_dry_run_contacts_nothing_and_bad_input_exits_2(data, fake_openai, tmp_path, capsys) -> None:
    cfg = judge_config(tmp_path, fake_openai, "  price: {prompt: 10.0, completion: 30.0}\n")
    assert run(cfg, tmp_path / "o", "--dry-run") == 0
    text = capsys.readouterr().out
    assert f"total: {4 * LIMIT} judge calls" in text and "cost:" in text
    assert fake_openai.chat_calls == 0
    assert main(["--bench", str(BENCH), "--judge-config", str(cfg), "--model", "nope",
                 "--judge-prompt", str(PROMPT), "--save_path", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err


def test_all_invalid_exits_3(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = lambda req: Reply(content=GARBAGE)
    assert run(judge_config(tmp_path, fake_openai), tmp_path / "o", "--limit", "3") == 3
    assert "no verdict" in capsys.readouterr().err


def test_bad_judgment_file_names_file_and_line(tmp_path) -> None:
    p = tmp_path / "model_judgment" / "j" / "m.jsonl"
    p.parent.mkdir(parents=True)
    p.write_text('{"uid": "a", "model": "m", "baseline": "b", "games": [null, null]}\n'
                 '{"uid": "b", "model": "m", "baseline": "b", "games": [{"score": 3}]}\n')
    with pytest.raises(InputError, match=r"m\.jsonl:2: games"):
        ah.read_judgments(p)
    (tmp_path / "model_judgment" / "k").mkdir()
    with pytest.raises(InputError, match="several judges"):
        ah.leaderboard_table(tmp_path, None)


def test_battles_and_fits_by_hand() -> None:
    w = ah.SHOW_RESULT_WEIGHTS
    # game 1 baseline as A: A>>B is a strong baseline win -> three 0s; game 2 model as A: A>B -> one 1
    assert battle_outcomes({"games": [{"score": "A>>B"}, {"score": "A>B"}]}, w) == [1, 0, 0, 0]
    assert battle_outcomes({"games": [{"score": "B>A"}, {"score": "A=B"}]}, w) == [0.5, 1]
    assert battle_outcomes({"games": [{"score": None}, {"score": "A=B"}]}, w) is None
    # raw score: the mean of bootstrap means -> the plain mean 7/12 with many rounds
    r = raw_scores({"m": [1, 0, 0, 0, 0.5, 1, 1, 1, 1, 0.5, 1, 0]}, seed=1, rounds=20000)["m"]
    assert abs(r.score - 100 * 7 / 12) < 0.3 and r.lower < r.score < r.upper
    # the BT fit (the project's one, unpenalized) equals sklearn's logistic regression on soft labels spread
    # as weights; show_result.py's LBFGS, which Arena-Hard's scores use, comes near it on this easy problem
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(0)
    x = np.hstack([np.ones((60, 1)), rng.normal(size=(60, 2))])
    y = rng.choice([0, 0.5, 1], size=60)
    ref = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-10, max_iter=10000).fit(
        np.vstack([x, x]), np.r_[np.ones(60), np.zeros(60)], sample_weight=np.r_[y, 1 - y])
    assert np.allclose(fit_logistic(x, y, l2=0.0), ref.coef_[0], atol=1e-4)
    assert np.allclose(fit_logistic(x, y, l2=0.0, solver="lbfgs"), ref.coef_[0], atol=1e-2)
    c = markdown_counts("# T\n## U\n- a\n* b\n1. c\n**x** __y__\n```\n# not a header\n- no\n```\n")
    assert (sum(c["header_count"].values()), sum(c["list_count"].values()), sum(c["bold_count"].values())) == (2, 3, 2)


# What lmarena/arena-hard-auto @ 196f6b8 show_result.py computes for the judgment files that
# test_matches_show_result writes (verdict_text above, first 100 questions, judge "fake-judge"), run
# outside this repository: its own functions in a throwaway copy, numpy's global generator seeded
# with 0 (np.random.seed(0), the only change: it never seeds it), the answers' metadata being what
# arena_hard/scores.style_metadata writes without tiktoken (words and punctuation for token_len),
# the unrounded numbers read where it formats them. Commands and the check on 500 questions and
# several seeds: BENCHMARKS.md, "Arena-Hard: agreement with show_result.py".
UPSTREAM: dict[str, dict[str, float]] = {
    "gpt-4-0613": {"score": 39.929577, "lower": 35.554577, "upper": 44.727113,
                   "sc_score": 33.716182, "sc_lower": 28.487398, "sc_upper": 38.350436},
    "gpt-3.5-turbo-0125": {"score": 35.899671, "lower": 31.578947, "upper": 39.662829,
                           "sc_score": 37.024610, "sc_lower": 31.379291, "sc_upper": 40.083054},
}
# Same draws, so raw numbers agree to rounding; the style fit runs in float32 (torch LBFGS) on both
# sides and differs in the last bits (at most 0.005 pp on 500 questions).
TOL_POINT, TOL_END = 0.05, 0.05


@pytest.mark.skipif(not UPSTREAM, reason="upstream numbers not recorded")
def test_matches_show_result(data, fake_openai, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(scores, "_ENC", [None])  # the token counts UPSTREAM was computed with
    fake_openai.reply_fn = hashed_reply
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "--limit", "100") == 0
    _, rows = ah.leaderboard_table(out, "fake-judge", seed=0)
    by = {r["model"]: r for r in rows}
    for m in MODELS:
        for key, want in UPSTREAM[m].items():
            tol = TOL_POINT if key.endswith("score") else TOL_END
            assert abs(by[m][key] - want) <= tol, (m, key, by[m][key], want)


def test_judge_check_of_the_same_judge_is_quoted(tmp_path) -> None:
    from evaluate.benchmarks.tables import judge_check_line
    store = tmp_path / "judge_checks"
    store.mkdir()
    rec = {"judge": {"battle": {"judge": {"backend": "openai", "model": "fake-judge", "mode": "generate"}}},
           "verdict_text": "NOT trustworthy: with labels (hhh.jsonl, 40 pairs): agreement 0.500", "created": "2026-11-25"}
    (store / "k1.json").write_text(json.dumps(rec))
    line = judge_check_line(tmp_path, {"backend": "openai", "model": "fake-judge", "base_url": "http://x"})
    assert "NOT trustworthy" in line and "not this benchmark's prompt" in line
    other = judge_check_line(tmp_path, {"backend": "openai", "model": "another-judge"})
    assert other.startswith("judge check: not checked for judge another-judge")
