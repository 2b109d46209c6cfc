"""MT-bench with the local judge on a handful of questions, end to end, and a label-free check of the
judge on the same conversations.

    python bench/mt_bench_local.py [--questions 81 111 101] [--answers vicuna-13b-v1.3] [--config bench/configs/mt_bench_qwen.yaml]

1. A subset of FastChat's MT-bench files (the questions named, their reference answers, one model's
   answers) is written under results/mt_bench_local/ (generated from ../shared at run time, never
   committed) and judged with `eval.py mt-bench --mode single` (turn 1 and turn 2; a math question
   gets its reference answer): time per judgment.
2. The judge check on the run's own conversations (evaluate/benchmarks/mt_bench/judge_check.py, what
   `eval.py mt-bench --judge-check N` runs): each judged turn again with the assistant's answer
   replaced by a corrupted copy (truncated to its first third; the answer to another question),
   FastChat's prompt unchanged. A judge worth trusting rates the intact answer higher: the
   preference (ties half) with its 95% Wilson interval, "near chance" by the judge check's rule.
   Stored in the run's save path like the command's check, and report.html rebuilt to show it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.backends.pool import open_backend  # noqa: E402
from evaluate.benchmarks.mt_bench.run import load_inputs, make_matches  # noqa: E402
from evaluate.benchmarks.mt_bench.judge import judge_single  # noqa: E402
from evaluate.benchmarks.driver import load_judge  # noqa: E402
from evaluate.commands.mt_bench import main as mt_bench_main  # noqa: E402
from evaluate.benchmarks.mt_bench.judge_check import run_check  # noqa: E402
from evaluate.report.page import write_report  # noqa: E402

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

    # the judge check on the run's own conversations: every judged turn, two corruptions
    opts = load_judge(args.config)
    inputs = load_inputs(data, [answers], judge_model=opts.model, mode="single")
    matches = make_matches(inputs, "single")
    backend = open_backend(opts, save / "judge_cache.sqlite")
    try:
        intact = judge_single(backend, matches)  # the run's judgments, from the cache
        record, _ = run_check(save, backend, inputs, matches, intact, "single", n=len(matches),
                              corruptions=("truncate", "other_answer"))
    finally:
        backend.close()
    write_report(save)
    print("\njudge check on these conversations (intact answer vs a corrupted copy, FastChat's single prompt):")
    print(f"{'corruption':<13} {'prefers intact':>14} {'95% Wilson':>16} {'valid':>6}  verdict")
    for kind, blk in record["sanity"]["by_corruption"].items():
        r = blk["rating"]
        rate = f"{r['preference']:.2f}" if r["n"] else "-"
        verdict = "near chance" if r["near_chance"] else "tells them apart"
        print(f"{kind:<13} {rate:>14} {str(r['ci95']):>16} {r['n']:>3}/{len(matches):<2}  {verdict}  "
              f"({blk['wall_s']:.0f} s)")
    print(f"verdict: {record['verdict_text']}")
    scores = [j.score for j in intact]
    print(f"\nintact ratings: {scores}; invalid {sum(s is None for s in scores)} of {len(scores)}")
    print(f"tables: {save / 'mt_bench_summary.json'}; report: {save / 'report.html'}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
