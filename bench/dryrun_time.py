"""How close `--dry-run`'s time estimate for a local judge comes to the time the judge then takes.

    .venv/bin/python bench/dryrun_time.py [--model SmolLM2-135M-Instruct]

Three `eval.py` runs on the bundled English example, in a judge-speed store of their own (a temporary
EVAL_CACHE_DIR that reuses the checkout's converted weights):
1. a calibration run: G-Eval ratings from log-probabilities and battles with `explain: false` on three
   categories, which records the judge's speed (evaluate/backends/speed.py);
2. `--dry-run` of another config: other categories, more items, and battles with `explain: true` and
   `max_tokens: 64` (replies that may end before the limit): the estimate it prints;
3. that config run: the seconds its judge calls took (what the store recorded for them) and the run's
   wall time.
The estimate counts generated tokens at max_tokens, so it should land above the judge's own seconds
where replies end early; model loading and scoring are outside it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EN = ROOT / "examples" / "en"


def config(tmp: Path, name: str, model: str, categories: dict, limit: int, **judge) -> Path:
    cfg = {"answers": [{"name": "a", "path": str(EN / "answers_model_a.json")},
                       {"name": "b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp / name), "limit": limit,
           "judge": {"backend": "local", "model": model, "mode": "logprobs", **judge}, "category": categories}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def eval_py(*argv: str, env: dict[str, str]) -> tuple[float, str]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "eval.py"), *argv], capture_output=True, text=True, env=env)
    if done.returncode not in (0, 3):
        raise SystemExit(f"eval.py {' '.join(argv)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    return time.monotonic() - t0, done.stdout + done.stderr


def recorded(cache: Path) -> list[list[float]]:
    data = json.loads((cache / "judge_speed.json").read_text())
    return [row for rows in data.values() for row in rows]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="SmolLM2-135M-Instruct")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from evaluate.backends.speed import machine
    from evaluate.core.places import cache_dir

    with tempfile.TemporaryDirectory(prefix="dryrun-time-") as t:
        tmp = Path(t)
        cache = tmp / "cache"
        cache.mkdir()
        if (cache_dir() / "hf").is_dir():
            (cache / "hf").symlink_to(cache_dir() / "hf", target_is_directory=True)
        env = {**os.environ, "EVAL_CACHE_DIR": str(cache), "EVAL_NO_PROGRESS": "1"}
        first = config(tmp, "calibrate", args.model, {c: {"GPT": ["relevance"]} for c in
                                                      ("brainstorming", "open_qa", "chat")}, 4,
                       explain=False, max_tokens=6)
        wall1, _ = eval_py("--config", str(first), "--no-charts", env=env)
        before = len(recorded(cache))
        second = config(tmp, "target", args.model, {"closed_qa": {"GPT": ["correctness"]},
                                                    "classification": {"GPT": ["correctness"]},
                                                    "rewriting": {"GPT": ["relevance"]}}, 6,
                        explain=True, max_tokens=64)
        _, dry = eval_py("--config", str(second), "--dry-run", env=env)
        line = next(x for x in dry.splitlines() if x.startswith("local judge time"))
        estimate = float(re.search(r"about (?:\S+ (?:min|h) \()?([\d,]+) s", line).group(1).replace(",", ""))
        exact = re.search(r"judge requests to send: (\d+)", dry).group(1)
        wall2, _ = eval_py("--config", str(second), "--no-charts", env=env)
        rows = recorded(cache)[before:]
        judged = sum(r[0] for r in rows)
        print(f"machine: {machine()}; judge {args.model}")
        print(f"calibration run: {wall1:.0f} s wall, {before} judge calls recorded")
        print(f"dry run: {exact} requests; {line}")
        print(f"run: {sum(r[1] for r in rows)} requests in {len(rows)} calls, {judged:.1f} s in the judge, "
              f"{sum(r[3] for r in rows)} tokens generated (at most {sum(r[1] for r in rows)} x 64), "
              f"{wall2:.0f} s wall")
        print(f"estimate / judge seconds = {estimate / judged:.2f}; estimate / wall = {estimate / wall2:.2f}")


if __name__ == "__main__":
    main()
