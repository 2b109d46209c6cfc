"""`eval.py alpaca-eval --model-outputs FILE [FILE...] --reference-outputs FILE --evaluator-config DIR_OR_YAML
--judge-config C --save_path OUT [--limit N] [--seed S] [--dry-run]`

Judges model outputs against a baseline by AlpacaEval's protocol (evaluate/benchmarks/alpaca_eval_judge.py
says how) with the judge of C's `judge:` block. Writes OUT/<model>/<annotator>/annotations.json
(AlpacaEval's results layout) with judge_run.json beside it, and OUT/judge_cache.sqlite; a re-run
is answered from the cache. Prints each model's win rate.

Decoding (max_tokens, temperature, top_logprobs) comes from the evaluator config, as AlpacaEval sends
it; the `judge:` block gives the backend, model, server, cache and price (`judge.mode: generate`
asks for no log-probabilities: preferences are then read from the generated token).

Exit codes: 0 done; 2 bad input (one `error:` line, no judge call made); 3 the judge failed on some
calls (written with preference null; run again to finish them) or every annotation is invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from ..backends.options import JudgeOptions
from ..core.errors import InputError
from ..core.io import check_output_dir, safe_name
from .common import EXIT_OK, EXIT_RUN_ERRORS, Parser, cost_line, load_judge, parse_and_run

EXIT_JUDGE = EXIT_RUN_ERRORS
# The dry run's token estimate. It errs high on purpose: GPT-4's tokenizer averaged 4.7 characters a
# token over AlpacaEval's own judge prompts (alpaca-7b and vicuna-13b, from their published prices).


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py alpaca-eval",
                description="Judge model outputs against a baseline by AlpacaEval 2's protocol (one randomised "
                            "order per instruction, preference from the log-probabilities of m / M).")
    p.add_argument("--model-outputs", required=True, nargs="+", type=Path, metavar="FILE",
                   help="AlpacaEval model_outputs.json files: lists of {instruction, output, generator, dataset}")
    p.add_argument("--reference-outputs", required=True, type=Path, metavar="FILE",
                   help="the baseline's outputs (AlpacaEval 2: gpt4_1106_preview), same format")
    p.add_argument("--evaluator-config", required=True, type=Path, metavar="DIR_OR_YAML",
                   help="an AlpacaEval evaluator folder (e.g. .../evaluators_configs/weighted_alpaca_eval_gpt4_turbo) "
                        "or its configs.yaml; its prompt file is read from where the config names it")
    p.add_argument("--judge-config", required=True, type=Path, help="YAML/JSON file with a judge: block")
    p.add_argument("--save_path", required=True, type=Path, help="output folder")
    p.add_argument("--limit", type=int, help="only the reference's first N instructions")
    p.add_argument("--seed", type=int, default=0, help="seed of the per-instruction order (default 0: AlpacaEval's)")
    p.add_argument("--dry-run", action="store_true", help="count the judge calls (and the cost, with judge.price); "
                                                          "contact nothing")
    return p


def main(argv: list[str]) -> int:
    return parse_and_run(_parser(), argv, _run)


def _run(args: argparse.Namespace) -> int:
    from ..benchmarks import alpaca_eval_judge as ae

    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive number of instructions, got {args.limit}")
    opts = load_judge(args.judge_config)
    evaluator = ae.read_evaluator(args.evaluator_config)
    reference = ae.read_outputs(args.reference_outputs)
    models = [ae.read_outputs(p) for p in args.model_outputs]
    seen: dict[str, Path] = {}
    for m in models:
        key = safe_name(m.generator)
        if key in seen:
            raise InputError(f"{m.path}: model {m.generator!r} is given twice (also {seen[key]}); each model "
                             "needs its own results folder")
        seen[key] = m.path
    pairs = {m.generator: ae.pair_up(m, reference, args.limit) for m in models}
    for m in models:
        extra = ae.extra_instructions(m, reference)
        if extra:
            print(f"note: {m.path}: {extra} instruction(s) not in the reference are left out", file=sys.stderr)
    check_output_dir(args.save_path, "--save_path")

    logprobs = evaluator.top_logprobs > 0 and opts.mode != "generate"
    planned = {name: ae.plan(evaluator, ps, args.seed, logprobs) for name, ps in pairs.items()}
    if args.dry_run:
        return _dry_run(planned, evaluator, opts, reference.generator)

    from ..backends.pool import MeteredBackend, open_backend
    from ..pipeline import benchmark_outputs as bo

    cache = (args.save_path / "judge_cache.sqlite" if opts.cache is True else
             Path(opts.cache) if isinstance(opts.cache, str) else None)
    args.save_path.mkdir(parents=True, exist_ok=True)
    run_id, started = bo.new_run_id(), _now()
    inner = open_backend(opts, cache)
    backend = MeteredBackend(inner, opts.price)  # what this run asked of the judge, for the manifest
    try:
        if logprobs and not backend.supports_logprobs:
            logprobs = False
            planned = {name: ae.plan(evaluator, ps, args.seed, False) for name, ps in pairs.items()}
        flat = [p for ps in planned.values() for p in ps]
        records = ae.annotate(evaluator, flat, backend)
        signature = backend.signature()
    finally:
        inner.close()

    info = {"baseline": reference.generator, "seed": args.seed, "limit": args.limit, "judge": signature,
            "order": f"AlpacaEval's: swapped when random.Random('is_switched_outputs' + instruction + '{args.seed}')"
                     ".random() >= 0.5",
            "reference_outputs": str(reference.path)}
    results: dict[str, Any] = {}
    annotations: dict[str, list[dict[str, Any]]] = {}
    start = 0
    for m in models:
        recs = records[start:start + len(planned[m.generator])]
        start += len(planned[m.generator])
        annotations[m.generator] = recs
        methods = sorted({r["preference_method"] for r in recs if r.get("preference_method")})
        path = ae.write_annotations(args.save_path, m.generator, evaluator, recs,
                                    {**info, "model_outputs": str(m.path), "preference_methods": methods})
        results[m.generator] = (ae.win_rate(recs), path, "token" in methods)
    lc, lc_note = _length_controlled([path for _, path, _ in results.values()])
    _print(results, lc, lc_note, evaluator, signature, reference.generator, args.seed)
    from ..benchmarks.tables import judge_check_line

    print(judge_check_line(args.save_path, signature), end="")
    report = _write_outputs(args, opts, evaluator, reference, models, pairs, annotations, results, lc, lc_note,
                            signature, backend.usage(), run_id, started)
    if report is not None:
        print(f"  report: {report}")
    if any(fallback for _, _, fallback in results.values()):
        print("note: the judge gave no log-probabilities: preferences were read from the generated token "
              "(m -> 1, M -> 2, as a binarized AlpacaEval config reads them), so the win rate is a discrete one",
              file=sys.stderr)

    failed = sum(w.n_failed for w, _, _ in results.values())
    if failed:
        print(f"error: the judge failed on {failed} pair(s) (written with preference null and the error); "
              "run again to judge them", file=sys.stderr)
        return EXIT_JUDGE
    if all(w.n_total == 0 for w, _, _ in results.values()):
        print("error: no preference could be read (every annotation is invalid); see invalid_reason in "
              "annotations.json", file=sys.stderr)
        return EXIT_JUDGE
    return EXIT_OK


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _now() -> str:
    from ..savepath.manifest import iso

    return iso()


def _write_outputs(args: argparse.Namespace, opts: JudgeOptions, evaluator: Any, reference: Any, models: Sequence[Any],
                   pairs: dict[str, Any], annotations: dict[str, Any], results: dict[str, Any],
                   lc: dict[str, dict[str, Any]], lc_note: str, signature: dict[str, Any], usage: dict[str, Any],
                   run_id: str, started: str) -> Path | None:
    """The project's own outputs of the run (results, battles, summary.csv, report.html, manifest) in the
    save path, beside AlpacaEval's files; returns the report's path when it was written."""
    from ..pipeline import alpaca_eval_outputs as out
    from ..pipeline import benchmark_outputs as bo
    from ..pipeline.savedir import SaveDir

    save = SaveDir(args.save_path, log=lambda s: print(s, file=sys.stderr))
    entries = out.add_run(save, evaluator=evaluator, reference=reference, models=models, pairs=pairs,
                          annotations=annotations, win_rates={k: w for k, (w, _, _) in results.items()}, lc=lc,
                          lc_note=lc_note, judge=signature, seed=args.seed)
    failed = sum(w.n_failed for w, _, _ in results.values())
    errors = [{"family": out.FAMILY, "error": f"the judge failed on {failed} pair(s); run again to judge them"}] \
        if failed else []
    manifest_extra = {"alpaca_eval": {"annotator": evaluator.name, "baseline": reference.generator,
                                      "seed": args.seed, "limit": args.limit,
                                      "annotations": {k: str(p) for k, (_, p, _) in results.items()}}}
    manifest = bo.write_run(save, benchmark="alpaca_eval", family=out.FAMILY, run_id=run_id, started=started,
                            judge_opts=opts, judge=signature, usage=usage, models=entries, errors=errors,
                            extra=manifest_extra)
    report = (manifest.get("outputs_files") or {}).get("report")
    return Path(report) if report else None


def _print(results: dict[str, Any], lc: dict[str, dict[str, Any]], lc_note: str, evaluator: Any,
           judge: dict[str, Any], baseline: str, seed: int) -> None:
    """One table: each model's raw win rate beside its length-controlled one, then where the files are."""
    from ..benchmarks.tables import alpaca_eval_table, wrap

    rows = []
    for name, (w, _, _) in results.items():
        row = {"model": name, "win_rate": w.win_rate, "standard_error": w.standard_error,
               "discrete_win_rate": w.discrete_win_rate, "n_total": w.n_total, "n_invalid": w.n_invalid,
               "n_failed": w.n_failed}
        row.update({k: lc.get(name, {}).get(k) for k in ("length_controlled_winrate", "lc_standard_error",
                                                         "avg_length")})
        rows.append(row)
    print(wrap(f"AlpacaEval: annotator {evaluator.name}, judge {judge.get('model')}, baseline {baseline}, "
               f"seed {seed}"), end="")
    print(alpaca_eval_table(rows), end="")
    print(wrap("win rate: the model's mean preference (probability-weighted), %, with its standard error; LC "
               f"win: AlpacaEval 2's length-controlled win rate, {lc_note}; discrete: wins with draws as "
               "halves, %; len: mean output length (characters); inv: kept in the file, not counted; fail: the "
               "judge call failed."), end="")
    for name, (_, path, _) in results.items():
        print(f"  {name}: {path}")


