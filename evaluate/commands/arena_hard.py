"""`eval.py arena-hard --bench DIR --judge-config C --model NAME [--model NAME...] [--baseline gpt-4-0314]
[--judge-prompt FILE] [--limit N] [--seed S] [--dry-run] --save_path OUT`

Judges models against the baseline by Arena-Hard's protocol (evaluate/benchmarks/arena_hard.py) with
the judge of C's `judge:` block. DIR holds question.jsonl and model_answer/<model>.jsonl (Arena-Hard's
data/<bench_name>/ folder). --judge-prompt defaults to judge_prompt_v0.1.json in DIR or its parent
(where the shared data keeps it). Writes OUT/model_judgment/<judge model>/<model>.jsonl in
Arena-Hard's schema, judging only the games still missing there (re-runs are also answered from
OUT/judge_cache.sqlite), prints the leaderboard (raw and style-controlled) and writes
OUT/leaderboard.csv. Decoding (temperature, max_tokens) comes from the judge prompt file, as
Arena-Hard's config gives it.
Exit codes: 0 done; 2 bad input (one `error:` line); 3 no judgment has a verdict, or the judge failed
on some calls (left null; run again to finish them).
"""
from __future__ import annotations

import argparse
import csv
import io
import shutil
import sys
from pathlib import Path

from ..core.errors import InputError
from ..core.io import atomic_write_text, safe_name
from .common import EXIT_OK, EXIT_RUN_ERRORS, Parser, cost_line, load_judge, parse_and_run



def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py arena-hard", description="Judge models against a baseline by Arena-Hard's protocol "
                                                      "and print its leaderboard (raw and style-controlled).")
    p.add_argument("--bench", required=True, type=Path, help="folder with question.jsonl and model_answer/")
    p.add_argument("--judge-config", required=True, type=Path, help="YAML/JSON file with a judge: block")
    p.add_argument("--model", required=True, action="append", help="model to judge (its model_answer file name)")
    p.add_argument("--baseline", default=None, help="baseline model (default: the judge prompt's, else gpt-4-0314)")
    p.add_argument("--judge-prompt", type=Path, help="judge prompt JSON (default: judge_prompt_v0.1.json in "
                                                     "--bench or its parent)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--dry-run", action="store_true", help="count the judge calls (and the cost with judge.price)")
    p.add_argument("--save_path", required=True, type=Path, help="output folder")
    return p


def main(argv: list[str]) -> int:
    return parse_and_run(_parser(), argv, _run)


def _prompt_path(args: argparse.Namespace) -> Path:
    if args.judge_prompt:
        return args.judge_prompt
    for p in (args.bench / "judge_prompt_v0.1.json", args.bench.parent / "judge_prompt_v0.1.json"):
        if p.is_file():
            return p
    raise InputError(f"{args.bench}: no judge_prompt_v0.1.json here or in the parent folder; give --judge-prompt")


def _answer_file(bench: Path, model: str) -> Path:
    p = bench / "model_answer" / f"{model}.jsonl"
    if not p.is_file():
        raise InputError(f"{p}: no answers for model {model!r}")
    return p


def _run(args: argparse.Namespace) -> int:
    from ..benchmarks import arena_hard as ah

    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive number of questions, got {args.limit}")
    opts = load_judge(args.judge_config)
    prompt = ah.read_judge_prompt(_prompt_path(args))
    questions = ah.read_questions(args.bench / "question.jsonl")[:args.limit]
    base_name = args.baseline or prompt.baseline or ah.DEFAULT_BASELINE
    baseline = ah.read_answers(_answer_file(args.bench, base_name))
    models = [ah.read_answers(_answer_file(args.bench, m)) for m in dict.fromkeys(args.model)]
    judge_name = safe_name(opts.model)
    out_dir = args.save_path / "model_judgment" / judge_name
    done = {}
    for m in models:
        path = out_dir / f"{m.model}.jsonl"
        done[m.model] = {r["uid"]: r for r in ah.read_judgments(path)} if path.is_file() else {}
    todo = {m.model: ah.plan(questions, m, baseline, prompt, done[m.model]) for m in models}
    if args.dry_run:
        reqs = [g.request(prompt) for gs in todo.values() for g in gs]
        print(f"Arena-Hard dry run: judge {opts.model}, baseline {baseline.model}, {len(questions)} questions")
        for name, gs in todo.items():
            print(f"  {name}: {len(gs)} judge calls")
        print(f"total: {len(reqs)} judge calls")
        if opts.price:
            print(cost_line(reqs, opts.price))
        return EXIT_OK
    from ..backends.pool import open_backend

    args.save_path.mkdir(parents=True, exist_ok=True)
    cache = (args.save_path / "judge_cache.sqlite" if opts.cache is True else
             Path(opts.cache) if isinstance(opts.cache, str) else None)
    backend = open_backend(opts, cache)
    signature = backend.signature()
    failed = 0
    try:
        for m in models:
            recs = ah.judge(questions, m, baseline, prompt, backend, opts.model, done[m.model])
            failed += sum(1 for r in recs for g in r["games"] if g is None)
            ah.write_judgments(out_dir / f"{m.model}.jsonl", recs)
    finally:
        backend.close()
    # the leaderboard reads the answers beside the judgments, as show_result.py does
    ans_dir = args.save_path / "model_answer"
    ans_dir.mkdir(exist_ok=True)
    for a in [baseline, *models]:
        if a.path.resolve() != (ans_dir / f"{a.model}.jsonl").resolve():
            shutil.copyfile(a.path, ans_dir / f"{a.model}.jsonl")
    try:
        cols, rows = ah.leaderboard_table(args.save_path, judge_name, baseline=baseline.model, seed=args.seed)
    except InputError as exc:
        print(f"exit 3: no verdict could be scored ({exc})", file=sys.stderr)
        return EXIT_RUN_ERRORS
    from ..benchmarks.tables import arena_hard_table, judge_check_line

    print(arena_hard_table(rows, opts.model, baseline.model, ah.lengths_note(args.save_path)), end="")
    print(judge_check_line(args.save_path, signature), end="")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(args.save_path / "leaderboard.csv", buf.getvalue())
    print(f"written: {out_dir}, {args.save_path / 'leaderboard.csv'}")
    if failed:
        print(f"exit 3: the judge failed on {failed} game(s) (left null); run again to judge them", file=sys.stderr)
        return EXIT_RUN_ERRORS
    return EXIT_OK
