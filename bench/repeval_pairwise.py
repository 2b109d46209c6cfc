"""RepEval pairwise: direction from PandaLM pairs, layer/token/method chosen on other PandaLM
pairs, accuracy on the 221 HHH-alignment pairs; and the reverse (--reverse): direction from HHH
pairs, layer/token chosen on other HHH pairs, accuracy on the PandaLM pairs; and in-domain
(also with --reverse): direction from HHH pairs, accuracy on 60 other, held-out HHH pairs.

Each pair is represented twice with the "pairwise" template: better answer as A ("AB") and as
B ("BA"); the direction is fitted on AB - BA; a test pair picks A when proj(AB) > proj(BA), so
the answer order cannot bias it.

    python bench/repeval_pairwise.py --out results/repeval_pairwise.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repeval.direction import fit_direction  # noqa: E402
from repeval.estimator import RepEval  # noqa: E402
from repeval.pairs import Pair, pairs_from_pairwise, read_rows  # noqa: E402
from repeval.select import grid, sweep  # noqa: E402
from repeval.templates import render, template_for  # noqa: E402

DATA = ROOT / ".." / "shared" / "data" / "metaeval"
PAPER = {5: 0.950, 20: 0.977}


def rows_of(pair_idx: np.ndarray) -> np.ndarray:
    """Representation rows of the given pairs (each pair has two consecutive rows)."""
    return np.stack([2 * pair_idx, 2 * pair_idx + 1], axis=1).ravel()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--layers", default="6,9,12,15,18,21,24,27,30")
    ap.add_argument("--tokens", default="-1,-2,-3")
    ap.add_argument("--pool", type=int, default=40, help="PandaLM pairs to draw training sets from")
    ap.add_argument("--val", type=int, default=60, help="PandaLM pairs for choosing layer/token/method")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "repeval_bench")
    ap.add_argument("--reverse", action="store_true",
                    help="also fit on HHH (pool = the HHH pairs outside a --val sized validation draw) "
                         "and test on the --pool + --val PandaLM pairs")
    ap.add_argument("--methods", default="pca,mean,svm", help="pcaN = PCA with N components")
    ap.add_argument("--template", default="pairwise",
                    help="pairwise (both answers in one prompt, AB vs BA) or a single-answer template such as "
                         "helpfulness (each answer scored alone; the higher projection wins)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    layers = [int(x) for x in args.layers.split(",")]
    tokens = [int(x) for x in args.tokens.split(",")]
    panda = pairs_from_pairwise(read_rows(DATA / "pandalm.jsonl"), k=args.pool + args.val, seed=0,
                                where="pandalm.jsonl")
    pool, valp = panda[: args.pool], panda[args.pool:]
    hhh_rows = read_rows(DATA / "hhh_alignment.jsonl")
    hhh = pairs_from_pairwise(hhh_rows, where="hhh_alignment.jsonl")
    rep = RepEval(model=args.model, criterion=args.template, max_tokens=args.max_tokens)
    tpl = template_for(args.template)
    tag = args.model.replace("/", "_")

    def reps_of(pairs: list[Pair], name: str) -> np.ndarray:
        path = args.cache / f"{tag}-{args.template}-{name}-{len(pairs)}.npz"
        if path.is_file():
            return np.load(path)["reps"].astype(np.float32)
        if args.template == "pairwise":  # rows: AB (better answer first), BA
            prompts = [render(tpl, a=x, b=y, question=p.question) for p in pairs
                       for x, y in ((p.good, p.bad), (p.bad, p.good))]
        else:  # rows: the better answer alone, the worse one alone
            prompts = [render(tpl, hyp=x, question=p.question) for p in pairs for x in (p.good, p.bad)]
        t0 = time.time()
        out = rep.represent(prompts, layers=layers, tokens=tokens)
        print(f"  extracted {len(prompts)} prompts in {time.time() - t0:.0f}s ({name})", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, reps=out.astype(np.float16))
        return out

    pool_r, val_r, hhh_r = reps_of(pool, "pandalm-pool"), reps_of(valp, "pandalm-val"), reps_of(hhh, "hhh")
    longer = float(np.mean([len(p.good) > len(p.bad) for p in hhh]))
    results = {"model": args.model, "template": args.template, "hhh_pairs": len(hhh), "longer_answer": longer, "paper": PAPER, "runs": []}
    print(f"pick the longer answer: {longer:.3f} on {len(hhh)} HHH pairs")
    setups = [("pandalm->hhh", pool_r, val_r, hhh_r)]
    if args.reverse:
        order = np.random.default_rng(0).permutation(len(hhh))
        hv, hp = order[: args.val], order[args.val:]
        pick2, vpick2 = rows_of(hp), rows_of(hv)
        panda_r = np.concatenate([pool_r, val_r])
        setups.append(("hhh->pandalm", hhh_r[pick2], hhh_r[vpick2], panda_r))
        panda_longer = float(np.mean([len(p.good) > len(p.bad) for p in panda]))
        results["pandalm_pairs"], results["pandalm_longer_answer"] = len(panda), panda_longer
        print(f"pick the longer answer: {panda_longer:.3f} on {len(panda)} PandaLM pairs")
        # in-domain, closest to the paper's HHH numbers: the same 60 validation pairs choose the
        # layer, the next 60 HHH pairs are the test set, the remaining 101 the training pool
        ht, hp_in = order[args.val: 2 * args.val], order[2 * args.val:]
        setups.append(("hhh->hhh", hhh_r[rows_of(hp_in)], hhh_r[vpick2], hhh_r[rows_of(ht)]))
        held_longer = float(np.mean([len(hhh[i].good) > len(hhh[i].bad) for i in ht]))
        results["hhh_heldout_pairs"], results["hhh_heldout_longer_answer"] = len(ht), held_longer
        print(f"pick the longer answer: {held_longer:.3f} on the {len(ht)} held-out HHH test pairs")
    for name, train_r, vr, test_r in setups:
        for k in (5, 20):
            for spec in args.methods.split(","):
                method = "pca" if spec.startswith("pca") else spec
                n_comp = int(spec[3:] or 1) if method == "pca" else 1
                if method == "pca" and n_comp >= k:
                    continue
                per_seed = []
                for seed in range(args.seeds):
                    pick = np.random.default_rng(seed).choice(len(train_r) // 2, k, replace=False)
                    good, bad = train_r[0::2][pick], train_r[1::2][pick]
                    table = sweep(good, bad, vr[0::2], layers, tokens, grid(layers, tokens, (method,), (n_comp,)),
                                  val_bad=vr[1::2], seed=seed)
                    best = table[0]
                    ti, li = tokens.index(best.token), layers.index(best.layer)
                    d = fit_direction(good[:, ti, li], bad[:, ti, li], method, n_comp, seed).direction
                    acc = float(np.mean(test_r[0::2, ti, li] @ d > test_r[1::2, ti, li] @ d))
                    per_seed.append({"seed": seed, "layer": best.layer, "token": best.token, "val": best.validation,
                                     "test": acc})
                accs = [s["test"] for s in per_seed]
                run = {"setup": name, "k": k, "method": spec, "test_mean": float(np.mean(accs)),
                       "test_sd": float(np.std(accs)), "seeds": per_seed}
                results["runs"].append(run)
                print(f"{name} K={k:2d} {spec:4s} test {run['test_mean']:.3f} (sd {run['test_sd']:.3f}) val "
                      f"{np.mean([s['val'] for s in per_seed]):.3f} picks "
                      f"{[(s['layer'], s['token']) for s in per_seed]}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
