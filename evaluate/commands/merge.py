"""`eval.py merge OUT DIR...`: join the save paths of sharded runs (`--shard I/N`) into one."""

from __future__ import annotations

import sys
from pathlib import Path

from ..pipeline.merge import merge
from ..savepath.manifest import model_names
from .common import EXIT_OK, EXIT_RUN_ERRORS, Parser


def main(argv: list[str]) -> int:
    p = Parser(prog="eval.py merge", description="merge the save paths of sharded runs (--shard I/N) into OUT")
    p.add_argument("out", help="the merged save path")
    p.add_argument("dirs", nargs="+", help="the shards' save paths, or the save path the --shard runs were given "
                                           "(its shard-* folders are merged)")
    p.add_argument("--force", action="store_true", help="merge save paths made from different answer files, "
                   "configs or judges (each difference is still named)")
    p.add_argument("--no-charts", action="store_true", help="do not draw charts")
    args = p.parse_args(argv)
    manifest = merge(Path(args.out), [Path(d) for d in args.dirs], charts=not args.no_charts, force=args.force,
                     log=lambda s: print(s, file=sys.stderr))
    print(f"merged {len(args.dirs)} save paths into {args.out} (models: {', '.join(model_names(manifest))}; "
          f"status: {manifest['status']})")
    if manifest["status"] == "ok" and not manifest.get("errors"):
        return EXIT_OK
    first = (manifest.get("errors") or [{}])[0]
    print(f"exit {EXIT_RUN_ERRORS}: merge: {manifest['status']}"
          + (f": {first.get('shard', '')}: {first.get('error')}" if first.get("error") else ""), file=sys.stderr)
    return EXIT_RUN_ERRORS
