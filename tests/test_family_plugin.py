"""A family declared in one place (this file) is a first-class family: the config validates its
options block, --dry-run shows it, the run scores with it, results and charts hold its scores.
Nothing else in the project is touched to add it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from evaluate.cli import main
from evaluate.core.options import option
from evaluate.core.scores import Invalid, ItemScores
from evaluate.families import FAMILY_REGISTRY, Family, FamilyOutput, register_family

EN = Path(__file__).resolve().parents[1] / "examples" / "en"


@dataclass
class LengthOptions:
    unit: Literal["words", "characters"] = option("words", "what is counted")
    max_length: int = option(100, "the length that scores 1.0", min=1)


class LengthFamily(Family):
    """Answer length relative to `max_length`, capped at 1 (a toy family: the shape is the point)."""

    name = "Length"
    options_key = "length"
    Options = LengthOptions
    scale = (0.0, 1.0)

    def validate(self, ctx, category, names, where, *, used):
        return [f'{where}[{i}]: unknown Length score "{n}" (known: answer_length)'
                for i, n in enumerate(names) if n != "answer_length"]

    def score(self, ctx, category, names, records):
        opts = ctx.options
        items = []
        for r in records:
            it = ItemScores()
            size = len(r.output.split()) if opts.unit == "words" else len(r.output)
            if size == 0:
                it.invalid["answer_length"] = Invalid(reason="empty answer")
            else:
                it.scores["answer_length"] = min(1.0, size / opts.max_length)
            items.append(it)
        return FamilyOutput(items=items, signatures={"answer_length": {"evaluator": "Length", "unit": opts.unit,
                                                                       "max_length": opts.max_length}})


@pytest.fixture
def length_family():
    register_family(LengthFamily)
    yield LengthFamily
    FAMILY_REGISTRY.remove("Length")


def _config(tmp_path: Path, **extra) -> Path:
    cfg = {"answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"),
           "category": {"closed_qa": {"Length": ["answer_length"], "Metrics": ["CHRF"]},
                        "open_qa": {"Length": ["answer_length"]}},
           **extra}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def test_a_family_in_one_file_validates_plans_scores_and_charts(tmp_path, length_family, capsys):
    path = _config(tmp_path, length={"unit": "words", "max_length": 20})
    assert main(["--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Length: answer_length" in out and "options Length: unit=\"words\", max_length=20" in out

    assert main(["--config", str(path), "--no-charts"]) == 0
    assert main(["--config", str(path)]) == 0  # charts this time (and the results are kept, not redone wrong)
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    answers = {str(r["id"]): r for r in json.loads((EN / "answers_model_a.json").read_text())}
    checked = 0
    for item in res["items"]:
        if item["category"] in ("closed_qa", "open_qa"):
            want = min(1.0, len(answers[item["id"]]["output"].split()) / 20)
            assert item["scores"]["Length/answer_length"] == pytest.approx(want)
            checked += 1
    assert checked == 5
    assert res["signatures"]["Length/answer_length"]["scale"] == [0.0, 1.0]
    assert res["aggregates"]["by_category"]["closed_qa"]["Length/answer_length"]["n"] == 2
    assert (tmp_path / "out" / "charts" / "Length" / "closed_qa.png").stat().st_size > 1000
    assert (tmp_path / "out" / "charts" / "Length" / "overview.png").exists()
    comp = json.loads((tmp_path / "out" / "comparisons" / "model_a__vs__model_b.json").read_text())
    assert any(r["score"] == "Length/answer_length" for r in comp["rows"])


def test_its_options_are_checked_when_the_config_loads(tmp_path, length_family, capsys):
    path = _config(tmp_path, length={"unit": "letters", "max_lenght": 3})
    assert main(["--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert 'length.unit: expected "words" or "characters", got "letters"' in err
    assert 'length: unknown key "max_lenght"; did you mean "max_length"?' in err
    path = _config(tmp_path, length={"max_length": 0})
    assert main(["--config", str(path), "--dry-run"]) == 2
    assert "length.max_length: expected a positive integer, got 0" in capsys.readouterr().err


def test_without_the_family_its_key_is_unknown(tmp_path, capsys):
    path = _config(tmp_path)
    assert main(["--config", str(path), "--dry-run"]) == 2
    assert 'category.closed_qa: unknown key "Length"' in capsys.readouterr().err


class EchoJudgeFamily(Family):
    """Asks the run's judge one question per answer (a toy judge-calling family): declared in this file
    alone, its requests are in --dry-run's cost, --export-requests and batch prefetch."""

    name = "EchoJudge"
    scale = (1.0, 5.0)

    def uses_judge(self, ctx):
        return True

    def judge_bound(self, ctx):
        return True

    def plan(self, ctx, category, names, n_items):
        return {"scores": n_items, "judge_calls": n_items}

    def score(self, ctx, category, names, records):
        from evaluate.backends.base import JudgeRequest

        comps = ctx.judge().complete_many([JudgeRequest.chat(None, f"Echo-judge, rate 1-5: {r.output}", max_tokens=2)
                                           for r in records])
        items = []
        for comp in comps:
            it = ItemScores()
            if comp.ok and comp.text.strip().isdigit():
                it.scores["echo"] = float(comp.text.strip())
            else:
                it.invalid["echo"] = Invalid(reason=comp.error or "not a digit", raw=comp.text)
            items.append(it)
        return FamilyOutput(items=items, signatures={"echo": {"evaluator": "EchoJudge", "judge": ctx.cfg.judge.model}})


@pytest.fixture
def echo_family():
    register_family(EchoJudgeFamily)
    yield EchoJudgeFamily
    FAMILY_REGISTRY.remove("EchoJudge")


def test_a_judge_calling_family_in_one_file_is_costed_exported_and_prefetched(tmp_path, echo_family, capsys):
    from evaluate.pipeline.collect import collect
    from evaluate.pipeline.plan import load_inputs
    from evaluate.pipeline.config import load_config

    judge = {"backend": "openai", "model": "fake-judge", "base_url": "http://127.0.0.1:9/v1",
             "price": {"prompt": 1.0, "completion": 2.0}}
    path = _config(tmp_path, judge=judge, category={"closed_qa": {"EchoJudge": ["echo"]},
                                                     "open_qa": {"EchoJudge": ["echo"]}})
    n = 2 * (2 + 3)  # two models x (closed_qa 2 + open_qa 3 records)
    assert main(["--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"judge requests to send: {n} (already cached: 0)" in out and "cost at most $" in out
    export = tmp_path / "requests.jsonl"
    assert main(["--config", str(path), "--export-requests", str(export)]) == 0
    lines = [json.loads(x) for x in export.read_text().splitlines()]
    assert len(lines) == n and all("Echo-judge" in x["body"]["messages"][-1]["content"] for x in lines)
    # batch prefetch sends exactly what `collect` finds missing
    got = collect(load_inputs(load_config(path), ["EchoJudge"]))
    assert len(got.missing) == n
