"""Export of N judge requests and import of their results: time and peak memory.

Makes two answer files of N/2 records each (one category, one GPT metric, no battle: N rating
requests), then, each step in its own process so its peak RSS is its own:

  1. export:  eval.py --config C --export-requests requests.jsonl   (timed, peak RSS)
  2. a synthetic engine writes one result line per request (what vLLM's run_batch writes; not timed)
  3. import:  eval.py --config C --import-results results.jsonl    (timed, peak RSS)
  4. export again: must write 0 requests (everything is in the cache)

    python bench/export_import.py [--n 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANSWER = ("The capital of France is Paris, which has been the political and cultural centre of the country for "
          "centuries; it sits on the Seine and is home to about two million people. ") * 2


def make_files(tmp: Path, n: int) -> Path:
    per = n // 2
    for model in ("model_a", "model_b"):
        rows = [{"id": i, "category": "open_qa", "instruction": f"Question number {i}: what is the capital of "
                 f"France, and why?", "input": "", "output": f"{model} answer {i}. {ANSWER}", "target": "Paris"}
                for i in range(per)]
        (tmp / f"{model}.json").write_text(json.dumps(rows))
    cfg = {"language": "en", "save_path": str(tmp / "out"), "battle": False,
           "category": {"open_qa": {"GPT": ["correctness"]}},
           "answers": [{"name": m, "path": str(tmp / f"{m}.json")} for m in ("model_a", "model_b")],
           "judge": {"backend": "openai", "model": "served-judge", "base_url": "http://127.0.0.1:9/v1",
                     "mode": "generate"}}
    (tmp / "c.json").write_text(json.dumps(cfg))
    return tmp / "c.json"


def step(args: list[str]) -> tuple[float, float, str]:
    """Run eval.py in a child; (seconds, peak RSS MiB of that child, stdout)."""
    code = ("import resource, sys, time; sys.argv = ['eval.py'] + sys.argv[1:]; t = time.perf_counter(); "
            "from evaluate.cli import main; rc = main(sys.argv[1:]); "
            "print('BENCH', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rc)")
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "EVAL_NO_PROGRESS": "1"})
    line = next((x for x in out.stdout.splitlines() if x.startswith("BENCH")), None)
    if line is None or not line.endswith(" 0"):
        raise SystemExit(f"step {args} failed:\n{out.stdout}\n{out.stderr}")
    _, secs, rss, _ = line.split()
    return float(secs), float(rss), out.stdout


def fake_engine(src: Path, dst: Path) -> int:
    n = 0
    with open(src) as fin, open(dst, "w") as fout:
        for line in fin:
            req = json.loads(line)
            body = {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": req["body"]["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": str(1 + n % 5)},
                                 "logprobs": None, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 400, "completion_tokens": 1, "total_tokens": 401}}
            fout.write(json.dumps({"id": f"vllm-{n}", "custom_id": req["custom_id"],
                                   "response": {"status_code": 200, "request_id": f"r{n}", "body": body},
                                   "error": None}) + "\n")
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cfg = make_files(tmp, a.n)
        req, res = tmp / "requests.jsonl", tmp / "results.jsonl"
        t_exp, m_exp, _ = step(["--config", str(cfg), "--export-requests", str(req)])
        lines = sum(1 for _ in open(req))
        size_req = req.stat().st_size
        n_res = fake_engine(req, res)
        t_imp, m_imp, out = step(["--config", str(cfg), "--import-results", str(res)])
        t_again, m_again, _ = step(["--config", str(cfg), "--export-requests", str(req)])
        left = sum(1 for _ in open(req))
        cache = tmp / "out" / "judge_cache.sqlite"
        cache_mb = sum(p.stat().st_size for p in cache.parent.glob("judge_cache.sqlite*")) / 2**20
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average at the end {os.getloadavg()[0]:.2f}")
    print("| step | requests | time (s) | peak RSS (MiB) | per request |")
    print("|---|---|---|---|---|")
    print(f"| export | {lines:,} ({size_req / 2**20:.0f} MiB JSONL) | {t_exp:.1f} | {m_exp:.0f} | {t_exp / lines * 1e6:.0f} us |")
    print(f"| import | {n_res:,} results | {t_imp:.1f} | {m_imp:.0f} | {t_imp / n_res * 1e6:.0f} us |")
    print(f"| export again (all cached) | {left} left | {t_again:.1f} | {m_again:.0f} | |")
    print(f"cache after import: {cache_mb:.0f} MiB on disk; bench driver RSS {base:.0f} MiB")
    assert lines == a.n and left == 0, (lines, left)


if __name__ == "__main__":
    main()
