"""CI around a run (issue 31, and the gate items of issues 30 and 32): gates on a saved run score
nothing; the JUnit file validates against the Ant/Jenkins/GitLab schema (tests/data/junit.xsd) and
names each gate and rule check; the Markdown file parses as tables holding the run's numbers;
`missing: common` scores the items every model answered and names the others; per-turn scores of
a conversation can be gated; `summary --width` below the minimum is refused."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.cli import main

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
XSD = REPO / "tests" / "data" / "junit.xsd"
ANSWERS_A = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))
ANSWERS_B = json.loads((EN / "answers_model_b.json").read_text(encoding="utf-8"))
CATS = ("classification", "closed_qa")


def eval_py(*argv: str, timeout: float = 300) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def write(tmp_path: Path, name: str = "c.json", **cfg) -> Path:
    base = {"save_path": str(tmp_path / "out"), "battle": False, "target_file": str(EN / "targets.json"),
            "answers": [{"name": "base", "path": str(EN / "answers_model_a.json")},
                        {"name": "cand", "path": str(EN / "answers_model_b.json")}],
            "category": {c: {"Metrics": ["F1 score"]} for c in CATS}}
    base.update(cfg)
    p = tmp_path / name
    p.write_text(json.dumps(base), encoding="utf-8")
    return p


def gate_lines(out: str) -> list[str]:
    return [x for x in out.splitlines() if x.startswith(("gate passed: ", "gate passed without power: ", "gate FAILED: ",
                                                          "status: "))]


# ---------------------------------------------------------------------- a rule check, registered here
def _capital(text: str) -> bool:
    return bool(text.strip()) and text.strip()[0].isupper()


@pytest.fixture
def rule_metric():
    """A pass/fail metric that says so in its signature (`rule_check: true`): 1 when the answer
    starts with a capital letter. Registered for the test only."""
    from evaluate.metrics.base import METRICS, Metric

    class StartsWithCapital(Metric):
        name = "TestStartsWithCapital"
        sub_scores = ("TestStartsWithCapital",)
        needs_reference = False

        def score(self, items):
            return [{"TestStartsWithCapital": 1.0 if _capital(i.output) else 0.0} for i in items]

        def signature(self):
            return {**super().signature(), "rule_check": True, "aggregate": "mean of items"}

    METRICS.add("TestStartsWithCapital", StartsWithCapital)
    yield "TestStartsWithCapital"
    METRICS.remove("TestStartsWithCapital")


# ---------------------------------------------------------------------- gates on a saved run
def test_summary_gates_a_saved_run_with_nothing_scored(tmp_path, monkeypatch, capsys):
    """The run's gate lines, status and exit code again from the save path, with every family's
    and metric's scorer replaced by one that counts its calls."""
    cfg = write(tmp_path)
    gates = ["--fail-under", "F1=0.3", "--fail-under", "base:closed_qa:F1=0.5", "--fail-if-worse", "cand:base:F1"]
    assert main(["--config", str(cfg), "--no-charts", *gates]) == 1
    run_out = capsys.readouterr().out
    run_lines = gate_lines(run_out)
    assert run_lines[-1] == "status: gate failed" and len(run_lines) == 4
    res = {m: json.loads((tmp_path / "out" / "results" / f"{m}.json").read_text()) for m in ("base", "cand")}
    cand_f1 = res["cand"]["aggregates"]["overall"]["Metrics/F1"]["mean"]
    assert cand_f1 < 0.3
    assert run_lines[0] == f"gate FAILED: --fail-under F1=0.3: cand: Metrics/F1 = {cand_f1:.4f} < 0.3"

    from evaluate.families import FAMILY_REGISTRY
    from evaluate.metrics import METRICS

    calls = []

    def scorer(*args, **kwargs):
        calls.append(args)
        raise AssertionError("scored on a saved run")

    for name in FAMILY_REGISTRY.names():
        for attr in ("score", "score_run"):
            monkeypatch.setattr(FAMILY_REGISTRY.get(name), attr, scorer, raising=False)
    for name in METRICS.names():
        monkeypatch.setattr(METRICS.get(name), "score", scorer)
    assert main(["summary", str(tmp_path / "out"), *gates]) == 1
    captured = capsys.readouterr()
    assert gate_lines(captured.out) == run_lines
    assert captured.err.strip().splitlines()[-1].startswith("exit 1: 1 of 3 gates failed: --fail-under F1=0.3 (cand:")
    assert calls == []
    # a gate naming what the saved run does not hold: exit 2, did-you-mean, before any line
    assert main(["summary", str(tmp_path / "out"), "--fail-under", "F2=0.3"]) == 2
    assert 'no score "F2"' in capsys.readouterr().err
    assert main(["summary", str(tmp_path / "out"), "--fail-under", "bsae::F1=0.3"]) == 2
    assert 'did you mean "base"' in capsys.readouterr().err
    # a result file cut short: the saved run cannot be gated (exit 2 naming the file), nothing passes on less
    path = tmp_path / "out" / "results" / "cand.json"
    path.write_text(path.read_text()[:200])
    assert main(["summary", str(tmp_path / "out"), *gates]) == 2
    assert "cand.json" in capsys.readouterr().err


