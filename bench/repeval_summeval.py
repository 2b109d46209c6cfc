"""RepEval on SummEval (or Topical-Chat with --dataset topical_chat): Spearman per dimension,
layer/token/method chosen on docs 0-19, tested on docs 20-99 (or fewer with --test-docs).

Topical-Chat: a "doc" is one dialogue (its 6 responses); the fluency direction is chosen on the
human naturalness score and tested on naturalness and understandability; synthetic pairs corrupt
the two human-written responses of each validation dialogue (twice each); the in-domain pool is
the best vs worst response per validation dialogue. Topical-Chat has no references, so the
baseline is the response length in words instead of ROUGE. SummEval also gets the share of the
summary's trigrams copied from the source, a strong baseline for consistency.

Training pairs (K = 5 and 20, five random draws each):
- asset:     ASSET best vs worst rows (fluency for fluency/coherence, "meaning" for consistency)
- synthetic: corruptions of SummEval reference summaries of the validation docs 0-19
- summeval:  best vs worst system output per validation doc (in-domain human labels)

Representations are extracted once per criterion and cached (``--cache``), so reruns and the
many fitted directions cost no forward passes.

    python bench/repeval_summeval.py --criteria fluency,coherence --out results/repeval_summeval.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from repeval.direction import fit_direction  # noqa: E402
from repeval.estimator import RepEval  # noqa: E402
from repeval.pairs import pairs_from_scored, read_rows, synthetic_pairs  # noqa: E402
from repeval.select import grid, grouped_spearman, spearman, sweep  # noqa: E402
from repeval.templates import render, template_for  # noqa: E402

DATA = ROOT / ".." / "shared" / "data" / "metaeval"
ASSET_DIM = {"fluency": "fluency", "coherence": "fluency", "consistency": "meaning", "relevance": "meaning"}
PAPER = {"summeval": {"fluency": 0.447, "consistency": 0.426, "coherence": 0.534},
         "topical_chat": {"fluency": 0.329}}
ROUGE1 = {"coherence": 0.169, "consistency": 0.160, "fluency": 0.116, "relevance": 0.328}
# human dimensions each criterion is tested against; the first one chooses layer/token
HUMAN = {"summeval": {}, "topical_chat": {"fluency": ["naturalness", "understandability"]}}
HUMAN_WRITTEN = ("Original Ground Truth", "New Human Generated")


def copy_rate_on(rows: list[dict], crit: str, groups: list) -> dict[str, float]:
    """Share of the output's word trigrams found in its source (extractiveness), against the
    human `crit` score: a trivial baseline that is strong for consistency, where copied text
    cannot contradict the source."""
    def grams(text: str) -> list[tuple[str, ...]]:
        w = text.lower().split()
        return [tuple(w[i:i + 3]) for i in range(len(w) - 2)]

    rate = []
    for r in rows:
        src, out = set(grams(r["source"])), grams(r["output"])
        rate.append(sum(g in src for g in out) / max(1, len(out)))
    return against_humans(rate, rows, crit, groups)


def length_on(rows: list[dict], dim: str, groups: list) -> dict[str, float]:
    """Response length in words against the human `dim` score: per-doc mean and dataset level."""
    return against_humans([len(r["output"].split()) for r in rows], rows, dim, groups)


def against_humans(pred: list[float], rows: list[dict], dim: str, groups: list) -> dict[str, float]:
    """A baseline's Spearman with the human `dim` score: per-doc mean ("summary") and over all rows."""
    h = [r["human"][dim] for r in rows]
    return {"summary": round(grouped_spearman(pred, h, groups), 3), "dataset": round(spearman(pred, h), 3)}


