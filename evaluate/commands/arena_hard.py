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
from typing import Any

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
    from ..backends.pool import MeteredBackend, open_backend
    from ..pipeline import benchmark_outputs as bo

    args.save_path.mkdir(parents=True, exist_ok=True)
    cache = (args.save_path / "judge_cache.sqlite" if opts.cache is True else
             Path(opts.cache) if isinstance(opts.cache, str) else None)
    run_id, started = bo.new_run_id(), _now()
    inner = open_backend(opts, cache)
    backend = MeteredBackend(inner, opts.price)  # what this run asked of the judge, for the manifest
    signature = backend.signature()
    failed = 0
    try:
        for m in models:
            recs = ah.judge(questions, m, baseline, prompt, backend, opts.model, done[m.model])
            failed += sum(1 for r in recs for g in r["games"] if g is None)
            ah.write_judgments(out_dir / f"{m.model}.jsonl", recs)
    finally:
        inner.close()
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

    lengths = ah.lengths_note(args.save_path)
    print(arena_hard_table(rows, opts.model, baseline.model, lengths), end="")
    print(judge_check_line(args.save_path, signature), end="")
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(args.save_path / "leaderboard.csv", buf.getvalue())
    report = _write_outputs(args, opts, prompt, baseline.model, judge_name, out_dir, rows, lengths, signature,
                            backend.usage(), failed, run_id, started)
    print(f"written: {out_dir}, {args.save_path / 'leaderboard.csv'}" + (f", {report}" if report else ""))
    if failed:
        print(f"exit 3: the judge failed on {failed} game(s) (left null); run again to judge them", file=sys.stderr)
        return EXIT_RUN_ERRORS
    return EXIT_OK


def _now() -> str:
    from ..savepath.manifest import iso

    return iso()


def _write_outputs(args: argparse.Namespace, opts: Any, prompt: Any, baseline: str, judge_name: str, out_dir: Path,
                   rows: list[dict[str, Any]], lengths: str, signature: dict[str, Any], usage: dict[str, Any],
                   failed: int, run_id: str, started: str) -> Path | None:
    """The project's own outputs of the leaderboard just printed (battles, results, summary.csv,
    report.html, manifest) in the save path, beside Arena-Hard's files; returns the report's path when
    it was written."""
    from ..benchmarks import arena_hard as ah
    from ..pipeline import arena_hard_outputs as out
    from ..pipeline import benchmark_outputs as bo
    from ..pipeline.savedir import SaveDir

    judgments: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(out_dir.glob("*.jsonl")):
        for r in ah.read_judgments(p):
            if r.get("baseline", baseline) == baseline:
                judgments.setdefault(str(r["model"]).split("/")[-1], []).append(r)
    questions = {q["uid"]: q for q in ah.read_questions(args.bench / "question.jsonl")}
    save = SaveDir(args.save_path, log=lambda s: print(s, file=sys.stderr))
    entries = out.add_run(save, judgments=judgments, table=rows, baseline=baseline,
                          answers=ah.read_answer_dir(args.save_path / "model_answer"), questions=questions,
                          weights=ah.SHOW_RESULT_WEIGHTS, judge=signature, judge_name=judge_name, prompt=prompt,
                          lengths=lengths, seed=args.seed)
    errors = [{"family": out.FAMILY, "error": f"the judge failed on {failed} game(s) (left null); run again to "
                                              "judge them"}] if failed else []
    extra = {"arena_hard": {"bench": str(args.bench), "judge_prompt": str(prompt.path), "baseline": baseline,
                            "judgments": str(out_dir), "seed": args.seed, "limit": args.limit, "leaderboard": rows}}
    manifest = bo.write_run(save, benchmark="arena_hard", family=out.FAMILY, run_id=run_id, started=started,
                            judge_opts=opts, judge=signature, usage=usage, models=entries, errors=errors, extra=extra)
    report = (manifest.get("outputs_files") or {}).get("report")
    return Path(report) if report else None
