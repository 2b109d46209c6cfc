"""`eval.py schema [KIND]`: the JSON Schema of each file a save path holds (as inspect_ai's `log schema`).

Every file of a save path is a typed record of `evaluate.savepath.records` (a benchmark's own files
declared in its package); this prints their schemas, one JSON object keyed by kind, or one kind's
alone. Exit 2 for a kind no record declares, with the closest names."""

from __future__ import annotations

import json
from importlib import import_module

from ..benchmarks.benchmark import benchmarks
from ..core.errors import InputError
from ..core.registry import suggest
from ..savepath.records import SCHEMA_VERSION, record_kinds
from .common import EXIT_OK, Parser


def kinds() -> dict[str, type]:
    """Every record kind, the labels' and the benchmarks' files included (loading them registers them)."""
    benchmarks()
    import_module("evaluate.savepath.labels")
    return record_kinds()


def main(argv: list[str]) -> int:
    known = kinds()
    p = Parser(prog="eval.py schema",
               description=f"Print the JSON Schema of each file of a save path (records version {SCHEMA_VERSION}): "
                           "all of them as one JSON object keyed by kind, or one kind's.",
               epilog="kinds: " + ", ".join(known))
    p.add_argument("kind", nargs="?", help="one kind of file (default: every kind); the kinds are listed below")
    p.add_argument("--list", action="store_true", help="list the kinds and their files, one a line, instead")
    args = p.parse_args(argv)
    if args.kind is not None and args.kind not in known:
        raise InputError(f'schema: no file kind "{args.kind}"{suggest(args.kind, list(known))} '
                         f"(kinds: {', '.join(known)})")
    if args.list:
        width = max(map(len, known))
        for name, cls in known.items():
            print(f"{name:<{width}}  {cls.json_schema()['description']}")
        return EXIT_OK
    if args.kind is not None:
        print(json.dumps(known[args.kind].json_schema(), indent=2, ensure_ascii=False))
    else:
        print(json.dumps({name: cls.json_schema() for name, cls in known.items()}, indent=2, ensure_ascii=False))
    return EXIT_OK
