"""How close the project's AlpacaEval 2 length-controlled (LC) win rate is to the published one.

    .venv/bin/python bench/alpaca_eval_lc.py [--data ../shared/data/alpaca_eval] [--leave-k 10 --splits 10]

Reads the published annotations of ../shared/data/alpaca_eval/annotations (every file: the
reference set) and compares each model's LC win rate with leaderboard_dev.csv:

1. in-sample: the whole reference set, LC by AlpacaEval's positional difficulty (the default)
   and by instruction text; the project's older `stats.battle.length_controlled_win_rate`
   (per-model logistic on length only, verdicts rounded) for contrast;
2. leave-one-out: each model scored with the difficulty and slope prior fitted without it;
3. leave-k-out: random splits, k models held out of the reference set at a time;
4. truncation attack: AlpacaEval's `gpt4_gamed` recipe applied to models here (keep an answer
   where it is longer than the baseline's and won, cut every other one to 10 characters, which
   then loses): the attack must not raise LC above the honest model's.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.benchmarks.alpaca_eval.leaderboard import ModelAnnotations, leaderboard, read_annotations  # noqa: E402
from evaluate.stats.battle import length_controlled_win_rate  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "alpaca_eval"
ATTACKED = ("claude", "claude-2.1", "gpt-3.5-turbo-0301", "FuseChat-Llama-3.2-1B-Instruct",
            "FuseChat-Gemma-2-9B-Instruct")


def published(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return {row[""]: row for row in csv.DictReader(f)}


def old_lc(m: ModelAnnotations) -> float:
    """The project's older estimate: verdicts rounded to win / tie / loss, length only, no difficulty."""
    rows = [r for r in m.rows if r.preference is not None]
    out = [0.5 if r.preference in (0, 1.5) else float(r.preference > 1.5) for r in rows]
    res = length_controlled_win_rate(out, [len(r.output_2) for r in rows], [len(r.output_1) for r in rows],
                                     resamples=0)
    return 100 * res["lc_win_rate"]


def truncation_attack(m: ModelAnnotations) -> ModelAnnotations:
    """AlpacaEval's gpt4_gamed recipe on m's annotations; a cut answer is judged a loss (preference 1)."""
    rows = []
    for r in m.rows:
        keep = len(r.output_2) > len(r.output_1) and r.preference is not None and r.preference > 1.5
        rows.append(r if keep else replace(r, output_2=r.output_2[:10], preference=1.0))
    return ModelAnnotations(model=f"{m.model}_truncated", baseline=m.baseline, annotator=m.annotator,
                            source="(constructed)", rows=rows)


def errors(board, pub: dict, names) -> dict[str, float]:
    lc = {r["model"]: r["length_controlled_winrate"] for r in board.rows}
    return {n: lc[n] - float(pub[n]["length_controlled_winrate"]) for n in names}


def summary(errs) -> str:
    a = np.abs(np.asarray(list(errs), dtype=float))
    return f"median {np.median(a):.2f}  mean {a.mean():.2f}  worst {a.max():.2f} pp"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--leave-k", type=int, default=10)
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.data / "annotations").is_dir():
        print(f"no data at {args.data}", file=sys.stderr)
        return 2
    pub = published(args.data / "leaderboard_dev.csv")
    t0 = time.perf_counter()
    models = read_annotations(args.data / "annotations")
    t1 = time.perf_counter()
    board = leaderboard(models)
    t2 = time.perf_counter()
    board_text = leaderboard(models, alignment="instruction")
    by_name = {m.model: m for m in models}
    names = [r["model"] for r in board.rows if r["model"] in pub and r["model"] != board.baseline]
    ours, ours_text = errors(board, pub, names), errors(board_text, pub, names)
    lc = {r["model"]: r for r in board.rows}
    old = {n: old_lc(by_name[n]) for n in names}

    print(f"AlpacaEval 2 LC win rate, {len(names)} published models (reference set: all {len(models)} files, "
          f"baseline {board.baseline}); read {t1 - t0:.1f} s, LC {t2 - t1:.1f} s")
    print(f"method: {board.lc_method}\n")
    print("| model | published LC | ours | diff | by instruction | diff | old project LC | diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in names:
        p = float(pub[n]["length_controlled_winrate"])
        print(f"| {n} | {p:.2f} | {lc[n]['length_controlled_winrate']:.2f} | {ours[n]:+.2f} | "
              f"{p + ours_text[n]:.2f} | {ours_text[n]:+.2f} | {old[n]:.2f} | {old[n] - p:+.2f} |")
    print()
    print(f"ours (positional difficulty, default): {summary(ours.values())}")
    print(f"ours (difficulty by instruction text): {summary(ours_text.values())}")
    old_errs = [old[n] - float(pub[n]["length_controlled_winrate"]) for n in names]
    print(f"old project LC:                         {summary(old_errs)}")

    t0 = time.perf_counter()
    loo = {}
    for n in names:
        ref = [m.model for m in models if m.model != n]
        loo[n] = errors(leaderboard(models, reference=ref), pub, [n])[n]
    print(f"\nleave-one-out (difficulty and slope prior fitted without the model): {summary(loo.values())}"
          f"  [{time.perf_counter() - t0:.0f} s]")
    worst = sorted(loo, key=lambda n: -abs(loo[n]))[:3]
    print("  largest: " + ", ".join(f"{n} {loo[n]:+.2f}" for n in worst))

    rng = np.random.default_rng(args.seed)
    medians, worsts, held = [], [], []
    for _ in range(args.splits):
        out = set(rng.choice(names, size=args.leave_k, replace=False))
        b = leaderboard(models, reference=[m.model for m in models if m.model not in out])
        e = errors(b, pub, sorted(out))
        a = np.abs(list(e.values()))
        medians.append(np.median(a))
        worsts.append(a.max())
        held.extend(a)
    print(f"leave-{args.leave_k}-out, {args.splits} random splits (held-out models only): median of medians "
          f"{np.median(medians):.2f}, worst split median {max(medians):.2f}, worst model {max(worsts):.2f} pp; "
          f"all held-out errors {summary(held)}")

    print("\ntruncation attack (AlpacaEval's gpt4_gamed recipe), attacked copy added to the reference set:")
    print("| source model | source LC | attacked: raw win rate | attacked: LC (ours) | attacked: old project LC |")
    print("|---|---:|---:|---:|---:|")
    for n in ATTACKED:
        if n not in by_name:
            continue
        attacked = truncation_attack(by_name[n])
        b = leaderboard([*models, attacked])
        row = {r["model"]: r for r in b.rows}
        a = row[attacked.model]
        print(f"| {n} | {row[n]['length_controlled_winrate']:.2f} | {a['win_rate']:.2f} | "
              f"{a['length_controlled_winrate']:.2f} | {old_lc(attacked):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
