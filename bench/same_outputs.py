"""Does a change to how the save path is written keep every output, and its speed? Runs the bundled
example (`configs/example_en.yaml --only Metrics`), then `eval.py summary` and `eval.py report` on its
save path, with each of two checkouts of the project, and compares what they printed and wrote byte
for byte once the run ids, times, durations and the checkout's own paths are masked. Prints each
command's wall time per checkout and the differences (none: exit 0; some: exit 1).

    .venv/bin/python bench/same_outputs.py --before /path/to/old/checkout [--after .] [--runs 3]

Each checkout is copied to one place (PLACE, emptied before and after: one instance at a time) before
it runs, its source files only (no .git, .venv or results), so the paths a config resolves to, and so
the config's hash, are the same for every run of both. The runs alternate
between the two checkouts (A B A B ...), and the best time of each is reported, on a shared machine
whose load changes while it runs. An output that differs between two runs of the same checkout is
named as unsteady (it says nothing about the change); PNG charts are compared by name only (matplotlib
writes its version and time into them).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN_ID = re.compile(r"\d{8}T\d{6}Z-(?:[a-z]+-)?[0-9a-f]{6}")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
SECONDS = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|seconds)\b")
PLACE = Path(tempfile.gettempdir()) / "same-outputs"  # one place for every run: a config's hash holds its paths
STEPS = (("run", ["--config", "configs/example_en.yaml", "--only", "Metrics", "--save_path", "{out}"]),
         ("summary", ["summary", "{out}", "--width", "100"]),
         ("report", ["report", "{out}"]))


def mask(text: str, root: Path, out: Path) -> str:
    for path, name in ((out, "<OUT>"), (root, "<REPO>")):
        text = text.replace(str(path.resolve()), name).replace(str(path), name)
    text = RUN_ID.sub("<RUN_ID>", text)
    text = ISO.sub("<TIME>", text)
    return SECONDS.sub("<SECONDS>", text)


def run_once(root: Path, tmp: Path, env: dict[str, str]) -> tuple[dict[str, float], dict[str, str]]:
    """(seconds per command, masked text per printed stream and per file written); `root` a checkout."""
    out = tmp / "out"
    times, seen = {}, {}
    for name, argv in STEPS:
        argv = [a.format(out=out) for a in argv]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=root, capture_output=True, text=True,
                              env={**env, "PYTHONPATH": str(root)}, timeout=900)
        times[name] = time.perf_counter() - t0
        seen[f"{name}: exit"] = str(proc.returncode)
        seen[f"{name}: stdout"] = mask(proc.stdout, root, out)
        seen[f"{name}: stderr"] = mask(proc.stderr, root, out)
    for p in sorted(out.rglob("*")):
        if p.is_file() and p.suffix != ".png":  # PNGs carry matplotlib's metadata; their presence is compared
            rel = p.relative_to(out).as_posix()
            rel = RUN_ID.sub("<RUN_ID>", rel)
            seen[f"file {rel}"] = mask(p.read_text(encoding="utf-8", errors="replace"), root, out)
        elif p.is_file():
            seen[f"file {p.relative_to(out).as_posix()}"] = "(png)"
    return times, seen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, type=Path, help="the checkout before the change")
    ap.add_argument("--after", default=Path("."), type=Path, help="the checkout after it (default: here)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    env = {**os.environ, "NO_COLOR": "1", "EVAL_NO_PROGRESS": "1"}
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    best: dict[str, dict[str, float]] = {k: {} for k in roots}
    outputs: dict[str, dict[str, str]] = {}
    unsteady: set[str] = set()
    for _ in range(args.runs):
        for label, root in roots.items():
            tmp = PLACE
            shutil.rmtree(tmp, ignore_errors=True)
            here = tmp / "checkout"
            shutil.copytree(root, here, ignore=shutil.ignore_patterns(".git", ".venv*", ".cache", "results",
                                                                      "__pycache__"))
            if (root.parent / "shared").exists():
                (tmp / "shared").symlink_to((root.parent / "shared").resolve())
            try:
                times, seen = run_once(here, tmp, env)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for k, v in times.items():
                best[label][k] = min(best[label].get(k, float("inf")), v)
            if label in outputs:
                unsteady |= {k for k in set(seen) | set(outputs[label]) if seen.get(k) != outputs[label].get(k)}
            outputs.setdefault(label, seen)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()} (shared and busy: best of {args.runs} alternating runs)")
    for step, _ in STEPS:
        b, a = best["before"][step], best["after"][step]
        print(f"{step:<8} before {b:6.2f} s   after {a:6.2f} s   after/before {a / b:.2f}")
    before, after = outputs["before"], outputs["after"]
    for key in sorted(unsteady):
        print(f"unsteady (differs between runs of one checkout, left out): {key}")
    differ = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and k not in unsteady)
    for key in differ:
        print(f"DIFFERS: {key}")
        for line in _first_difference(before.get(key), after.get(key)):
            print(f"    {line}")
    print(f"{len(before) - len(unsteady)} outputs compared, {len(differ)} differ")
    return 1 if differ else 0


def _first_difference(a: str | None, b: str | None) -> list[str]:
    if a is None or b is None:
        return ["only " + ("after" if a is None else "before")]
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return [f"line {i + 1} before: {x[:200]}", f"line {i + 1} after:  {y[:200]}"]
    return [f"{len(la)} vs {len(lb)} lines"]


if __name__ == "__main__":
    raise SystemExit(main())
