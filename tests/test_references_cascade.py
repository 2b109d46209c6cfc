"""Issue 40: the references reach the judge (`gpt_with_reference: auto`), or the plan and the closing
lines say they do not; rules before the judge (`category.<name>.cascade`): a rule check decides what it
can and only the undecided items go to the judge, counted in the dry run, the log and the closing lines.

Every judge request is captured at a real HTTP server on 127.0.0.1 (tests/fake_openai_server.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.core.errors import InputError
from evaluate.judges.prompts import load_evaluation_prompts

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
COLOSSAL = REPO / ".." / "shared" / "data" / "colossalai" / "Chat" / "evaluate" / "prompt" / "evaluation_prompt"
BATTLE_MARK = "[Assistant 1's answer]"

# the README's first config: closed_qa and open_qa have references in the target file
QUESTIONS = [
    ("q1", "closed_qa", "What is the capital of Australia?", "Canberra"),
    ("q2", "closed_qa", "Which planet is known as the red planet?", "Mars"),
    ("q3", "open_qa", "Who wrote the novel Pride and Prejudice?", "Jane Austen wrote it."),
    ("q4", "open_qa", "What gas do plants take in from the air to make sugar?", "Carbon dioxide."),
    ("q5", "brainstorming", "Suggest two names for a bakery.", "Crumb & Co.; The Rising Loaf"),
]
BASE = {"q1": "The capital of Australia is Sydney.", "q2": "Venus.", "q3": "Charlotte Bronte.",
        "q4": "Oxygen.", "q5": "Bread Place; Bakery One"}
CAND = {"q1": "The capital of Australia is Canberra.", "q2": "Mars", "q3": "Jane Austen.",
        "q4": "Carbon dioxide", "q5": "Knead to Know; Flour Power"}


def records(outputs: dict[str, str] | None, questions=QUESTIONS, with_targets: bool = False) -> list[dict]:
    out = []
    for rid, cat, q, target in questions:
        rec = {"id": rid, "category": cat, "instruction": q, "input": ""}
        if outputs is not None:
            rec["output"] = outputs[rid]
        if with_targets:
            rec["target"] = target
        out.append(rec)
    return out


def write_run(tmp_path: Path, server: FakeOpenAIServer, *, questions=QUESTIONS, answers=None, category=None,
              **extra) -> Path:
    """Answer files, a target file and a config like the README's first one, the judge at `server`."""
    answers = answers or {"base": BASE, "cand": CAND}
    entries = []
    for name, outputs in answers.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(records(outputs, questions)), encoding="utf-8")
        entries.append({"name": name, "path": str(path)})
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps(records(None, questions, with_targets=True)), encoding="utf-8")
    cfg = {"answers": entries, "target_file": str(targets), "save_path": str(tmp_path / "out"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "mode": "generate",
                     "max_retries": 1, "timeout": 10},
           "category": category or {
               "closed_qa": {"Metrics": ["BLEU", "ROUGE", "CHRF"], "GPT": ["correctness"]},
               "open_qa": {"Metrics": ["ROUGE", "CHRF"], "GPT": ["relevance", "correctness"]},
               "brainstorming": {"Metrics": ["Distinct"], "GPT": ["relevance"]}},
           **extra}
    path = tmp_path / "my.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def flat(text: str) -> str:
    """Text with every run of whitespace one space: the closing lines wrap to the terminal's width."""
    return " ".join(text.split())


def replies(rec) -> Reply:
    return Reply(content="5 5" if BATTLE_MARK in rec.user_text else "3")


def rating_requests(server: FakeOpenAIServer, question: str, metric_name: str) -> list[str]:
    """The user messages of the rating requests for `question` on the metric whose display name is given."""
    return [r.user_text for r in server.chat_requests() if BATTLE_MARK not in r.user_text
            and question in r.user_text and f"[Metric]\n{metric_name} (1-5)" in r.user_text]


def battle_requests(server: FakeOpenAIServer, question: str) -> list[str]:
    return [r.user_text for r in server.chat_requests() if BATTLE_MARK in r.user_text and question in r.user_text]


