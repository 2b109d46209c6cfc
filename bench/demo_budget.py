"""Where `make demo`'s judge time goes, and what it cannot go below on this machine.

    .venv/bin/python bench/demo_budget.py [--keep]

Runs the demo's own command (`eval.py --config configs/example_en.yaml configs/example_cn.yaml
configs/example_sageval.yaml --judge-check 1`, models already converted: `make demo` once first) in
this process, with copies of the three configs that write to fresh save paths (results/bench_demo_*;
removed afterwards unless --keep), so no judge cache answers. The local backend is instrumented from
outside (its methods wrapped, nothing changed): for every `complete_many` call of the judge, the
prompt tokens, the tokens taken from a cached prefix, the seconds of prefill and the seconds in all.

Then it prices the prefill in arithmetic: a token through the model's linear layers costs
2 x (the non-embedding weights) floating-point operations; the prefill's rate in GFLOP/s is set
beside a bare float32 matrix product of the prefill's shape on the same kernel (oneDNN) in the same
process. The closing lines give the judge's share of the run's wall time and the lower bound that
rate sets on it: what a faster engine on this CPU could not beat without fewer tokens or less
arithmetic per token.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local_batched import cpu_model  # noqa: E402  (bench/ is on the path when run as a script)

CONFIGS = ["configs/example_en.yaml", "configs/example_cn.yaml", "configs/example_sageval.yaml"]


def copies() -> list[Path]:
    """The demo's configs, each writing to results/bench_demo_<name> (paths stay relative to configs/)."""
    out = []
    for c in CONFIGS:
        src = ROOT / c
        text = src.read_text(encoding="utf-8")
        name = src.stem
        text, n = re.subn(r"^save_path:.*$", f"save_path: ../results/bench_demo_{name}", text, flags=re.M)
        if n != 1:
            sys.exit(f"{src}: expected one top-level save_path line")
        dst = src.with_name(f".bench_demo_{name}.yaml")
        dst.write_text(text, encoding="utf-8")
        out.append(dst)
    return out


