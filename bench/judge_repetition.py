"""A judge that repeats itself: how many MT-bench judgments of the local judge loop, where the loop is
stopped, and what that saves.

    python bench/judge_repetition.py [--questions 81 91 101 111 121 131 141 151] [--answers vicuna-13b-v1.3]
                                     [--config bench/configs/mt_bench_qwen.yaml] [--max-tokens 2048]
                                     [--cache FILE] [--save tests/data/qwen_mt_bench_judgments.jsonl]

FastChat's single-answer judging (`--mode single`, turns 1 and 2) of one model's answers from
../shared with the config's local judge, at FastChat's own reply budget (2048 tokens) unless
--max-tokens says otherwise. Per judgment: how the reply ended (stop / repetition / length), its
tokens, the rating or why it is invalid, and for a stopped loop the block and the tokens it did not
spend (the budget minus what was written: greedy decoding that has repeated a block four times
writes it again, so a reply that loops runs to the budget without the stop). `--save` keeps the
real replies (judge, question, turn, finish reason, text) as a JSON Lines file for the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from evaluate.backends.pool import open_backend  # noqa: E402
from evaluate.benchmarks.mt_bench import judge as mj  # noqa: E402
from evaluate.benchmarks.mt_bench.run import load_inputs, make_matches  # noqa: E402
from evaluate.benchmarks.driver import load_judge  # noqa: E402
from evaluate.core.repetition import repeated_tail  # noqa: E402
from local_batched import cpu_model  # noqa: E402
from mt_bench_local import FASTCHAT, _subset  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, nargs="+", default=[81, 91, 101, 111, 121, 131, 141, 151])
    p.add_argument("--answers", default="vicuna-13b-v1.3")
    p.add_argument("--config", type=Path, default=ROOT / "bench" / "configs" / "mt_bench_qwen.yaml")
    p.add_argument("--max-tokens", type=int, default=mj.MAX_TOKENS)
    p.add_argument("--cache", type=Path, help="a judge cache file (a re-run then costs nothing)")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "judge_repetition")
    p.add_argument("--save", type=Path, help="write the replies here (JSON Lines)")
    args = p.parse_args()
    if not FASTCHAT.is_dir():
        print("../shared/data/fastchat_mt_bench is not here; nothing to run")
        return 0
    data, answers = _subset(args.out, args.questions, args.answers)
    opts = dataclasses.replace(load_judge(args.config), max_tokens=args.max_tokens)
    inputs = load_inputs(data, [answers], judge_model=opts.model, mode="single")
    matches = make_matches(inputs, "single")
    backend = open_backend(opts, args.cache)
    print(f"machine: {cpu_model()} (2 cores, shared with other work); judge {opts.model}; reply budget "
          f"{args.max_tokens} tokens; {len(matches)} judgments (single, turns 1 and 2)")
    t0 = time.time()
    reqs = [dataclasses.replace(mj.request(m.prompt, mj.single_user_prompt(m)), max_tokens=args.max_tokens)
            for m in matches]
    comps = backend.complete_many(reqs)
    wall = time.time() - t0
    judged = mj.judge_single(type("Replay", (), {"complete_many": lambda self, r: comps})(), matches)
    rows, saved = [], 0
    print(f"\n{'question':>8} {'turn':>4} {'ended':<10} {'tokens':>6} {'rating':>6}  note")
    for m, comp, j in zip(matches, comps, judged):
        loop = repeated_tail(comp.text) if comp.finish_reason in ("repetition", "length") else None
        unspent = args.max_tokens - comp.completion_tokens if comp.finish_reason == "repetition" else 0
        saved += unspent
        note = (j.game.reason or "") if j.score is None else ""
        if loop:
            note = (note + "; " if note else "") + f"loop {loop.describe(40)}" + (
                f", {unspent} tokens not spent" if unspent else "")
        print(f"{m.question.question_id:>8} {m.turn:>4} {comp.finish_reason or comp.error or '-':<10} "
              f"{comp.completion_tokens:>6} {('-' if j.score is None else f'{j.score:g}'):>6}  {note[:110]}")
        rows.append({"judge": opts.model, "answers": args.answers, "question_id": m.question.question_id,
                     "turn": m.turn, "prompt": m.prompt.name, "max_tokens": args.max_tokens,
                     "finish_reason": comp.finish_reason, "completion_tokens": comp.completion_tokens,
                     "text": comp.text, "rating": j.score, "loop": loop.describe() if loop else None})
    invalid = sum(r["rating"] is None for r in rows)
    loops = sum(r["loop"] is not None for r in rows)
    print(f"\n{len(rows)} judgments in {wall:.0f} s: {invalid} invalid, {loops} ended in a loop "
          f"({sum(r['finish_reason'] == 'repetition' for r in rows)} stopped there), {saved} tokens of budget "
          f"not spent on loops; {sum(r['completion_tokens'] for r in rows)} tokens written")
    if args.save:  # the real replies as they came, without what this script read from them
        args.save.parent.mkdir(parents=True, exist_ok=True)
        keep = [{k: v for k, v in r.items() if k not in ("rating", "loop")} for r in rows]
        args.save.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8")
        print(f"replies: {args.save}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
