"""The judge-failure contract: a family whose share of invalid scores reaches `max_invalid_share`
(default 1.0: every score invalid) makes the run exit 3 with a manifest error; the counts are shown."""

import itertools
import json
from pathlib import Path

import pytest

from evaluate.cli import main

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

EN = Path(__file__).resolve().parents[1] / "examples" / "en"
KEY = "sk-judge-failures-SECRET-0042"


def config(tmp_path, server, **extra):
    cfg = {"save_path": str(tmp_path / "out"), "battle": False,
           "category": {"classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake", "base_url": server.url, "api_key_env": "GPT_KEY",
                     "mode": "generate", "max_retries": 0, "timeout": 5}, **extra}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cfg))
    return p


def manifest(tmp_path):
    return json.loads((tmp_path / "out" / "manifest.json").read_text())


@pytest.mark.parametrize("fault", [Reply.client_error(401), Reply.server_error(500), Reply.malformed(),
                                   Reply.empty(), Reply.rate_limited(0.01)])
def test_every_call_failing_is_exit_3_not_success(tmp_path, fake_openai, monkeypatch, capsys, fault):
    monkeypatch.setenv("GPT_KEY", KEY)
    fake_openai.reply_fn = lambda rec: fault
    assert main(["--config", str(config(tmp_path, fake_openai))]) == 3
    m = manifest(tmp_path)
    assert m["status"] == "finished with errors"
    assert m["invalid"]["GPT"] == {"valid": 0, "invalid": 3}
    assert any(e.get("family") == "GPT" and "3 of 3 scores invalid" in e["error"] for e in m["errors"])
    err = capsys.readouterr().err
    assert "GPT: 0 scores, 3 invalid (100%)" in err and "Traceback" not in err
    assert KEY not in err


def test_some_invalid_is_ok_by_default_and_fails_under_a_lower_threshold(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("GPT_KEY", KEY)
    replies = itertools.cycle(["4", "no idea", "3"])
    fake_openai.reply_fn = lambda rec: Reply(content=next(replies))
    assert main(["--config", str(config(tmp_path, fake_openai))]) == 0
    assert manifest(tmp_path)["invalid"]["GPT"] == {"valid": 2, "invalid": 1}
    # the cache answers the re-run identically; 1 of 3 invalid is >= 0.3
    assert main(["--config", str(config(tmp_path, fake_openai, max_invalid_share=0.3))]) == 3
    assert main(["--config", str(config(tmp_path, fake_openai, max_invalid_share=0.5))]) == 0


@pytest.mark.parametrize("value", [0, -0.1, 1.5, "half", True])
def test_max_invalid_share_is_checked_at_load(tmp_path, fake_openai, capsys, value):
    assert main(["--config", str(config(tmp_path, fake_openai, max_invalid_share=value)), "--dry-run"]) == 2
    assert "max_invalid_share" in capsys.readouterr().err


def test_a_slow_server_gets_a_longer_timeout_on_retry_and_retries_are_shown(tmp_path, fake_openai, monkeypatch, caplog):
    """Every reply takes 1.5 s; the timeout is 1 s: the retry waits 2 s and succeeds (the same 1 s
    limit would fail forever), and the retry is reported as it happens."""
    monkeypatch.setenv("GPT_KEY", KEY)
    fake_openai.reply_fn = lambda rec: Reply(content="4", hang=1.5)
    cfg = config(tmp_path, fake_openai, category={"classification": {"GPT": ["correctness"]}})
    raw = json.loads(cfg.read_text())
    raw["judge"].update(timeout=1, max_retries=1, concurrency=3)
    cfg.write_text(json.dumps(raw))
    with caplog.at_level("WARNING"):
        assert main(["--config", str(cfg)]) == 0
    assert manifest(tmp_path)["invalid"]["GPT"] == {"valid": 3, "invalid": 0}
    shown = [r.getMessage() for r in caplog.records if "judge retry" in r.getMessage()]
    assert shown and "next timeout 2s" in shown[0] and "timed out after 1s" in shown[0]


def test_default_retry_budget_spans_a_server_restart():
    from evaluate.backends.options import JudgeOptions
    from evaluate.backends.retry import RetryPolicy

    opts = JudgeOptions()
    policy = RetryPolicy(max_retries=opts.max_retries)
    # full jitter: the mean pause is half of each attempt's cap; their sum must cover a ~10-30 s restart
    mean_total = sum(min(policy.backoff_max, policy.backoff_base * 2 ** a) / 2 for a in range(opts.max_retries))
    assert mean_total >= 30 and opts.timeout >= 120
