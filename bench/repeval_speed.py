"""RepEval speed: items/s of scoring, and the time of a truncated vs a full forward pass, in one run.

The same SummEval summaries (fluency prompt) go through `extract_hidden_states` stopping at the
layer the direction reads and through all layers; the two are timed alternately (best of
--repeats) so that load from other processes hits both alike. With `--criterion consistency`
each prompt carries its source article (SummEval has 16 summaries per article), and a third
pass times the truncated forward pass without the shared-prefix reuse ("unshared").

    OMP_NUM_THREADS=1 python bench/repeval_speed.py --n 64 --layer 21
    OMP_NUM_THREADS=1 python bench/repeval_speed.py --criterion consistency --n 32 --layer 15
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

from evaluate.models.load import load_causal_lm  # noqa: E402
from repeval.extract import extract_hidden_states  # noqa: E402
from repeval.pairs import read_rows  # noqa: E402
from repeval.templates import render, template_for  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--layer", type=int, default=21)
    ap.add_argument("--criterion", default="fluency", help="template; consistency/relevance include the source")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import torch

    model, tok, info = load_causal_lm(args.model)
    rows = read_rows(ROOT / ".." / "shared" / "data" / "metaeval" / "summeval.jsonl")[: args.n]
    tpl = template_for(args.criterion)
    prompts = [render(tpl, hyp=r["output"], src=r["source"]) for r in rows]
    n_tok = sum(len(tok(p)["input_ids"]) for p in prompts)
    extract_hidden_states(model, tok, prompts[: args.batch_size], args.layer)  # warm-up
    # truncated: stop at --layer, shared prefixes run once (the default); full: every layer, every
    # prompt on its own (a plain forward pass); unshared: stop at --layer, every prompt on its own
    modes = ("truncated", "full", "unshared") if "{src}" in tpl else ("truncated", "full")
    times: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}  # this process's CPU time: less sensitive to load
    for _ in range(args.repeats):
        for mode in modes:
            t0, c0 = time.perf_counter(), time.process_time()
            extract_hidden_states(model, tok, prompts, args.layer, batch_size=args.batch_size,
                                  truncate=mode != "full", min_shared_prefix=64 if mode == "truncated" else None)
            times[mode].append(time.perf_counter() - t0)
            cpu[mode].append(time.process_time() - c0)
    best = {k: min(v) for k, v in times.items()}
    res = {"model": info.name, "dtype": info.dtype, "criterion": args.criterion, "n": len(prompts), "tokens": n_tok, "layer": args.layer,
           "depth": model.config.num_hidden_layers, "batch_size": args.batch_size,
           "torch_threads": torch.get_num_threads(), "load_average": os.getloadavg()[0],
           "seconds": best, "cpu_seconds": {k: min(v) for k, v in cpu.items()}, "items_per_s": {k: len(prompts) / v for k, v in best.items()},
           "speedup": best["full"] / best["truncated"]}
    if "unshared" in best:
        res["speedup_from_shared_prefix"] = best["unshared"] / best["truncated"]
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
