"""Two runs into one save_path: the second is refused with a message naming the holder (exit 2),
and the first keeps every score; a lock left by a dead run is taken over."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from evaluate.cli import main
from evaluate.savepath.layout import LOCK_NAME

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def config(tmp_path, url):
    cfg = {"save_path": str(tmp_path / "out"), "battle": False,
           "category": {"classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake", "base_url": url, "api_key_env": "NO_KEY_HERE",
                     "mode": "generate", "max_retries": 0, "timeout": 10, "concurrency": 1}}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cfg))
    return p


def run_cli(cfg, *extra):
    return subprocess.run([sys.executable, str(REPO / "eval.py"), "--config", str(cfg), *extra], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_second_run_into_a_busy_save_path_is_refused_and_nothing_is_lost(tmp_path, fake_openai):
    release = threading.Event()  # the first run's judge answers only once the second run is over

    def held(rec):
        # the reachability probe (1 token) is answered at once: held, it would time out whenever the second
        # run's start (a fresh interpreter) takes longer than the judge's timeout on a loaded host
        if rec.body.get("max_tokens") != 1:
            release.wait(90)
        return Reply(content="4")

    fake_openai.reply_fn = held
    cfg = config(tmp_path, fake_openai.url)
    codes = []
    first = threading.Thread(target=lambda: codes.append(main(["--config", str(cfg), "--only", "GPT", "--no-charts"])))
    first.start()
    lock = tmp_path / "out" / LOCK_NAME
    for _ in range(100):
        if lock.exists():
            break
        time.sleep(0.05)
    assert lock.exists()
    try:
        second = run_cli(cfg, "--only", "Metrics", "--no-charts")
    finally:
        release.set()
    first.join(60)
    assert second.returncode == 2, second.stderr
    assert f"pid {os.getpid()}" in second.stderr and "in use by another run" in second.stderr
    assert "Traceback" not in second.stderr
    assert codes == [0] and not lock.exists()
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    assert res["aggregates"]["overall"]["GPT/correctness"]["n"] == 3
    # once the first run is done, the second one runs and both families' scores are kept
    again = run_cli(cfg, "--only", "Metrics", "--no-charts")
    assert again.returncode == 0, again.stderr
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    assert {"GPT/correctness", "Metrics/F1"} <= set(res["aggregates"]["overall"])


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path, fake_openai):
    fake_openai.reply_fn = lambda rec: Reply(content="4")
    cfg = config(tmp_path, fake_openai.url)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "out").mkdir()
    import socket

    (tmp_path / "out" / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    proc = run_cli(cfg, "--only", "Metrics", "--no-charts")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "out" / LOCK_NAME).exists()
