"""`eval.py generate` throughput: does generation keep `concurrency` requests in flight?

Writes N synthetic target records (this project's question format), starts the fake OpenAI server in
another process with a fixed latency per request, and times the whole command
(`python eval.py generate ...`, process start and the endpoint probe included) with an empty cache,
and the part of it spent asking (`counts.seconds` of the sidecar: from the first request to the last
answer); then the same command again, answered from the cache. The ideal of the first run is
N x latency / concurrency; the target is at most 1.15 of it. Prints a markdown table.

    python bench/generate_throughput.py [--n 960] [--latency 1.0] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api_throughput import chat_calls, fake_server  # noqa: E402  (bench/: the served-judge benchmark's fake server)
from tests.fake_openai_server import RecordedRequest, Reply  # noqa: E402


def answer(rec: RecordedRequest) -> Reply:
    return Reply(content=f"An answer of some length to: {rec.user_text}", usage=(60, 40))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=960)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()

    with fake_server(args.latency, reply=answer) as url:
        with tempfile.TemporaryDirectory() as tmp:
            tmp_path = Path(tmp)
            questions = tmp_path / "questions.json"
            cats = ["open_qa", "brainstorming", "closed_qa", "generation"]
            questions.write_text(json.dumps([{"id": i, "category": cats[i % 4], "instruction": f"Question number {i}: "
                                              "explain one thing about the number.", "input": ""}
                                             for i in range(args.n)]), encoding="utf-8")
            cfg = tmp_path / "model.yaml"
            cfg.write_text(f"model:\n  backend: openai\n  base_url: {url}\n  model: fake-judge\n"
                           f"  concurrency: {args.concurrency}\n  price: {{prompt: 0.15, completion: 0.6}}\n")
            out = tmp_path / "answers.json"
            cmd = [sys.executable, "eval.py", "generate", "--questions", str(questions), "--model-config", str(cfg),
                   "--out", str(out)]
            env = {**os.environ, "EVAL_NO_PROGRESS": "1"}
            times, asking = [], []
            for _ in range(2):
                t0 = time.perf_counter()
                done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                if done.returncode:
                    raise SystemExit(f"generate failed ({done.returncode}): {done.stderr[-2000:]}")
                sidecar = json.loads(out.with_name(out.name + ".generation.json").read_text())
                asking.append(sidecar["counts"]["seconds"])
            sent = chat_calls(url)
            answered = len(json.loads(out.read_text()))
    ideal = args.n * args.latency / args.concurrency
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| answers | latency | concurrency | ideal | command, empty cache | ratio | of which asking | ratio | "
          "command, from the cache | requests sent |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {answered} | {args.latency:g} s | {args.concurrency} | {ideal:.1f} s | {times[0]:.1f} s | "
          f"{times[0] / ideal:.3f}x | {asking[0]:.1f} s | {asking[0] / ideal:.3f}x | {times[1]:.1f} s | "
          f"{sent} |")


if __name__ == "__main__":
    main()
