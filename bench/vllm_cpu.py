"""On a CPU: the managed vLLM server (`backend: vllm`, vLLM's CPU build) against the in-process engine
(`backend: local`) generating the same answers.

    flock /tmp/heavy.lock .venv/bin/python bench/vllm_cpu.py [--model Qwen2.5-Coder-1.5B-Instruct] [--n 24]
                                                             [--max-tokens 128] [--in-flight 8]

The questions are MT-bench's first turns (every third of its 80, as bench/local_batched.py takes them;
first turns only: a second turn would need each engine's own first answer), asked greedily in
float32 with at most `--max-tokens` new tokens. Each engine keeps `--in-flight` requests going: the
local backend decodes that many sequences together (`local_sequences`), the vLLM server gets that many
requests at a time from the tool's HTTP pool (`concurrency`). Loading is before the clock for both
(the server is started and answers one warm-up request; the local weights are loaded and packed for
oneDNN). The arms run one after the other, the server stopped before the local model loads: both
at once would not fit in 24 GB with Qwen-1.5B in float32 twice. Prints tokens per second of each, the
ratio, and how many greedy answers are the same text.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local_batched import cpu_model  # noqa: E402  (bench/ is on the path when run as a script)

from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.options import JudgeOptions  # noqa: E402

QUESTIONS = ROOT.parent / "shared" / "data" / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench" / "question.jsonl"


def prompts(n: int) -> list[str]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["turns"][0] for r in rows[::max(1, len(rows) // n)]][:n]


def run_vllm(model: str, reqs: list[JudgeRequest], in_flight: int) -> tuple[float, list, str]:
    from evaluate.backends.vllm import VllmBackend
    from evaluate.backends.vllm_server import stop_all

    opts = JudgeOptions(backend="vllm", model=model, dtype="float32", concurrency=in_flight)
    backend = VllmBackend(opts)
    try:
        t0 = time.perf_counter()
        warm = backend.complete_many([JudgeRequest.chat(None, "Say hi.", max_tokens=4)])
        assert warm[0].ok, warm[0].error or backend.unreachable
        info = (f"vLLM {backend.install().distribution} {backend.install().version}, flags "
                f"{' '.join(backend.spec().flags)} (start and warm-up {time.perf_counter() - t0:.0f} s, before the clock)")
        t0 = time.perf_counter()
        out = backend.complete_many(reqs)
        seconds = time.perf_counter() - t0
    finally:
        backend.close()
        stop_all()
    return seconds, out, info


def run_local(model: str, reqs: list[JudgeRequest], in_flight: int, max_tokens: int) -> tuple[float, list, str]:
    from evaluate.backends.local import LocalBackend

    t0 = time.perf_counter()
    backend = LocalBackend(model, dtype="float32", max_new_tokens=max_tokens, sequences=in_flight, pack="always").load()
    info = (f"local backend, matmul {backend.kernel}, packed weights {'yes' if backend.packed else 'no'} "
            f"(load {time.perf_counter() - t0:.0f} s, before the clock)")
    t0 = time.perf_counter()
    out = backend.complete_many(reqs)
    return time.perf_counter() - t0, out, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--in-flight", type=int, default=8)
    args = ap.parse_args()
    if not QUESTIONS.is_file():
        print(f"{QUESTIONS}: not present (the MT-bench questions are read from ../shared)", file=sys.stderr)
        return 2
    reqs = [JudgeRequest.chat(None, p, max_tokens=args.max_tokens) for p in prompts(args.n)]
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs (shared with other work); {args.model} float32; "
          f"{len(reqs)} MT-bench first turns, at most {args.max_tokens} new tokens, greedy, {args.in_flight} in flight",
          flush=True)
    results = {}
    for name, run in (("vllm server", lambda: run_vllm(args.model, reqs, args.in_flight)),
                      ("local backend", lambda: run_local(args.model, reqs, args.in_flight, args.max_tokens))):
        seconds, out, info = run()
        bad = [c.error for c in out if not c.ok]
        assert not bad, bad[:3]
        tokens = sum(c.completion_tokens for c in out)
        results[name] = (tokens / seconds, [c.text for c in out])
        print(f"{name:>14}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.2f} tokens/s; {info}; load "
              f"average after it {os.getloadavg()[0]:.1f}", flush=True)
    (v_rate, v_text), (l_rate, l_text) = results["vllm server"], results["local backend"]
    same = sum(a == b for a, b in zip(v_text, l_text))
    faster = "local backend" if l_rate > v_rate else "vllm server"
    print(f"ratio local / vllm: {l_rate / v_rate:.2f}x tokens per second ({faster} faster); "
          f"greedy answers with the same text: {same}/{len(reqs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
