"""MT-bench with the local judge on a handful of questions, end to end, and a label-free check of the
judge on the same conversations.

    python bench/mt_bench_local.py [--questions 81 111 101] [--answers vicuna-13b-v1.3] [--config bench/configs/mt_bench_qwen.yaml]

1. A subset of FastChat's MT-bench files (the questions named, their reference answers, one model's
   answers) is written under results/mt_bench_local/ (generated from ../shared at run time, never
   committed) and judged with `eval.py mt-bench --mode single` (turn 1 and turn 2; a math question
   gets its reference answer): time per judgment.
2. The judge check on the run's own conversations: each judged turn again with the assistant's
   answer replaced by a corrupted copy (truncated to its first third; the answer to another
   question), FastChat's prompt unchanged. A judge worth trusting rates the intact answer higher:
   the preference (ties half) with its 95% Wilson interval, "near chance" by the judge check's rule.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.backends.pool import open_backend  # noqa: E402
from evaluate.benchmarks.mt_bench import load_inputs, make_matches  # noqa: E402
from evaluate.benchmarks.mt_bench_judge import judge_single  # noqa: E402
from evaluate.commands.common import load_judge  # noqa: E402
from evaluate.commands.mt_bench import main as mt_bench_main  # noqa: E402
from evaluate.judgecheck.corrupt import corrupt  # noqa: E402
from evaluate.judgecheck.rules import _wilson, near_chance  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
FASTCHAT = SHARED / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data"


def _subset(out: Path, qids: list[int], model: str) -> tuple[Path, Path]:
    data = out / "data" / "mt_bench"
    (data / "reference_answer").mkdir(parents=True, exist_ok=True)
    keep = lambda path: [l for l in path.read_text(encoding="utf-8").splitlines()  # noqa: E731
                         if l.strip() and json.loads(l)["question_id"] in qids]
    (data / "question.jsonl").write_text("\n".join(keep(FASTCHAT / "mt_bench" / "question.jsonl")) + "\n")
    refs = keep(FASTCHAT / "mt_bench" / "reference_answer" / "gpt-4.jsonl")
    (data / "reference_answer" / "gpt-4.jsonl").write_text("\n".join(refs) + "\n" if refs else "")
    (out / "data" / "judge_prompts.jsonl").write_text((FASTCHAT / "judge_prompts.jsonl").read_text(encoding="utf-8"))
    answers = out / "model_answer" / f"{model}.jsonl"
    answers.parent.mkdir(parents=True, exist_ok=True)
    answers.write_text("\n".join(keep(SHARED / "mt_bench" / "model_answer" / f"{model}.jsonl")) + "\n")
    return data, answers


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, nargs="+", default=[81, 111, 101])
    p.add_argument("--answers", default="vicuna-13b-v1.3")
    p.add_argument("--config", type=Path, default=ROOT / "bench" / "configs" / "mt_bench_qwen.yaml")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "mt_bench_local")
    args = p.parse_args()
    if not FASTCHAT.is_dir():
        print("../shared/data/fastchat_mt_bench is not here; nothing to run")
        return 0
    data, answers = _subset(args.out, args.questions, args.answers)
    save = args.out / "run"
    t0 = time.time()
    code = mt_bench_main(["--data", str(data), "--answers", str(answers), "--judge-config", str(args.config),
                          "--mode", "single", "--save_path", str(save)])
    wall = time.time() - t0

    n = len(args.questions) * 2
    print(f"\nmt-bench single: exit {code}, {n} judgments in {wall:.0f} s ({wall / n:.1f} s per judgment, "
          "model load included; a re-run is served by the cache)")

    # the judge check on the run's own conversations
    opts = load_judge(args.config)
    inputs = load_inputs(data, [answers], judge_model=opts.model, mode="single")
    matches = make_matches(inputs, "single")
    backend = open_backend(opts, save / "judge_cache.sqlite")
    try:
        intact = judge_single(backend, matches)
        others = {m.question.question_id: m.answer.turns[m.turn - 1] for m in matches}
        rows = []
        for kind in ("truncate", "other_answer"):
            bad = []
            for m in matches:
                text = m.answer.turns[m.turn - 1]
                pool = [t for q, t in others.items() if q != m.question.question_id]
                got = corrupt(text, kind, seed=0, key=f"{m.question.question_id}-{m.turn}", others=pool)
                turns = list(m.answer.turns)
                turns[m.turn - 1] = got[0] if got else text
                bad.append(replace(m, answer=replace(m.answer, turns=tuple(turns))))
            t1 = time.time()
            spoiled = judge_single(backend, bad)
            wins = valid = 0.0
            for a, b in zip(intact, spoiled):
                if a.valid and b.valid:
                    valid += 1
                    wins += 1.0 if a.score > b.score else 0.5 if a.score == b.score else 0.0
            rows.append((kind, wins, int(valid), len(matches), time.time() - t1))
    finally:
        backend.close()
    print("\njudge check on these conversations (intact answer vs a corrupted copy, FastChat's single prompt):")
    print(f"{'corruption':<13} {'prefers intact':>14} {'95% Wilson':>16} {'valid':>6}  verdict")
    for kind, wins, valid, total, secs in rows:
        ci = _wilson(wins, valid)
        rate = f"{wins / valid:.2f}" if valid else "-"
        verdict = "near chance" if near_chance(wins, valid) else "tells them apart"
        print(f"{kind:<13} {rate:>14} {str(ci):>16} {valid:>3}/{total:<2}  {verdict}  ({secs:.0f} s)")
    scores = [j.score for j in intact]
    print(f"\nintact ratings: {scores}; invalid {sum(s is None for s in scores)} of {len(scores)}")
    print(f"tables: {save / 'mt_bench_summary.json'}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
