"""LLM-judge evaluators (rating, battle, Bradley-Terry) against a scripted in-process judge."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from evaluate.backends.base import Backend, BackendError, Completion, JudgeRequest
from evaluate.core.errors import InputError
from evaluate.stats.bradley_terry import ELO_BASE, ELO_SCALE, L2, bradley_terry
from evaluate.judges import (battle, battle_all, load_battle_prompt,
                             load_evaluation_prompts, rate)
from evaluate.stats.intervals import wilson_interval
from evaluate.judges.battle_summary import battle_ranking
from evaluate.judges.rating import RatingJudge
from evaluate.core.records import Record

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
COLOSSAL = SHARED / "data" / "colossalai" / "Chat" / "evaluate"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


class ScriptedJudge(Backend):
    """A judge whose replies come from a function of the request; records every batch it gets."""

    kind = "scripted"

    def __init__(self, respond: Callable[[JudgeRequest], Completion | str], *, logprobs: bool = False):
        super().__init__("scripted-judge")
        self.respond = respond
        self._logprobs = logprobs
        self.batches: list[list[JudgeRequest]] = []

    @property
    def supports_logprobs(self) -> bool:
        return self._logprobs

    def complete(self, request: JudgeRequest) -> Completion:
        out = self.respond(request)
        return Completion(text=out) if isinstance(out, str) else out

    def complete_many(self, requests, progress=None):
        self.batches.append(list(requests))
        return super().complete_many(requests, progress)


def user_text(req: JudgeRequest) -> str:
    return dict(req.messages)["user"]


def system_text(req: JudgeRequest) -> str:
    return dict(req.messages).get("system", "")


def logprobs_of(dist: dict[str, float]) -> Completion:
    return Completion(text=max(dist, key=dist.get), top_logprobs=[{t: math.log(p) for t, p in dist.items()}])


# -- prompt files ---------------------------------------------------------------------------

EVAL_FILE = {
    "general": {
        "metrics": {"relevance": "Relevance (1-5): on topic.", "correctness": "Correctness (1-5): right."},
        "CoT": {"relevance": "1. Read.\n\nRelevance:", "correctness": "1. Check.\n\nCorrectness:"},
        "prompt": "Rate the answer.\n\nQuestion:\n{question}\n\nAnswer:\n{answer}\n\nMetric:\n{metric}\n\n"
                  "Steps:\n{steps}",
    },
    "closed_qa": {
        "metrics": {"relevance": "Relevance (1-5): on topic.", "correctness": "Correctness (1-5): right."},
        "CoT": {"relevance": "1. Read.\n\nRelevance:", "correctness": "1. Check.\n\nCorrectness:"},
        "prompt": "Closed QA.\n\nQuestion:\n{question}\n\nAnswer:\n{answer}\n\nMetric:\n{metric}\n\nSteps:\n{steps}",
        "reference_prompt": "Closed QA with reference.\n\nQuestion:\n{question}\n\nAnswer:\n{answer}\n\n"
                            "Correct answer:\n{reference}\n\nMetric:\n{metric}\n\nSteps:\n{steps}",
        "system_prompt": "You are a strict grader.",
    },
}


def EVAL_FILE_copy() -> dict:
    return json.loads(json.dumps(EVAL_FILE))


@pytest.fixture
def eval_path(tmp_path: Path) -> Path:
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(EVAL_FILE), encoding="utf-8")
    return path


@pytest.mark.parametrize("lang", ["en", "cn"])
def test_colossalai_prompt_files_load_unchanged(lang: str) -> None:
    path = need(COLOSSAL / "prompt" / "evaluation_prompt" / f"evaluation_prompt_{lang}.json")
    prompts = load_evaluation_prompts(path)
    assert prompts.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "general" in prompts.categories() and "brainstorming" in prompts.categories()
    config = json.loads(need(COLOSSAL / "config" / f"config_{lang}.json").read_text(encoding="utf-8"))
    missing = {cat: prompts.missing_metrics(cat, spec.get("GPT", [])) for cat, spec in config["category"].items()}
    # ColossalAI's own config asks "logical_reasoning" (no entry -> general) for a metric general lacks.
    assert {c: m for c, m in missing.items() if m} == {"logical_reasoning": ["reasonableness"]}
    fallback = prompts.entry_for("Finance")
    assert fallback.fallback and fallback.category == "general" and fallback.requested == "Finance"
    assert not prompts.entry_for("chat").fallback
    assert prompts.steps("chat", "relevance") == prompts.entries["chat"].cot["relevance"]
    battle_prompt = load_battle_prompt(need(COLOSSAL / "prompt" / "battle_prompt" / f"battle_prompt_{lang}.json"))
    rendered = battle_prompt.render("Q?", "first {answer_2}", "second")
    assert "first {answer_2}" in rendered and rendered.index("first") < rendered.index("second")
    assert battle_prompt.prompt in rendered


def test_colossalai_rating_prompt_ends_with_metric_cue() -> None:
    path = need(COLOSSAL / "prompt" / "evaluation_prompt" / "evaluation_prompt_en.json")
    prompts = load_evaluation_prompts(path)
    judge = RatingJudge(ScriptedJudge(lambda r: "3"), prompts, mode="generate")
    record = Record(id="1", category="brainstorming", instruction="Name three fruits.", output="Apple {steps}")
    text = judge.build_prompt(prompts.entry_for("brainstorming"), record, "relevance")
    assert text.endswith("Relevance:")
    assert "Apple {steps}" in text and prompts.metric_definition("brainstorming", "relevance") in text


@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["general"].pop("CoT"), r'"general": missing key "CoT"'),
    (lambda d: d["general"].update(prompt="{question} {anwser}"),
     r'"general" -> "prompt": unknown placeholder.*anwser'),
    (lambda d: d["general"].update(prompt="{question} only"), r"lacks \{answer\}"),
    (lambda d: d["closed_qa"]["metrics"].update(relevance=3),
     r'"closed_qa" -> "metrics" -> "relevance": expected a string'),
    (lambda d: d["closed_qa"].update(reference_prompt="{question} {answer}"), r'"reference_prompt".*\{reference\}'),
    (lambda d: d.update(general=[]), r'"general": expected an object'),
])
def test_prompt_file_errors_name_file_and_key(tmp_path: Path, mutate, expected: str) -> None:
    data = EVAL_FILE_copy()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=expected) as err:
        load_evaluation_prompts(path)
    assert str(path) in str(err.value)


def test_prompt_file_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="broken.json: not valid JSON"):
        load_evaluation_prompts(path)
    with pytest.raises(InputError, match="absent.json: prompt file not found"):
        load_evaluation_prompts(tmp_path / "absent.json")


def test_missing_metrics_and_fallback(eval_path: Path) -> None:
    prompts = load_evaluation_prompts(eval_path)
    assert prompts.missing_metrics("closed_qa", ["relevance", "creativity"]) == ["creativity"]
    assert prompts.missing_metrics("poetry", ["correctness"]) == []  # via general
    with pytest.raises(InputError, match=r'"general" -> "metrics" -> "creativity" is missing.*"poetry" falls back'):
        prompts.metric_definition("poetry", "creativity")


def test_no_general_entry(tmp_path: Path) -> None:
    data = EVAL_FILE_copy()
    del data["general"]
    path = tmp_path / "nogeneral.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    prompts = load_evaluation_prompts(path)
    assert prompts.missing_metrics("poetry", ["relevance"]) == ["relevance"]
    with pytest.raises(InputError, match='no entry for category "poetry"'):
        prompts.entry_for("poetry")


# -- rating ---------------------------------------------------------------------------------

RECORDS = [
    Record(id="1", category="closed_qa", instruction="Capital of France?", output="Paris", targets=("Paris",)),
    Record(id="2", category="closed_qa", instruction="2+2?", output="5 {question} }{", targets=("4",)),
    Record(id="3", category="poetry", instruction="A haiku", output="Leaves fall", targets=("An old pond",)),
]
# The scripted judge's next-token distribution per answer (shared by both metrics).
DISTS = {
    "Paris": {"5": 0.7, " 5": 0.1, "4": 0.1, "The": 0.1},
    "5 {question} }{": {"1": 0.6, "2": 0.3, "**": 0.1},
    "Leaves fall": {"Sure": 0.98, "3": 0.02},
}


def answer_in(req: JudgeRequest) -> str:
    return re.search(r"Answer:\n(.*?)\n\n", user_text(req), re.S).group(1)


def test_rate_logprobs_mode(eval_path: Path) -> None:
    judge = ScriptedJudge(lambda r: logprobs_of(DISTS[answer_in(r)]), logprobs=True)
    prompts = load_evaluation_prompts(eval_path)
    items = rate(judge, prompts, RECORDS, ["relevance", "correctness"])
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 6
    assert all(r.max_tokens == 1 and r.top_logprobs == 20 and r.temperature == 0 for r in judge.batches[0])
    for metric in ("relevance", "correctness"):
        assert items[0].scores[metric] == pytest.approx((5 * 0.8 + 4 * 0.1) / 0.9)
        assert items[0].details[metric]["score_token_mass"] == pytest.approx(0.9)
        assert items[1].scores[metric] == pytest.approx((1 * 0.6 + 2 * 0.3) / 0.9)
        assert metric in items[2].invalid and not items[2].scores
        assert "0.020" in items[2].invalid[metric].reason and "Sure" in items[2].invalid[metric].raw
        assert items[2].details[metric]["fallback_from"] == "poetry"
        assert items[2].details[metric]["prompt_category"] == "general"
        assert items[0].details[metric]["mode"] == "logprobs"
    sent = {answer_in(r): r for r in judge.batches[0]}
    assert "5 {question} }{" in user_text(sent["5 {question} }{"])  # hostile answer verbatim
    assert system_text(sent["Paris"]).startswith("You are a strict grader.")  # entry system prompt
    assert "first line holds only the score" in system_text(sent["Leaves fall"])


def test_rate_generate_mode_and_failures(eval_path: Path) -> None:
    replies = {"Paris": "5\nCorrect.", "5 {question} }{": "The answer claims 'Score: 5'.\nIt is wrong.\nScore: 1"}

    def respond(req: JudgeRequest) -> str:
        if answer_in(req) == "Leaves fall":
            if "Correctness" in user_text(req):
                raise BackendError("HTTP 500 after 3 retries")
            return "I'd say about a 10"
        return replies[answer_in(req)]

    judge = ScriptedJudge(respond, logprobs=False)
    items = rate(judge, load_evaluation_prompts(eval_path), RECORDS, ["relevance", "correctness"])
    assert all(r.max_tokens >= 256 and r.top_logprobs == 0 for r in judge.batches[0])
    assert items[0].scores == {"relevance": 5.0, "correctness": 5.0}
    assert items[1].scores == {"relevance": 1.0, "correctness": 1.0}
    assert items[1].details["relevance"]["parsed_by"] == "last-line"
    assert items[2].invalid["relevance"].raw == "I'd say about a 10"
    assert "judge call failed: HTTP 500" in items[2].invalid["correctness"].reason
    assert items[0].details["relevance"]["raw"] == "5\nCorrect."


def test_rate_mode_choice(eval_path: Path) -> None:
    prompts = load_evaluation_prompts(eval_path)
    assert RatingJudge(ScriptedJudge(lambda r: "1"), prompts).mode == "generate"
    assert RatingJudge(ScriptedJudge(lambda r: "1", logprobs=True), prompts).mode == "logprobs"
    assert RatingJudge(ScriptedJudge(lambda r: "1", logprobs=True), prompts, mode="generate").mode == "generate"
    with pytest.raises(InputError, match="needs a backend with log-probabilities"):
        RatingJudge(ScriptedJudge(lambda r: "1"), prompts, mode="logprobs")
    with pytest.raises(InputError, match="unknown mode"):
        RatingJudge(ScriptedJudge(lambda r: "1"), prompts, mode="votes")


def test_rate_with_reference(eval_path: Path) -> None:
    judge = ScriptedJudge(lambda r: "4")
    prompts = load_evaluation_prompts(eval_path)
    items = rate(judge, prompts, RECORDS, ["correctness"], with_reference=True)
    assert [i.scores["correctness"] for i in items] == [4.0, 4.0, 4.0]
    by_q = {re.search(r"Question:\n(.*?)\n", user_text(r)).group(1): user_text(r) for r in judge.batches[0]}
    # closed_qa has a reference_prompt: used as is.
    assert by_q["2+2?"].startswith("Closed QA with reference.") and "Correct answer:\n4\n" in by_q["2+2?"]
    # poetry -> general, no reference_prompt: a reference block follows the answer, before the metric.
    text = by_q["A haiku"]
    assert text.index("Leaves fall") < text.index("The reference answer") < text.index("An old pond") \
        < text.index("Metric:")
    cn = ScriptedJudge(lambda r: "4")
    rate(cn, prompts, RECORDS[2:], ["correctness"], with_reference=True, language="cn")
    assert "参考答案" in user_text(cn.batches[0][0])


def test_rate_checks_before_any_call(eval_path: Path) -> None:
    prompts = load_evaluation_prompts(eval_path)
    judge = ScriptedJudge(lambda r: "4")
    no_target = [*RECORDS, Record(id="77", category="closed_qa", instruction="?", output="x")]
    with pytest.raises(InputError, match="record.* 77 have no target"):
        rate(judge, prompts, no_target, ["correctness"], with_reference=True)
    with pytest.raises(InputError, match='metric "creativity" of category "closed_qa"'):
        rate(judge, prompts, RECORDS, {"closed_qa": ["creativity"], "general": ["relevance"]})
    with pytest.raises(InputError, match='no metrics configured for category "poetry"'):
        rate(judge, prompts, RECORDS, {"closed_qa": ["relevance"]})
    assert judge.batches == []


def test_rate_per_category_metrics(eval_path: Path) -> None:
    judge = ScriptedJudge(lambda r: "3")
    items = rate(judge, load_evaluation_prompts(eval_path), RECORDS,
                 {"closed_qa": ["relevance", "correctness"], "general": ["relevance"]})
    assert [sorted(i.scores) for i in items] == [["correctness", "relevance"]] * 2 + [["relevance"]]


def common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_requests_sharing_a_prefix_are_adjacent(tmp_path: Path, eval_path: Path) -> None:
    records = [Record(id=str(i), category="closed_qa", instruction=f"Question {i}", output=f"answer {i}",
                      targets=("t",)) for i in range(6)]
    metrics = ["relevance", "correctness"]
    # Question-first template: the metrics of one answer share the longest prefix.
    judge = ScriptedJudge(lambda r: "3")
    rate(judge, load_evaluation_prompts(eval_path), records, metrics)
    sent = [answer_in(r) for r in judge.batches[0]]
    assert [sent[i] for i in range(0, len(sent), 2)] == [sent[i] for i in range(1, len(sent), 2)]
    # Rubric-first template: one metric's requests are contiguous.
    data = EVAL_FILE_copy()
    data["closed_qa"]["prompt"] = ("Metric:\n{metric}\n\nSteps:\n{steps}\n\n"
                                   "Question:\n{question}\n\nAnswer:\n{answer}\n\n")
    path = tmp_path / "rubric_first.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    judge = ScriptedJudge(lambda r: "3")
    rate(judge, load_evaluation_prompts(path), records, metrics)
    kinds = ["Relevance" if "Relevance (1-5)" in user_text(r) else "Correctness" for r in judge.batches[0]]
    assert kinds == sorted(kinds)
    texts = [user_text(r) for r in judge.batches[0]]
    shared = sum(common_prefix(a, b) for a, b in zip(texts, texts[1:]))
    interleaved = [t for pair in zip(texts[:6], texts[6:]) for t in pair]
    assert shared > sum(common_prefix(a, b) for a, b in zip(interleaved, interleaved[1:]))


def test_duplicate_requests_are_sent_once(eval_path: Path) -> None:
    judge = ScriptedJudge(lambda r: "2")
    items = rate(judge, load_evaluation_prompts(eval_path), [RECORDS[0], RECORDS[0]], ["relevance"])
    assert len(judge.batches[0]) == 1 and [i.scores["relevance"] for i in items] == [2.0, 2.0]


def test_aggregate(eval_path: Path) -> None:
    records = [Record(id=str(i), category="closed_qa", instruction=f"q{i}", output=str(s))
               for i, s in enumerate([5, 2, 4, 1, 3])]
    records.append(Record(id="bad", category="closed_qa", instruction="q", output="x"))
    judge = ScriptedJudge(lambda r: answer_in(r))  # the judge echoes the answer as its score
    items = rate(judge, load_evaluation_prompts(eval_path), records, ["relevance"])
    from evaluate.pipeline.results import summarize  # the one aggregation every family's scores go through

    values = [(r.id, it.scores["relevance"]) for r, it in zip(records, items) if "relevance" in it.scores]
    summary = summarize(values, sum("relevance" in it.invalid for it in items), (1.0, 5.0))
    assert summary["mean"] == pytest.approx(3.0) and summary["n"] == 5 and summary["invalid"] == 1
    assert summary["best"] == {"id": "0", "value": 5.0} and summary["worst"] == {"id": "3", "value": 1.0}
    # five items: no interval could honestly be called 95% (the rule of results.mean_ci), and it says why
    assert summary["ci95"] is None and summary["ci_note"].startswith("too few items (n = 5 < 10)")
    wide = summarize(values * 2, 0, (1.0, 5.0))
    assert 1.0 <= wide["ci95"][0] < 3.0 < wide["ci95"][1] <= 5.0


def test_rating_signature(eval_path: Path) -> None:
    prompts = load_evaluation_prompts(eval_path)
    sig = RatingJudge(ScriptedJudge(lambda r: "1", logprobs=True), prompts, with_reference=True).signature()
    assert sig["judge"] == {"backend": "scripted", "model": "scripted-judge"}
    assert sig["prompt_sha256"] == hashlib.sha256(eval_path.read_bytes()).hexdigest()
    assert sig["prompt_file"] == str(eval_path) and sig["mode"] == "logprobs" and sig["with_reference"] is True


# -- battle ---------------------------------------------------------------------------------

BATTLE_FILE = {
    "system_prompt": "Compare two answers.",
    "prompt_template": "[Question]\n{question}\n\n[Answer 1]\n{answer_1}\n[End 1]\n\n[Answer 2]\n{answer_2}\n"
                       "[End 2]\n\n[Requirements]\n{prompt}\n\n",
    "prompt": "Output two scores (1-10) on the first line.",
}


@pytest.fixture
def battle_prompt(tmp_path: Path):
    path = tmp_path / "battle.json"
    path.write_text(json.dumps(BATTLE_FILE), encoding="utf-8")
    return load_battle_prompt(path)


def shown(req: JudgeRequest) -> tuple[str, str]:
    m = re.search(r"\[Answer 1\]\n(.*?)\n\[End 1\].*\[Answer 2\]\n(.*?)\n\[End 2\]", user_text(req), re.S)
    return m.group(1), m.group(2)


def quality(answer: str) -> int:
    return int(re.search(r"q=(\d+)", answer).group(1))


def fair_judge(req: JudgeRequest) -> str:
    first, second = shown(req)
    return f"{quality(first)} {quality(second)}\nExplanation."


def answers(model: str, qualities: list[int]) -> list[Record]:
    return [Record(id=str(i), category="open_qa", instruction=f"Question {i}", output=f"{model} q={q}")
            for i, q in enumerate(qualities)]


def test_battle_both_orders(battle_prompt) -> None:
    judge = ScriptedJudge(fair_judge)
    a, b = answers("A", [8, 5, 7, 9]), answers("B", [6, 5, 9, 2])
    res = battle(judge, battle_prompt, a, b, names=("alpha", "beta"))
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 8
    assert [it.verdict for it in res.items] == ["A", "tie", "B", "A"]
    assert (res.wins, res.ties, res.losses, res.invalid) == (2, 1, 1, 0)
    assert res.win_rate == pytest.approx(2.5 / 4)
    item = res.items[0]
    assert [o.order for o in item.orders] == ["AB", "BA"]
    assert [o.scores for o in item.orders] == [(8, 6), (8, 6)]  # always (A, B)
    assert item.orders[1].raw.startswith("6 8")  # the judge saw B first
    s = res.summary()
    assert s["flip_rate"] == 0 and s["inconsistent"] == 0 and s["first_position_win_rate"] == pytest.approx(0.5)
    assert s["win_rate_ci95"] == pytest.approx(list(wilson_interval(2.5, 4)))
    assert res.signature["both_orders"] is True and res.signature["prompt_sha256"] == battle_prompt.sha256
    assert json.loads(json.dumps(res.to_dict()))["items"][0]["orders"][1]["order"] == "BA"


def test_battle_position_bias_becomes_ties(battle_prompt) -> None:
    judge = ScriptedJudge(lambda req: "9 3")  # always prefers the first answer shown
    res = battle(judge, battle_prompt, answers("A", [1, 2, 3]), answers("B", [3, 2, 1]))
    assert [it.verdict for it in res.items] == ["tie"] * 3
    s = res.summary()
    assert s["inconsistent"] == 3 and s["flips"] == 3 and s["flip_rate"] == 1.0
    assert s["first_position_win_rate"] == 1.0
    one = battle(ScriptedJudge(lambda req: "9 3"), battle_prompt, answers("A", [1]), answers("B", [1]),
                 both_orders=False)
    assert one.items[0].verdict == "A" and len(one.items[0].orders) == 1


def test_battle_score_line_cut_at_the_token_limit_is_invalid(battle_prompt) -> None:
    """With a small max_tokens, "9 10" can arrive as "9 1": a score line that ends where the
    token limit cut the reply is not read as a verdict. One that ends in a line break is whole."""
    replies = {"0": Completion(text="9 1", finish_reason="length"),
               "1": Completion(text="9 10\n\nAssistant", finish_reason="length"),
               "2": Completion(text="9 1", finish_reason="stop")}
    res = battle(ScriptedJudge(lambda req: replies[re.search(r"Question (\d)", user_text(req)).group(1)]),
                 battle_prompt, answers("A", [1, 1, 1]), answers("B", [1, 1, 1]), both_orders=False)
    assert [it.verdict for it in res.items] == ["invalid", "B", "A"]
    assert "cut at the token limit" in res.items[0].orders[0].reason
    assert res.items[1].orders[0].scores == (9, 10)


def test_battle_win_vs_tie_is_inconsistent_not_flip(battle_prompt) -> None:
    judge = ScriptedJudge(lambda req: "7 5" if shown(req)[0].startswith("A") else "6 6")
    res = battle(judge, battle_prompt, answers("A", [1]), answers("B", [1]))
    item = res.items[0]
    assert item.verdict == "tie" and item.inconsistent and not item.flipped


def test_battle_one_order_invalid(battle_prompt) -> None:
    def respond(req: JudgeRequest) -> str:
        first, _ = shown(req)
        if first.startswith("B") and quality(first) == 2:
            return "Assistant 1 is better."
        if first.startswith("B") and quality(first) == 3:
            raise BackendError("timeout")
        return fair_judge(req)

    res = battle(ScriptedJudge(respond), battle_prompt, answers("A", [5, 5, 5]), answers("B", [1, 2, 3]))
    assert [it.verdict for it in res.items] == ["A", "invalid", "invalid"]
    assert res.items[1].orders[1].raw == "Assistant 1 is better." and res.items[1].orders[0].verdict == "A"
    assert "judge call failed: timeout" in res.items[2].orders[1].reason
    s = res.summary()
    assert s["invalid"] == 2 and s["one_order_invalid"] == 2 and s["both_orders_valid"] == 1
    assert res.win_rate == 1.0


def test_battle_input_checks(battle_prompt) -> None:
    judge = ScriptedJudge(fair_judge)
    a = answers("A", [1, 2, 3])
    with pytest.raises(InputError, match=r'ids only in "A": 2'):
        battle(judge, battle_prompt, a, answers("B", [1, 2]))
    res = battle(judge, battle_prompt, a, answers("B", [1, 2]), allow_unmatched=True)
    assert [it.id for it in res.items] == ["0", "1"]
    other = [Record(id="0", category="open_qa", instruction="Something else", output="q=1")]
    with pytest.raises(InputError, match="record id 0 has different questions"):
        battle(judge, battle_prompt, a[:1], other)
    with pytest.raises(InputError, match="contain record id 0 twice"):
        battle(judge, battle_prompt, a[:1] * 2, a[:1])
    with pytest.raises(InputError, match="different names"):
        battle(judge, battle_prompt, a, a, names=("x", "x"))


def test_battle_prompt_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({**BATTLE_FILE, "prompt_template": "{question} {answer_1}"}), encoding="utf-8")
    with pytest.raises(InputError, match=r'b.json: "prompt_template": template lacks \{answer_2\}'):
        load_battle_prompt(path)


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(8, 10)
    assert (lo, hi) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(0, 0) is None  # the one Wilson interval (evaluate.stats): None when nothing to estimate


def test_battle_all_and_rank(battle_prompt) -> None:
    n = 40
    rng = np.random.default_rng(1)
    base = rng.integers(3, 8, n)
    models = {"weak": base - 2, "mid": base, "strong": base + 2}
    # Noise so that not every comparison goes the same way.
    data = {m: answers(m, list(np.clip(q + rng.integers(-2, 3, n), 1, 10))) for m, q in models.items()}
    judge = ScriptedJudge(fair_judge)
    results = battle_all(judge, battle_prompt, data)
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 3 * n * 2
    assert [(r.model_a, r.model_b) for r in results] == [("weak", "mid"), ("weak", "strong"), ("mid", "strong")]
    outputs = {m: {r.id: r.output for r in recs} for m, recs in data.items()}
    raw = battle_ranking(results, outputs, resamples=100, seed=3)["raw"]  # the run's one ranking
    assert sorted(raw, key=lambda m: raw[m]["rank"]) == ["strong", "mid", "weak"]
    lo, hi = raw["mid"]["interval"]
    assert lo < raw["mid"]["rating"] < hi
    assert raw["weak"]["interval"][1] < raw["strong"]["interval"][0]
    assert battle_ranking(results, outputs, resamples=100, seed=3)["raw"] == raw  # fixed seed, same intervals


# -- Bradley-Terry --------------------------------------------------------------------------

def synthetic_battles(beta: dict[str, float], n_items: int, seed: int) -> tuple[list, list[str]]:
    """Every pair of models on `n_items` questions, A winning with the Bradley-Terry probability."""
    rng = np.random.default_rng(seed)
    names = list(beta)
    battles, groups = [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = 1 / (1 + math.exp(beta[b] - beta[a]))
            for k in range(n_items):
                battles.append((a, b, 1.0 if rng.random() < p else 0.0, None, None))
                groups.append(str(k))
    return battles, groups


def logits(ratings: dict[str, float]) -> dict[str, float]:
    """Elo-scale ratings back to the logit scale of the fit."""
    return {m: (r - ELO_BASE) / ELO_SCALE for m, r in ratings.items()}


def test_bradley_terry_recovers_known_strengths() -> None:
    truth = {"m1": -1.0, "m2": -0.3, "m3": 0.4, "m4": 0.9}
    centre = sum(truth.values()) / len(truth)  # the ratings are mean-centred
    battles, groups = synthetic_battles(truth, 600, seed=7)
    raw = bradley_terry(battles, resamples=200, seed=0, groups=groups)["raw"]
    assert sorted(raw, key=lambda m: raw[m]["rank"]) == ["m4", "m3", "m2", "m1"]
    fitted = logits({m: v["rating"] for m, v in raw.items()})
    for m, b in truth.items():
        assert fitted[m] == pytest.approx(b - centre, abs=0.12)
        lo, hi = ((v - ELO_BASE) / ELO_SCALE for v in raw[m]["interval"])
        assert lo < b - centre < hi and hi - lo < 0.4


def test_bradley_terry_matches_direct_likelihood_maximisation() -> None:
    """The fit is the optimum of the penalised likelihood, soft outcomes (ties) included."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    models = ["a", "b", "c", "d"]
    battles = [(models[i], models[j], float(rng.choice([0.0, 0.5, 1.0])), None, None)
               for i, j in (rng.choice(4, 2, replace=False) for _ in range(120))]
    fitted = logits({m: v["rating"] for m, v in bradley_terry(battles, resamples=0)["raw"].items()})
    pos = {m: i for i, m in enumerate(models)}
    a = np.array([pos[x] for x, *_ in battles])
    b = np.array([pos[x] for _, x, *_ in battles])
    y = np.array([o for _, _, o, *_ in battles])

    def nll(x: np.ndarray) -> float:
        full = np.concatenate([[0.0], x])  # the first model is the reference
        z = full[a] - full[b]
        return float(np.sum(np.logaddexp(0, z) - y * z) + L2 / 2 * x @ x)

    opt = minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
    ref = np.concatenate([[0.0], opt.x])
    assert [fitted[m] for m in models] == pytest.approx(list(ref - ref.mean()), abs=1e-5)


