"""Local backend: multi-token generation with several sequences in flight vs one at a time.

    .venv/bin/python bench/local_batched.py [--model Qwen2.5-Coder-1.5B-Instruct] [--n 8] [--max-tokens 128]
                                            [--sequences 8] [--rounds 1] [--matmul auto|onednn|default]
                                            [--pack auto|always|never]

Generates `n` greedy answers (MT-bench's first turns from ../shared when present, else built-in
questions) with the same loaded weights (evaluate.models.load, once per process) two ways:
today's one-at-a-time decoding (prefix reuse and prompt-lookup drafts as configured by default)
and `sequences` rows in flight (continuous batching). The arms alternate round by round, so a
machine shared with other work slows both alike. Prints generated tokens per second for each,
the ratio, forward passes, and whether every greedy text is identical token for token.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.local import LocalBackend  # noqa: E402

QUESTIONS = ROOT.parent / "shared" / "data" / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench" / "question.jsonl"
FALLBACK = ["Write a haiku about rain.", "Explain why the sky is blue to a child.", "What is 17 times 23?",
            "Write a Python function that reverses a string.", "Name three causes of the French Revolution.",
            "Summarise the rules of chess in a paragraph.", "Give a recipe for pancakes.",
            "Compare TCP and UDP in a few sentences."]


def prompts(n: int) -> list[str]:
    if QUESTIONS.is_file():
        rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [r["turns"][0] for r in rows[::max(1, len(rows) // n)]][:n]
    return (FALLBACK * (n // len(FALLBACK) + 1))[:n]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--sequences", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--matmul", default="auto", choices=["auto", "onednn", "default"],
                    help="float32 matrix-product kernel of both arms (judge.local_matmul)")
    ap.add_argument("--pack", default="always", choices=["auto", "always", "never"],
                    help="oneDNN packed weights for both arms (judge.local_pack_weights; the same numbers): "
                         "always packs at load, before the clock (auto would pack inside the first arm's time)")
    args = ap.parse_args()
    import torch

    reqs = [JudgeRequest.chat(None, p, max_tokens=args.max_tokens) for p in prompts(args.n)]
    t_load = time.perf_counter()
    arms = {"one at a time": LocalBackend(args.model, dtype=args.dtype, max_new_tokens=args.max_tokens,
                                             matmul=args.matmul, pack=args.pack).load(),
            f"{args.sequences} in flight": LocalBackend(args.model, dtype=args.dtype, max_new_tokens=args.max_tokens,
                                                       sequences=args.sequences, matmul=args.matmul,
                                                       pack=args.pack).load()}
    print(f"machine: {cpu_model()}, {torch.get_num_threads()} torch threads (shared with other work); model "
          f"{args.model} {arms['one at a time'].dtype}, matmul {arms['one at a time'].kernel}, packed weights "
          f"{'yes' if arms['one at a time'].packed else 'no'} (loading and packing {time.perf_counter() - t_load:.0f} s, "
          f"before the clock); {len(reqs)} answers of at most {args.max_tokens} new tokens")
    seconds = {k: 0.0 for k in arms}
    tokens = {k: 0 for k in arms}
    texts: dict[str, list[str]] = {}
    for r in range(args.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            backend = arms[name]
            backend.close()  # no prefix cache carried from an earlier round
            t0 = time.perf_counter()
            out = backend.complete_many(reqs)
            seconds[name] += time.perf_counter() - t0
            assert all(c.ok for c in out), [c.error for c in out if not c.ok]
            tokens[name] += sum(c.completion_tokens for c in out)
            texts.setdefault(name, [c.text for c in out])
            print(f"  round {r + 1}, {name}: {sum(c.completion_tokens for c in out)} tokens in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    rate = {k: tokens[k] / seconds[k] for k in arms}
    for k in arms:
        print(f"{k:>14}: {tokens[k]} tokens in {seconds[k]:.1f} s = {rate[k]:.2f} tokens/s; "
              f"forward passes {arms[k].forward_passes}")
    one, many = list(arms)
    same = [a == b for a, b in zip(texts[one], texts[many])]
    print(f"ratio: {rate[many] / rate[one]:.2f}x tokens per second; greedy texts identical: {sum(same)}/{len(same)}")
    for i, ok in enumerate(same):
        if not ok:
            print(f"  answer {i} differs:\n    {texts[one][i]!r}\n    {texts[many][i]!r}")
    return 0 if all(same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
