"""SAGEval: aspects, template filling, strict parsing with retries, rectification aggregates,
weighted scores, and the plumbing through a real HTTP server and a real local model."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Callable

import pytest

from evaluate.backends.base import Backend, BackendError, Completion, JudgeRequest
from evaluate.core.errors import InputError
from evaluate.core.records import Record
from sageval import (
    EVALUATOR_SUFFIX, extract_json_object, fill, load_aspects, load_prompts, parse_evaluator_reply,
    parse_sage_reply, resolve_aspects, run_sage, validate_aspects,
)
from sageval.agents import weighted_score
from sageval.parsing import ReplyError, aspect_key
from sageval.prompts import evaluator_request

REPO = Path(__file__).resolve().parents[1]
THREE = ["accuracy", "relevancy", "fairness"]


# ---------------------------------------------------------------- a scripted judge

def role_of(req: JudgeRequest) -> str:
    """Which agent sent a request: the evaluator, SAGE, or a one-token scoring request."""
    if req.max_tokens == 1:
        return "score-sage" if "evaluator's score" in req.messages[-1][1] else "score-evaluator"
    return "sage" if req.messages[0][1].startswith("You are SAGE") else "evaluator"


def item_of(req: JudgeRequest) -> str:
    """The record id, taken from the generated text (every test output starts with 'ID:<id>')."""
    text = req.messages[0][1] if req.messages[0][0] == "user" else req.messages[1][1]
    return text.split("ID:", 1)[1].split()[0]


class Scripted(Backend):
    """Answers with `respond(request)`; records every request."""

    kind = "scripted"

    def __init__(self, respond: Callable[[JudgeRequest], str | Completion], logprobs: bool = False):
        super().__init__("scripted")
        self.respond = respond
        self.logprobs = logprobs
        self.requests: list[JudgeRequest] = []

    @property
    def supports_logprobs(self) -> bool:
        return self.logprobs

    def complete(self, request: JudgeRequest) -> Completion:
        self.requests.append(request)
        out = self.respond(request)
        return out if isinstance(out, Completion) else Completion(text=out)


def rec(rid: str, output: str = "1. How was it? (1-5)") -> Record:
    return Record(id=rid, category="survey", instruction="Write a survey.", output=f"ID:{rid} {output}")


def ev_reply(scores: dict[str, int]) -> str:
    return json.dumps({a: {"score": s, "reason": f"{a} looks like {s}"} for a, s in scores.items()})


def sage_reply(scores: dict[str, int], new: list[dict] | None = None, definitions: dict[str, str] | None = None) -> str:
    definitions = definitions or {}
    return json.dumps({
        "aspects": {a: {"score": s, "reason": "checked", "definition": definitions.get(a)} for a, s in scores.items()},
        "new_aspects": new or [],
    })


# ---------------------------------------------------------------- aspects and prompts

def test_default_aspects_and_validation():
    known = load_aspects()
    assert list(known) == ["accuracy", "semantic_diversity", "cohesion", "relevancy", "audience_understandability",
                           "audience_engagement", "fairness", "sentiment_tone"]
    assert known["sentiment_tone"].kind == "label" and not known["sentiment_tone"].is_score
    assert all(a.steps for a in known.values())
    assert validate_aspects(["Accuracy", "semantic diversity", "Audience-Engagement", "tone"], "cfg") == []
    problems = validate_aspects(["acuracy", "cohesion", "coherence", "zzz"], "config.json: category 'survey'")
    assert len(problems) == 3
    assert problems[0].startswith("config.json: category 'survey': unknown SAGEval aspect \"acuracy\"")
    assert 'did you mean "accuracy"' in problems[0]
    assert "listed twice" in problems[1]
    assert "unknown SAGEval aspect \"zzz\"" in problems[2] and "did you mean" not in problems[2]
    assert validate_aspects("accuracy", "cfg") == ["cfg: SAGEval must be a list of aspect names, got str"]
    assert validate_aspects([], "cfg")[0].startswith("cfg: SAGEval lists no aspect")
    with pytest.raises(InputError, match="acuracy"):
        resolve_aspects(["acuracy"])


def test_bad_aspects_and_prompts_files_fail_with_the_file_named(tmp_path):
    bad = tmp_path / "aspects.json"
    bad.write_text(json.dumps({"en": {"x": {"name": "X", "definition": "d", "kind": "stars"}}}))
    with pytest.raises(InputError, match=r"aspects.json.*'kind' must be one of"):
        load_aspects(bad)
    data = json.loads((REPO / "sageval" / "prompts.json").read_text())
    data["en"]["evaluator"]["retry"] = "Wrong: {eror}"
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"en\.evaluator\.retry: unknown placeholder\(s\) \['eror'\]"):
        load_prompts(path)


def test_item_text_is_inserted_verbatim():
    nasty = 'Q1 {output} {instruction} {"score": 5} {{x}} }{ \\n {0}'
    r = Record(id="b", category="survey", instruction="Survey about {input} braces", output=nasty)
    req = evaluator_request(load_prompts(), r, resolve_aspects(THREE), max_tokens=100)
    user = req.messages[1][1]
    assert user.count(nasty) == 1
    assert "Survey about {input} braces" in user
    assert fill("{a}-{b}-{c}", {"a": "{b}", "b": "x"}) == "{b}-x-{c}"


# ---------------------------------------------------------------- strict parsing

def test_extract_json_object():
    assert extract_json_object('Sure!\n```json\n{"a": {"b": 1}}\n```\nDone {x}') == {"a": {"b": 1}}
    assert extract_json_object('Here is {my} answer: {"a": 1} {"a": 2}') == {"a": 1}
    with pytest.raises(ReplyError, match="no JSON object"):
        extract_json_object("score: 4")
    with pytest.raises(ReplyError, match="does not parse"):
        extract_json_object('{"accuracy": {"score": 4, "reason": "cut off')
    with pytest.raises(ReplyError, match='key "accuracy" more than once'):
        extract_json_object('{"accuracy": {"score": 4, "reason": "a"}, "accuracy": {"score": 2, "reason": "b"}}')


def test_schema_checks_types_ranges_and_labels():
    aspects = resolve_aspects(["accuracy", "relevancy", "fairness", "sentiment_tone"])
    text = json.dumps({"Accuracy": {"score": 4.0, "reason": "fine"}, "relevancy": {"score": 6, "reason": "x"},
                       "fairness": {"score": "4", "reason": "x"}, "sentiment_tone": {"label": "Cheerful", "reason": "x"}})
    p = parse_evaluator_reply(text, aspects)
    assert p.judgements["accuracy"].value == 4 and isinstance(p.judgements["accuracy"].value, int)
    assert set(p.problems) == {"relevancy", "fairness", "sentiment_tone"}
    assert "integer from 1 to 5, got 6" in p.problems["relevancy"]
    assert 'got "4"' in p.problems["fairness"]
    assert "one of ['positive', 'neutral', 'negative', 'mixed']" in p.problems["sentiment_tone"]
    p = parse_evaluator_reply(json.dumps({"accuracy": {"score": True, "reason": "x"}}), aspects[:1])
    assert "got true" in p.problems["accuracy"]
    p = parse_evaluator_reply(json.dumps({"accuracy": {"score": 3}}), aspects[:1])
    assert '"reason" must be a non-empty string' in p.problems["accuracy"]
    p = parse_sage_reply(sage_reply({"accuracy": 2}, new=[{"name": f"n{i}", "definition": "d"} for i in range(4)]),
                         aspects[:1], max_new=3)
    assert p.judgements["accuracy"].value == 2 and "at most 3" in p.problems["new_aspects"]
    given = aspects[0].definition
    p = parse_sage_reply(sage_reply({"accuracy": 2}, definitions={"accuracy": "  " + given.upper()[:-1]}), aspects[:1])
    assert p.judgements["accuracy"].definition is None  # the given definition echoed back is no suggestion


# ---------------------------------------------------------------- the two agents, scripted

def test_rectification_means_and_counts():
    ev = {"a": {"accuracy": 5, "relevancy": 4, "fairness": 3},
          "b": {"accuracy": 4, "relevancy": 4, "fairness": 5},
          "c": {"accuracy": 2, "relevancy": 5, "fairness": 4}}
    sg = {"a": {"accuracy": 3, "relevancy": 4, "fairness": 4},
          "b": {"accuracy": 4, "relevancy": 2, "fairness": 5},
          "c": {"accuracy": 1, "relevancy": 5, "fairness": 5}}

    def respond(req):
        rid = item_of(req)
        return ev_reply(ev[rid]) if role_of(req) == "evaluator" else sage_reply(
            sg[rid], definitions={"fairness": "Balanced options."} if rid == "a" else None)

    backend = Scripted(respond)
    seen = []
    result = run_sage(backend, [rec("a"), rec("b"), rec("c")], THREE, progress=lambda *a: seen.append(a))
    assert len(backend.requests) == 6  # one evaluator + one SAGE request per item, no retries
    assert seen == [("evaluator", i, 3) for i in (1, 2, 3)] + [("sage", i, 3) for i in (1, 2, 3)]
    stats = result.aspect_stats()
    assert stats["accuracy"]["mean_before"] == pytest.approx((5 + 4 + 2) / 3, abs=1e-4)
    assert stats["accuracy"]["mean_after"] == pytest.approx((3 + 4 + 1) / 3, abs=1e-4)
    assert (stats["accuracy"]["lowered"], stats["accuracy"]["raised"], stats["accuracy"]["unchanged"]) == (2, 0, 1)
    assert (stats["relevancy"]["lowered"], stats["relevancy"]["raised"]) == (1, 0)
    assert (stats["fairness"]["lowered"], stats["fairness"]["raised"], stats["fairness"]["unchanged"]) == (0, 2, 1)
    assert stats["fairness"]["mean_change_paired"] == pytest.approx(2 / 3, abs=1e-4)
    a = result.items[0].scores
    assert a.scores["accuracy"] == 3.0 and a.scores["accuracy" + EVALUATOR_SUFFIX] == 5.0
    assert a.details["sageval"]["evaluator"]["accuracy"]["reason"] == "accuracy looks like 5"
    assert a.details["sageval"]["suggested_definitions"] == {"fairness": "Balanced options."}
    assert result.definition_suggestions() == {"fairness": [{"id": "a", "definition": "Balanced options."}]}
    # The SAGE agent saw the evaluator's scores and reasons.
    sage_req = next(r for r in backend.requests if role_of(r) == "sage" and item_of(r) == "c")
    assert "- accuracy: 2 (accuracy looks like 2)" in sage_req.messages[1][1]
    summary = result.summary()
    assert json.loads(json.dumps(summary)) == summary
    assert summary["replies"]["evaluator"] == {"retries": 0, "cut_and_closed": 0, "fully_valid": 3}


def test_invalid_json_is_retried_with_the_error_then_succeeds():
    calls = {"evaluator": 0}

    def respond(req):
        if role_of(req) == "evaluator":
            calls["evaluator"] += 1
            return "I think it is good, 4/5." if len(req.messages) == 2 else ev_reply({"accuracy": 4, "relevancy": 3, "fairness": 5})
        return sage_reply({"accuracy": 4, "relevancy": 3, "fairness": 5})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("a")], THREE)
    assert calls["evaluator"] == 2
    retry = [r for r in backend.requests if role_of(r) == "evaluator"][1]
    assert [m[0] for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[2][1] == "I think it is good, 4/5."
    assert "the reply contains no JSON object" in retry.messages[3][1]
    item = result.items[0]
    assert item.attempts == {"evaluator": 2, "sage": 1}
    assert item.scores.invalid == {}
    assert item.scores.scores["relevancy" + EVALUATOR_SUFFIX] == 3.0
    assert result.summary()["replies"]["evaluator"]["retries"] == 1


def test_persistent_garbage_is_invalid_with_raw_and_never_averaged():
    def respond(req):
        rid = item_of(req)
        if role_of(req) == "evaluator":
            return "garbage" if rid == "bad" else ev_reply({"accuracy": 4, "relevancy": 4, "fairness": 4})
        if rid == "bad":
            return '{"aspects": {"accuracy": {"score": 9, "reason": "x"}'  # truncated, every time
        return sage_reply({"accuracy": 2, "relevancy": 4, "fairness": 4})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("ok"), rec("bad")], THREE, max_retries=2)
    bad = result.items[1]
    assert bad.attempts == {"evaluator": 3, "sage": 3}
    assert set(bad.scores.invalid) == {a for x in THREE for a in (x, x + EVALUATOR_SUFFIX)}
    assert bad.scores.scores == {}
    inv = bad.scores.invalid["accuracy" + EVALUATOR_SUFFIX]
    assert inv.raw == "garbage" and "no JSON object" in inv.reason
    assert "does not parse" in bad.scores.invalid["accuracy"].reason
    stats = result.aspect_stats()["accuracy"]
    assert (stats["mean_before"], stats["mean_after"], stats["n_before"], stats["invalid_after"]) == (4.0, 2.0, 1, 1)
    assert stats["n_paired"] == 1 and stats["lowered"] == 1
    assert result.summary()["replies"]["sage"]["fully_valid"] == 1
    # max_retries=0: one request per agent and item, nothing re-asked
    backend = Scripted(respond)
    run_sage(backend, [rec("bad")], THREE, max_retries=0)
    assert len(backend.requests) == 2


def test_out_of_range_score_is_invalid_for_that_aspect_only():
    def respond(req):
        if role_of(req) == "evaluator":
            return ev_reply({"accuracy": 0, "relevancy": 4, "fairness": 5})
        return sage_reply({"accuracy": 3, "relevancy": 7, "fairness": 5})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("a")], THREE, max_retries=1)
    s = result.items[0].scores
    assert "integer from 1 to 5, got 0" in s.invalid["accuracy" + EVALUATOR_SUFFIX].reason
    assert "got 7" in s.invalid["relevancy"].reason
    assert s.scores == {"relevancy@evaluator": 4.0, "fairness@evaluator": 5.0, "accuracy": 3.0, "fairness": 5.0}
    # the follow-up quoted the range problem
    retry = [r for r in backend.requests if role_of(r) == "evaluator"][1]
    assert '"accuracy": "score" must be an integer from 1 to 5, got 0' in retry.messages[-1][1]
    # the SAGE prompt told it the evaluator had no valid accuracy score
    sage_req = [r for r in backend.requests if role_of(r) == "sage"][0]
    assert "- accuracy: no valid judgement" in sage_req.messages[1][1]


def test_backend_failure_is_invalid_and_not_retried():
    def respond(req):
        if role_of(req) == "evaluator":
            raise BackendError("HTTP 500 after 5 retries")
        return sage_reply({"accuracy": 3, "relevancy": 3, "fairness": 3})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("a")], THREE)
    assert sum(role_of(r) == "evaluator" for r in backend.requests) == 1
    assert "HTTP 500" in result.items[0].scores.invalid["accuracy" + EVALUATOR_SUFFIX].reason
    assert result.items[0].scores.scores["accuracy"] == 3.0


def test_new_aspect_frequency_is_normalised():
    new = {
        "a": [{"name": "Question Clarity", "definition": "Clear questions."},
              {"name": "Length", "definition": "Not too long.", "score": 2}],
        "b": [{"name": "question-clarity", "definition": "Each question is clear."},
              {"name": "Relevance", "definition": "an alias of a given aspect"}],
        "c": [{"name": "Questions  clarity", "definition": "Clear."}, {"name": "length", "definition": "Short.", "score": 4}],
    }

    def respond(req):
        rid = item_of(req)
        if role_of(req) == "evaluator":
            return ev_reply({"accuracy": 4, "relevancy": 4, "fairness": 4})
        return sage_reply({"accuracy": 4, "relevancy": 4, "fairness": 4}, new=new[rid])

    result = run_sage(Scripted(respond), [rec("a"), rec("b"), rec("c")], THREE)
    rows = result.new_aspect_counts()
    assert [(r["key"], r["count"]) for r in rows] == [("question_clarity", 3), ("length", 2)]
    assert rows[0]["items"] == ["a", "b", "c"] and rows[1]["mean_score"] == 3.0
    assert result.summary()["echoes_of_given_aspects"] == 1
    assert aspect_key("Options Bias") == "option_bias"


def test_label_aspect_is_a_label_not_a_score():
    aspects = ["accuracy", "sentiment_tone"]

    def respond(req):
        if role_of(req) == "evaluator":
            return json.dumps({"accuracy": {"score": 4, "reason": "ok"},
                               "sentiment_tone": {"label": "Positive", "reason": "warm"}})
        return json.dumps({"aspects": {"accuracy": {"score": 4, "reason": "ok"},
                                       "sentiment_tone": {"label": "neutral", "reason": "plain"}}})

    result = run_sage(Scripted(respond), [rec("a")], aspects)
    s = result.items[0].scores
    assert set(s.scores) == {"accuracy", "accuracy@evaluator"}
    assert s.details["sageval"]["labels"]["sentiment_tone"] == {"evaluator": "positive", "final": "neutral"}
    assert s.details["sageval"]["sentiment"] == "neutral"
    assert result.label_stats()["sentiment_tone"] == {"before": {"positive": 1}, "after": {"neutral": 1}, "changed": 1}


# ---------------------------------------------------------------- probability-weighted scores

def test_weighted_score_arithmetic():
    w = weighted_score({"4": math.log(0.6), " 5": math.log(0.2), "3": math.log(0.1), "The": math.log(0.1)})
    assert w.mass == pytest.approx(0.9)
    assert w.score == pytest.approx((4 * 0.6 + 5 * 0.2 + 3 * 0.1) / 0.9)
    assert weighted_score({"A": -0.1}).score is None


def test_weighted_scores_from_one_token_requests():
    dists = {("score-evaluator", "accuracy"): {"4": math.log(0.5), "5": math.log(0.5)},
             ("score-evaluator", "relevancy"): {"Sure": math.log(0.9), "3": math.log(0.1)},  # too little mass
             ("score-sage", "accuracy"): {"2": math.log(0.75), "3": math.log(0.25)},
             ("score-sage", "relevancy"): {"3": 0.0}}

    def respond(req):
        role = role_of(req)
        if role == "evaluator":
            return ev_reply({"accuracy": 5, "relevancy": 2})
        if role == "sage":
            return sage_reply({"accuracy": 3, "relevancy": 4})
        aspect = "accuracy" if "Aspect: Accuracy" in req.messages[-1][1] else "relevancy"
        return Completion(text="x", top_logprobs=[dists[(role, aspect)]])

    backend = Scripted(respond, logprobs=True)
    seen = []
    result = run_sage(backend, [rec("a")], ["accuracy", "relevancy"], progress=lambda *a: seen.append(a))
    assert [x for x in seen if x[0].endswith("scores")] == [("evaluator scores", 1, 2), ("evaluator scores", 2, 2),
                                                           ("sage scores", 1, 2), ("sage scores", 2, 2)]
    one_token = [r for r in backend.requests if r.max_tokens == 1]
    assert len(one_token) == 4 and all(r.top_logprobs == 20 and len(r.messages) == 1 for r in one_token)
    ev, sg = result.items[0].evaluator, result.items[0].sage
    assert ev["accuracy"].value == pytest.approx(4.5) and ev["accuracy"].source == "logprobs"
    assert ev["accuracy"].stated == 5
    assert ev["relevancy"].value == 2 and ev["relevancy"].source == "reply" and ev["relevancy"].digit_mass == 0.1
    assert sg["accuracy"].value == pytest.approx(2.25) and sg["relevancy"].value == pytest.approx(3.0)
    # the SAGE scoring request saw the evaluator's (weighted) score and reason
    sage_acc = next(r for r in one_token if role_of(r) == "score-sage" and "Aspect: Accuracy" in r.messages[0][1])
    assert "The evaluator's score: 4.50 (accuracy looks like 5)" in sage_acc.messages[0][1]
    stats = result.aspect_stats()
    assert stats["accuracy"]["lowered"] == 1  # 4.5 -> 2.25
    assert stats["relevancy"]["raised"] == 1  # 2 -> 3.0
    assert result.signature["weighted_scores"] == {"evaluator": True, "sage": True}
    # use_logprobs=False: no one-token requests; True on a backend without them: refused
    backend = Scripted(respond, logprobs=True)
    run_sage(backend, [rec("a")], ["accuracy"], use_logprobs=False)
    assert all(r.max_tokens != 1 for r in backend.requests)
    with pytest.raises(InputError, match="no log-probabilities"):
        run_sage(Scripted(respond), [rec("a")], ["accuracy"], use_logprobs=True)


def test_separate_sage_backend():
    ev_backend = Scripted(lambda r: ev_reply({"accuracy": 5}))
    sg_backend = Scripted(lambda r: sage_reply({"accuracy": 1}))
    result = run_sage(ev_backend, [rec("a"), rec("b")], ["accuracy"], sage_backend=sg_backend)
    assert {role_of(r) for r in ev_backend.requests} == {"evaluator"}
    assert {role_of(r) for r in sg_backend.requests} == {"sage"}
    assert result.aspect_stats()["accuracy"]["lowered"] == 2


def test_records_must_be_records():
    with pytest.raises(InputError, match=r"records\[0\]"):
        run_sage(Scripted(lambda r: ""), [{"id": "x"}], ["accuracy"])


# ---------------------------------------------------------------- through a real HTTP server

def _through_fake_server(reply_fn, records, aspects, **kw):
    """run_sage on the real OpenAI client against the fake server; (result, the requests it saw)."""
    fake_server = pytest.importorskip("tests.fake_openai_server", reason="tests/fake_openai_server.py is absent")
    openai_compat = pytest.importorskip("evaluate.backends.openai_compat")
    with fake_server.FakeOpenAIServer(reply_fn) as server:
        backend = openai_compat.OpenAICompatBackend("fake-judge", base_url=server.url, api_key="k", max_retries=0)
        result = run_sage(backend, records, aspects, **kw)
        reqs = server.chat_requests()
        backend.close()
    return result, reqs


def test_through_the_fake_openai_server():
    fake_server = pytest.importorskip("tests.fake_openai_server", reason="tests/fake_openai_server.py is absent")

    def reply_fn(rec):
        body = rec.body
        msgs = body["messages"]
        if body.get("max_tokens", body.get("max_completion_tokens")) == 1:
            return fake_server.Reply(content="4", top_logprobs=[{"4": math.log(0.7), "2": math.log(0.3)}])
        if msgs[0]["content"].startswith("You are SAGE"):
            return sage_reply({"accuracy": 2, "fairness": 4},
                              new=[{"name": "Answer balance", "definition": "Options are balanced."}])
        if len(msgs) == 2:
            return "```json\n{\"accuracy\": {\"score\": 4, \"reason\": \"fine\"}, \"fairness\": {\"score\": 5}}\n```"
        return ev_reply({"accuracy": 4, "fairness": 5})

    result, reqs = _through_fake_server(reply_fn, [rec("a")], ["accuracy", "fairness"])
    retry = next(r for r in reqs if len(r.body["messages"]) == 4)
    assert '"fairness": "reason" must be a non-empty string' in retry.user_text
    one_token = [r for r in reqs if r.body.get("max_tokens") == 1]
    assert len(one_token) == 4 and all(r.body.get("logprobs") for r in one_token)
    item = result.items[0]
    assert item.scores.scores["accuracy@evaluator"] == pytest.approx(4 * 0.7 + 2 * 0.3)
    assert item.evaluator["accuracy"].stated == 4
    assert item.scores.invalid == {}
    assert result.new_aspect_counts()[0]["key"] == "answer_balance"
    assert result.signature["evaluator_backend"]["backend"] == "openai"


# ---------------------------------------------------------------- a real local model

@pytest.fixture(scope="module")
def smollm2():
    local = pytest.importorskip("evaluate.backends.local")
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    # One thread: on a busy CI machine torch's spinning thread pool made generation 10x slower.
    backend = local.LocalBackend("SmolLM2-135M-Instruct", max_new_tokens=32, threads=1)
    try:
        backend.load()
    except InputError as exc:
        pytest.skip(f"SmolLM2-135M-Instruct is not available: {exc}")
    yield backend
    backend.close()
    torch.set_num_threads(threads)


@pytest.mark.skipif(os.environ.get("SAGEVAL_SKIP_LOCAL") == "1", reason="SAGEVAL_SKIP_LOCAL=1")
def test_end_to_end_with_smollm2(smollm2):
    """Real generation from a tiny model: every score is either parsed or invalid with its raw text."""
    r = Record(id="s", category="quiz", instruction="Write a one-question quiz about Paris.",
               output="Q1. What is the capital of France? (a) Paris (b) Rome")
    result = run_sage(smollm2, [r], ["accuracy"], max_retries=1, max_tokens=32)
    item = result.items[0]
    for key in ("accuracy", "accuracy@evaluator"):
        assert (key in item.scores.scores) != (key in item.scores.invalid)
        if key in item.scores.scores:
            assert 1.0 <= item.scores.scores[key] <= 5.0
        else:
            assert item.scores.invalid[key].reason
    assert 1 <= item.attempts["evaluator"] <= 2 and 1 <= item.attempts["sage"] <= 2
    assert isinstance(item.raw["evaluator"], str) and item.raw["evaluator"]
    json.dumps(result.summary())
    assert result.signature["weighted_scores"] == {"evaluator": True, "sage": True}


# ---------------------------------------------------------------- Chinese ("cn")

import re  # noqa: E402  (kept with the tests that use it)

CJK = re.compile(r"[\u4e00-\u9fff]")
CN_TEXT = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # CJK, CJK and full-width punctuation


def _key_paths(node, prefix=""):
    """Every dotted key path of a JSON object (lists are leaves), to compare two language sections."""
    if not isinstance(node, dict):
        return {prefix}
    out = set()
    for k, v in node.items():
        out |= _key_paths(v, f"{prefix}.{k}" if prefix else k)
    return out


def _placeholders(text: str) -> set[str]:
    from evaluate.core.templates import placeholders
    from sageval.prompts import PLACEHOLDERS
    known = set().union(*(allowed for allowed, _ in PLACEHOLDERS.values()))
    return placeholders(text) & known


def test_cn_prompts_match_en_key_for_key_and_placeholder_for_placeholder():
    raw = json.loads((REPO / "sageval" / "prompts.json").read_text(encoding="utf-8"))
    assert _key_paths(raw["cn"]) == _key_paths(raw["en"])
    en, cn = load_prompts(language="en"), load_prompts(language="cn")
    assert cn.language == "cn" and set(cn.templates) == set(en.templates)
    for name, text in en.templates.items():
        assert _placeholders(cn.t(name)) == _placeholders(text), name
        # Human-readable text is Chinese: Chinese words, or at least Chinese punctuation where a
        # template is only a frame (e.g. "- {id}：{score}（{reason}）"); "step_entry" has neither.
        if name != "step_entry" and CN_TEXT.search(text := cn.t(name)) is None:
            pytest.fail(f"cn.{name} has no Chinese text: {text!r}")
    assert len(cn.exemplars) == len(en.exemplars) >= 1
    aspects = load_aspects(language="cn")
    for ex_en, ex_cn in zip(en.exemplars, cn.exemplars):
        assert set(ex_cn) == set(ex_en) and CJK.search(ex_cn["output"])
        assert list(ex_cn["reply"]) == list(ex_en["reply"])
        for aid, entry in ex_cn["reply"].items():
            assert set(entry) == set(ex_en["reply"][aid]), aid  # same JSON field names ("score"/"label", "reason")
            assert CJK.search(entry["reason"]), aid
        # The cn exemplar is itself a reply the parser accepts for the cn aspects.
        parsed = parse_evaluator_reply(json.dumps(ex_cn["reply"], ensure_ascii=False), list(aspects.values()))
        assert parsed.ok, parsed.problems


def test_cn_aspects_match_en_and_accept_chinese_names():
    en, cn = load_aspects(language="en"), load_aspects(language="cn")
    assert list(cn) == list(en)
    for aid, a in en.items():
        c = cn[aid]
        assert (c.kind, c.labels, len(c.steps)) == (a.kind, a.labels, len(a.steps)), aid
        assert CJK.search(c.name) and CJK.search(c.definition) and all(CJK.search(s) for s in c.steps), aid
        # A config written with the English spellings keeps working in cn.
        for spelling in (a.name, *a.aliases):
            assert validate_aspects([spelling], f"cn {aid}", cn) == [], spelling
            assert resolve_aspects([spelling], cn)[0].id == aid, spelling
    assert validate_aspects(["准确性", "语义多样性", "清晰度", "语气", "公平性"], "cfg", cn) == []
    assert [a.id for a in resolve_aspects(["准确性", "情感/语气", "coherence"], cn)] == \
        ["accuracy", "sentiment_tone", "cohesion"]
    problems = validate_aspects(["准确度", "准确性"], "cfg", cn)  # an alias and the name: one aspect twice
    assert len(problems) == 1 and "listed twice" in problems[0]
    with pytest.raises(InputError, match="no aspects for language 'jp'"):
        load_aspects(language="jp")


def test_cn_through_the_fake_openai_server():
    fake_server = pytest.importorskip("tests.fake_openai_server", reason="tests/fake_openai_server.py is absent")

    def reply_fn(rec):
        body = rec.body
        msgs = body["messages"]
        if body.get("max_tokens", body.get("max_completion_tokens")) == 1:
            if "评估者的分数" in msgs[-1]["content"]:  # SAGE's one-token request
                return fake_server.Reply(content="2", top_logprobs=[{"2": math.log(0.9), "3": math.log(0.1)}])
            return fake_server.Reply(content="4", top_logprobs=[{"4": math.log(0.7), "2": math.log(0.3)}])
        if msgs[0]["content"].startswith("你是 SAGE"):
            return json.dumps({"aspects": {
                "accuracy": {"score": 2, "reason": "第 2 题的答案是错的。", "definition": None},
                "fairness": {"score": 4, "reason": "选项略有偏向。", "definition": "选项正反平衡。"},
                "sentiment_tone": {"label": "neutral", "reason": "语气平实。"}},
                "new_aspects": [{"name": "选项平衡", "definition": "正反选项数量相当。"},
                                {"name": "公正性", "definition": "只是换个说法。"}]}, ensure_ascii=False)
        if len(msgs) == 2:  # first evaluator reply: fenced, fairness lacks its reason
            return "```json\n{\"accuracy\": {\"score\": 4, \"reason\": \"基本正确\"}, \"fairness\": {\"score\": 5}, " \
                   "\"sentiment_tone\": {\"label\": \"positive\", \"reason\": \"语气热情\"}}\n```"
        return json.dumps({"accuracy": {"score": 4, "reason": "基本正确"}, "fairness": {"score": 5, "reason": "没有偏见"},
                           "sentiment_tone": {"label": "positive", "reason": "语气热情"}}, ensure_ascii=False)

    r = Record(id="z", category="quiz", instruction="写一份关于长城的两道题测验。",
               output="1. 长城位于哪个国家？（A）中国（B）日本 2. 长城全长约多少公里？答案：500 公里")
    result, reqs = _through_fake_server(reply_fn, [r], ["准确性", "公平性", "语气"], language="cn")

    # What the server was sent is the Chinese prompt, with the Chinese aspect names and the item verbatim.
    first = next(q for q in reqs if len(q.body["messages"]) == 2 and q.body.get("max_tokens") != 1
                 and not q.body["messages"][0]["content"].startswith("你是 SAGE"))
    system, user = first.body["messages"][0]["content"], first.user_text
    assert CJK.search(system) and "You are" not in system
    assert "accuracy（准确性）" in user and "fairness（公平性）" in user and "sentiment_tone（情感/语气）" in user
    assert "待评估的文本" in user and "顾客满意度调查" in user and r.output in user
    assert "Evaluate" not in user and "Reply with" not in user
    retry = next(q for q in reqs if len(q.body["messages"]) == 4)
    assert retry.user_text.startswith("你的回复无法使用：")
    assert '"fairness": "reason" must be a non-empty string' in retry.user_text
    sage = next(q for q in reqs if q.body["messages"][0]["content"].startswith("你是 SAGE"))
    assert "最多 3 个" in sage.body["messages"][0]["content"]
    assert "- accuracy：3.40（基本正确）" in sage.user_text and "- sentiment_tone：positive（语气热情）" in sage.user_text
    one_token = [q for q in reqs if q.body.get("max_tokens") == 1]
    assert len(one_token) == 4 and all(CJK.search(q.user_text) and "维度：" in q.user_text for q in one_token)
    assert sum("评估者的分数" in q.user_text for q in one_token) == 2

    # The scores are rectified exactly as in en.
    item = result.items[0]
    assert item.scores.invalid == {}
    assert item.scores.scores["accuracy@evaluator"] == pytest.approx(4 * 0.7 + 2 * 0.3)
    assert item.scores.scores["accuracy"] == pytest.approx(2 * 0.9 + 3 * 0.1)
    assert item.evaluator["fairness"].stated == 5 and item.sage["fairness"].stated == 4
    assert item.sage["accuracy"].reason == "第 2 题的答案是错的。"
    stats = result.aspect_stats()
    assert (stats["accuracy"]["lowered"], stats["fairness"]["lowered"]) == (1, 1)
    assert item.scores.details["sageval"]["labels"]["sentiment_tone"] == {"evaluator": "positive", "final": "neutral"}
    assert item.scores.details["sageval"]["suggested_definitions"] == {"fairness": "选项正反平衡。"}
    assert [c["key"] for c in result.new_aspect_counts()] == ["选项平衡"]  # "公正性" renames fairness
    summary = result.summary()
    assert summary["echoes_of_given_aspects"] == 1 and summary["signature"]["language"] == "cn"
    assert json.loads(json.dumps(summary, ensure_ascii=False)) == summary


def test_a_reply_cut_at_the_token_limit_is_retried_without_echoing_its_run_on():
    run_on = '{"accuracy": {"score": 3, "reason": "' + "The form is not well-estimated. " * 60
    answers = {"evaluator": 0}

    def respond(req):
        if role_of(req) == "evaluator":
            answers["evaluator"] += 1
            if answers["evaluator"] == 1:
                return Completion(text=run_on, finish_reason="length", completion_tokens=req.max_tokens)
            return ev_reply({"accuracy": 3, "relevancy": 3, "fairness": 5})
        return sage_reply({"accuracy": 3, "relevancy": 3, "fairness": 5})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("a")], THREE, max_tokens=320)
    retry = [r for r in backend.requests if role_of(r) == "evaluator"][1]
    assert retry.messages[2][1] == run_on[:300] + " ..."  # the start of the cut reply, not all of it
    assert "cut off at the 320-token limit" in retry.messages[3][1]
    assert "one short sentence" in retry.messages[3][1]
    assert result.items[0].evaluator["accuracy"].value == 3


def test_a_cut_reply_that_holds_every_aspect_is_closed_not_retried():
    """The 1.5B judge gives its score, then runs on in the reason until the token limit: the
    reply is closed after the reason's last full sentence and kept, with no retry."""
    cut = ('{"accuracy": {"score": 4, "reason": "Correct."}, "relevancy": {"score": 2, "reason": '
           '"Question 3 is off-topic. It asks about holidays, which is not relevant. The form is not well-te')
    fairness_first = ('{"fairness": {"score": 5, "reason": "Balanced."}, "accuracy": {"score": 4, "reason": "Fine."}, '
                      '"relevancy": {"score": 2, "rea')

    def respond(req):
        if role_of(req) == "evaluator":
            text = {"a": cut, "b": fairness_first}[item_of(req)]
            return Completion(text=text, finish_reason="length", completion_tokens=req.max_tokens)
        return sage_reply({"accuracy": 4, "relevancy": 2, "fairness": 5})

    backend = Scripted(respond)
    result = run_sage(backend, [rec("a"), rec("b")], ["accuracy", "relevancy"], max_tokens=64)
    ev_requests = [r for r in backend.requests if role_of(r) == "evaluator"]
    # a: closed with every aspect, not asked again; b: cut in the key after relevancy's score, so
    # relevancy has no reason: asked again (max_retries=2), keeping what the closed reply gave
    assert [item_of(r) for r in ev_requests] == ["a", "b", "b", "b"]
    a, b = result.items
    assert a.evaluator["relevancy"].value == 2
    assert a.evaluator["relevancy"].reason == "Question 3 is off-topic. It asks about holidays, which is not relevant."
    assert a.closed == {"evaluator": True, "sage": False} and a.attempts["evaluator"] == 1
    assert a.scores.details["sageval"]["cut_and_closed"] == ["evaluator"]
    assert b.evaluator["accuracy"].value == 4 and b.evaluator["accuracy"].reason == "Fine."
    assert b.evaluator["relevancy"].value is None and '"reason" must be' in b.evaluator["relevancy"].invalid
    assert result.summary()["replies"]["evaluator"]["cut_and_closed"] == 2
    # the SAGE agent saw the closed reason
    sage_a = next(r for r in backend.requests if role_of(r) == "sage" and item_of(r) == "a")
    assert "- relevancy: 2 (Question 3 is off-topic. It asks about holidays, which is not relevant.)" in sage_a.messages[1][1]


