"""Local judge: one-token (G-Eval logprobs) judgments per second, one at a time vs several per forward pass.

    .venv/bin/python bench/local_batch.py [--model SmolLM2-135M-Instruct] [--n 32] [--batch 1 8 16]

On a GPU batching is what fills the device; on this project's 2-core CPU the forward pass is
already compute-bound, and one at a time keeps the prefix cache (the shared rubric is computed
once), so the numbers here say what the CPU does, not what a GPU would.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.local import LocalBackend  # noqa: E402

RUBRIC = ("You will rate an answer to a question for relevance, on a scale of 1 to 5. Evaluation steps: read the "
          "question; read the answer; judge whether the answer addresses the question directly and completely; "
          "give a score from 1 (irrelevant) to 5 (fully relevant). Reply with the score only.")


def requests(n: int) -> list[JudgeRequest]:
    return [JudgeRequest.chat(RUBRIC, f"Question: What is {i} plus {i + 1}?\nAnswer: It is {2 * i + 1}"
                              + ", because adding one more" * (i % 5), max_tokens=1, top_logprobs=20)
            for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16])
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()
    import torch

    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"cuda={torch.cuda.is_available()}; model {args.model}, {args.n} one-token judgments")
    reqs = requests(args.n)
    base = None
    for b in args.batch:
        for reuse in ((True, False) if b == 1 else (False,)):
            be = LocalBackend(args.model, dtype=args.dtype, batch_size=b, prefix_reuse=reuse).load()
            be.complete_many(reqs[:2])  # warm-up
            t0 = time.perf_counter()
            out = be.complete_many(reqs)
            dt = time.perf_counter() - t0
            assert all(c.ok for c in out)
            tops = [max(c.top_logprobs[0], key=c.top_logprobs[0].get) for c in out]
            if base is None:
                base = tops
            print(f"batch {b:>3} prefix reuse {str(reuse):5}: {args.n / dt:6.2f} judgments/s ({dt:.1f} s); "
                  f"same top token as the first setting: {sum(x == y for x, y in zip(tops, base))}/{args.n}")


if __name__ == "__main__":
    main()
