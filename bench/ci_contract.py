"""How long an unattended run takes to give up on a judge that is not there, through `python eval.py`:

- dead: nothing listens on the judge's port (connection refused)
- one dead of three: a list of three replicas, one refusing; the run must finish on the other two
- hung: a server that accepts connections and never answers (a listening socket nobody reads)
- dies: the server answers the first request, then goes away (the probe passed)

Each case is a whole run (answer files, plan, probe, scoring, outputs) of one category of the
example answers with a GPT metric; the judge settings are a CI user's defaults (timeout 60 s,
5 retries). Prints one line per case: seconds from start to exit, the exit code, the last line.

    .venv/bin/python bench/ci_contract.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_openai_server import FakeOpenAIServer, Reply  # noqa: E402

EN = REPO / "examples" / "en"


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(tmp: Path, name: str, base_url, concurrency: int = 8) -> tuple[float, int, str]:
    cfg = {"save_path": str(tmp / name), "battle": False, "target_file": str(EN / "targets.json"),
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "category": {c: {"GPT": ["correctness"]} for c in ("classification", "closed_qa", "open_qa")},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": base_url, "mode": "generate",
                     "timeout": 60, "max_retries": 5, "concurrency": concurrency}}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(cfg))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "eval.py", "--config", str(path), "--no-charts"], cwd=REPO,
                          capture_output=True, text=True, timeout=900, env={**os.environ})
    took = time.monotonic() - t0
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    return took, proc.returncode, last


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        dead = f"http://127.0.0.1:{free_port()}/v1"
        t, code, last = run(tmp, "dead", dead)
        print(f"dead endpoint:          {t:6.2f} s  exit {code}  {last[:160]}")

        with FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s1, \
                FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s2:
            t, code, last = run(tmp, "one_dead", [s1.url, f"http://127.0.0.1:{free_port()}/v1", s2.url])
            print(f"one dead of three:      {t:6.2f} s  exit {code}  paid on the live ones: "
                  f"{s1.chat_calls + s2.chat_calls} of 8 requests")

        hung = socket.socket()
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # the kernel completes handshakes; nobody ever reads or answers
        try:
            t, code, last = run(tmp, "hung", f"http://127.0.0.1:{hung.getsockname()[1]}/v1")
        finally:
            hung.close()
        print(f"accepts, never answers: {t:6.2f} s  exit {code}  {last[:160]}")

        holder: dict[str, FakeOpenAIServer] = {}
        first = threading.Event()

        def dies(rec):  # answers the first request, then the server goes away
            if not first.is_set():
                first.set()
                threading.Thread(target=holder["s"].stop, daemon=True).start()
            return Reply(content="4")

        holder["s"] = s = FakeOpenAIServer(reply_fn=dies, latency=0.05).start()
        try:
            t, code, last = run(tmp, "dies", s.url, concurrency=1)
        finally:
            s.stop()
        print(f"dies after 1 request:   {t:6.2f} s  exit {code}  {last[:160]}")

        t0 = time.monotonic()
        subprocess.run([sys.executable, "eval.py", "--help"], cwd=REPO, capture_output=True)
        print(f"(python eval.py --help alone: {time.monotonic() - t0:.2f} s)")


if __name__ == "__main__":
    main()
