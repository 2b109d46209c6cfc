"""`eval.py judge-check --config CFG [--data FILE.jsonl] [--limit N] [--seed S]`: can I trust this
judge on this kind of data? (evaluate/judgecheck says how it decides)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import InputError
from ..judgecheck import check_config


def main(argv: list[str]) -> int:
    from ..pipeline.config import load_config

    p = argparse.ArgumentParser(prog="eval.py judge-check", description="Can I trust this judge on this kind of data? With --data: agreement with human labels; without: sanity pairs of the run's own records.")
    p.add_argument("--config", required=True, help="the run config whose judge and prompts to check")
    p.add_argument("--data", help="a pairwise file with human labels (instruction, input, response_a, response_b, "
                                  "label a/b/tie); without it, the label-free check on the config's own records")
    p.add_argument("--limit", type=int, help="labels: a seeded random N of the decided pairs; without labels: "
                                             "N sanity pairs per corruption")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", help="also write the full record (JSON) here")
    args = p.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit: expected a positive integer, got {args.limit}")
    cfg = load_config(Path(args.config))
    from ..backends.pool import JudgePool

    judges = JudgePool(api_key=cfg.openai_key)
    try:
        check_config(cfg, judges, data=Path(args.data) if args.data else None, limit=args.limit, seed=args.seed,
                     output=Path(args.output) if args.output else None)
    finally:
        judges.close()
    return 0