# ------------------------------------------------------------------ references reach the judge
def test_readme_config_shows_the_reference_to_the_judge_and_says_so(tmp_path, fake_openai, capsys):
    fake_openai.reply_fn = replies
    cfg = write_run(tmp_path, fake_openai)
    assert main(["--config", str(cfg), "--no-charts"]) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr()
    sydney = rating_requests(fake_openai, "capital of Australia", "Correctness")
    assert len(sydney) == 2  # base and cand
    for text in sydney:
        assert "[Reference answer]\nCanberra\n[End of reference answer]" in text
        assert "passage" not in text  # the reference wording, not "the passage given in the question"
        assert "same key fact as the reference answer" in text
    assert "Sydney" in sydney[0] + sydney[1] and "is Canberra." in sydney[0] + sydney[1]
    # open_qa's correctness is shown its reference, its relevance is not (not a reference metric)
    assert all("Jane Austen wrote it." in t for t in rating_requests(fake_openai, "Pride and Prejudice", "Correctness"))
    relevance = rating_requests(fake_openai, "Pride and Prejudice", "Relevance")
    assert len(relevance) == 2 and not any("Jane Austen wrote it." in t for t in relevance)
    # battles: closed_qa's with the reference (a rating of the category is shown it), brainstorming's without
    assert battle_requests(fake_openai, "capital of Australia") and \
        all("Canberra\n" in t for t in battle_requests(fake_openai, "capital of Australia"))
    assert not any("Rising Loaf" in t for t in battle_requests(fake_openai, "names for a bakery"))
    # the plan (log) and the closing lines say it per category
    line = "closed_qa: 2 records have a reference; the judge is shown it for GPT/correctness and the battle"
    assert line in out.err and line in flat(out.out)
    assert re.search(r"brainstorming: 1 records have a reference; GPT/relevance is judged WITHOUT it \(not in the "
                     r"reference_metrics of the prompt file's \"brainstorming\" entry\)", out.err)
    res = json.loads((tmp_path / "out" / "results" / "base.json").read_text())
    assert res["signatures"]["GPT/correctness"]["reference_shown_in"] == ["closed_qa", "open_qa"]
    assert res["signatures"]["GPT/relevance"]["reference_shown_in"] == []
    assert res["signatures"]["GPT/correctness"]["with_reference"] == "auto"
    battle = json.loads((tmp_path / "out" / "battles" / "base__vs__cand.json").read_text())
    assert battle["signature"]["reference_shown_in"] == ["closed_qa", "open_qa"]


def test_gpt_with_reference_true_shows_every_metric_and_says_so(tmp_path, fake_openai, capsys):
    fake_openai.reply_fn = replies
    cfg = write_run(tmp_path, fake_openai, gpt_with_reference=True)
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "references (gpt_with_reference: true):" in plan
    assert "brainstorming: 1 records have a reference; the judge is shown it for GPT/relevance and the battle" in plan
    assert main(["--config", str(cfg), "--no-charts", "--only", "GPT"]) == 0
    capsys.readouterr()
    relevance = rating_requests(fake_openai, "names for a bakery", "Relevance")
    assert len(relevance) == 2 and all("The Rising Loaf" in t for t in relevance)


def test_gpt_with_reference_false_says_in_the_plan_and_closing_lines_that_it_is_not_sent(tmp_path, fake_openai,
                                                                                          capsys):
    fake_openai.reply_fn = replies
    cfg = write_run(tmp_path, fake_openai, gpt_with_reference=False)
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    said = ("closed_qa: 2 records have a reference; GPT/correctness and the battle are judged WITHOUT it "
            "(gpt_with_reference: false)")
    assert said in plan and "references (gpt_with_reference: false):" in plan
    assert fake_openai.chat_calls == 0  # a dry run asks nothing
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    out = capsys.readouterr()
    assert said in flat(out.out)  # the closing lines repeat it
    assert fake_openai.chat_calls > 0
    assert not any("[Reference answer]" in r.user_text or "Canberra\n" in r.user_text.replace("is Canberra.", "")
                   for r in fake_openai.chat_requests())


