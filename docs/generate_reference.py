"""Write the generated parts of the reference pages from the code, so that they cannot drift:
each command's `--help` (docs/commands.md), the config's top-level keys, every family's options
block, the `judge:` keys and every metric's options (docs/config.md, docs/judge.md).

    python docs/generate_reference.py          # rewrite the blocks between the markers
    python docs/generate_reference.py --check  # exit 1 naming the page whose block is stale

Each block sits between `<!-- BEGIN generated: NAME -->` and `<!-- END generated: NAME -->`;
`tests/test_docs.py` runs the check.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
HELP_COLUMNS = "100"  # argparse wraps --help to $COLUMNS: one width for every machine


def command_help(name: str) -> str:
    """`eval.py NAME --help`, as argparse prints it at HELP_COLUMNS columns."""
    from evaluate.cli import COMMANDS

    module = importlib.import_module(COMMANDS[name][0])
    out = io.StringIO()
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS  # for this call only: a caller's later output keeps its own width
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                module.main(["--help"])
            except SystemExit:
                pass
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before
    return out.getvalue().rstrip() + "\n"


def commands_block() -> str:
    from evaluate.cli import COMMANDS, _available

    parts = []
    for name, (module, line) in COMMANDS.items():
        if not _available(module):
            continue
        title = "eval.py --config FILE (run)" if name == "run" else f"eval.py {name}"
        parts.append(f"### `{title}`\n\n{line}.\n\n```text\n{command_help(name)}```\n")
    return "\n".join(parts)


def _table(rows: list[tuple[str, str, object, str]]) -> str:
    out = ["| key | type | default | what |", "|---|---|---|---|"]
    for key, kind, default, doc in rows:
        shown = json.dumps(default, ensure_ascii=False, default=str)
        out.append(f"| `{key}` | {kind} | `{shown}` | {doc.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def judge_block() -> str:
    """The `judge:` keys in their three groups (evaluate/backends/options.py, and each kind's own keys
    from its kind_*.py), each key with the backend kinds that read it."""
    from dataclasses import fields

    from evaluate.backends.options import EngineOptions, JudgingOptions, TransportOptions, readers
    from evaluate.backends.registry import names
    from evaluate.core.options import options_doc

    out = ["The keys are flat in the YAML; they fall in three groups. `backend:` is one of "
           + ", ".join(f"`{k}`" for k in names()) + "; a key marked with kinds is read by those only.", ""]
    for title, cls in (("Transport: which backend and model, and how requests reach it", TransportOptions),
                       ("Engine: how the engine that computes runs", EngineOptions),
                       ("Judging: what is asked of the judge", JudgingOptions)):
        kinds = {f.name: readers(f.name) for f in fields(cls)}
        rows = [(k, t, d, (f"({', '.join(kinds[k])}) " if kinds[k] else "") + doc)
                for k, t, d, doc in options_doc(cls)]
        out += [f"**{title}**", "", _table(rows)]
    return "\n".join(out)


def config_block() -> str:
    from evaluate.core.options import options_doc
    from evaluate.families import family_names, get_family
    from evaluate.metrics import METRICS
    from evaluate.pipeline.config import BASE_KEYS

    out = ["Top-level keys: " + ", ".join(f"`{k}`" for k in BASE_KEYS) + ", and each family's options block below.",
           "",
           "`judge:` (and a model config's `model:` block, which adds the generation keys) takes the keys listed in "
           "[judge.md](judge.md#every-key-of-judge), in three groups: transport (which backend and model, how "
           "requests reach it), engine (how the local engine or the vLLM server runs) and judging (what is asked "
           "of the judge).",
           ""]
    for name in family_names():
        fam = get_family(name)
        key = getattr(fam, "options_key", None)
        if not key:
            continue
        out += [f"`{key}:` ({name})", "", _table(options_doc(fam.Options))]
    from evaluate.track.options import TRACKERS

    for tracker, cls in TRACKERS.items():  # `track:` (docs/tracking.md)
        out += [f"`track.{tracker}:` (docs/tracking.md)", "", _table(options_doc(cls))]
    out += ["`metric_options:` (per metric; the metrics not named have none)", "",
            "| metric | option | default |", "|---|---|---|"]
    for metric in sorted(METRICS._items):
        for opt, default in (getattr(METRICS._items[metric], "defaults", None) or {}).items():
            out.append(f"| `{metric}` | `{opt}` | `{json.dumps(default, default=str)}` |")
    return "\n".join(out) + "\n"


BLOCKS = {  # page -> {block name -> maker}
    "commands.md": {"flags": commands_block},
    "config.md": {"keys": config_block},
    "judge.md": {"judge-keys": judge_block},
}


def render(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
    block = f"{begin}\n<!-- made by docs/generate_reference.py: do not edit by hand -->\n\n{body}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    raise SystemExit(f"no {begin} marker")


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    import evaluate.metrics as metrics_pkg  # every metric module registers itself on import
    import pkgutil

    for mod in pkgutil.iter_modules(metrics_pkg.__path__):
        importlib.import_module(f"evaluate.metrics.{mod.name}")
    stale = []
    for page, blocks in BLOCKS.items():
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        new = text
        for name, make in blocks.items():
            new = render(new, name, make())
        if new != text:
            stale.append(page)
            if "--check" not in argv:
                path.write_text(new, encoding="utf-8")
    if "--check" in argv and stale:
        print(f"stale generated blocks in docs/{', docs/'.join(stale)}: run python docs/generate_reference.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
