"""The API key never reaches results, manifest, cache, logs or the terminal, however it is given."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.core.secrets import looks_like_key, scrub_argv, scrub_url

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
KEY = "sk-proj-SECRETSECRET-1234567890"


def config(tmp_path, server_url, **judge):
    cfg = {"save_path": str(tmp_path / "out"), "battle": False,
           "category": {"classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake", "base_url": server_url, "mode": "generate",
                     "max_retries": 0, "timeout": 5, **judge}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cfg))
    return p


def no_key_anywhere(root: Path, *texts: str) -> None:
    for f in root.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
    for t in texts:
        assert KEY not in t


@pytest.mark.parametrize("argv", [
    ["--openai_key", KEY], [f"--openai_key={KEY}"], ["--openai_k", KEY], ["--openai", KEY],
    ["--api-key", KEY], [f"--token={KEY}"], ["--x", KEY], ["--openai_key"],
])
def test_scrub_argv_hides_every_form(argv):
    shown = scrub_argv(["eval.py", "--config", "c.yaml", *argv])
    assert KEY not in " ".join(shown)
    assert shown[:3] == ["eval.py", "--config", "c.yaml"]


def test_scrub_url():
    assert scrub_url(f"https://user:{KEY}@host.example/v1") == "https://host.example/v1"
    assert scrub_url(f"http://127.0.0.1:8000/v1?key={KEY}&x=1") == "http://127.0.0.1:8000/v1?x=1"
    assert looks_like_key(KEY) and not looks_like_key("OPENAI_API_KEY") and not looks_like_key("MY_JUDGE_KEY")


@pytest.mark.parametrize("flag", [["--openai_k", KEY], ["--openai", KEY], ["--openai_ke", KEY]])
def test_abbreviated_key_flags_are_refused_without_echoing_the_key(tmp_path, flag):
    proc = subprocess.run([sys.executable, "eval.py", "--config", str(config(tmp_path, "http://127.0.0.1:9/v1")),
                           "--dry-run", *flag], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unrecognized arguments" in proc.stderr and "Traceback" not in proc.stderr
    assert KEY not in proc.stderr + proc.stdout


def test_key_in_flag_and_url_never_written(tmp_path, fake_openai, capsys, monkeypatch):
    fake_openai.reply_fn = lambda rec: Reply(content="4")
    url = fake_openai.url.replace("http://", f"http://user:{KEY}@")
    argv = ["--config", str(config(tmp_path, url)), f"--openai_key={KEY}"]
    monkeypatch.setattr(sys, "argv", ["eval.py", *argv])  # the manifest stores sys.argv, scrubbed
    assert main(argv) == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert m["config"]["judge"]["base_url"] == fake_openai.url
    assert "--openai_key=***" in m["argv"]
    out = capsys.readouterr()
    no_key_anywhere(tmp_path / "out", out.out, out.err)


def test_key_in_url_query_never_written(tmp_path, fake_openai, capsys):
    fake_openai.reply_fn = lambda rec: Reply(content="4")
    main(["--config", str(config(tmp_path, fake_openai.url + f"?key={KEY}"))])
    out = capsys.readouterr()
    no_key_anywhere(tmp_path / "out", out.out, out.err)


def test_key_pasted_into_api_key_env_is_refused_not_echoed(tmp_path, capsys):
    assert main(["--config", str(config(tmp_path, "http://127.0.0.1:9/v1", api_key_env=KEY)), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "judge.api_key_env" in err and "looks like an API key" in err
    assert KEY not in err
