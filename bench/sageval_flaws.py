"""Do planted flaws score lower after the SAGE pass than before?

Runs SAGEval (evaluator agent, then SAGE) with a local judge over `examples/sageval/surveys.json`,
whose records carry `planted_flaws` (a duplicated question, leading or biased wording, an
off-topic item). Each flaw maps to the aspect it should hurt. For every flawed item the score of
that aspect is compared with the same aspect's mean over the clean items, before (evaluator)
and after (SAGE):

    gap = mean(clean items) - flawed item      (positive: the flaw is seen)

If SAGE helps, the gap grows and the flawed aspects are lowered more often than the same
aspects on clean items. Scores are reported both as used (probability-weighted when the judge
gives log-probabilities) and as stated in the JSON replies (integers).

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/sageval_flaws.py \
        [--model Qwen2.5-Coder-1.5B-Instruct] [--ids s1 s2] [--out results/sageval_flaws.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from statistics import mean

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.pipeline.answers import load_records  # noqa: E402
from sageval import run_sage  # noqa: E402

FLAW_ASPECT = {
    "duplicate question": "semantic_diversity",
    "leading wording": "fairness",
    "biased wording": "fairness",
    "off-topic item": "relevancy",
}
ASPECTS = ["accuracy", "semantic_diversity", "relevancy", "fairness"]


def _gaps(result, records, value: str) -> list[dict]:
    """Per (flawed item, flaw): its aspect's score and the clean items' mean, before and after."""
    clean = [it for it, r in zip(result.items, records) if not r.extra.get("planted_flaws")]

    def get(item, agent, aspect):
        aj = getattr(item, agent)[aspect]
        v = aj.value if value == "used" else aj.stated
        return None if v is None or (value == "used" and aj.value is None) else float(v)

    rows = []
    for item, r in zip(result.items, records):
        for flaw in r.extra.get("planted_flaws", []):
            aspect = FLAW_ASPECT[flaw]
            row = {"id": r.id, "flaw": flaw, "aspect": aspect}
            for agent, when in (("evaluator", "before"), ("sage", "after")):
                ref = [x for x in (get(c, agent, aspect) for c in clean) if x is not None]
                own = get(item, agent, aspect)
                row[f"flawed_{when}"] = own
                row[f"clean_mean_{when}"] = round(mean(ref), 3) if ref else None
                row[f"gap_{when}"] = round(mean(ref) - own, 3) if ref and own is not None else None
            rows.append(row)
    return rows


def _lowered(result, records) -> dict:
    """How often SAGE lowered the flaw's aspect on flawed items vs the same aspects on clean items."""
    flawed_pairs, clean_pairs = [], []
    targets = {FLAW_ASPECT[f] for r in records for f in r.extra.get("planted_flaws", [])}
    for item, r in zip(result.items, records):
        flaws = {FLAW_ASPECT[f] for f in r.extra.get("planted_flaws", [])}
        for aspect in (flaws if flaws else targets):
            e, s = item.evaluator[aspect].value, item.sage[aspect].value
            if e is not None and s is not None:
                (flawed_pairs if flaws else clean_pairs).append(float(s) - float(e))
    tol = result.tolerance
    return {
        "flawed": {"n": len(flawed_pairs), "lowered": sum(d <= -tol for d in flawed_pairs),
                   "mean_change": round(mean(flawed_pairs), 3) if flawed_pairs else None},
        "clean_same_aspects": {"n": len(clean_pairs), "lowered": sum(d <= -tol for d in clean_pairs),
                               "mean_change": round(mean(clean_pairs), 3) if clean_pairs else None},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--data", default=str(REPO / "examples" / "sageval" / "surveys.json"))
    ap.add_argument("--ids", nargs="*", help="only these record ids")
    ap.add_argument("--aspects", nargs="*", default=ASPECTS)
    ap.add_argument("--max-tokens", type=int, default=700)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="write the full summary and per-item details here")
    args = ap.parse_args()

    from evaluate.backends.local import LocalBackend

    records = load_records(Path(args.data))
    if args.ids:
        records = [r for r in records if r.id in set(args.ids)]
    backend = LocalBackend(args.model, max_new_tokens=args.max_tokens, threads=args.threads)
    t0 = time.time()
    backend.load()
    t_load = time.time() - t0
    t0 = time.time()
    def progress(stage: str, done: int, total: int) -> None:
        print(f"[{time.time() - t0:7.1f}s] {stage}: {done}/{total}", file=sys.stderr, flush=True)

    result = run_sage(backend, records, args.aspects, max_tokens=args.max_tokens, progress=progress)
    t_run = time.time() - t0

    report = {
        "model": args.model, "records": len(records), "aspects": args.aspects,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, torch threads={args.threads or 'default'}",
        "seconds": {"load": round(t_load, 1), "run": round(t_run, 1)},
        "forward_passes": getattr(backend, "forward_passes", None),
        "gaps_used": _gaps(result, records, "used"),
        "gaps_stated": _gaps(result, records, "stated"),
        "lowered": _lowered(result, records),
        "summary": result.summary(),
    }
    for view in ("used", "stated"):
        rows = [g for g in report[f"gaps_{view}"] if g["gap_before"] is not None and g["gap_after"] is not None]
        report[f"mean_gap_{view}"] = {
            "before": round(mean(g["gap_before"] for g in rows), 3) if rows else None,
            "after": round(mean(g["gap_after"] for g in rows), 3) if rows else None,
            "n": len(rows)}
    print(json.dumps({k: v for k, v in report.items() if k != "summary"}, indent=1))
    print(json.dumps(report["summary"]["aspects"], indent=1))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        details = [{"id": it.record_id, "evaluator": {a: j.to_dict() for a, j in it.evaluator.items()},
                    "sage": {a: j.to_dict() for a, j in it.sage.items()},
                    "new_aspects": [n.__dict__ for n in it.new_aspects], "raw": it.raw, "attempts": it.attempts}
                   for it in result.items]
        out.write_text(json.dumps({**report, "items": details}, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