def test_summary_width_below_the_minimum_is_refused(tmp_path):
    cfg = write(tmp_path, category={"classification": {"Metrics": ["F1 score"]}})
    assert eval_py("--config", str(cfg), "--no-charts")[0] == 0
    for bad in ("-5", "0", "12", "wide"):
        code, out, err = eval_py("summary", str(tmp_path / "out"), "--width", bad)
        assert code == 2 and out == "", (bad, out)
        assert err.strip().splitlines()[-1].startswith(f'error: --width {bad}') or "whole number" in err, err
        assert "at least 60 columns" in err or "whole number" in err
    code, out, err = eval_py("summary", str(tmp_path / "out"), "--width", "60")
    assert code == 0 and max(len(x) for x in out.splitlines() if str(tmp_path) not in x) <= 60


# ---------------------------------------------------------------------- JUnit and Markdown
def _validate(path: Path):
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(XSD)))
    doc = etree.parse(str(path))
    assert schema.validate(doc), schema.error_log
    for suite in doc.getroot():
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
    return doc


def _cases(doc) -> dict[tuple[str, str, str], str | None]:
    """(suite kind, classname, name) -> the failure message or None."""
    out = {}
    for suite in doc.getroot():
        kind = suite.get("name").split(":")[0]
        for c in suite.findall("testcase"):
            f = c.find("failure")
            out[(kind, c.get("classname"), c.get("name"))] = None if f is None else f.get("message")
    return out


