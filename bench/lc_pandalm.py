"""How much of a judge's battle preference is length: raw vs length-controlled win rate on PandaLM.

    .venv/bin/python bench/lc_pandalm.py --config bench/configs/judgecheck_qwen.yaml --limit 40 [--seed 0]

A seeded sample of PandaLM's non-tie pairs, judged in both orders by the config's battle judge
(the judge cache makes a re-run free). Reports, for response_a's side: the raw win rate (ties half),
the length-controlled win rate (AlpacaEval 2's logistic model read at equal lengths) with its
interval, the fitted length coefficient, P(longer answer wins), the human labels' own
length-controlled rate (what an unbiased judge would show), and the judge's agreement with them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.backends.pool import JudgePool  # noqa: E402
from evaluate.pipeline.config import load_config  # noqa: E402
from evaluate.families import Context  # noqa: E402
from evaluate.families.gpt import battle_judge  # noqa: E402
from evaluate.judgecheck import read_pairs, select_pairs  # noqa: E402
from evaluate.metaeval.run import row_record  # noqa: E402
from evaluate.stats.battle import OUTCOME, judge_bias, length_controlled_win_rate, style_features  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "metaeval" / "pandalm.jsonl"))
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    cfg = load_config(Path(args.config))
    rows = select_pairs(read_pairs(Path(args.data)), args.limit, args.seed)
    recs_a = [row_record({**r, "output": r["response_a"]}, i) for i, r in enumerate(rows)]
    recs_b = [row_record({**r, "output": r["response_b"]}, i) for i, r in enumerate(rows)]
    pool = JudgePool()
    t0 = time.time()
    try:
        ctx = Context(cfg=cfg, options=cfg.family_options("GPT"), judges=pool, family="GPT")
        result = battle_judge(ctx).run({"response_a": recs_a, "response_b": recs_b})[0]
        usage = pool.usage().get("GPT", {})
    finally:
        pool.close()
    wall = time.time() - t0
    la = [style_features(r.output)["length"] for r in recs_a]
    lb = [style_features(r.output)["length"] for r in recs_b]
    keep = [i for i, it in enumerate(result.items) if it.verdict in OUTCOME]
    judged = length_controlled_win_rate([OUTCOME[result.items[i].verdict] for i in keep],
                                        [la[i] for i in keep], [lb[i] for i in keep])
    weighted_keep = [i for i, it in enumerate(result.items) if it.weighted_verdict in OUTCOME]
    weighted = length_controlled_win_rate([OUTCOME[result.items[i].weighted_verdict] for i in weighted_keep],
                                          [la[i] for i in weighted_keep], [lb[i] for i in weighted_keep])
    humans = length_controlled_win_rate([1.0 if r["label"] == "a" else 0.0 for r in rows], la, lb)
    bias = judge_bias([it.to_dict() for it in result.items], {it.id: (la[i], lb[i]) for i, it in enumerate(result.items)})
    agree = sum((1.0 if it.verdict == ("A" if r["label"] == "a" else "B") else 0.5 if it.verdict == "tie" else 0.0)
                for it, r in zip(result.items, rows) if it.verdict in OUTCOME) / max(1, len(keep))
    out = {"data": args.data, "pairs": len(rows), "seed": args.seed, "wall_s": round(wall, 1), "usage": usage,
           "parsed_verdicts": judged, "weighted_verdicts": weighted, "human_labels": humans,
           "judge_bias": bias, "agreement_ties_half": agree}
    print(f"{len(rows)} PandaLM non-tie pairs (seed {args.seed}), judge {cfg.judge.model}, {wall:.0f} s")
    for name, r in (("judge, parsed verdicts", judged), ("judge, probability-weighted", weighted),
                    ("human labels", humans)):
        if r["n"]:
            print(f"  {name:30} n={r['n']:3}  raw win rate of A {r['raw_win_rate']:.3f}  "
                  f"LC {r['lc_win_rate']:.3f} [{r['lc_interval'][0]:.3f}, {r['lc_interval'][1]:.3f}]  "
                  f"length coefficient {r['beta']:+.3f}")
    lw = bias["longer_wins"]
    print(f"  P(longer answer wins | decisive) {lw['rate'] if lw else None}; agreement (ties half) {agree:.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