def rouge_on(rows: list[dict], crit: str) -> dict[str, float]:
    """ROUGE-1/2 F1 (rouge-score, stemmed, mean over the references) against the human `crit`
    score on exactly these rows, summary level: the baseline for the same test documents."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2"], use_stemmer=True)
    out = {}
    for key in ("rouge1", "rouge2"):
        pred = [float(np.mean([scorer.score(ref, r["output"])[key].fmeasure for ref in r["references"]]))
                for r in rows]
        out[key] = round(grouped_spearman(pred, [r["human"][crit] for r in rows], [r["doc_id"] for r in rows]), 3)
    return out


def extract_cached(rep: RepEval, prompts: list[str], layers: list[int], tokens: list[int], path: Path,
                   head: Path | None = None) -> np.ndarray:
    """Representations of `prompts`, cached at `path`. `head`: a cache of the first prompts of
    this same list (a run on fewer test docs); its rows are reused and only the rest extracted."""
    if path.is_file():
        return np.load(path)["reps"].astype(np.float32)
    done = np.load(head)["reps"].astype(np.float32) if head is not None and head.is_file() else None
    if done is not None and (len(done) >= len(prompts) or done.shape[1:3] != (len(tokens), len(layers))):
        done = None  # not a head of this list, or another layer/token grid
    start = 0 if done is None else len(done)
    t0 = time.time()
    reps = rep.represent(prompts[start:], layers=layers, tokens=tokens)
    if done is not None:
        reps = np.concatenate([done, reps])
    print(f"  extracted {len(prompts) - start} prompts in {time.time() - t0:.0f}s -> {path.name}"
          + (f" (first {start} from {head.name})" if start else ""), flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, reps=reps.astype(np.float16))
    return reps


def prompts_for(tpl: str, pairs) -> list[str]:
    return [render(tpl, hyp=t, src=p.src) for p in pairs for t in (p.good, p.bad)]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    ap.add_argument("--dataset", choices=("summeval", "topical_chat"), default="summeval")
    ap.add_argument("--criteria", default=None,
                    help="default: fluency,coherence,consistency (SummEval), fluency (Topical-Chat)")
    ap.add_argument("--layers", default="6,9,12,15,18,21,24,27,30")
    ap.add_argument("--tokens", default="-1,-2,-3")
    ap.add_argument("--test-docs", type=int, default=80, help="how many of docs 20-99 to test on")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--methods", default="pca,mean,svm",
                    help="direction estimators; pcaN = PCA with N components weighted by explained variance")
    ap.add_argument("--val-docs", type=int, default=20, help="docs 0..N-1 choose layer/token")
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "repeval_bench")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    layers = [int(x) for x in args.layers.split(",")]
    tokens = [int(x) for x in args.tokens.split(",")]
    ds = args.dataset
    criteria = args.criteria or ("fluency" if ds == "topical_chat" else "fluency,coherence,consistency")
    rows = read_rows(DATA / f"{ds}.jsonl")
    if ds == "topical_chat":  # doc_id is a truncated first turn (not unique): group by the dialogue
        for r in rows:
            r["doc_id"] = r["source"]
    asset = read_rows(DATA / "asset.jsonl")
    docs = list(dict.fromkeys(r["doc_id"] for r in rows))
    nv = args.val_docs
    val_docs, test_docs = set(docs[:nv]), set(docs[nv:nv + args.test_docs])
    val_rows = [r for r in rows if r["doc_id"] in val_docs]
    test_rows = [r for r in rows if r["doc_id"] in test_docs]
    results: dict = {"model": args.model, "dataset": ds, "layers": layers, "tokens": tokens, "test_docs": len(test_docs),
                     "criteria": {}}
    tag = args.model.replace("/", "_") + ("" if ds == "summeval" else f"-{ds}")
    for crit in criteria.split(","):
        print(f"== {crit}", flush=True)
        rep = RepEval(model=args.model, criterion=crit)
        tpl = template_for(crit)
        items = val_rows + test_rows
        vtag = "" if nv == 20 else f"-v{nv}"
        smaller = sorted((int(m.group(1)), f) for f in args.cache.glob(f"{tag}-{crit}-{ds}-*{vtag}.npz")
                         if (m := re.fullmatch(rf"{re.escape(f'{tag}-{crit}-{ds}-')}(\d+){vtag}\.npz", f.name))
                         and int(m.group(1)) < len(test_docs))
        reps = extract_cached(rep, [render(tpl, hyp=r["output"], src=r["source"]) for r in items], layers, tokens,
                              args.cache / f"{tag}-{crit}-{ds}-{len(test_docs)}{vtag}.npz",
                              head=smaller[-1][1] if smaller else None)
        val, test = reps[: len(val_rows)], reps[len(val_rows):]
        dims = HUMAN[ds].get(crit, [crit])
        val_h = [r["human"][dims[0]] for r in val_rows]
        test_hs = {d: [r["human"][d] for r in test_rows] for d in dims}
        val_g = [r["doc_id"] for r in val_rows]
        test_g = [r["doc_id"] for r in test_rows]
        # training sources: every candidate pair is extracted once; draws index into them
        # ASSET: the 20 best rows against the 20 worst (ASSET rows carry their source sentence)
        asset_all = pairs_from_scored(asset, ASSET_DIM[crit], k=20, seed=0, where="asset.jsonl")
        if ds == "summeval":
            refs = [(ref, r["source"]) for r in val_rows[::16] for ref in r["references"]]
        else:
            refs = [(r["output"], r["source"]) for r in val_rows if r["system_id"] in HUMAN_WRITTEN] * 2
        synth_all = synthetic_pairs([t for t, _ in refs], crit, seed=0, sources=[s for _, s in refs])
        synth_all = synth_all[:40]
        pools = {
            "asset": (asset_all, extract_cached(rep, prompts_for(tpl, asset_all), layers, tokens,
                                                args.cache / f"{tag}-{crit}-asset{'' if nv == 20 else f'-v{nv}'}.npz")),
            "synthetic": (synth_all, extract_cached(rep, prompts_for(tpl, synth_all), layers, tokens,
                                                    args.cache / f"{tag}-{crit}-synthetic{'' if nv == 20 else f'-v{nv}'}.npz")),
        }
        # in-domain: best vs worst output per validation doc, reps taken from the validation set
        idx_pairs = []
        for d in list(dict.fromkeys(val_g)):
            ids = [i for i, g in enumerate(val_g) if g == d]
            hi, lo = max(ids, key=lambda i: val_h[i]), min(ids, key=lambda i: val_h[i])
            if val_h[hi] > val_h[lo]:
                idx_pairs.append((hi, lo))
        sv = np.stack([np.stack([val[h], val[lo]]) for h, lo in idx_pairs])  # [P, 2, T, L, H]
        pools[ds] = (idx_pairs, sv.reshape(-1, *val.shape[1:]))
        crit_res = {"paper": PAPER[ds].get(crit), "human_dims": dims, "runs": [],
                    "length_test_docs": {d: length_on(test_rows, d, test_g) for d in dims}}
        if ds == "summeval":
            crit_res["rouge1"] = ROUGE1.get(crit)
            crit_res["rouge_test_docs"] = rouge_on(test_rows, crit)
            crit_res["copy_rate_test_docs"] = copy_rate_on(test_rows, crit, test_g)
            print(f"  ROUGE on the same test docs (summary level): {crit_res['rouge_test_docs']}; "
                  f"source trigram copy rate: {crit_res['copy_rate_test_docs']}", flush=True)
        print(f"  length in words on the same test docs: {crit_res['length_test_docs']}", flush=True)
        for source, (pairs, preps) in pools.items():
            good_all, bad_all = preps[0::2], preps[1::2]
            for k in (5, 20):
                if k > len(pairs):
                    print(f"  {source} K={k}: only {len(pairs)} pairs, skipped")
                    continue
                for spec in args.methods.split(","):
                    method = "pca" if spec.startswith("pca") else spec
                    n_comp = int(spec[3:] or 1) if method == "pca" else 1
                    if method == "pca" and n_comp >= k:
                        continue
                    per_seed = []
                    for seed in range(args.seeds):
                        pick = np.random.default_rng(seed).choice(len(pairs), k, replace=False)
                        cands = grid(layers, tokens, methods=(method,), n_components=(n_comp,))
                        table = sweep(good_all[pick], bad_all[pick], val, layers, tokens, cands,
                                      human=val_h, groups=val_g, seed=seed)
                        best = table[0]
                        ti, li = tokens.index(best.token), layers.index(best.layer)
                        fit = fit_direction(good_all[pick, ti, li], bad_all[pick, ti, li], method, n_comp, seed)
                        proj = test[:, ti, li] @ fit.direction
                        entry = {"seed": seed, "layer": best.layer, "token": best.token, "val": best.validation}
                        for d, test_h in test_hs.items():
                            sfx = "" if d == dims[0] else f"_{d}"
                            entry["test_summary" + sfx] = grouped_spearman(proj, test_h, test_g)
                            entry["test_dataset" + sfx] = spearman(proj, test_h)
                        per_seed.append(entry)
                    run = {"source": source, "k": k, "method": spec}
                    for d in dims:
                        sfx = "" if d == dims[0] else f"_{d}"
                        summ = [s["test_summary" + sfx] for s in per_seed]
                        dset = [s["test_dataset" + sfx] for s in per_seed]
                        run.update({f"test_summary{sfx}_mean": float(np.mean(summ)),
                                    f"test_summary{sfx}_sd": float(np.std(summ)),
                                    f"test_dataset{sfx}_mean": float(np.mean(dset)),
                                    f"test_dataset{sfx}_sd": float(np.std(dset))})
                    run["seeds"] = per_seed
                    crit_res["runs"].append(run)
                    extra = "".join(f" | {d} summary {run[f'test_summary_{d}_mean']:+.3f} dataset "
                                    f"{run[f'test_dataset_{d}_mean']:+.3f}" for d in dims[1:])
                    print(f"  {source:12s} K={k:2d} {spec:4s} summary {run['test_summary_mean']:+.3f} "
                          f"(sd {run['test_summary_sd']:.3f}) dataset {run['test_dataset_mean']:+.3f} "
                          f"(sd {run['test_dataset_sd']:.3f}){extra} "
                          f"picks {[(s['layer'], s['token']) for s in per_seed]}", flush=True)
        results["criteria"][crit] = crit_res
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
