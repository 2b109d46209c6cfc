"""Prompt-lookup decoding in the local judge: time and forward passes with and without it.

Runs the SAGEval pipeline (evaluator agent, then SAGE agent: JSON replies of a few hundred tokens,
which copy aspect names, keys and the first agent's reasons from their prompts) on the bundled
forms twice in one process on the same loaded model: `lookahead=0` (one token per forward pass)
and `lookahead=N`. Reports wall time, forward passes, drafted / confirmed tokens and whether the
two runs produced the same replies and scores.

    .venv/bin/python bench/lookup_decoding.py --ids s5 --lookahead 3 6 10

Prints a markdown table; --json writes the raw numbers.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spinning OpenMP threads slowed shared CPUs 5-8x
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.pipeline.answers import load_records  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--data", default=str(REPO / "examples" / "sageval" / "surveys.json"))
    ap.add_argument("--ids", nargs="*", default=["s5"], help="record ids (default: s5)")
    ap.add_argument("--aspects", nargs="*", default=["relevancy", "semantic_diversity", "fairness"])
    ap.add_argument("--lookahead", type=int, nargs="+", default=[10], help="values to compare with 0")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import torch

    from evaluate.backends.local import LocalBackend
    from sageval.run import run_sage

    records = [r for r in load_records(Path(args.data)) if r.id in set(args.ids)]
    if not records:
        print(f"{args.data}: none of the ids {args.ids}", file=sys.stderr)
        return 2
    rows, replies = [], {}
    for lookahead in (0, *args.lookahead):
        backend = LocalBackend(args.model, max_new_tokens=args.max_tokens, lookahead=lookahead).load()
        t0 = time.perf_counter()
        result = run_sage(backend, records, args.aspects, max_tokens=args.max_tokens, max_retries=1)
        seconds = time.perf_counter() - t0
        replies[lookahead] = [(it.raw, {a: (it.evaluator[a].value, it.sage[a].value) for a in args.aspects})
                              for it in result.items]
        tokens = sum(len(backend.tokenizer(r, add_special_tokens=False)["input_ids"])
                     for it in result.items for r in it.raw.values())
        rows.append({"lookahead": lookahead, "seconds": round(seconds, 1), "forward_passes": backend.forward_passes,
                     "drafted": backend.drafted_tokens, "confirmed": backend.accepted_tokens,
                     "reply_tokens_kept": tokens})
    base = replies[0]
    for r in rows:
        fast = replies[r["lookahead"]]
        r["same_replies"] = all(a[0] == b[0] for a, b in zip(base, fast))
        r["max_weighted_score_diff"] = max((abs(x - y) for a, b in zip(base, fast) for asp in args.aspects
                                            for x, y in zip(a[1][asp], b[1][asp]) if x is not None and y is not None),
                                           default=0.0)
        r["speed_up"] = round(rows[0]["seconds"] / r["seconds"], 2)
    report = {"model": args.model, "ids": args.ids, "aspects": args.aspects,
              "machine": f"{platform.machine()}, {os.cpu_count()} cpu, torch threads={torch.get_num_threads()}",
              "runs": rows}
    print(f"{args.model}, items {args.ids}, aspects {args.aspects}; {report['machine']}\n")
    print("| lookahead | seconds | speed-up | forward passes | drafted | confirmed | same replies as 0 | largest weighted-score diff |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lookahead']} | {r['seconds']} | {r['speed_up']}x | {r['forward_passes']} | {r['drafted']} | "
              f"{r['confirmed']} | {r['same_replies']} | {r['max_weighted_score_diff']:.1e} |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
