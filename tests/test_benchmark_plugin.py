"""A benchmark declared in one place (this file) is a first-class benchmark: `eval.py toy` runs it
through the one benchmark driver (flags, dry run with cost, the judge over the real OpenAI client
against the fake server, the judge cache, its table), and its save path reads like any other:
report.html shows its leaderboard rows in the battle section, `eval.py summary` prints them,
manifest.json names it. Nothing else in the project is touched to add it."""

from __future__ import annotations

import argparse
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evaluate.backends.base import JudgeRequest
from evaluate.cli import main as cli
from evaluate.core.errors import InputError
from evaluate.core.records import Record
from evaluate.core.scores import Invalid, ItemScores
from evaluate.judges.battle import BattleItem, BattleResult, OrderJudgment
from evaluate.benchmarks.benchmark import BENCHMARKS, Benchmark, Scored, register_benchmark
from evaluate.benchmarks.outputs import block, row
from evaluate.generation.formats import FORMATS, Question, QuestionFormat, register_format

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # type: ignore[no-redef]  # noqa: F401


class Toy(Benchmark):
    """Each question judged once: the model's answer (A) against the baseline's (B), [[A]] or [[B]]."""

    name, key, family, summary = "toy", "toy", "Toy", "a toy benchmark (tests)"
    config_block = "toy"  # a run config holding a toy: block is pointed at eval.py toy

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--items", required=True, type=Path, help="JSON: [{id, question, model, baseline}]")
        p.add_argument("--model", required=True)
        p.add_argument("--judge-config", required=True, type=Path)
        p.add_argument("--save_path", required=True, type=Path)
        p.add_argument("--dry-run", action="store_true")

    def read(self, args, judge) -> dict[str, Any]:
        items = json.loads(args.items.read_text())
        for i, it in enumerate(items):
            if not isinstance(it, dict) or not {"id", "question", "model", "baseline"} <= set(it):
                raise InputError(f"{args.items}: item {i}: expected {{id, question, model, baseline}}")
        return {"args": args, "items": items}

    def requests(self, inputs) -> dict[str, list[JudgeRequest]]:
        return {inputs["args"].model: [
            JudgeRequest.chat("Answer [[A]] or [[B]].", f"{it['question']}\nA: {it['model']}\nB: {it['baseline']}",
                              max_tokens=8) for it in inputs["items"]]}

    def judge(self, inputs, backend) -> list[str]:
        reqs = self.requests(inputs)[inputs["args"].model]
        return [c.text or "" for c in backend.complete_many(reqs)]

    def scores(self, inputs, judged) -> Scored:
        verdicts = ["A" if "[[A]]" in t else "B" if "[[B]]" in t else "invalid" for t in judged]
        valid = [v for v in verdicts if v != "invalid"]
        rate = 100 * sum(v == "A" for v in valid) / len(valid)
        rows = [{"model": inputs["args"].model, "win_rate": rate, "n": len(valid)}]
        text = f"toy: {inputs['args'].model} wins {rate:.1f}% of {len(valid)} questions against the baseline\n"
        return Scored(text, ["model", "win_rate", "n"], rows, detail={"verdicts": verdicts})

    def save(self, save, inputs, judged, scored, judge) -> None:
        model, items = inputs["args"].model, inputs["items"]
        verdicts = scored.detail["verdicts"]
        recs = [Record(id=str(it["id"]), category="toy", instruction=it["question"], output=it["model"])
                for it in items]
        save.open_model(model, str(inputs["args"].items), recs)
        scores = []
        for v, raw in zip(verdicts, judged):
            s = ItemScores()
            if v == "invalid":
                s.invalid["win"] = Invalid(reason="no [[A]] or [[B]]", raw=raw)
            else:
                s.scores["win"] = 1.0 if v == "A" else 0.0
            scores.append(s)
        save.add(model, self.family, "toy", recs, scores, {"win": {"evaluator": "toy", "judge": judge,
                                                                   "scale": [0, 1]}}, {})
        res = BattleResult(model, "baseline", [
            BattleItem(id=str(it["id"]), verdict=v, category="toy",
                       orders=[OrderJudgment(order="AB", verdict=v, raw=raw)])
            for it, v, raw in zip(items, verdicts, judged)], both_orders=False)
        data = res.to_dict()
        data["summary"] = res.summary()
        data["benchmark"] = block("Toy", model, "baseline", [
            row("toy win rate (%)", scored.rows[0]["win_rate"], digits=1, note="questions the model won")])
        save.add_battle(model, "baseline", data)
        save.open_model("baseline", str(inputs["args"].items),  # the baseline's answers, unscored
                        [Record(id=str(it["id"]), category="toy", instruction=it["question"], output=it["baseline"])
                         for it in items])
        save.header.update(models=[{"name": model, "answer_file": str(inputs["args"].items), "records": len(recs)}],
                           toy={"items": str(inputs["args"].items)})


def _read_toy_questions(path: Path, rows: list[tuple[str, Any]]) -> list[Question]:
    return [Question(str(obj["tid"]), "toy", (obj["ask"],), obj) for _, obj in rows]


