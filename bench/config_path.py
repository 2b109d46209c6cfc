"""How far a run's config travels: the files and packages of the project whose functions are handed the
run's `RunConfig`, measured on a real run (issue 45: "following a run's config through the code").

    PYTHONPATH=$PWD .venv/bin/python bench/config_path.py [--config configs/example_rules.yaml] [--json]

The config is run in this process (its save path moved to a temporary folder) under `sys.setprofile`;
every call of a function defined under evaluate/, unieval/, repeval/ or sageval/ whose arguments hold
the `RunConfig` object, or its save path (the folder the config names: where most of it ends up), is one
step. Printed: the files and packages those functions live in, the moves
between packages along the calls in order, and the round trips between the run (`evaluate/pipeline`) and
the save path (`evaluate/savepath`) — a move there and straight back. Run it on two checkouts to compare
a structure before and after a change (docs/layout.md quotes both).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("evaluate", "unieval", "repeval", "sageval")


def _package(path: Path) -> str:
    rel = path.relative_to(REPO)
    return "/".join(rel.parts[:-1])


def trace(config: Path) -> list[tuple[str, str]]:
    """(file, function) of each call handed the run's config, in call order."""
    sys.path.insert(0, str(REPO))
    from evaluate.cli import main
    from evaluate.pipeline.config import RunConfig

    roots = tuple(str(REPO / r) + os.sep for r in ROOTS)
    steps: list[tuple[str, str]] = []
    seen: list[Path] = []  # the config's save path, once the config was seen

    def profile(frame, event, arg):  # noqa: ARG001
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(roots):
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        local = frame.f_locals
        for n in names:
            v = local.get(n)
            if isinstance(v, RunConfig):
                seen.append(Path(v.save_path))
                break
            if isinstance(v, (str, Path)) and seen and str(v) == str(seen[-1]):
                break
        else:
            return
        steps.append((str(Path(code.co_filename).relative_to(REPO)), code.co_name))

    cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="config-path-") as tmp:
        cfg["save_path"] = str(Path(tmp) / "run")
        # beside the original, so that its relative paths hold (the name is gitignored)
        copy = config.resolve().parent / f".bench_demo_config_path_{os.getpid()}.yaml"
        copy.write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False), encoding="utf-8")
        sys.setprofile(profile)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                code = main(["--config", str(copy)])
        finally:
            sys.setprofile(None)
            copy.unlink(missing_ok=True)
    if code not in (0, 1):
        raise SystemExit(f"{config}: the run exited {code}")
    return steps


def summary(steps: list[tuple[str, str]]) -> dict:
    files = list(dict.fromkeys(f for f, _ in steps))
    packages = [_package(REPO / f) for f, _ in steps]
    path = [p for i, p in enumerate(packages) if i == 0 or p != packages[i - 1]]
    trips = sum(1 for i in range(len(path) - 2) if {path[i], path[i + 1]} == {"evaluate/pipeline", "evaluate/savepath"}
                and path[i] == path[i + 2])
    return {"calls": len(steps), "files": len(files), "packages": len(set(packages)),
            "moves_between_packages": len(path) - 1, "pipeline_savepath_round_trips": trips,
            "by_package": dict(Counter(_package(REPO / f) for f in files).most_common()), "files_list": files}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=REPO / "configs" / "example_rules.yaml")
    p.add_argument("--json", action="store_true", help="the whole summary as JSON")
    args = p.parse_args(argv)
    s = summary(trace(args.config))
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{args.config.name}: the run's config handed to {s['calls']} calls in {s['files']} files of "
          f"{s['packages']} packages; {s['moves_between_packages']} moves between packages, "
          f"{s['pipeline_savepath_round_trips']} round trips pipeline -> savepath -> pipeline")
    for pkg, n in s["by_package"].items():
        print(f"  {pkg}: {n} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