def test_auto_leaves_out_a_category_where_a_record_has_no_reference_and_says_why(tmp_path, fake_openai, capsys):
    fake_openai.reply_fn = replies
    questions = [*QUESTIONS[:2], ("q6", "closed_qa", "How many legs has a spider?", "")]
    answers = {"base": {**BASE, "q6": "Eight."}, "cand": {**CAND, "q6": "Six."}}
    cfg = write_run(tmp_path, fake_openai, questions=questions, answers=answers,
                    category={"closed_qa": {"GPT": ["correctness"]}})
    assert main(["--config", str(cfg), "--no-charts"]) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr()
    assert ("closed_qa: 2 of 3 records have a reference; GPT/correctness and the battle are judged WITHOUT it "
            "(gpt_with_reference: auto, and 1 of the 3 records have none)") in out.err
    assert not any("[Reference answer]" in r.user_text for r in fake_openai.chat_requests())


def test_gpt_with_reference_true_refuses_a_record_without_a_reference(tmp_path, fake_openai, capsys):
    questions = [*QUESTIONS[:2], ("q6", "closed_qa", "How many legs has a spider?", "")]
    answers = {"base": {**BASE, "q6": "Eight."}, "cand": {**CAND, "q6": "Six."}}
    cfg = write_run(tmp_path, fake_openai, questions=questions, answers=answers, gpt_with_reference=True,
                    category={"closed_qa": {"GPT": ["correctness"]}})
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    assert "records without a target: q6" in capsys.readouterr().err


def test_a_prompt_file_without_reference_metrics_shows_none_under_auto_and_says_why(tmp_path, fake_openai, capsys):
    path = COLOSSAL / "evaluation_prompt_en.json"
    if not path.is_file():
        pytest.skip(f"{path} not present (shared data is absent)")
    fake_openai.reply_fn = replies
    cfg = write_run(tmp_path, fake_openai, prompts={"evaluation": str(path.resolve())},
                    category={"closed_qa": {"GPT": ["correctness"]}})
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert ('closed_qa: 2 records have a reference; GPT/correctness is judged WITHOUT it (the prompt file\'s '
            '"closed_qa" entry has no reference_metrics (gpt_with_reference: true shows it anyway))') in plan


@pytest.mark.parametrize("value, said", [(1, "got an integer 1"), ("yes", 'got a string "yes"'),
                                         ("Auto", 'did you mean "auto"')])
def test_gpt_with_reference_takes_auto_true_or_false(tmp_path, fake_openai, capsys, value, said):
    cfg = write_run(tmp_path, fake_openai, gpt_with_reference=value)
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "gpt_with_reference: expected auto, true or false" in err and said in err, err


# ------------------------------------------------------------------ the prompt files' reference wording
@pytest.mark.parametrize("lang", ["en", "cn"])
def test_reference_wording_of_the_project_prompts(lang):
    prompts = load_evaluation_prompts(REPO / "prompts" / f"evaluation_prompt_{lang}.json")
    label = {"en": "Correctness:", "cn": "正确性："}[lang]
    marked = {c for c, e in prompts.entries.items() if e.reference_metrics}
    assert marked == {"classification", "closed_qa", "extraction", "open_qa", "rewriting", "general"}
    for cat, entry in prompts.entries.items():
        assert entry.reference_metrics is not None, cat  # every entry says, even when it marks nothing
        for metric in entry.reference_metrics:
            definition, steps = entry.texts(metric, True)
            assert definition != entry.metrics[metric] and steps.endswith("\n\n" + label), (cat, metric)
            name = re.compile(r"^[^(（]+")  # the same display name as the plain definition
            assert name.match(definition).group() == name.match(entry.metrics[metric]).group(), (cat, metric)
            assert "passage" not in definition + steps and "材料" not in definition + steps
    closed = prompts.entries["closed_qa"]
    # without a reference the definition no longer assumes a passage in every question
    assert ("where it includes none" in closed.metrics["correctness"] if lang == "en"
            else "没有附材料时" in closed.metrics["correctness"])


