"""UniEval inside the pipeline: T5 checkpoints from path_for_UniEval, and the judge variant."""

import json
import math
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.core.expected import yes_probability

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
    from tests.test_unieval import _save_checkpoint
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401
    from test_unieval import _save_checkpoint

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def config(tmp_path, **extra):
    cfg = {"language": "en", "save_path": str(tmp_path / "out"),
           "category": {"summarization": {"UniEval": ["summarization-fluency", "summarization-coherence"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "target_file": str(EN / "targets.json"), **extra}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def test_yes_probability():
    assert yes_probability({"Yes": math.log(0.6), " no": math.log(0.2), "Maybe": math.log(0.2)}) == pytest.approx(0.75)
    assert yes_probability({"1": 0.0}) is None


def test_t5_checkpoint_in_pipeline(tmp_path):
    ckpt = _save_checkpoint(tmp_path / "tiny-unieval")
    assert main(["--config", str(config(tmp_path, path_for_UniEval={"summarization": str(ckpt)}))]) == 0
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    items = [i for i in res["items"] if i["category"] == "summarization"]
    for it in items:
        for k in ("UniEval/summarization-fluency", "UniEval/summarization-coherence"):
            assert 0 < it["scores"][k] < 1
    assert res["signatures"]["UniEval/summarization-fluency"]["evaluator"] == "UniEval T5"


def test_missing_checkpoint_is_a_config_error(tmp_path, capsys):
    code = main(["--config", str(config(tmp_path, path_for_UniEval={"summarization": "path to unieval-sum"}))])
    assert code == 2
    err = capsys.readouterr().err
    assert "category.summarization.UniEval[0]: path_for_UniEval.summarization" in err
    assert "MingZhong/unieval-sum" in err


def test_judge_variant_reads_yes_no_logprobs(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-unieval-secret-123")
    fake_openai.reply_fn = lambda rec: Reply(content="Yes", top_logprobs=[{"Yes": math.log(0.8), "No": math.log(0.2)}])
    cfg = config(tmp_path, unieval={"evaluator": "judge"},
                 judge={"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url, "api_key_env": "JUDGE_KEY"})
    assert main(["--config", str(cfg)]) == 0
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    items = [i for i in res["items"] if i["category"] == "summarization"]
    assert all(it["scores"]["UniEval/summarization-coherence"] == pytest.approx(0.8) for it in items)
    # fluency is asked sentence by sentence and averaged: still 0.8, but more calls than items
    assert all(it["scores"]["UniEval/summarization-fluency"] == pytest.approx(0.8) for it in items)
    assert fake_openai.chat_calls > 2 * len(items)
    first = fake_openai.chat_requests()[0].user_text
    assert "Answer with one word, Yes or No." in first
    for f in (tmp_path / "out").rglob("*"):
        if f.is_file():
            assert b"sk-unieval-secret-123" not in f.read_bytes(), f