def test_bradley_terry_model_that_never_wins() -> None:
    """No finite maximum-likelihood rating exists for a model that never won; the penalty keeps it finite,
    at the optimum computed by hand: the loser's coefficient w solves 10 sigmoid(w) + L2 w = 0."""
    from scipy.optimize import brentq
    from scipy.special import expit

    raw = bradley_terry([("a", "b", 1.0, None, None)] * 10, resamples=0)["raw"]
    gap = (raw["a"]["rating"] - raw["b"]["rating"]) / ELO_SCALE
    w = brentq(lambda w: 10 * expit(w) + L2 * w, -1e4, 0.0, xtol=1e-12)
    assert gap == pytest.approx(-w, abs=1e-6) and 5 < gap < 10  # finite, and large: 10 wins of 10
    assert raw["a"]["rank"] == 1


def test_battle_with_reference(tmp_path: Path, battle_prompt) -> None:
    a = [Record(id="0", category="open_qa", instruction="Q", output="A q=3", targets=("gold {answer_1}",))]
    b = [Record(id="0", category="open_qa", instruction="Q", output="B q=5", targets=("gold {answer_1}",))]
    judge = ScriptedJudge(fair_judge)
    res = battle(judge, battle_prompt, a, b, with_reference=True)
    assert res.items[0].verdict == "B" and res.signature["with_reference"] is True
    for req in judge.batches[0]:  # the block sits after the question, before both answers
        text = user_text(req)
        start = text.index("[Question]\nQ\n\n[Reference answer")
        assert start < text.index("gold {answer_1}") < text.index("[Answer 1]")
    path = tmp_path / "b_ref.json"
    path.write_text(json.dumps({**BATTLE_FILE, "reference_template": "<<REF {reference} REF>>"}), encoding="utf-8")
    judge = ScriptedJudge(fair_judge)
    battle(judge, load_battle_prompt(path), a, b, with_reference=True)
    assert "<<REF gold {answer_1} REF>>" in user_text(judge.batches[0][0])
    no_target = [Record(id="0", category="open_qa", instruction="Q", output="B q=5")]
    with pytest.raises(InputError, match="record.* 0 have no target"):
        battle(judge, battle_prompt, no_target, no_target[:], names=("x", "y"), with_reference=True)


@pytest.mark.parametrize("lang", ["en", "cn"])
def test_project_prompt_files_load(lang: str) -> None:
    root = Path(__file__).resolve().parents[1] / "prompts"
    path = root / f"evaluation_prompt_{lang}.json"
    if not path.exists():
        pytest.skip("project prompt files not written yet")
    prompts = load_evaluation_prompts(path)
    config = json.loads(need(COLOSSAL / "config" / f"config_{lang}.json").read_text(encoding="utf-8"))
    assert all(not prompts.missing_metrics(c, s.get("GPT", [])) for c, s in config["category"].items())
    battle_prompt = load_battle_prompt(root / f"battle_prompt_{lang}.json")
    judge = ScriptedJudge(lambda r: "4")
    rec = [Record(id="1", category="closed_qa", instruction="Q", output="ans", targets=("t",))]
    items = rate(judge, prompts, rec, ["correctness"], with_reference=True, language=lang)
    assert items[0].scores == {"correctness": 4.0}
    assert battle_prompt.reference_template is None or "{reference}" in battle_prompt.reference_template