@pytest.mark.parametrize("edit, said", [
    (lambda e: e.update(reference_metrics={"correctness": "Correctness (1-5): x"}),
     '"reference_metrics" without "reference_CoT"'),
    (lambda e: e.update(reference_metrics={"corectness": "Correctness (1-5): x"},
                        reference_CoT={"corectness": "1. x\n\nCorrectness:"}),
     '"closed_qa" -> "reference_metrics" -> "corectness": the entry defines no metric "corectness"; '
     'did you mean "correctness"?'),
    (lambda e: e.update(reference_metrics={"correctness": "Correctness (1-5): x"}, reference_CoT={}),
     '"closed_qa" -> "reference_metrics" -> "correctness" has no counterpart in "reference_CoT"'),
])
def test_reference_keys_of_a_prompt_file_are_checked_with_their_key_path(tmp_path, edit, said):
    data = json.loads((REPO / "prompts" / "evaluation_prompt_en.json").read_text(encoding="utf-8"))
    for key in ("reference_metrics", "reference_CoT"):
        del data["closed_qa"][key]
    edit(data["closed_qa"])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_evaluation_prompts(path)
    assert said in str(exc.value) and str(path) in str(exc.value)


# ------------------------------------------------------------------ rules before the judge
# 10 closed_qa questions; model a matches the target exactly on 6 (after case and punctuation), b on 3
N = 10
CASCADE_Q = [(f"c{i}", "closed_qa", f"What is the code word number {i}?", f"Word{i}") for i in range(N)]
A_OUT = {f"c{i}": (f"word{i}." if i < 6 else f"I think it is word{i}, probably") for i in range(N)}
B_OUT = {f"c{i}": (f"WORD{i}" if i < 3 else f"no idea ({i})") for i in range(N)}
K_A, K_B = 6, 3


def cascade_config(tmp_path, server, **extra):
    return write_run(tmp_path, server, questions=CASCADE_Q, answers={"a": A_OUT, "b": B_OUT},
                     category={"closed_qa": {"GPT": ["correctness"], "Metrics": ["ExactMatch"],
                                             "cascade": {"correctness": "ExactMatch"}}},
                     metric_options={"ExactMatch": {"normalize": ["case", "punctuation", "whitespace"]}}, **extra)


def test_cascade_sends_only_the_undecided_items_to_the_judge(tmp_path, fake_openai, capsys):
    fake_openai.reply_fn = replies
    cfg = cascade_config(tmp_path, fake_openai)
    saved = K_A + K_B
    line = (f"closed_qa GPT/correctness: {2 * N} items, {saved} decided by ExactMatch (a {K_A} of {N}, b {K_B} of {N}),"
            f" {2 * N - saved} to the judge: {saved} calls saved")
    # the dry run counts them before anything is sent
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert line in plan, plan
    assert f"work GPT: scores={2 * N}, judge_calls={2 * N - saved}, rule_decided={saved}, battle_calls={2 * N}" in plan
    # the cost estimate drives the family against the cache: the same count of rating requests
    assert f"judge requests to send: {2 * N - saved + 2 * N}" in plan
    assert "battle is judged on every item" in plan
    assert fake_openai.chat_calls == 0
    # the run: exactly N - K rating requests per model reach the judge, battles on every item in both orders
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    out = capsys.readouterr()
    ratings = [r for r in fake_openai.chat_requests() if BATTLE_MARK not in r.user_text]
    battles = [r for r in fake_openai.chat_requests() if BATTLE_MARK in r.user_text]
    assert len(ratings) == 2 * N - saved and len(battles) == 2 * N
    assert not any(A_OUT[f"c{i}"] in r.user_text for i in range(K_A) for r in ratings)
    assert line in flat(out.out)  # the closing lines, beside the judge's usage
    assert f"a / closed_qa / GPT/correctness: {N} items, {K_A} decided by ExactMatch, {N - K_A} to the judge" in out.err
    # the result file: who decided each item, the rule's 5 or the judge's 3, and the signature says how they combine
    for name, k in (("a", K_A), ("b", K_B)):
        res = json.loads((tmp_path / "out" / "results" / f"{name}.json").read_text())
        items = {it["id"]: it for it in res["items"]}
        for i in range(N):
            it = items[f"c{i}"]
            det = it["details"]["GPT/correctness"]
            if i < k:
                assert det["decided_by"] == "rule" and det["cascade"]["passed"] is True
                assert det["cascade"]["rule"] == "ExactMatch" and "equals target" in det["cascade"]["reason"]
                assert it["scores"]["GPT/correctness"] == 5.0 and "request" not in det
            else:
                assert det["decided_by"] == "judge" and det["cascade"]["passed"] is False
                assert it["scores"]["GPT/correctness"] == 3.0 and det["raw"] == "3"
            # the rule check's own score agrees with the cascade's decision
            assert it["scores"]["Metrics/ExactMatch"] == (1.0 if i < k else 0.0)
        agg = res["aggregates"]["by_category"]["closed_qa"]["GPT/correctness"]
        assert agg["n"] == N and agg["mean"] == pytest.approx((5.0 * k + 3.0 * (N - k)) / N)
        sig = res["signatures"]["GPT/correctness"]["cascade"]
        assert list(sig["rules"]) == ["closed_qa"] and sig["rules"]["closed_qa"].startswith("ExactMatch|")
        assert sig["top"] == 5.0 and "decided_by" in sig["aggregate"]
    # a second run pays nothing: the judge's replies are cached, the rule needs no call
    calls = fake_openai.chat_calls
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    capsys.readouterr()
    assert fake_openai.chat_calls == calls


