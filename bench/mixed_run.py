"""A whole run through the judge pool: many small categories, three models, two GPT metrics, battles.

10 categories x 8 items x 3 models, rated on 2 GPT metrics (480 calls) and battled pairwise in
both orders (480 calls): 960 judge calls against the fake OpenAI server (in a child process) with
a fixed latency. Ideal wall time = calls x latency / concurrency (30 s at the defaults); the
ratio includes start-up (config, answer files, prompts) and writing every file.

    python bench/mixed_run.py [--latency 1.0] [--concurrency 32] [--items 8] [--sequential]

--sequential runs the units one after the other (the runner before the run-wide pool), for comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.pipeline.config import parse_config  # noqa: E402
from evaluate.pipeline.run import run  # noqa: E402
from api_throughput import chat_calls, fake_server  # noqa: E402  (bench/: the served-judge benchmark's fake server)
from tests.fake_openai_server import RecordedRequest, Reply  # noqa: E402

CATEGORIES = ["brainstorming", "chat", "classification", "closed_qa", "extraction", "generation", "open_qa",
              "rewriting", "roleplay", "summarization"]


def reply(rec: RecordedRequest) -> Reply:
    h = hashlib.sha256(rec.user_text.encode()).digest()
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content=f"{h[0] % 10 + 1} {h[1] % 10 + 1}\nThe first answer is more complete.", usage=(600, 20))
    probs = {str(h[0] % 5 + 1): 0.6, str((h[0] + 1) % 5 + 1): 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}],
                 usage=(400, 1))


def write_answers(tmp: Path, items: int) -> list[dict[str, str]]:
    out = []
    for m in ("model_a", "model_b", "model_c"):
        recs = [{"id": f"{c}-{i}", "category": c, "instruction": f"Question {i} about {c}: explain it.",
                 "input": "", "output": f"{m} answers question {i} of {c}. " + "Some detail. " * (5 + i % 7),
                 "target": f"reference {i}"} for c in CATEGORIES for i in range(items)]
        path = tmp / f"{m}.json"
        path.write_text(json.dumps(recs))
        out.append({"name": m, "path": str(path)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--sequential", action="store_true")
    args = ap.parse_args()
    os.environ["EVAL_NO_PROGRESS"] = "1"
    os.environ.setdefault("BENCH_KEY", "sk-bench-mixed")
    with fake_server(args.latency, reply=reply) as url:
        with tempfile.TemporaryDirectory() as tmp:
            tmp_p = Path(tmp)
            raw = {"language": "en", "save_path": str(tmp_p / "out"),
                   "category": {c: {"GPT": ["relevance", "language organization"]} for c in CATEGORIES},
                   "answers": write_answers(tmp_p, args.items),
                   "judge": {"backend": "openai", "model": "fake-judge", "base_url": url, "api_key_env": "BENCH_KEY",
                             "concurrency": args.concurrency, "timeout": 30}}
            t0, c0 = time.perf_counter(), time.process_time()
            cfg = parse_config(raw, tmp_p / "c.json")
            manifest = run(cfg, families=["GPT"], charts=False, parallel=False if args.sequential else None,
                           log=lambda s: None)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            calls = chat_calls(url)
    ideal = calls * args.latency / args.concurrency
    work = manifest["plan"]["work"]["GPT"]
    print(f"{'sequential' if args.sequential else 'run-wide pool'}: 10 categories x {args.items} items x 3 models, "
          f"2 GPT metrics + battles; {work['judge_calls']} rating + {work['battle_calls']} battle calls planned, "
          f"{calls} HTTP calls made; latency {args.latency:g} s, concurrency {args.concurrency}; status "
          f"{manifest['status']}; {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| mode | calls | wall (s) | ideal (s) | wall / ideal | client CPU (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| {'sequential units' if args.sequential else 'run-wide pool'} | {calls} | {wall:.1f} | {ideal:.1f} "
          f"| {wall / ideal:.3f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