def _tables(md: str) -> list[list[list[str]]]:
    """Every table of a Markdown text, parsed by markdown-it-py (GFM tables), as rows of cell texts."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    tables, rows, row = [], None, None
    for t in tokens:
        if t.type == "table_open":
            rows = []
        elif t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            rows.append(row)
            row = None
        elif t.type == "table_close":
            tables.append(rows)
    return tables


def test_junit_and_markdown_on_a_run_and_on_the_saved_run(tmp_path, rule_metric, capsys):
    cfg = write(tmp_path, category={c: {"Metrics": ["F1 score", rule_metric]} for c in CATS})
    gates = ["--fail-under", "F1=0.3", "--fail-under", f"{rule_metric}=0.5"]
    j1, m1, j2, m2 = (tmp_path / n for n in ("run.xml", "run.md", "saved.xml", "saved.md"))
    assert main(["--config", str(cfg), "--no-charts", *gates, "--junit", str(j1), "--markdown", str(m1)]) == 1
    run_out = capsys.readouterr().out
    assert main(["summary", str(tmp_path / "out"), *gates, "--junit", str(j2), "--markdown", str(m2)]) == 1
    capsys.readouterr()
    cases = _cases(_validate(j1))
    assert _cases(_validate(j2)) == cases
    # one test case per gate, failed with its own line
    lines = {x.split(": ", 2)[1]: x for x in gate_lines(run_out) if x.startswith("gate")}
    assert {n: v for (k, c, n), v in cases.items() if k == "gates"} == {
        "--fail-under F1=0.3": lines["--fail-under F1=0.3"],
        f"--fail-under {rule_metric}=0.5": None if lines[f"--fail-under {rule_metric}=0.5"].startswith("gate passed")
        else lines[f"--fail-under {rule_metric}=0.5"]}
    assert cases[("gates", "eval.gates", "--fail-under F1=0.3")].startswith("gate FAILED: --fail-under F1=0.3: cand:")
    # one test case per rule check, model and category: failed where an answer starts in lower case
    rules = {(c, n): v for (k, c, n), v in cases.items() if k == "rule checks"}
    want = {}
    for model, answers in (("base", ANSWERS_A), ("cand", ANSWERS_B)):
        for cat in CATS:
            recs = [r for r in answers if r["category"] == cat]
            bad = [str(r["id"]) for r in recs if not _capital(r["output"])]
            want[(f"rules.{model}", f"{cat}: Metrics/{rule_metric}")] = (
                f"{len(bad)} of {len(recs)} items failed: " + "; ".join(f"id {i}" for i in bad) if bad else None)
    assert rules == want
    assert any(v for v in want.values()) and any(v is None for v in want.values())  # both outcomes exercised
    # the Markdown: the closing lines as tables, the same from the run and from the saved run
    md = m1.read_text(encoding="utf-8")
    tables = _tables(md)
    assert tables == _tables(m2.read_text(encoding="utf-8"))
    means = next(t for t in tables if t[0][0] == "mean, all items")
    assert means[0] == ["mean, all items", "base", "cand"]
    res = {m: json.loads((tmp_path / "out" / "results" / f"{m}.json").read_text()) for m in ("base", "cand")}
    for row in means[1:]:
        for model, cell in zip(("base", "cand"), row[1:]):
            assert math.isclose(float(cell), res[model]["aggregates"]["overall"][row[0]]["mean"], abs_tol=5e-4)
    gates_table = next(t for t in tables if t[0] == ["gate", "result", "detail"])
    assert [r[:2] for r in gates_table[1:]] == [["`--fail-under F1=0.3`", "**FAILED**"],
                                               [f"`--fail-under {rule_metric}=0.5`",
                                                "passed" if lines[f"--fail-under {rule_metric}=0.5"].startswith(
                                                    "gate passed") else "**FAILED**"]]
    assert "**status: gate failed** (exit 1" in md


def test_rule_checks_by_name_and_their_reasons():
    from evaluate.ci.reports import is_rule_check, rule_cases

    assert is_rule_check("Metrics/ExactMatch", {}, [0, 1, 1])
    assert is_rule_check("Metrics/Contains-all", None, [1.0])
    assert is_rule_check("Metrics/JSON@turn2", None, [0.0])
    assert not is_rule_check("Metrics/ExactMatchish", None, [1])  # a prefix is not a name
    assert not is_rule_check("Metrics/Length", None, [0.5, 1])  # not pass/fail values
    assert not is_rule_check("Metrics/F1", None, [0, 1])
    assert is_rule_check("Custom/ok", {"rule_check": True}, [1, 0])
    assert is_rule_check("Metrics/MyCheck", {"outcome": "pass/fail"}, [1, 0])
    res = {"model": "m", "signatures": {}, "items": [
        {"id": "1", "category": "qa", "scores": {"Metrics/Regex": 1.0}},
        {"id": "2", "category": "qa", "scores": {"Metrics/Regex": 0.0},
         "details": {"Metrics/Regex": {"reason": "no match for \\d{4}"}}},
        {"id": "3", "category": "qa", "scores": {}, "invalid": {"Metrics/Regex": {"reason": "no reference"}}}]}
    (case,) = rule_cases([res])
    assert (case.passed, case.failed, case.invalid) == (1, [("2", "no match for \\d{4}")], ["3"])
    assert case.message() == "1 of 2 items failed: id 2: no match for \\d{4}; 1 invalid"


def test_junit_and_markdown_paths_checked_before_the_run(tmp_path):
    cfg = write(tmp_path)
    (tmp_path / "no").write_text("a file where a folder would be made")
    code, out, err = eval_py("--config", str(cfg), "--junit", str(tmp_path / "no" / "such" / "j.xml"))
    assert code == 2 and "--junit" in err.strip().splitlines()[-1] and "cannot be made" in err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- missing answers
def test_missing_common_scores_the_items_every_model_answered(tmp_path):
    dropped = [r for r in ANSWERS_B if r["category"] in CATS][:2]
    drop_ids = [str(r["id"]) for r in dropped]
    partial = tmp_path / "cand.json"
    partial.write_text(json.dumps([r for r in ANSWERS_B if r not in dropped]), encoding="utf-8")
    answers = [{"name": "base", "path": str(EN / "answers_model_a.json")}, {"name": "cand", "path": str(partial)}]
    cfg = write(tmp_path, answers=answers)
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 2 and "no answer for ids" in err and drop_ids[0] in err  # the default: refused
    assert not (tmp_path / "out").exists()
    bad = write(tmp_path, "bad.json", answers=answers, missing="comon")
    code, out, err = eval_py("--config", str(bad), "--dry-run")
    assert code == 2 and 'did you mean "common"' in err
    for how, args in (("flag", ("--config", str(cfg), "--missing", "common")),
                      ("config", ("--config", str(write(tmp_path, "c2.json", answers=answers, missing="common"))))):
        code, out, err = eval_py(*args, "--no-charts", "--fail-under", "cand::F1=0")
        assert code == 0, (how, err[-2000:])
        assert f"missing: common: cand did not answer 2 ids: {', '.join(drop_ids)}" in err
        assert f"left out (missing: common, every model scored on the same items): cand did not answer 2: " \
               f"{', '.join(drop_ids)}" in " ".join(out.split())
        res = {m: json.loads((tmp_path / "out" / "results" / f"{m}.json").read_text()) for m in ("base", "cand")}
        scored = {m: {it["id"] for it in r["items"] if it.get("scores")} for m, r in res.items()}
        common = {str(r["id"]) for r in ANSWERS_A if r["category"] in CATS} - set(drop_ids)
        assert scored["base"] == scored["cand"] == common  # never two models over different items
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert {m["name"]: m["missing_ids"] for m in manifest["models"]} == {"base": [], "cand": drop_ids}
        comp = json.loads((tmp_path / "out" / "comparisons" / "base__vs__cand.json").read_text())
        row = next(r for r in comp["rows"] if r["category"] == "(all)" and r["score"] == "Metrics/F1")
        assert row["n"] == len(common)


def test_missing_common_without_a_target_file(tmp_path):
    from evaluate.core.errors import ConfigError, InputError
    from evaluate.pipeline.answers import load_answer_sets

    a = [{"id": i, "category": "qa", "instruction": f"q{i}", "output": f"a{i}"} for i in (1, 2, 3, 4)]
    fa, fb, fc = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    fa.write_text(json.dumps(a))
    fb.write_text(json.dumps([r for r in a if r["id"] != 2] + [{**a[0], "id": 5}]))
    fc.write_text(json.dumps([{**a[0], "id": 9}]))
    with pytest.raises(ConfigError):
        load_answer_sets([("a", fa), ("b", fb)], None)
    sa, sb = load_answer_sets([("a", fa), ("b", fb)], None, "common")
    assert [r.id for r in sa.records] == [r.id for r in sb.records] == ["1", "3", "4"]
    assert (sa.missing_ids, sb.missing_ids) == (["5"], ["2"])
    with pytest.raises(InputError, match="no item was answered by every model"):
        load_answer_sets([("a", fa), ("c", fc)], None, "common")


# ---------------------------------------------------------------------- per-turn scores
def test_a_per_turn_score_of_a_conversation_can_be_gated(tmp_path, monkeypatch):
    try:
        from tests.fake_openai_server import FakeOpenAIServer
        from tests.test_conversations import chat_config, judge
    except ImportError:
        from fake_openai_server import FakeOpenAIServer
        from test_conversations import chat_config, judge

    def only_gpt(cfg):
        cfg["category"] = {c: {"GPT": fams["GPT"]} for c, fams in cfg["category"].items()}
        cfg["battle"] = False

    with FakeOpenAIServer(reply_fn=judge) as server:
        cfg = chat_config(tmp_path, server, edit=only_gpt)
        monkeypatch.setenv("CONV_KEY", "sk-conv-test")  # the key the chat config names (judge.api_key_env)
        code, out, err = eval_py("--config", str(cfg), "--no-charts", "--fail-under", "GPT/relevance@turn2=3",
                                 "--fail-under", "model_a::relevance@turn2=4.5")
        paid = server.chat_calls
        code2, out2, err2 = eval_py("summary", str(tmp_path / "out"), "--fail-under", "GPT/relevance@turn2=3")
        code3, out3, err3 = eval_py("summary", str(tmp_path / "out"), "--fail-under", "GPT/relevance@turn7=3")
        assert server.chat_calls == paid
    assert code == 1, err[-2000:]
    res = json.loads((tmp_path / "out" / "results" / "model_b.json").read_text())
    mean_b = res["aggregates"]["overall"]["GPT/relevance@turn2"]["mean"]
    assert mean_b == pytest.approx(0.6 * 2 + 0.4 * 1)
    lines = gate_lines(out)
    assert lines[0] == f"gate FAILED: --fail-under GPT/relevance@turn2=3: model_b: GPT/relevance@turn2 = {mean_b:.4f} < 3"
    assert lines[1] == "gate passed: --fail-under model_a::relevance@turn2=4.5: model_a: GPT/relevance@turn2 = 4.7000 >= 4.5"
    assert code2 == 1 and gate_lines(out2)[0] == lines[0]
    assert code3 == 2 and 'no aggregate named "GPT/relevance@turn7"' in err3


def test_junit_of_a_run_whose_judge_is_not_there(tmp_path):
    """Exit 3 is a test case in error, with the reason; the file still validates."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    s.close()
    cfg = write(tmp_path, category={"classification": {"GPT": ["correctness"]}},
                judge={"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate",
                       "max_retries": 1, "timeout": 5})
    junit, md = tmp_path / "j.xml", tmp_path / "m.md"
    code, out, err = eval_py("--config", str(cfg), "--junit", str(junit), "--markdown", str(md))
    assert code == 3 and out.strip().splitlines()[-1] == "status: failed"
    doc = _validate(junit)
    (case,) = doc.getroot().iter("testcase")
    assert case.get("name") == "eval.py run" and case.find("error").get("message").startswith(
        f"exit 3: judge unreachable: {url}")
    assert "**status: failed** (exit 3: judge unreachable" in md.read_text(encoding="utf-8")