def test_a_cascaded_score_does_not_meet_a_judge_only_one(tmp_path, fake_openai, capsys):
    """The same save path judged first without the cascade: the signature changed, so the earlier
    judge-only scores are named and dropped, never averaged with the cascade's."""
    fake_openai.reply_fn = replies
    plain = write_run(tmp_path, fake_openai, questions=CASCADE_Q, answers={"a": A_OUT, "b": B_OUT}, battle=False,
                      category={"closed_qa": {"GPT": ["correctness"]}})
    assert main(["--config", str(plain), "--no-charts"]) == 0
    capsys.readouterr()
    cfg = cascade_config(tmp_path, fake_openai, battle=False)
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    err = capsys.readouterr().err
    assert "GPT/correctness: signature changed since an earlier run" in err and "cascade" in err


@pytest.mark.parametrize("cascade, metrics, said", [
    ({"correctnes": "ExactMatch"}, None,
     'category.closed_qa.cascade.correctnes: "correctnes" is not a GPT metric of this category; did you mean '
     '"correctness"?'),
    ({"correctness": "ExactMach"}, None,
     'category.closed_qa.cascade.correctness: expected a rule check (pass/fail), got "ExactMach"; did you mean '
     '"ExactMatch"?'),
    ({"correctness": "BLEU"}, None, 'got "BLEU"'),
    ({"correctness": "Regex"}, None, "category.closed_qa.cascade.correctness (Regex): metric_options.Regex"),
    (["ExactMatch"], None, "category.closed_qa.cascade: expected a mapping GPT metric -> rule check"),
])
def test_a_bad_cascade_is_refused_with_its_key_path(tmp_path, fake_openai, capsys, cascade, metrics, said):
    cfg = write_run(tmp_path, fake_openai, questions=CASCADE_Q, answers={"a": A_OUT, "b": B_OUT},
                    category={"closed_qa": {"GPT": ["correctness"], "cascade": cascade}})
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert "Traceback" not in err


def test_an_unknown_key_in_a_category_entry_names_cascade(tmp_path, fake_openai, capsys):
    cfg = write_run(tmp_path, fake_openai, questions=CASCADE_Q, answers={"a": A_OUT, "b": B_OUT},
                    category={"closed_qa": {"GPT": ["correctness"], "cascde": {"correctness": "ExactMatch"}}})
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    assert 'category.closed_qa: unknown key "cascde"; did you mean "cascade"?' in capsys.readouterr().err


def test_a_cascade_on_conversations_is_refused(tmp_path, fake_openai, capsys):
    conv = [{"id": "t1", "category": "chat", "turns": [{"user": "Hi", "assistant": "Hello"},
                                                       {"user": "Capital of Peru?", "assistant": "Lima"}],
             "target": ["Hello", "Lima"]}]
    paths = []
    for name in ("a", "b"):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(conv), encoding="utf-8")
        paths.append({"name": name, "path": str(p)})
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"answers": paths, "save_path": str(tmp_path / "out"),
                               "judge": {"backend": "openai", "model": "m", "base_url": fake_openai.url},
                               "category": {"chat": {"GPT": ["relevance"], "cascade": {"relevance": "ExactMatch"}}}}))
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    assert 'category.chat.cascade: category "chat" holds conversations' in capsys.readouterr().err