def test_a_reply_that_was_not_cut_is_never_closed():
    """Closing is only for replies cut at the token limit: a malformed reply that ended on its
    own is invalid and retried, however close it is to JSON."""
    broken = '{"accuracy": {"score": 4, "reason": "Correct."}, "relevancy": {"score": 2, "reason": "Off-topic.'
    backend = Scripted(lambda req: Completion(text=broken, finish_reason="stop") if role_of(req) == "evaluator"
                       else sage_reply({"accuracy": 4, "relevancy": 2}))
    result = run_sage(backend, [rec("a")], ["accuracy", "relevancy"], max_retries=1)
    assert result.items[0].attempts["evaluator"] == 2 and not result.items[0].closed["evaluator"]
    assert result.items[0].evaluator["relevancy"].value is None


@pytest.mark.parametrize("text, closed", [
    # an open reason ends after its last full sentence
    ('{"a": {"score": 3, "reason": "One. Two! Three? Fou', '{"a": {"score": 3, "reason": "One. Two! Three?"}}'),
    # Chinese sentence ends need no space after them
    ('{"a": {"score": 3, "reason": "完整的一句。没有完', '{"a": {"score": 3, "reason": "完整的一句。"}}'),
    # an escaped quote is no end of the string; "hi." followed by an escape is no sentence end
    ('{"a": {"score": 3, "reason": "He said \\"hi.\\" then. And', '{"a": {"score": 3, "reason": "He said \\"hi.\\" then."}}'),
    # no full sentence: the member goes, back to the last complete one
    ('{"a": {"score": 3, "reason": "ok."}, "b": {"score": 4, "reason": "no end', '{"a": {"score": 3, "reason": "ok."}, "b": {"score": 4}}'),
    # nested lists of the SAGE agent
    ('{"aspects": {"a": {"score": 3, "reason": "ok.", "definition": null}}, "new_aspects": [{"name": "x", "definition": "A. B',
     '{"aspects": {"a": {"score": 3, "reason": "ok.", "definition": null}}, "new_aspects": [{"name": "x", "definition": "A."}]}'),
    # a number at the very end may be cut ("4" of "45"?): nothing before it is complete
    ('{"a": {"score": 4', None),
    # a complete object is not "cut", whatever else is wrong with it
    ('{"a": {"score": 3, "reason": "ok."}} and more', None),
    ('no JSON here', None),
    # a cut inside a key cannot be closed there
    ('{"a": {"score": 3, "reason": "ok."}, "relev', '{"a": {"score": 3, "reason": "ok."}}'),
])
def test_close_cut_reply(text, closed):
    from sageval.parsing import close_cut_reply

    got = close_cut_reply(text)
    assert got == closed
    if got is not None:
        json.loads(got)