def test_junit_of_the_rule_checks_example(tmp_path):
    """configs/example_rules.yaml (every rule check on the bundled example): one test case per rule
    check, model and category of the config, failed exactly where an item scored 0, each failed
    item named with the reason its details give."""
    import yaml

    config = REPO / "configs" / "example_rules.yaml"
    if not config.is_file():
        pytest.skip("configs/example_rules.yaml is absent (the rule checks are not in this tree)")
    junit = tmp_path / "j.xml"
    code, out, err = eval_py("--config", str(config), "--save_path", str(tmp_path / "out"), "--no-charts",
                             "--junit", str(junit))
    assert code == 0, err[-2000:]
    cases = _cases(_validate(junit))
    rules = {(c, n): v for (k, c, n), v in cases.items() if k == "rule checks"}
    cats = yaml.safe_load(config.read_text(encoding="utf-8"))["category"]
    want = {}
    for model in ("model_a", "model_b"):
        res = json.loads((tmp_path / "out" / "results" / f"{model}.json").read_text(encoding="utf-8"))
        for cat, fams in cats.items():
            for check in fams["Metrics"]:
                key = f"Metrics/{check}"
                items = [it for it in res["items"] if it["category"] == cat and key in it["scores"]]
                bad = [it for it in items if it["scores"][key] == 0]
                named = "; ".join(f"id {it['id']}: {it['details'][key]['reason']}" for it in bad[:10])
                want[(f"rules.{model}", f"{cat}: {key}")] = (f"{len(bad)} of {len(items)} items failed: {named}"
                                                             + (f"; and {len(bad) - 10} more" if len(bad) > 10 else "")
                                                             if bad else None)
    assert rules == want
    assert sum(v is not None for v in want.values()) >= 3 and sum(v is None for v in want.values()) >= 3
