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
    report = generate_answers(qf, opts, args.out, name=name, dry_run=args.dry_run, api_key=args.openai_key)
    for line in report.lines():
        print(line)
    if report.code != EXIT_OK:
        print(f"exit {report.code}: {report.why()}", file=sys.stderr)
    return report.code