def _length_controlled(paths: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], str]:
    """AlpacaEval's length-controlled win rates of the models just judged, the models judged together
    being the reference set (`eval.py leaderboard --alpaca-eval` refits them over a larger one)."""
    from ..benchmarks import alpaca_eval as board

    try:
        b = board.leaderboard([m for p in paths for m in board.read_annotations(p)])
    except InputError as exc:
        return {}, f"not computed ({exc})"
    k = len(b.reference_models)
    note = (f"{b.lc_method}, fitted over the {k} model{'' if k == 1 else 's'} judged here" +
            ("; `eval.py leaderboard --alpaca-eval` with more models fits instruction difficulty jointly"
             if k < 2 else ""))
    return {str(r["model"]): r for r in b.rows}, note


def _dry_run(planned: dict[str, Sequence[Any]], evaluator: Any, opts: JudgeOptions, baseline: str) -> int:
    calls = {name: [p.request for p in ps if p.request is not None] for name, ps in planned.items()}
    print(f"AlpacaEval dry run: annotator {evaluator.name}, judge {opts.model}, baseline {baseline}")
    print(f"{'model':<28}{'pairs':>7}{'identical':>10}{'judge calls':>12}")
    for name, ps in planned.items():
        print(f"{name[:27]:<28}{len(ps):>7}{len(ps) - len(calls[name]):>10}{len(calls[name]):>12}")
    reqs = [r for rs in calls.values() for r in rs]
    print(f"{'total':<28}{sum(len(ps) for ps in planned.values()):>7}{'':>10}{len(reqs):>12}")
    if opts.price:
        print(cost_line(reqs, opts.price))
    return EXIT_OK