def gemm_rate(rows: int, hidden: int, inner: int, kernel: str) -> float:
    """GFLOP/s of the MLP's three bare float32 products for `rows` tokens ((rows x hidden) @ (hidden x inner)
    twice, then (rows x inner) @ (inner x hidden)), best of 5, on the kernel the backend's forward uses."""
    import torch

    from evaluate.backends import onednn

    def product(x, w):
        return onednn.linear(x, w) if kernel == "onednn" else torch.nn.functional.linear(x, w)

    x, h = torch.randn(rows, hidden), torch.randn(rows, inner)
    up, down = torch.randn(inner, hidden), torch.randn(hidden, inner)
    best = float("inf")
    with torch.inference_mode():
        product(x, up), product(h, down)
        for _ in range(5):
            t = time.perf_counter()
            product(x, up), product(x, up), product(h, down)
            best = min(best, time.perf_counter() - t)
    return 3 * 2 * rows * hidden * inner / best / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the configs' copies and their save paths")
    args = ap.parse_args()
    os.chdir(ROOT)
    from evaluate.backends import local as L

    calls: list[dict] = []
    current: dict | None = None
    backends: list = []
    orig_prefill, orig_many = L.LocalBackend._prefill, L.LocalBackend.complete_many_indexed

    def prefill(self, ids):
        t, before = time.perf_counter(), self.reused_tokens
        out = orig_prefill(self, ids)
        if current is not None:
            current["prompts"] += 1
            current["tokens"] += len(ids)
            current["reused"] += self.reused_tokens - before
            current["prefill_s"] += time.perf_counter() - t
        return out

    def many(self, requests, on_result):
        nonlocal current
        if self not in backends:
            backends.append(self)
        current = {"model": self.model, "requests": len(requests), "max_tokens": max(r.max_tokens for r in requests),
                   "prompts": 0, "tokens": 0, "reused": 0, "prefill_s": 0.0, "load_s": 0.0}
        t = time.perf_counter()
        orig_many(self, requests, on_result)
        current["wall_s"] = time.perf_counter() - t
        calls.append(current)
        current = None

    orig_load = L.LocalBackend.load

    def load(self):
        t = time.perf_counter()
        out = orig_load(self)
        if current is not None:
            current["load_s"] += time.perf_counter() - t
        return out

    L.LocalBackend._prefill, L.LocalBackend.complete_many_indexed, L.LocalBackend.load = prefill, many, load
    cfgs = copies()
    from evaluate.cli import main as eval_main

    t0 = time.perf_counter()
    try:
        code = eval_main(["--config", *map(str, cfgs), "--judge-check", "1", "--no-charts"])
    finally:
        wall = time.perf_counter() - t0
        if not args.keep:
            for c in cfgs:
                c.unlink(missing_ok=True)
                shutil.rmtree(ROOT / "results" / f"bench_demo_{c.stem.removeprefix('.bench_demo_')}",
                              ignore_errors=True)
    judge = [b for b in backends if "Qwen" in b.model]
    if not judge:
        sys.exit("the demo's Qwen judge never ran (exit code %s)" % code)
    lm = judge[0]._lm
    cfg = lm.config
    embed = lm.get_input_embeddings().weight.numel()
    body = sum(p.numel() for p in lm.base_model.parameters()) - embed
    per_token = 2 * body  # multiply-adds of the linear layers; attention scores and the output head left out
    mine = [c for c in calls if "Qwen" in c["model"]]
    computed = sum(c["tokens"] - c["reused"] for c in mine)
    prefill_s = sum(c["prefill_s"] for c in mine)
    judge_s = sum(c["wall_s"] for c in mine)
    rate = computed * per_token / prefill_s / 1e9
    peak = gemm_rate(384, cfg.hidden_size, cfg.intermediate_size, judge[0].kernel)

    print(f"\nmachine: {cpu_model()}, {os.cpu_count()} CPUs; torch threads {__import__('torch').get_num_threads()}; "
          f"exit code of the run {code}")
    print(f"\n{'call':>4} {'requests':>8} {'max_tok':>7} {'prompt tok':>10} {'reused':>7} {'load s':>6} {'prefill s':>9} "
          f"{'wall s':>7}")
    for i, c in enumerate(mine):
        print(f"{i:>4} {c['requests']:>8} {c['max_tokens']:>7} {c['tokens']:>10} {c['reused']:>7} {c['load_s']:>6.1f} "
              f"{c['prefill_s']:>9.1f} {c['wall_s']:>7.1f}")
    print(f"\nQwen judge: {len(mine)} calls, {sum(c['requests'] for c in mine)} requests, "
          f"{sum(c['tokens'] for c in mine):,} prompt tokens, {computed:,} computed "
          f"({sum(c['reused'] for c in mine):,} from cached prefixes)")
    load_s = sum(c["load_s"] for c in mine)
    print(f"  {judge_s:.0f} s of the run's {wall:.0f} s wall ({judge_s / wall:.0%}): loading {load_s:.0f} s, prefill "
          f"{prefill_s:.0f} s, decoding and the rest {judge_s - prefill_s - load_s:.0f} s")
    print(f"  prefill rate: {computed / prefill_s:.0f} tokens/s = {rate:.0f} GFLOP/s at {per_token / 1e9:.2f} GFLOP a token "
          f"({body / 1e9:.2f} B non-embedding weights)")
    print(f"  the MLP's three bare float32 products for 384 tokens ({cfg.hidden_size} <-> {cfg.intermediate_size}) on "
          f"the same kernel ({judge[0].kernel}): {peak:.0f} GFLOP/s; the prefill runs at {rate / peak:.0%} of it")
    floor = computed * per_token / peak / 1e9
    print(f"  lower bound for the same tokens at that bare-product rate: {floor:.0f} s of prefill "
          f"(now {prefill_s:.0f} s), before any decoding, loading, set-up or conversion")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