# its question file, for `eval.py generate` and `--generate`: [{tid, ask}] in, [{tid, reply, by}] out
TOY_QUESTIONS = QuestionFormat(
    kind="toy", shape="Toy {tid, ask}", extension="json", detect=lambda keys: {"tid", "ask"} <= keys,
    read=_read_toy_questions, answer=lambda q, turns, name, system, now: {"tid": q.id, "reply": turns[0], "by": name},
    temperature=lambda category: 0.25, answers_flag=("model", "name"))


@pytest.fixture
def toy():
    register_benchmark(Toy)
    register_format(TOY_QUESTIONS)
    yield Toy
    BENCHMARKS.remove("toy")
    FORMATS.remove("toy")


def test_a_fourth_benchmark_is_one_class(toy, fake_openai, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")
    monkeypatch.setenv("EVAL_TOY_KEY", "sk-toy")
    items = [{"id": i, "question": f"q{i}", "model": f"long answer {i} " * 3, "baseline": f"short {i}"}
             for i in range(5)]
    (tmp_path / "items.json").write_text(json.dumps(items))
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: toy-judge\n  base_url: {fake_openai.url}\n"
                   "  max_retries: 0\n  api_key_env: EVAL_TOY_KEY\n  price: {prompt: 1.0, completion: 2.0}\n")
    # the judge prefers A except on question 3, and writes no verdict on question 4
    fake_openai.reply_fn = lambda req: Reply(content="[[B]]" if "q3" in req.user_text else
                                             "I cannot say." if "q4" in req.user_text else "[[A]]")
    out = tmp_path / "out"
    argv = ["toy", "--items", str(tmp_path / "items.json"), "--model", "mine", "--judge-config", str(cfg),
            "--save_path", str(out)]

    assert cli(["help"]) == 0
    assert "toy" in capsys.readouterr().out and fake_openai.chat_calls == 0
    assert cli([*argv, "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert "mine: 5 judge calls" in said and "cost: at most about $" in said and fake_openai.chat_calls == 0

    assert cli(argv) == 0
    said = capsys.readouterr().out
    assert "toy: mine wins 75.0% of 4 questions against the baseline" in said  # 3 of 4 valid verdicts
    assert fake_openai.chat_calls == 5
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["benchmark"] == "toy" and manifest["toy"] == {"items": str(tmp_path / "items.json")}
    assert manifest["usage"]["Toy"]["requests"] == 5
    res = json.loads((out / "results" / "mine.json").read_text())
    assert res["aggregates"]["overall"]["Toy/win"]["mean"] == 0.75
    assert res["aggregates"]["overall"]["Toy/win"]["invalid"] == 1
    page = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text())))
    assert "toy win rate (%) 75.0" in page
    assert cli(["summary", str(out), "--width", "100"]) == 0
    assert "Toy, mine: toy win rate (%) 75.0" in " ".join(capsys.readouterr().out.split())
    # a re-run is answered from the judge cache (the one rule: OUT/judge_cache.sqlite)
    assert cli(argv) == 0 and fake_openai.chat_calls == 5 and (out / "judge_cache.sqlite").is_file()
    # bad input: exit 2, one line naming the file and the item
    (tmp_path / "items.json").write_text(json.dumps([{"id": 1}]))
    assert cli(argv) == 2
    assert f"{tmp_path / 'items.json'}: item 0: expected" in capsys.readouterr().err


def test_benchmarks_honour_the_one_judge_cache_rule(toy, fake_openai, tmp_path, capsys, monkeypatch) -> None:
    """EVAL_JUDGE_CACHE (a folder) and `judge.cache: DIR/` reach a benchmark's judge, as they reach a run's."""
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")
    monkeypatch.setenv("EVAL_TOY_KEY", "sk-toy")
    (tmp_path / "items.json").write_text(json.dumps([{"id": 1, "question": "q1", "model": "a", "baseline": "b"}]))
    fake_openai.reply_fn = lambda req: Reply(content="[[A]]")
    base = (f"judge:\n  backend: openai\n  model: toy-judge\n  base_url: {fake_openai.url}\n"
            "  api_key_env: EVAL_TOY_KEY\n")
    cfg = tmp_path / "judge.yaml"
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("EVAL_JUDGE_CACHE", str(shared))
    cfg.write_text(base)
    for n in (1, 2):
        assert cli(["toy", "--items", str(tmp_path / "items.json"), "--model", "m", "--judge-config", str(cfg),
                    "--save_path", str(tmp_path / f"out{n}")]) == 0
    assert (shared / "judge_cache.sqlite").is_file() and not (tmp_path / "out1" / "judge_cache.sqlite").exists()
    assert fake_openai.chat_calls == 1  # the second save path was answered from the shared cache
    cfg.write_text(base + "  cache: cachedir/\n")  # the folder form, relative to the config file
    assert cli(["toy", "--items", str(tmp_path / "items.json"), "--model", "m", "--judge-config", str(cfg),
                "--save_path", str(tmp_path / "out3")]) == 0
    assert (tmp_path / "cachedir" / "judge_cache.sqlite").is_file()


