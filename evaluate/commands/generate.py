"""`eval.py generate --questions FILE --model-config MODEL.yaml --out FILE [--name NAME] [--limit N] [--dry-run]`

Asks the model under test every question of FILE (this project's target records, FastChat's MT-bench
question.jsonl, Arena-Hard's question.jsonl or an AlpacaEval instruction list: recognised from its
records) and writes the answers in the format the matching tool reads (evaluate/generation/formats.py),
through the judge's own request pool, probe, retries and cache (evaluate/generation/engine.py).

Exit codes: 0 every question answered; 2 bad input (question file of no known kind, a record without
text, a model config with an unknown key: nothing sent); 3 the model's server is unreachable, or some
answers are missing after their retries (named with the reason in OUT.generation.json; run again to
ask only for those).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import InputError
from .common import EXIT_CODES, EXIT_OK, Parser, parse_and_run


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="eval.py generate", description="Generate a model's answers to a question file, in the format "
               "the matching benchmark reads.", epilog=EXIT_CODES)
    p.add_argument("--questions", required=True, type=Path, help="target records, MT-bench or Arena-Hard "
                   "question.jsonl, or an AlpacaEval instruction list")
    p.add_argument("--model-config", required=True, type=Path, help="YAML/JSON file with a model: block")
    p.add_argument("--out", required=True, type=Path, help="the answer file to write (MT-bench / Arena-Hard: "
                   "model_answer/<name>.jsonl)")
    p.add_argument("--name", help="the model's name in the answers (default: the --out file's stem)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    p.add_argument("--openai_key", help="API key (prefer the variable named by model.api_key_env); never written")
    p.add_argument("--dry-run", action="store_true", help="count the requests (after the cache) and the cost; "
                                                          "send nothing")
    p.add_argument("--export-requests", type=Path, metavar="FILE.jsonl", help="write the requests still needed "
                   "(OpenAI batch format, e.g. for vLLM's run_batch) and stop")
    p.add_argument("--import-responses", type=Path, metavar="FILE.jsonl", help="load a batch engine's output into "
                   "the cache and stop; then run without it to write the answers")
    return p


def main(argv: list[str]) -> int:
    return parse_and_run(_parser(), argv, _run)


def _run(args: argparse.Namespace) -> int:
    from ..generation.formats import read_questions
    from ..generation.options import load_model_config
    from ..generation.produce import generate_answers, limited

    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive number of questions, got {args.limit}")
    opts = load_model_config(args.model_config)
    qf = limited(read_questions(args.questions), args.limit)
    name = args.name or args.out.stem
    if not name.strip():
        raise InputError("--name: expected a non-empty model name")
    if args.export_requests or args.import_responses:
        return _offline(args, qf, opts)
    report = generate_answers(qf, opts, args.out, name=name, dry_run=args.dry_run, api_key=args.openai_key)
    for line in report.lines():
        print(line)
    if report.code != EXIT_OK:
        print(f"exit {report.code}: {report.why()}", file=sys.stderr)
    return report.code


def _offline(args: argparse.Namespace, qf, opts) -> int:
    from ..generation.offline import export_requests, import_responses
    from ..generation.produce import cache_path

    if args.export_requests and args.import_responses:
        raise InputError("--export-requests and --import-responses: give one of them (export, generate, import, run)")
    cache = cache_path(opts, args.out)
    if args.export_requests:
        got = export_requests(qf, opts, cache, args.export_requests)
        print(f"exported {got['requests']} requests to {got['file']} (already cached: {got['cached']}); answer them "
              f"with model \"{opts.model}\", then --import-responses OUTPUT.jsonl"
              + (f"; {got['deferred']} later turns depend on these replies: export again after the import"
                 if got["deferred"] else ""))
        return EXIT_OK
    got = import_responses(qf, opts, cache, args.import_responses)
    print(f"imported {got['stored']} responses into {got['cache']}; failed lines: {got['failed']}; requests still "
          f"without a response: {got['still_missing']}")
    for line in got["failures"]:
        print(f"  failed: {line}", file=sys.stderr)
    return EXIT_OK
