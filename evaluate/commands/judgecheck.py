"""`eval.py judge-check --config CFG [--data FILE.jsonl] [--limit N] [--seed S]`: can I trust this
judge on this kind of data? (evaluate/judgecheck says how it decides). `eval.py judge-check --labels
SAVE_PATH`: the judge's battle verdicts already in a run against a person's labels from `eval.py view`
(evaluate/judgecheck/labels.py), asking the judge nothing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.errors import InputError
from ..judgecheck import check_config


def main(argv: list[str]) -> int:
    from ..pipeline.config import load_config

    p = argparse.ArgumentParser(prog="eval.py judge-check", description="Can I trust this judge on this kind of data? With --data: agreement with human labels; without: sanity pairs of the run's own records.")
    p.add_argument("--config", help="the run config whose judge and prompts to check")
    p.add_argument("--labels", metavar="SAVE_PATH", help="instead: the judge's battle verdicts already in this run "
                   "against the labels a person gave in `eval.py view` (labels.jsonl); no judge request")
    p.add_argument("--data", help="a pairwise file with human labels (instruction, input, response_a, response_b, "
                                  "label a/b/tie); without it, the label-free check on the config's own records")
    p.add_argument("--limit", type=int, help="labels: a seeded random N of the decided pairs; without labels: "
                                             "N sanity pairs per corruption")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="also write the full record (JSON) here")
    p.add_argument("--json", action="store_true", help="with --labels: print the label-corrected verdicts as one JSON "
                   "object ({\"pairs\": [{model_a, model_b, labels_used, effective_labels, label_corrected, "
                   "labels_only, judge_only, ...}]}, docs/labels.md) instead of the text")
    args = p.parse_args(argv)
    if args.labels is not None:
        return labels_main(args)
    if args.json:
        raise InputError("--json: prints the label-corrected verdicts of --labels SAVE_PATH; give --labels")
    if args.config is None:
        raise InputError("judge-check: give --config CFG (check the config's judge) or --labels SAVE_PATH (check the "
                         "judge's verdicts in a run against your labels)")
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive integer, got {args.limit}")
    cfg = load_config(Path(args.config))
    from ..backends.pool import JudgePool

    from ..pipeline.config import single_judges

    data = Path(args.data) if args.data else None
    output = Path(args.output) if args.output else None
    judges = JudgePool(api_key=cfg.openai_key)
    try:
        # a panel: each judge checked on its own, one report each, then the panel as a whole on the same
        # pairs (its judges' replies come from the cache those checks filled); --output gets the panel's
        for name, one in single_judges(cfg):
            if name is not None:
                print(f"== judge check of the panel's judge {name} ==", flush=True)
            check_config(one, judges, data=data, limit=args.limit, seed=args.seed,
                         output=output if cfg.panel is None else None)
        if cfg.panel is not None:
            print("== judge check of the panel as a whole ==", flush=True)
            check_config(cfg, judges, data=data, limit=args.limit, seed=args.seed, output=output)
    finally:
        judges.close()
    return 0


def labels_main(args) -> int:
    """`--labels SAVE_PATH`: print the check on the person's labels; --output writes its record."""
    import sys

    from ..judgecheck.labels import check_labels, format_labels_report
    from ..core.io import atomic_write_json  # --output: a path the user names, not a save path's file

    given = [f"--{name}" for name in ("config", "data", "limit") if getattr(args, name) is not None]
    if given:
        raise InputError(f"--labels reads the judge's verdicts already in the run and asks no judge; "
                         f"{', '.join(given)} does not apply")
    from ..judgecheck.corrected import corrected, format_corrected

    if args.json:  # for scripts: the corrected verdicts alone, whatever labels there are (none: empty rows)
        result = corrected(Path(args.labels))
        for problem in result.get("problems", []):
            print(f"warning: {problem}", file=sys.stderr)
        print(json.dumps(result, ensure_ascii=False, indent=2))
        if args.output:
            atomic_write_json(Path(args.output), result)
        return 0
    record, found = check_labels(Path(args.labels))
    for problem in found.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(format_labels_report(record), flush=True)
    result = corrected(Path(args.labels))
    record["corrected"] = result
    print("\n" + format_corrected(result), flush=True)
    if args.output:
        atomic_write_json(Path(args.output), record)
    return 0
