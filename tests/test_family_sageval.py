"""SAGEval inside the pipeline, against the fake OpenAI-compatible server."""

import json
from pathlib import Path

from evaluate.cli import main

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
SURVEYS = REPO / "examples" / "sageval" / "surveys.json"


def reply(rec):
    msgs = rec.body["messages"]
    if msgs[0]["content"].startswith("You are SAGE"):
        flawed = "?" in msgs[-1]["content"] and "duplicate" in msgs[-1]["content"].lower()
        return Reply(content=json.dumps({
            "aspects": {"accuracy": {"score": 2 if flawed else 4, "reason": "checked", "definition": None},
                        "cohesion": {"score": 4, "reason": "ok", "definition": "Questions follow one thread."}},
            "new_aspects": [{"name": "Question overlap", "definition": "No two questions ask the same."}]}))
    return Reply(content=json.dumps({"accuracy": {"score": 4, "reason": "fine"},
                                     "cohesion": {"score": 5, "reason": "flows"}}))


def test_sageval_family(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("SAGE_KEY", "sk-sage")
    fake_openai.reply_fn = reply
    cfg = {"save_path": str(tmp_path / "out"), "answers": [{"name": "gen", "path": str(SURVEYS)}],
           "category": {c: {"SAGEval": ["accuracy", "cohesion"]} for c in ("survey", "form", "quiz")},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url, "api_key_env": "SAGE_KEY",
                     "mode": "generate"},
           "sageval": {"use_logprobs": False}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path)]) == 0
    res = json.loads((tmp_path / "out" / "results" / "gen.json").read_text())
    n = len(res["items"])
    overall = res["aggregates"]["overall"]
    assert overall["SAGEval/cohesion@evaluator"]["mean"] == 5 and overall["SAGEval/cohesion"]["mean"] == 4
    assert overall["SAGEval/accuracy"]["n"] == n
    # the plan counted the calls the run made, and the pool metered them for the manifest
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["plan"]["work"]["SAGEval"]["judge_calls"] == fake_openai.chat_calls == 2 * n
    usage = manifest["usage"]["SAGEval"]
    assert usage["requests"] == usage["cache_misses"] == fake_openai.chat_calls
    assert usage["prompt_tokens"] == 10 * fake_openai.chat_calls  # the fake server's usage block: (10, 1)
    summary = json.loads((tmp_path / "out" / "sageval" / "gen.json").read_text())
    assert set(summary["by_category"]) == {"survey", "form", "quiz"}
    cat = next(iter(summary["by_category"].values()))
    assert "aspects" in json.dumps(cat) or cat


def test_unknown_aspect(tmp_path, capsys):
    cfg = {"save_path": str(tmp_path / "o"), "answers": [{"name": "gen", "path": str(SURVEYS)}],
           "category": {"survey": {"SAGEval": ["acuracy"]}}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--dry-run"]) == 2
    assert 'did you mean "accuracy"' in capsys.readouterr().err


def test_cn_config_may_name_aspects_in_chinese(tmp_path):
    """A cn run validates its SAGEval list against the cn aspects (Chinese names and aliases work),
    and an unknown name is still reported with its category."""
    from evaluate.pipeline.config import parse_config
    from evaluate.families import Context, get_family

    fam = get_family("SAGEval")
    cfg = parse_config({"language": "cn", "category": {}}, tmp_path / "c.json")
    ctx = Context(cfg=cfg, options=cfg.family_options("SAGEval"), family="SAGEval")
    assert fam.validate(ctx, "survey", ["公平性", "准确度", "cohesion"], "category.survey", used=True) == []
    problems = fam.validate(ctx, "survey", ["不存在的维度"], "category.survey", used=True)
    assert len(problems) == 1 and "category.survey" in problems[0]


def test_sageval_plan_and_usage_with_weighted_scores(tmp_path, fake_openai, monkeypatch):
    """With probability-weighted scores each item costs two JSON replies and one one-token call per
    aspect and agent: the plan says so (it said 2 per item), and the manifest meters every one."""
    import math

    def reply_with_logprobs(rec):
        if rec.body.get("max_tokens") == 1:
            return Reply(content="4", top_logprobs=[{"4": math.log(0.7), "3": math.log(0.3)}])
        return reply(rec)

    monkeypatch.setenv("SAGE_KEY", "sk-sage")
    fake_openai.reply_fn = reply_with_logprobs
    cfg = {"save_path": str(tmp_path / "out"), "answers": [{"name": "gen", "path": str(SURVEYS)}],
           "category": {"survey": {"SAGEval": ["accuracy", "cohesion"]}},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url, "api_key_env": "SAGE_KEY"},
           "sageval": {"use_logprobs": True, "max_retries": 0}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path)]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    n = manifest["plan"]["items"]["gen"]["survey"]
    assert manifest["plan"]["work"]["SAGEval"]["judge_calls"] == n * (2 + 2 * 2) == fake_openai.chat_calls
    assert manifest["usage"]["SAGEval"]["requests"] == fake_openai.chat_calls
