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

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # type: ignore[no-redef]  # noqa: F401


class Toy(Benchmark):
    """Each question judged once: the model's answer (A) against the baseline's (B), [[A]] or [[B]]."""

    name, key, family, summary = "toy", "toy", "Toy", "a toy benchmark (tests)"

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


@pytest.fixture
def toy():
    register_benchmark(Toy)
    yield Toy
    BENCHMARKS.remove("toy")


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