def test_docs_list_every_flag_of_the_benchmark_commands() -> None:
    """docs/benchmarks.md names every flag the three commands accept (checked against their parsers)."""
    from evaluate.commands.common import Parser
    from evaluate.commands.leaderboard import _parser as leaderboard_parser
    from evaluate.benchmarks.benchmark import benchmarks

    doc = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    parsers = [leaderboard_parser()]
    for name in ("arena-hard", "alpaca-eval", "mt-bench"):
        p = Parser(prog=name)
        benchmarks().get(name)().add_arguments(p)
        parsers.append(p)
    flags = {o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
    assert flags and not [f for f in sorted(flags) if f"`{f}" not in doc and f"{f} " not in doc]


def test_a_benchmarks_question_format_is_declared_with_it(toy, fake_openai, tmp_path, capsys, monkeypatch) -> None:
    """The toy's question file, declared beside it (no file of the project touched): `eval.py generate`
    recognises it, asks each question at the temperature the toy's rule gives, and writes the toy's own
    answer shape; a file of no known kind is refused with the toy's shape among those expected."""
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")
    questions = tmp_path / "toy_questions.json"
    questions.write_text(json.dumps([{"tid": 7, "ask": "Say seven."}, {"tid": 8, "ask": "Say eight."}]))
    model = tmp_path / "model.yaml"
    model.write_text(f"model:\n  backend: openai\n  base_url: {fake_openai.url}\n  model: toy-gen\n")
    fake_openai.reply_fn = lambda req: Reply(content="seven" if "seven" in req.user_text else "eight")
    out = tmp_path / "answers" / "gen.json"
    assert cli(["generate", "--questions", str(questions), "--model-config", str(model), "--out", str(out)]) == 0
    assert "generate gen (toy)" in capsys.readouterr().out
    assert json.loads(out.read_text()) == [{"tid": "7", "reply": "seven", "by": "gen"},
                                           {"tid": "8", "reply": "eight", "by": "gen"}]
    asked = {r.user_text: r.body.get("temperature") for r in fake_openai.chat_requests() if r.body.get("max_tokens") != 1}
    assert asked == {"Say seven.": 0.25, "Say eight.": 0.25}  # (the reachability probe asks for one token)
    (tmp_path / "odd.json").write_text(json.dumps([{"what": 1}]))
    assert cli(["generate", "--questions", str(tmp_path / "odd.json"), "--model-config", str(model),
                "--out", str(tmp_path / "o.json")]) == 2
    assert "Toy {tid, ask}" in capsys.readouterr().err


def _code_names(path: Path) -> set[str]:
    """The names, keys and paths of a module's code (docstrings, comments and help sentences left out),
    lower-cased."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add(n.name)
        elif isinstance(n, ast.ImportFrom) and n.module:
            out.add(n.module)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs \
                and not any(c.isspace() for c in n.value):  # a key or a path, not a sentence of help
            out.add(n.value)
    return {s.lower() for s in out}


def test_the_save_path_and_generation_name_no_benchmark() -> None:
    """A benchmark's files, question format and config block are declared in its package: the save path's
    layout, generation and the run name none (in code; their docs may mention them as examples)."""
    repo = Path(__file__).resolve().parents[1]
    words = ("mt_bench", "mt-bench", "arena", "alpaca", "fastchat", "model_judgment", "model_answer", "model_outputs")
    for folder in ("evaluate/savepath", "evaluate/generation", "evaluate/pipeline"):
        for path in sorted((repo / folder).glob("*.py")):
            named = sorted(n for n in _code_names(path) for w in words if w in n)
            assert not named, f"{path.relative_to(repo)} names a benchmark: {named}"


def test_generation_imports_no_benchmark() -> None:
    """Generation sits below the benchmarks: it reads their kinds from its registry, into which each benchmark
    adds its own when the benchmark registry loads it (by name, as a plugin)."""
    import ast

    repo = Path(__file__).resolve().parents[1]
    for path in sorted((repo / "evaluate/generation").glob("*.py")):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom):
                assert "benchmarks" not in (n.module or ""), f"{path.name}: from {'.' * n.level}{n.module} import ..."
            elif isinstance(n, ast.Import):
                assert not any("benchmarks" in a.name for a in n.names), f"{path.name}: import {n.names[0].name}"


def test_a_run_given_a_benchmarks_config_block_names_its_command(toy, tmp_path, capsys) -> None:
    """The block a benchmark's --config file holds is declared on the benchmark (`config_block`): a run config
    that holds the toy's block is refused (exit 2) naming `eval.py toy`."""
    cfg = tmp_path / "toy.yaml"
    cfg.write_text("toy: {items: x}\nanswers: [{name: a, path: a.json}]\nsave_path: out\n", encoding="utf-8")
    assert cli(["--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert '"toy" is a benchmark block' in err and "eval.py toy --config FILE" in err
