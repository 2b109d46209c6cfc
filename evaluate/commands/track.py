"""`eval.py track SAVE_PATH --to mlflow|wandb`: send an existing run to a tracker, as `track:` (or
`--track`) does at the end of a run: its primary scores, paired verdicts, battles, judge check,
usage and cost, its report, summary.csv and manifest (docs/tracking.md). Nothing in the save path is
written.

Exit codes: 0 sent to every tracker named; 2 bad input (no results here, a newer layout, no tracker
named, a tracker's package not installed: the message names the extra); 3 a tracker refused (its
warning says why; the save path is untouched)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ..core.errors import InputError
from ..savepath.log import NoResults
from ..track.options import TRACKERS, check_installed
from .common import EXIT_CODES, EXIT_INPUT, EXIT_OK, EXIT_RUN_ERRORS, Parser


def build_parser() -> Parser:
    p = Parser(prog="eval.py track", description="Send a finished run (its save path) to MLflow or Weights & "
                                                 "Biases: scores, paired verdicts with their intervals, battles, "
                                                 "judge check, usage and cost; the report, summary.csv and "
                                                 "manifest as artifacts.", epilog=EXIT_CODES)
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/)")
    p.add_argument("--to", action="append", choices=tuple(TRACKERS), metavar="mlflow|wandb",
                   help="the tracker (repeatable); with --config, its track: block's options")
    p.add_argument("--config", type=Path, help="a run config whose track: block names the trackers and their options")
    p.add_argument("--uri", help="MLflow: the tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)")
    p.add_argument("--experiment", help="MLflow: the experiment (default: llm-eval)")
    p.add_argument("--project", help="W&B: the project (default: llm-eval)")
    p.add_argument("--dir", help="W&B: the folder the offline run folder goes in (default: the current folder)")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    configured: dict = {}
    if args.config is not None:
        from ..pipeline.config import load_config

        configured = load_config(args.config).track
    flags = {"mlflow": {k: v for k, v in (("uri", args.uri), ("experiment", args.experiment)) if v},
             "wandb": {k: v for k, v in (("project", args.project), ("dir", args.dir)) if v}}
    for name, given in flags.items():
        if given and name not in (args.to or []):
            raise InputError(f"--{', --'.join(given)}: goes with --to {name}")
    trackers = dict(configured) if not args.to else {}
    for name in args.to or []:
        trackers[name] = replace(configured.get(name) or TRACKERS[name](), **flags[name])
    if not trackers:
        raise InputError("nothing to send: name a tracker with --to mlflow|wandb, or give --config FILE whose "
                         "track: block names one")
    check_installed(trackers, "--to")
    from ..track.send import track

    failed: list[str] = []
    try:
        sent = track(args.save_path, trackers, log=print,
                     warn=lambda line: (failed.append(line), print(line, file=sys.stderr)))
    except NoResults as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if failed:
        print(f"exit {EXIT_RUN_ERRORS}: {len(failed)} of {len(trackers)} trackers refused the run (see above); "
              f"{len(sent)} logged it", file=sys.stderr)
        return EXIT_RUN_ERRORS
    return EXIT_OK
