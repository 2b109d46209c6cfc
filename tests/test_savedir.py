"""One owner of a save path: a run writes each result file and the manifest once and aggregates each
model's scores once; scores made differently (signatures differ) never meet silently."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.core import io as core_io
from evaluate.pipeline.results import ModelResults
try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

EN = Path(__file__).resolve().parents[1] / "examples" / "en"
PROMPTS = Path(__file__).resolve().parents[1] / "prompts"


def _config(tmp_path: Path, name: str, *, models=("model_a", "model_b"), **extra) -> Path:
    cfg = {"answers": [{"name": m, "path": str(EN / f"answers_{m}.json")} for m in models],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"), **extra}
    cfg.setdefault("category", {"closed_qa": {"Metrics": ["BLEU", "CHRF"]}, "classification": {"Metrics": ["F1 score"]},
                                "summarization": {"Metrics": ["ROUGE", "Distinct"]}})
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture
def counted(monkeypatch):
    """Every file written through the project's atomic writer, and every aggregation, counted."""
    writes: Counter = Counter()
    aggregations: Counter = Counter()
    real_write, real_agg = core_io.atomic_write_bytes, ModelResults._aggregate

    def write(path, data):
        writes[Path(path).resolve()] += 1
        return real_write(path, data)

    def aggregate(self):
        aggregations[self.model] += 1
        return real_agg(self)

    monkeypatch.setattr(core_io, "atomic_write_bytes", write)
    monkeypatch.setattr(ModelResults, "_aggregate", aggregate)
    return writes, aggregations


def test_a_run_writes_each_file_once_and_aggregates_each_model_once(tmp_path, counted, capsys):
    writes, aggregations = counted
    assert main(["--config", str(_config(tmp_path, "c.json")), "--no-charts"]) == 0, capsys.readouterr().err
    out = (tmp_path / "out").resolve()
    for model in ("model_a", "model_b"):
        assert writes[out / "results" / f"{model}.json"] == 1
    assert writes[out / "manifest.json"] == 1
    run_files = list((out / "runs").glob("*.json"))
    assert len(run_files) == 1 and writes[run_files[0].resolve()] == 1
    assert writes[out / "summary.csv"] == 1 and writes[out / "comparisons" / "model_a__vs__model_b.json"] == 1
    assert dict(aggregations) == {"model_a": 1, "model_b": 1}
    # what was written is what the outputs read: the manifest lists the report, written before it
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "ok" and Path(manifest["outputs_files"]["report"]).is_file()
    assert "report:" in capsys.readouterr().out


def test_chrf_and_chrf_plus_plus_are_never_compared(tmp_path, capsys):
    """model_a scored with chrF, model_b later into the same save path with chrF++."""
    cats = {"closed_qa": {"Metrics": ["CHRF", "BLEU"]}}
    a = _config(tmp_path, "a.json", models=("model_a",), category=cats)
    b = _config(tmp_path, "b.json", models=("model_b",), category=cats, metric_options={"CHRF": {"word_order": 2}})
    assert main(["--config", str(a), "--no-charts"]) == 0
    assert main(["--config", str(b), "--no-charts"]) == 0
    err = capsys.readouterr().err
    assert "Metrics/CHRF not compared" in err and 'orders: model_a "char 1..6, word 1..0, beta 2" vs model_b "char 1..6, word 1..2, beta 2"' in err
    comp = json.loads((tmp_path / "out" / "comparisons" / "model_a__vs__model_b.json").read_text())
    chrf = [r for r in comp["rows"] if r["score"] == "Metrics/CHRF"]
    assert chrf and all(r["verdict"].startswith("not comparable") and r["p"] is None for r in chrf)
    assert all("word 1..0" in r["signature_a"]["orders"] and "word 1..2" in r["signature_b"]["orders"] for r in chrf)
    bleu = [r for r in comp["rows"] if r["score"] == "Metrics/BLEU-4"]
    assert bleu and all(not r["verdict"].startswith("not comparable") for r in bleu)  # same signature: compared


def _judge(rec):
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        return Reply(content="7 5")
    return Reply(content="4")


def test_a_judge_change_between_runs_is_named_and_never_mixed(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    fake_openai.reply_fn = _judge
    cats = {"closed_qa": {"GPT": ["relevance"]}, "summarization": {"GPT": ["relevance"]}}

    def judge(model: str) -> dict:
        return {"backend": "openai", "model": model, "base_url": fake_openai.url, "mode": "generate",
                "max_retries": 0}

    prompts = {"battle": str(PROMPTS / "battle_prompt_en.json"), "evaluation": str(PROMPTS / "evaluation_prompt_en.json")}
    first = _config(tmp_path, "first.json", category=cats, judge=judge("judge-one"), prompts=prompts)
    assert main(["--config", str(first), "--no-charts"]) == 0, capsys.readouterr().err
    # model_b again, one category only, under another judge
    again = _config(tmp_path, "again.json", models=("model_b",), category={"closed_qa": {"GPT": ["relevance"]}},
                    judge=judge("judge-two"), prompts=prompts)
    assert main(["--config", str(again), "--no-charts"]) == 0
    err = capsys.readouterr().err
    assert "model_b GPT/relevance: signature changed" in err and "judge-one" in err and "judge-two" in err
    rb = json.loads((tmp_path / "out" / "results" / "model_b.json").read_text())
    by_cat = rb["aggregates"]["by_category"]
    assert "GPT/relevance" in by_cat["closed_qa"] and "GPT/relevance" not in by_cat.get("summarization", {})
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["signature_changes"][0]["dropped_items"] == 2
    comp = json.loads((tmp_path / "out" / "comparisons" / "model_a__vs__model_b.json").read_text())
    rows = [r for r in comp["rows"] if r["score"] == "GPT/relevance"]
    assert rows and all(r["verdict"].startswith("not comparable") for r in rows)
    assert "model_a vs model_b: GPT/relevance not compared" in err
