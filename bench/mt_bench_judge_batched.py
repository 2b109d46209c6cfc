"""MT-bench's judge step with the local judge: seconds per judgment one at a time vs several in flight.

    python bench/mt_bench_judge_batched.py [--questions 81 111 101 130] [--answers vicuna-13b-v1.3]
                                          [--config bench/configs/mt_bench_qwen.yaml] [--sequences 8]
                                          [--baseline-matmul default|auto]

The same subset as bench/mt_bench_local.py (FastChat's questions, reference answers and one
model's answers from ../shared), `--mode single`, turns 1 and 2: judged twice in one process on
the same loaded weights, without a judge cache, first as the local judge did before issue 29
(`local_sequences: 1`, `local_matmul: --baseline-matmul`, default: torch's own MKL products), then
with `--sequences` and the config's `local_matmul` (auto: oneDNN for float32 on x86-64). Prints
seconds per judgment for each, the ratio, and how many judgments (text and rating) are identical;
with the same kernel in both arms every one must be (exit 1 otherwise), with different kernels the
products round differently and a reply may part ways where two tokens nearly tie.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from evaluate.backends.pool import open_backend  # noqa: E402
from evaluate.benchmarks.mt_bench.run import load_inputs, make_matches  # noqa: E402
from evaluate.benchmarks.mt_bench.judge import judge_single  # noqa: E402
from evaluate.benchmarks.driver import load_judge  # noqa: E402
from local_batched import cpu_model  # noqa: E402
from mt_bench_local import FASTCHAT, _subset  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, nargs="+", default=[81, 111, 101, 130])
    p.add_argument("--answers", default="vicuna-13b-v1.3")
    p.add_argument("--config", type=Path, default=ROOT / "bench" / "configs" / "mt_bench_qwen.yaml")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "mt_bench_judge_batched")
    p.add_argument("--sequences", type=int, default=8)
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the one-at-a-time arm (compare with a recorded number instead)")
    p.add_argument("--baseline-matmul", default="default", choices=["default", "auto", "onednn"],
                   help="the one-at-a-time arm's local_matmul (default: what the judge used before)")
    args = p.parse_args()
    if not FASTCHAT.is_dir():
        print("../shared/data/fastchat_mt_bench is not here; nothing to run")
        return 0
    data, answers = _subset(args.out, args.questions, args.answers)
    opts = load_judge(args.config)
    inputs = load_inputs(data, [answers], judge_model=opts.model, mode="single")
    matches = make_matches(inputs, "single")
    print(f"machine: {cpu_model()} (2 cores shared with other work); judge {opts.model}, max_tokens "
          f"{opts.max_tokens}; {len(matches)} judgments (single, turns 1 and 2)")
    # the weights, once, before the clock, with oneDNN's packed copy (auto would pack inside the clock)
    open_backend(dataclasses.replace(opts, local_pack_weights="always"), None).load()  # type: ignore[attr-defined]
    got, walls = {}, {}
    arms = {args.sequences: opts.local_matmul} if args.no_baseline else \
        {1: args.baseline_matmul, args.sequences: opts.local_matmul}
    kernels = {}
    for n, matmul in arms.items():
        backend = open_backend(dataclasses.replace(opts, local_sequences=n, local_matmul=matmul), None)
        kernels[n] = backend.signature().get("matmul", "default")
        t0 = time.perf_counter()
        got[n] = judge_single(backend, matches)
        walls[n] = time.perf_counter() - t0
        packed = " (packed weights)" if getattr(backend, "packed", False) else ""
        print(f"local_sequences {n}, matmul {kernels[n]}{packed}: {walls[n]:.0f} s, {walls[n] / len(matches):.1f} s per "
              f"judgment; ratings {[j.score for j in got[n]]}", flush=True)
    if args.no_baseline:
        return 0
    a, b = got[1], got[args.sequences]
    same = sum(x.game.judgment == y.game.judgment and x.score == y.score for x, y in zip(a, b))
    print(f"ratio: {walls[1] / walls[args.sequences]:.2f}x faster per judgment; identical judgments "
          f"{same}/{len(a)}")
    return 0 if same == len(a) or kernels[1] != kernels[args.sequences] else 1


if __name__ == "__main__":
    raise SystemExit(main())
