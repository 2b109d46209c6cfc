"""`eval.py meta-eval --data FILE.jsonl --evaluator NAME...`: how well an evaluator agrees with human
labels (correlations for absolute scores, accuracy for pairwise labels)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import atomic_write_json, check_output_dir, read_structured
from ..metaeval.run import check_positive, format_report, parse_sets, run_metaeval


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="eval.py meta-eval", description='Meta-evaluation: how well does an evaluator agree with human judgments?',
                                allow_abbrev=False)
    p.add_argument("--data", required=True, help="a ../shared/data/metaeval/*.jsonl file (or the same schema)")
    p.add_argument("--evaluator", required=True, nargs="+", help="e.g. ROUGE BLEU Length UniEval:summarization-fluency")
    p.add_argument("--output", help="write the full report (JSON) here")
    p.add_argument("--language", default="en", choices=["en", "cn"])
    p.add_argument("--set", action="append", default=[], metavar="NAME.option=value",
                   help="metric option, e.g. ROUGE.multi_ref=mean (repeatable)")
    p.add_argument("--config", help="a run config whose judge / path_for_UniEval / repeval settings to use")
    p.add_argument("--docs", type=int, help="only the first N documents (by doc_id order of appearance)")
    p.add_argument("--limit", type=int, help="only the first N rows")
    p.add_argument("--sample", type=int, help="a random N of the rows (after --docs/--limit), seeded by --seed")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for value, flag in ((args.docs, "--docs"), (args.limit, "--limit"), (args.sample, "--sample")):
        check_positive(value, flag)
    if args.output:  # checked before any scoring, not after
        out = Path(args.output)
        if out.is_dir():
            raise InputError(f"--output {out}: is a folder; give a file name such as {out / 'report.json'}")
        check_output_dir(out.parent, "--output folder")
    extra: dict[str, Any] = {}
    if args.config:
        raw = read_structured(Path(args.config))
        if not isinstance(raw, dict):
            raise InputError(f"{args.config}: expected a mapping at the top level")
        extra = {k: v for k, v in raw.items()
                 if k in ("judge", "panel", "path_for_UniEval", "unieval", "repeval", "sageval", "prompts")}
    report = run_metaeval(Path(args.data), args.evaluator, language=args.language, options=parse_sets(args.set),
                          docs=args.docs, limit=args.limit, extra_config=extra,
                          config_source=Path(args.config) if args.config else None,
                          sample=args.sample, seed=args.seed)
    print(format_report(report))
    if args.output:
        atomic_write_json(Path(args.output), report)
        print(f"report: {args.output}", file=sys.stderr)
    return 0
